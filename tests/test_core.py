"""The issue's own example, and what @jit must preserve about a function."""
import inspect
import traceback

import pytest
import torch

import rewrite
from rewrite import dispatcher_of, jit

from conftest import CompileCounter, assert_same, eager_copy


def loop_fn(x, n):
    y = x * 2
    for i in range(n):
        y = y + i
    return y.relu()


def test_issue_example_three_calls_two_entries():
    eager = eager_copy(loop_fn)
    f = loop_fn
    assert jit(f) is f
    for n in (3, 3, 5):
        x = torch.randn(4, 4)
        assert_same(f(x, n), eager(x, n))
    entries = dispatcher_of(f).entries
    assert len(entries) == 2
    newest, oldest = entries
    adds = lambda e: [n for n in e.graph_module.graph.nodes if n.op == "call_function" and "add" in n.name]
    assert len(adds(oldest)) == 3 and len(adds(newest)) == 5  # the loop is unrolled
    assert oldest.guard.failures((torch.randn(4, 4), 5)) == ["n == 3 (actual 5)"]
    rewrite.reset()


def test_graph_is_unrolled_with_a_custom_backend():
    cnt = CompileCounter()

    def f(x, n):
        y = x * 2
        for i in range(n):
            y = y + i
        return y

    eager = eager_copy(f)
    jit(f, backend=cnt)
    x = torch.randn(3)
    assert_same(f(x, 3), eager(x, 3))
    assert cnt.frame_count == 1 and cnt.op_count == 4  # mul, add, add, add
    code = cnt.graphs[0].code
    assert "x * 2" in code and code.count(" + ") == 3


def documented(x, *args, scale: float = 2.0, **kwargs):
    """Multiply x."""
    return x * scale


def test_identity_and_introspection_are_preserved():
    sig = inspect.signature(documented)
    src = inspect.getsource(documented)
    name, qualname, doc, module = (documented.__name__, documented.__qualname__, documented.__doc__,
                                   documented.__module__)
    assert jit(documented) is documented
    assert inspect.signature(documented) == sig
    assert inspect.getsource(documented) == src
    assert (documented.__name__, documented.__qualname__, documented.__doc__, documented.__module__) == \
        (name, qualname, doc, module)
    x = torch.ones(2)
    assert_same(documented(x, 1, 2, scale=3.0, extra=1), x * 3.0)


def raises_on_negative(x, n):
    if n < 0:
        raise ValueError("negative n")  # the line a traceback must show
    return x + n


def test_traceback_points_at_the_users_line():
    jit(raises_on_negative)
    raises_on_negative(torch.ones(2), 1)
    with pytest.raises(ValueError) as info:
        raises_on_negative(torch.ones(2), -1)
    frames = traceback.extract_tb(info.tb)
    assert frames[-1].name == "raises_on_negative"
    assert frames[-1].line == 'raise ValueError("negative n")  # the line a traceback must show'


def test_user_error_found_while_tracing_is_eagers_error_from_the_users_line():
    def f(x, w):
        return x @ w

    jit(f)
    with pytest.raises(RuntimeError) as info:
        f(torch.randn(3, 4), torch.randn(5, 6))
    assert traceback.extract_tb(info.tb)[-1].line == "return x @ w"
    assert_same(f(torch.ones(2, 3), torch.ones(3, 2)), torch.full((2, 2), 3.0))


def test_decorator_forms():
    @jit
    def a(x):
        return x + 1

    @jit(backend="eager", fullgraph=True)
    def b(x):
        return x - 1

    x = torch.zeros(2)
    assert_same(a(x), x + 1)
    assert_same(b(x), x - 1)
    assert dispatcher_of(b).options.backend == "eager"


def test_jit_twice_is_harmless():
    def f(x):
        return x * 3

    assert jit(jit(f)) is f
    x = torch.ones(2)
    assert_same(f(x), x * 3)
    assert len(dispatcher_of(f).entries) == 1


def test_method_and_closure_over_self():
    class Scaler:
        def __init__(self, k):
            self.k = k

        def __call__(self, x):
            return x * self.k

    s = Scaler(2)
    jit(Scaler.__call__)
    x = torch.ones(3)
    assert_same(s(x), x * 2)
    assert_same(s(x), x * 2)
    s.k = 5  # the attribute read is guarded
    assert_same(s(x), x * 5)
    assert len(dispatcher_of(Scaler.__call__).entries) == 2


def test_generators_are_left_alone():
    def gen(x):
        yield x + 1

    code = gen.__code__
    assert jit(gen) is gen and gen.__code__ is code
    assert_same(next(gen(torch.ones(1))), torch.full((1,), 2.0))


def test_functions_sharing_code_share_a_cache_but_not_closures():
    def make(k):
        def f(x):
            return x + k
        return f

    f1, f2 = jit(make(1)), jit(make(2))
    x = torch.zeros(2)
    assert_same(f1(x), x + 1)
    assert_same(f2(x), x + 2)
    assert_same(f1(x), x + 1)
    assert dispatcher_of(f1) is dispatcher_of(f2)
    assert len(dispatcher_of(f1).entries) == 2  # the closure value is guarded


def test_random_ops_match_eager_on_first_and_later_calls():
    def f(x):
        return x + torch.randn(x.shape)

    eager = eager_copy(f)
    jit(f)
    x = torch.zeros(3)
    for _ in range(3):
        torch.manual_seed(0)
        expected = eager(x)
        torch.manual_seed(0)
        assert_same(f(x), expected)


def test_loop_sees_appends_to_the_list_it_iterates():
    def f(x):
        xs = [x]
        for t in xs:
            if len(xs) < 3:
                xs.append(t * 2)
        return xs

    eager = eager_copy(f)
    jit(f, fullgraph=True)
    for _ in range(2):
        assert_same(f(torch.ones(2)), eager(torch.ones(2)))


def test_dict_changed_during_iteration_raises_as_eager():
    def f(x):
        d = {"a": x}
        for k in d:
            d["b"] = x
        return d

    jit(f)
    with pytest.raises(RuntimeError, match="dictionary changed size"):
        f(torch.ones(1))


def test_returned_inputs_are_the_same_objects():
    def f(x, n, xs):
        return x, n, xs, x + n

    jit(f)
    x, n, xs = torch.ones(2), 1.5, [1, 2]
    for _ in range(2):
        rx, rn, rxs, _ = f(x, n, xs)
        assert rx is x and rn is n and rxs is xs
