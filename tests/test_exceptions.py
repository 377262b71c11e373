"""try/except/finally and raise while tracing; graph ops under a try -- each against eager."""
import traceback

import pytest
import torch

import rewrite
from rewrite import dispatcher_of, jit

from conftest import assert_same, eager_copy


class ShapeError(ValueError):
    pass


def both(fn, *args, fullgraph=True):
    """Compiled and eager agree on two calls; returns the compiled function."""
    eager = eager_copy(fn)
    jit(fn, fullgraph=fullgraph)
    for _ in range(2):
        assert_same(fn(*args), eager(*args))
    return fn


def test_caught_python_errors_are_one_graph():
    def f(x, d):
        try:
            y = x + d["k"]
        except KeyError:
            y = x - 1
        try:
            z = [x][3]
        except IndexError as e:
            z = x * len(str(e))
        try:
            if x.shape[0] > 2:
                raise ShapeError("too long", 3)
            w = x
        except ValueError as e:  # a base class catches the subclass
            w = x * e.args[1]
        finally:
            w = w + 1
        return y, z, w

    both(f, torch.ones(4), {})
    both(f, torch.ones(4), {"k": 2.0})
    assert rewrite.explain(eager_copy(f))(torch.ones(4), {}).graph_break_count == 0


def test_exception_from_an_inlined_helper_and_reraise():
    def check(x):
        if x.dim() != 2:
            raise TypeError(f"want 2-d, got {x.dim()}-d")
        return x

    def f(x):
        try:
            try:
                return check(x).sum()
            except TypeError:
                x = x * 3
                raise
        except TypeError as e:
            return x.mean(), str(e)

    both(f, torch.ones(3))
    both(f, torch.ones(2, 2))


def test_uncaught_raise_runs_eagerly_and_names_the_users_line():
    def f(x):
        y = x + 1
        if y.shape[0] == 2:
            raise ShapeError("bad length")
        return y

    jit(f)
    for _ in range(2):
        with pytest.raises(ShapeError, match="bad length") as info:
            f(torch.ones(2))
        frames = traceback.extract_tb(info.tb)
        assert frames[-1].name == "f" and "raise ShapeError" in frames[-1].line
    assert_same(f(torch.ones(3)), torch.full((3,), 2.0))


def test_assert_on_python_values():
    ns = {}  # defined by exec: pytest rewrites the asserts of test modules
    exec("def f(x, n):\n    assert n > 0, 'n must be positive'\n    return x * n\n", ns)
    f = ns["f"]

    both(f, torch.ones(2), 3)
    jit(f)
    with pytest.raises(AssertionError, match="positive"):
        f(torch.ones(2), 0)


def test_graph_op_failing_on_later_data_reaches_the_users_except():
    def f(x, i):
        try:
            return x[i]  # out of range only for some index values: the graph raises at run time
        except IndexError:
            return x.sum()

    eager = eager_copy(f)
    jit(f)
    x = torch.arange(3.0)
    for i in (1, 5, 2, 7):
        assert_same(f(x, torch.tensor(i)), eager(x, torch.tensor(i)))
    assert len(dispatcher_of(f).entries) == 1  # one entry: the eager run is its fallback


def test_graph_raising_inside_no_grad_restores_grad_mode_before_running_eagerly():
    def f(x, i):
        try:
            with torch.no_grad():
                y = x[i] * 2
        except IndexError:
            y = x.sum()
        return y, torch.is_grad_enabled()

    eager = eager_copy(f)
    jit(f)
    x = torch.arange(3.0, requires_grad=True)
    for i in (0, 9, 1):
        assert_same(f(x, torch.tensor(i)), eager(x, torch.tensor(i)))
        assert torch.is_grad_enabled()


def test_exception_leaving_a_traced_no_grad_block_restores_grad_mode():
    def f(x):
        try:
            with torch.no_grad():
                y = x * 2
                raise KeyError("k")
        except KeyError:
            pass
        return y, x * 3, torch.is_grad_enabled()

    both(f, torch.ones(2, requires_grad=True))


def test_random_op_inside_try_draws_what_eager_draws():
    def f(x):
        try:
            y = x + torch.rand(3)
        except RuntimeError:
            y = x
        return y

    eager = eager_copy(f)
    jit(f)
    for _ in range(2):
        torch.manual_seed(0)
        a = f(torch.ones(3))
        torch.manual_seed(0)
        assert_same(a, eager(torch.ones(3)))
    entry = dispatcher_of(f).entries[0]  # (compiled: the entry saves the generator, to run again from it)
    assert entry.eager_reason is None and "___rng.save()" in entry.source


def test_next_on_an_exhausted_iterator_is_stop_iteration():
    def f(xs):
        it = iter(xs)
        out = []
        while True:
            try:
                out.append(next(it) * 2)
            except StopIteration:
                break
        return out

    both(f, [torch.ones(1), torch.ones(2)])


def test_graph_raising_on_later_data_keeps_eagers_side_effects():
    def f(x, out):
        out.append(1)
        return x // x  # integer division by zero raises for some values only

    eager = eager_copy(f)
    jit(f)
    assert_same(f(torch.tensor([1, 2]), []), eager(torch.tensor([1, 2]), []))
    for fn in (f, eager):
        out = []
        with pytest.raises(RuntimeError) as info:
            fn(torch.tensor([0, 1]), out)
        assert out == [1]
        assert traceback.extract_tb(info.tb)[1].name == "f"  # raised from the user's frame's code
    assert len(dispatcher_of(f).entries) == 1


def test_write_through_a_view_of_an_empty_input_happens_once():
    def f(x, w):
        x[None] = w.sum()
        return x

    def g(x):
        x.view(-1).add_(1)
        return x

    for fn, make, w in ((f, lambda: torch.zeros(0, dtype=torch.int64), torch.ones(0, requires_grad=True)),
                        (g, lambda: torch.zeros(0), None)):
        eager = eager_copy(fn)
        jit(fn)
        for _ in range(2):
            a, b = make(), make()
            assert_same(fn(*[a, w][:fn.__code__.co_argcount]), eager(*[b, w][:fn.__code__.co_argcount]))
            assert a._version == b._version
        assert dispatcher_of(fn).compiles == 1


def test_ops_under_try_with_an_inference_mode_block_elsewhere_still_reach_the_handler():
    def f(x):
        with torch.inference_mode():
            y = x * 2
        try:
            z = x // x  # raises for a zero in x, at run time
        except RuntimeError:
            z = x
        return y, z

    eager = eager_copy(f)
    jit(f)
    for x in (torch.tensor([1, 2]), torch.tensor([0, 1])):
        assert_same(f(x), eager(x))
