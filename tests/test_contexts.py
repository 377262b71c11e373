"""`with` blocks the tracer enters itself: inference_mode, autocast, user context managers,
contextlib's, `@torch.no_grad()` as a decorator -- each one graph, against eager."""
import contextlib

import torch

import rewrite
from rewrite import dispatcher_of, jit

from conftest import assert_same, eager_copy


def one_graph(fn, *make_args):
    eager = eager_copy(fn)
    jit(fn, fullgraph=True)
    for seed in (0, 1):
        torch.manual_seed(seed)
        args = [m() for m in make_args]
        torch.manual_seed(seed)
        expected = eager(*[m() for m in make_args])
        yield fn(*args), expected
    assert dispatcher_of(fn).compiles == 1


def test_inference_mode_block():
    def f(x):
        with torch.inference_mode():
            y = x * 2
            inside = y.is_inference()  # a tensor made inside is an inference tensor
        return y + 0, inside, torch.is_inference_mode_enabled()

    for got, expected in one_graph(f, lambda: torch.randn(3, requires_grad=True)):
        assert_same(got, expected)
        assert got[0].is_inference() == expected[0].is_inference()


def test_autocast_block_changes_dtypes_inside_only():
    def f(x, w):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = x @ w
            z = y.relu()
        return z, (z.float() @ w).dtype, torch.is_autocast_enabled("cpu")

    for got, expected in one_graph(f, lambda: torch.randn(2, 4), lambda: torch.randn(4, 4)):
        assert got[0].dtype == torch.bfloat16
        assert_same(got, expected)
    assert not torch.is_autocast_enabled("cpu")

    def g(x):
        return x.relu(), torch.is_autocast_enabled("cpu")  # read outside any traced block: guarded

    eager = eager_copy(g)
    jit(g)
    x = torch.randn(2)
    assert_same(g(x), eager(x))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert_same(g(x), eager(x))  # a new entry: the guard saw autocast on
    assert len(dispatcher_of(g).entries) == 2


class Tracker:
    def __init__(self):
        self.log = []

    def __enter__(self):
        self.log.append("enter")
        return self

    def __exit__(self, typ, exc, tb):
        self.log.append("exit" if typ is None else f"exit {typ.__name__}")
        return typ is KeyError  # swallows KeyError only


def test_user_context_manager_made_inside_and_passed_in():
    def f(x, t):
        with Tracker() as mine:
            y = x + 1
        with t:
            y = y * 2
        return y, mine.log

    eager = eager_copy(f)
    jit(f, fullgraph=True)
    for _ in range(2):
        a, b = Tracker(), Tracker()
        x = torch.randn(3)
        assert_same(f(x, a), eager(x, b))
        assert a.log == b.log == ["enter", "exit"]


def test_user_exit_swallows_or_lets_through():
    def f(x, d):
        with Tracker() as t:
            y = x + d["k"]  # KeyError: swallowed
        try:
            with Tracker() as u:
                y = x - 1
                raise ValueError("no")  # goes through __exit__, then to the except
        except ValueError:
            y = y * 3
        return y, t.log, u.log

    for got, expected in one_graph(f, lambda: torch.randn(2), lambda: {}):
        assert_same(got, expected)
        assert got[1] == ["enter", "exit KeyError"] and got[2] == ["enter", "exit ValueError"]


@contextlib.contextmanager
def scaled(log, k):
    log.append("in")
    yield k * 2
    log.append("out")


def test_contextmanager_generator_and_contextlib_helpers():
    def f(x):
        log = []
        with scaled(log, 3) as s:
            y = x * s
        with contextlib.nullcontext(y) as same:
            z = same + 1
        with contextlib.suppress(IndexError):
            z = z + [1][5]
        return z, log

    for got, expected in one_graph(f, lambda: torch.randn(2)):
        assert_same(got, expected)


@torch.no_grad()
def double_without_grad(x):
    return x * 2


def test_no_grad_decorator_on_a_helper():
    def f(x):
        y = double_without_grad(x)
        return y, y.requires_grad, (x * 2).requires_grad, torch.is_grad_enabled()

    for got, expected in one_graph(f, lambda: torch.randn(2, requires_grad=True)):
        assert_same(got, expected)


SEEN = []


@rewrite.disable
def _note_modes(y):
    """A step the graph breaks at: what mode it runs in."""
    SEEN.append((torch.is_autocast_enabled("cpu"), torch.is_inference_mode_enabled(), y.dtype))


BLOCKS = {
    "autocast": lambda: torch.autocast("cpu", dtype=torch.bfloat16),
    "inference_mode": torch.inference_mode,
    "record_function": lambda: torch.profiler.record_function("block"),
}


def test_a_break_inside_autocast_inference_mode_or_record_function_compiles_both_sides():
    for kind in ("autocast", "inference_mode", "record_function"):
        block = BLOCKS[kind]

        def f(x, w):
            with block():
                y = x @ w
                _note_modes(y)  # the eager step runs inside the block, as in eager
                z = y @ w
            return z, torch.is_autocast_enabled("cpu"), torch.is_inference_mode_enabled()

        eager = eager_copy(f)
        jit(f)
        x, w = torch.randn(2, 2), torch.randn(2, 2)
        for _ in range(2):
            SEEN.clear()
            got = f(x, w)
            compiled_seen = list(SEEN)
            SEEN.clear()
            expected = eager(x, w)
            assert_same(got, expected)
            assert compiled_seen == SEEN, kind
        out = rewrite.explain(eager_copy(f))(x, w)
        assert out.graph_count == 2 and not out.eager_reasons, (kind, out.break_reasons)
        assert not torch.is_autocast_enabled("cpu") and not torch.is_inference_mode_enabled()


def test_a_break_inside_nested_blocks_enters_each_again():
    def f(x):
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            y = x @ x
            _note_modes(y)
            z = (y @ x, torch.is_grad_enabled())
        return z, torch.is_grad_enabled()

    eager = eager_copy(f)
    jit(f)
    x = torch.randn(2, 2, requires_grad=True)
    for _ in range(2):
        SEEN.clear()
        got = f(x)
        compiled_seen = list(SEEN)
        SEEN.clear()
        assert_same(got, eager(x))
        assert compiled_seen == SEEN


def test_record_function_ranges_reach_the_profiler():
    def f(x):
        with torch.profiler.record_function("my_block"):
            y = x * 2
        return y.relu()

    compiled = jit(eager_copy(f), fullgraph=True)
    x = torch.randn(3)
    assert_same(compiled(x), f(x))
    with torch.profiler.profile() as prof:
        compiled(x)
    assert [e.name for e in prof.events() if e.name == "my_block"] == ["my_block"]


def test_dtype_of_an_intermediate_read_outside_autocast_is_guarded():
    def f(x, w):
        y = x @ w
        if y.dtype == torch.float32:  # under a caller's autocast it is bfloat16
            return y + 1
        return y - 1

    eager = eager_copy(f)
    jit(f)
    x, w = torch.randn(2, 2), torch.randn(2, 2)
    assert_same(f(x, w), eager(x, w))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert_same(f(x, w), eager(x, w))


def test_an_error_part_way_through_the_graph_leaves_its_contexts():
    def f(x, i):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = torch.nn.functional.dropout(x @ x, 0.1)  # random: the graph cannot run again
            z = torch.nn.functional.embedding(i, y)  # raises for an index out of range, at run time
        return z

    compiled = jit(eager_copy(f))
    x = torch.randn(3, 3)
    compiled(x, torch.tensor([1]))
    for _ in range(2):
        try:
            compiled(x, torch.tensor([7]))
        except IndexError:
            pass
        else:
            raise AssertionError("eager raises IndexError")
        assert not torch.is_autocast_enabled("cpu")


def test_an_input_first_read_inside_inference_mode_after_a_break_is_written():
    """The resume function reads `t1` (an input of its own, requiring grad) first inside a traced
    `inference_mode` block and writes into it: the trace's copy is made outside that mode, as the
    input is (the fuzzer, `--focus contexts`, seed 5206)."""
    def f(x0):
        t1 = x0 + x0
        if x0.float().sum() > 0:
            x0 = x0 * 2
        with torch.inference_mode():
            t1.add_(1)
        return t1
    eager = eager_copy(f)
    jit(f)
    for n in (0, 3):
        x = torch.randn(n).requires_grad_()
        assert_same(f(x), eager(x))
