"""Objects of user classes made while tracing, and the operator protocol on user objects:
every result against eager, one graph where the construct is traced."""
import dataclasses

import pytest
import torch

import rewrite
from rewrite import jit

from conftest import CompileCounter, assert_same, eager_copy


class Acc:
    def __init__(self, t, scale=1.0):
        self.t = t
        self.scale = scale
        self.n = 0

    def add(self, u):
        self.t = self.t + u * self.scale
        self.n += 1
        return self

    @property
    def mean(self):
        return self.t / max(self.n, 1)

    def __iadd__(self, u):
        return self.add(u)


class Base:
    def __init__(self, w):
        self.w = w

    def f(self, x):
        return x * self.w


class Child(Base):
    def __init__(self, w, b):
        super().__init__(w)
        self.b = b

    def f(self, x):
        return super().f(x) + self.b


class V:
    def __init__(self, t):
        self.t = t

    def __add__(self, other):
        if isinstance(other, V):
            return V(self.t + other.t)
        return NotImplemented

    def __radd__(self, other):
        return V(self.t + other)


class SubV(V):
    def __radd__(self, other):
        return SubV(self.t - other.t)


@dataclasses.dataclass(frozen=True)
class Frozen:
    a: torch.Tensor
    k: int = 2


def one_graph(fn, *args):
    """Compile with fullgraph on a counting backend; two calls; the second must hit."""
    eager = eager_copy(fn)
    cnt = CompileCounter()
    jit(fn, backend=cnt, fullgraph=True)
    for seed in (0, 1):
        torch.manual_seed(seed)
        real = [a() if callable(a) else a for a in args]
        torch.manual_seed(seed)
        expected = eager(*[a() if callable(a) else a for a in args])
        got = fn(*real)
        yield got, expected
    assert rewrite.dispatcher_of(fn).compiles == 1 and cnt.frame_count <= 1


def attrs(obj):
    return {k: v for k, v in vars(obj).items()}


def test_object_made_inside_is_returned_with_its_class_and_attributes():
    def f(x):
        a = Acc(x, scale=2.0)
        a.add(x).add(1)
        a += x
        return a, a.mean

    for got, expected in one_graph(f, lambda: torch.randn(3)):
        assert type(got[0]) is Acc
        assert_same(attrs(got[0]), attrs(expected[0]))
        assert_same(got[1], expected[1])


def test_object_returned_twice_is_one_object():
    def f(x):
        a = Acc(x)
        return a, [a]

    for got, _ in one_graph(f, lambda: torch.randn(2)):
        assert got[0] is got[1][0]


def test_object_stored_on_an_input_object():
    class Box:
        pass

    def f(box, x):
        box.acc = Acc(x * 2)
        return x + 1

    eager = eager_copy(f)
    jit(f, fullgraph=True)
    b1, b2 = Box(), Box()
    x = torch.randn(3)
    assert_same(f(b1, x), eager(b2, x))
    assert type(b1.acc) is Acc
    assert_same(attrs(b1.acc), attrs(b2.acc))


def test_super_and_overridden_method():
    def f(x):
        return Child(3.0, x).f(x)

    for got, expected in one_graph(f, lambda: torch.randn(4)):
        assert_same(got, expected)


def test_reflected_operator_of_a_subclass_runs_first():
    def f(x):
        a, b = V(x), SubV(x * 3)
        return (a + b).t, type(a + b).__name__, (1 + a).t

    for got, expected in one_graph(f, lambda: torch.randn(2)):
        assert_same(got, expected)


def test_default_equality_is_identity():
    def f(x):
        a, b = Acc(x), Acc(x)
        return a == a, a == b, a != b

    for got, expected in one_graph(f, lambda: torch.randn(2)):
        assert got == expected == (True, False, True)


def test_frozen_dataclass_made_inside_and_its_error():
    def ok(x):
        fr = Frozen(x)
        return fr.a * fr.k

    for got, expected in one_graph(ok, lambda: torch.randn(2)):
        assert_same(got, expected)

    def bad(x):
        fr = Frozen(x)
        fr.k = 3  # FrozenInstanceError, as eager raises it
        return fr.a

    jit(bad)
    with pytest.raises(dataclasses.FrozenInstanceError):
        bad(torch.randn(2))


def test_object_alive_across_a_graph_break():
    def f(x):
        a = Acc(x)
        a.add(x)
        print("break")  # the object is rebuilt for the resume function
        a.add(1)
        return a.t, a.n

    eager = eager_copy(f)
    jit(f)
    for _ in range(2):
        x = torch.randn(3)
        assert_same(f(x), eager(x))
    assert rewrite.explain(eager_copy(f))(torch.randn(3)).graph_break_count == 1


def test_missing_attribute_raises_attribute_error_like_eager():
    def f(x):
        return Acc(x).nope

    jit(f)
    with pytest.raises(AttributeError, match="nope"):
        f(torch.randn(2))


def test_sets_made_while_tracing_iterate_in_eagers_order():
    def f(x, names):
        s = {n for n in names if n != "b"}
        t = set(["x", "y"]) | s
        s.add("z")
        s.discard("a")
        u = {x, x}  # tensors hash by identity
        return list(s), sorted(t), "x" in t, len(u), s, t - {"x"}, frozenset(names), s & t, s <= t, list(t ^ s)

    for got, expected in one_graph(f, lambda: torch.randn(2), ["a", "b", "c", "d", "e"]):
        assert got[0] == expected[0] and got[-1] == expected[-1]  # iteration order, not only equality
        assert_same(got, expected)


def test_set_of_parameters_deduplicates_tied_weights():
    lin = torch.nn.Linear(3, 3)
    model = torch.nn.Sequential(lin, torch.nn.ReLU(), lin)

    def f(m, x):
        return sum(p.sum() for p in m.parameters()) + x, [n for n, _ in m.named_parameters()]

    for got, expected in one_graph(f, lambda: model, lambda: torch.randn(1)):
        assert_same(got, expected)


SCALE = 2.0


def test_class_statement_inside_the_function():
    def f(x):
        class Local:
            kind = "local"

            def __init__(self, t):
                self.t = t

            def twice(self):
                return self.t * 2

        obj = Local(x)
        return obj.twice(), type(obj).__qualname__, type(obj).__module__, Local.kind

    for got, expected in one_graph(f, lambda: torch.randn(2)):
        assert_same(got, expected)


def test_class_body_reading_a_global_is_not_baked_in():
    global SCALE

    def f(x):
        class Local:
            scale = SCALE  # a global the class body reads: no guard could cover it

        return x * Local.scale

    eager = eager_copy(f)
    jit(f)
    x = torch.ones(2)
    assert_same(f(x), eager(x))
    SCALE = 3.0
    try:
        assert_same(f(x), eager(x))
    finally:
        SCALE = 2.0


def test_partial_passed_in_made_inside_and_returned():
    import functools

    def scale(t, k, shift=0.0):
        return t * k + shift

    def f(x, p):
        q = functools.partial(p, shift=1.0)
        return q(x), functools.partial(scale, k=3.0)

    eager = eager_copy(f)
    jit(f, fullgraph=True)
    for _ in range(2):
        x = torch.randn(2)
        got, expected = f(x, functools.partial(scale, k=2.0)), eager(x, functools.partial(scale, k=2.0))
        assert_same(got[0], expected[0])
        assert got[1].func is scale and got[1].keywords == {"k": 3.0}


class Obj:
    def __init__(self):
        self.a = 1


class Box:
    pass


def test_getattr_default_and_hasattr_see_attributes_set_in_the_call():
    def f(x, b):
        o = Obj()
        b.c = 3
        return getattr(o, "a", 0), hasattr(o, "a"), getattr(b, "c", 0), hasattr(o, "zz"), x + 1

    eager = eager_copy(f)
    jit(f, fullgraph=True)
    for _ in range(2):
        x = torch.randn(2)
        assert_same(f(x, Box()), eager(x, Box()))


class Scaled:
    scale = 2


def test_class_attribute_stored_through_type_of_an_object_made_in_the_call():
    def f(x):
        o = Scaled()
        type(o).scale = type(o).scale + 1
        return x * o.scale

    jit(f)
    try:
        for want in (3.0, 4.0, 5.0):
            assert_same(f(torch.ones(1)), torch.full((1,), want))
    finally:
        Scaled.scale = 2


def test_attribute_deleted_then_set_again_moves_to_the_end_as_in_eager():
    class A:
        pass

    def f(x, a):
        del a.n
        a.n = 5
        return x + 1

    eager = eager_copy(f)
    jit(f, fullgraph=True)
    for fn in (f, f, eager):
        a = A()
        a.w, a.n, a.last = 1, 2, 3
        fn(torch.ones(1), a)
        assert list(vars(a)) == ["w", "last", "n"] and a.n == 5


# -- `==` and `!=` as Python's slots give them: object's __ne__ inverts the class's __eq__; a
# builtin base's comparison (tuple.__eq__, set.__ne__) is that base's, never identity ----------

@dataclasses.dataclass
class Pair:
    t: torch.Tensor
    k: int = 0


class EqOnly:
    def __init__(self, v):
        self.v = v

    def __eq__(self, other):
        return (self.v,) == (other.v,)


class TupleSub(tuple):
    pass


class SetSub(set):
    pass


class StrSub(str):
    pass


class ListSub(list):
    pass


def _outcome(fn, *args):
    try:
        return "ok", fn(*args)
    except Exception as e:  # eager's exception type
        return "raised", type(e)


@pytest.mark.parametrize("expr", [
    "x * (Pair(x + 1, 2) != Pair(x, 2))",   # object.__ne__ -> the dataclass's __eq__ -> a tensor's truth
    "x * (Pair(x, 2) != Pair(x, 2))",
    "x * (EqOnly(3) != EqOnly(3))",
    "x * (EqOnly(3) != EqOnly(4))",
    "x * (EqOnly(x) != EqOnly(x + 1))",
    "x * (TupleSub((1, 2)) != TupleSub((1, 2)))",
    "x * (ListSub([1]) == ListSub([1]))",
    "x * (StrSub('a') != StrSub('a'))",
])
def test_not_equal_goes_through_eq_and_builtin_bases(expr):
    ns = {}
    exec(f"def f(x):\n    return {expr}\n", {**globals(), "__name__": __name__}, ns)
    f = ns["f"]
    x = torch.ones(3)
    expected = _outcome(f, x)
    compiled = jit(f)
    for _ in range(2):
        actual = _outcome(compiled, x)
        assert actual[0] == expected[0]
        if expected[0] == "ok":
            assert_same(actual[1], expected[1])
        else:
            assert actual[1] is expected[1]


@pytest.mark.parametrize("make", [lambda: (TupleSub((1, 2)), TupleSub((1, 2))), lambda: (SetSub({1}), SetSub({1})),
                                  lambda: (StrSub("ab"), StrSub("ab")), lambda: (ListSub([1]), ListSub([2]))])
def test_builtin_subclass_objects_that_came_in_compare_as_their_base(make):
    def f(x, a, b):
        return x + 1, a == b, a != b, a == a

    a, b = make()
    x = torch.ones(2)
    compiled = jit(f)
    for _ in range(2):
        assert_same(compiled(x, a, b), f(x, a, b))
