"""Graph breaks beyond calls and branches: `with` blocks (traced grad-mode contexts and user
context managers), stores and operators run eagerly, closures, loops over lists, logging,
captured scalars -- each compared with eager."""
import contextlib
import logging
import threading
import traceback
import warnings

import pytest
import torch

import rewrite
from rewrite import dispatcher_of, jit

from conftest import CompileCounter, assert_same, eager_copy

COUNTER = 0


LOCK = threading.Lock()


def both(f, *make_args, backend=None, fullgraph=False):
    """Run eager and jitted f on fresh args (twice each); return the jitted function."""
    eager = eager_copy(f)
    jit(f, backend=backend, fullgraph=fullgraph)
    for make in make_args:
        for _ in range(2):
            assert_same(f(*make()), eager(*make()))
    return f


def breaks(f):
    return [e.graph_break for e in dispatcher_of(f).entries if e.graph_break]


# -- traced grad-mode contexts ---------------------------------------------------------------

@pytest.mark.parametrize("outer", [True, False])
def test_no_grad_block_is_traced_into_one_graph(outer):
    def f(x):
        y = x * 2
        with torch.no_grad():
            z = y + 1
            w = z * y
        return y + w, z.requires_grad, w.requires_grad, torch.is_grad_enabled()

    x = torch.ones(3, requires_grad=True)
    with torch.set_grad_enabled(outer):
        both(f, lambda: (x,), fullgraph=True)
        assert torch.is_grad_enabled() is outer


def test_grad_mode_is_guarded_when_a_with_block_restores_it():
    def f(x):
        with torch.no_grad():
            y = x + 1
        return x * y, torch.is_grad_enabled()

    eager = eager_copy(f)
    jit(f, fullgraph=True)
    x = torch.ones(2, requires_grad=True)
    for mode in (True, False, True):
        with torch.set_grad_enabled(mode):
            assert_same(f(x), eager(x))
            assert torch.is_grad_enabled() is mode
    assert len(dispatcher_of(f).entries) == 2


def test_set_grad_enabled_as_a_statement_and_as_a_block():
    def f(x, flag):
        with torch.set_grad_enabled(flag):
            y = x * 2
        torch.set_grad_enabled(False)
        z = x * 3
        torch.set_grad_enabled(True)
        return y, z, y.requires_grad, z.requires_grad

    x = torch.ones(2, requires_grad=True)
    both(f, lambda: (x, True), lambda: (x, False), fullgraph=True)


def test_enable_grad_inside_no_grad():
    def f(x):
        with torch.no_grad():
            a = x * 2
            with torch.enable_grad():
                b = x * 3
            c = x * 4
        return a.requires_grad, b.requires_grad, c.requires_grad, b

    both(f, lambda: (torch.ones(2, requires_grad=True),), fullgraph=True)


def test_gradients_through_a_function_with_a_no_grad_block():
    def f(x, w):
        with torch.no_grad():
            scale = w.abs().max()
        return (x * w / scale).sum()

    eager = eager_copy(f)
    jit(f, fullgraph=True)
    x = torch.randn(4)
    w1, w2 = torch.randn(4, requires_grad=True), None
    w2 = w1.detach().clone().requires_grad_(True)
    f(x, w1).backward()
    eager(x, w2).backward()
    torch.testing.assert_close(w1.grad, w2.grad)


# -- breaks inside grad-mode blocks: left by the graph, re-entered ---------------------------

def test_break_inside_no_grad_runs_the_call_and_the_rest_under_no_grad():
    def record(seen):
        seen.append(torch.is_grad_enabled())

    rewrite.disable(record)

    def f(x, seen):
        y = x * 2
        with torch.no_grad():
            z = y + 1
            record(seen)  # runs eagerly: a graph break inside the block
            w = z * y
        return y + w, w.requires_grad, torch.is_grad_enabled()

    x = torch.ones(3, requires_grad=True)
    eager = eager_copy(f)
    cnt = CompileCounter()
    jit(f, backend=cnt)
    for mode in (True, False):
        with torch.set_grad_enabled(mode):
            a, b = [], []
            assert_same(f(x, a), eager(x, b))
            assert a == b == [False]
            assert torch.is_grad_enabled() is mode
    assert breaks(f)


def test_branch_on_a_tensor_inside_nested_grad_blocks():
    def f(x):
        with torch.enable_grad():
            y = x * 2
            with torch.no_grad():
                if y.sum() > 0:
                    z = y + 1
                else:
                    z = y - 1
                inner = torch.is_grad_enabled()
            w = z + y
        return w, w.requires_grad, z.requires_grad, inner, torch.is_grad_enabled()

    for mode in (True, False):
        with torch.set_grad_enabled(mode):
            rewrite.reset()
            both(f, lambda: (torch.ones(2, requires_grad=True),), lambda: (-torch.ones(2, requires_grad=True),))
            assert torch.is_grad_enabled() is mode


def test_exception_in_a_break_inside_no_grad_restores_grad_mode():
    def boom(t):
        raise ValueError("boom")

    rewrite.disable(boom)

    def f(x):
        with torch.no_grad():
            y = x + 1
            boom(y)
        return y

    eager = eager_copy(f)
    jit(f)
    for fn in (eager, f, f):
        with pytest.raises(ValueError, match="boom"):
            fn(torch.ones(2))
        assert torch.is_grad_enabled()


def test_break_after_a_statement_that_switched_grad_mode_is_not_taken_wrongly():
    def f(x, out):
        torch.set_grad_enabled(False)
        y = x * 2
        out.append(torch.is_grad_enabled())
        torch.set_grad_enabled(True)
        return y, y.requires_grad

    eager = eager_copy(f)
    jit(f)
    x = torch.ones(2, requires_grad=True)
    for _ in range(2):
        a, b = [], []
        assert_same(f(x, a), eager(x, b))
        assert a == b == [False]
        assert torch.is_grad_enabled()


# -- user context managers: the block runs inside a resume function ---------------------------

def test_user_context_manager_enters_and_exits_in_order():
    @contextlib.contextmanager
    def ctx(log):
        log.append("enter")
        yield 10
        log.append("exit")

    def f(x, log):
        y = x + 1
        with ctx(log) as k:
            y = y * k
        return y - 1

    eager = eager_copy(f)
    jit(f)
    for _ in range(2):
        a, b = [], []
        assert_same(f(torch.ones(2), a), eager(torch.ones(2), b))
        assert a == b == ["enter", "exit"]
    assert not breaks(f)  # the generator's __enter__/__exit__ are traced


def test_context_manager_that_swallows_an_exception():
    def fail(t):
        raise KeyError("k")

    def f(x):
        y = x * 2
        with contextlib.suppress(KeyError):
            y = y + 1
            fail(y)
            y = y * 100
        return y

    both(f, lambda: (torch.ones(2),))


def test_with_over_an_unknown_context_manager_raises_under_fullgraph():
    def f(x):
        with LOCK:  # a with block over a C object the tracer does not enter
            return x + 1

    jit(f, fullgraph=True)
    with pytest.raises(rewrite.Unsupported) as info:
        f(torch.ones(2))
    assert "test_break_kinds.py" in str(info.value)


# -- one instruction run eagerly: stores and operators ----------------------------------------

class Box:
    pass


def test_attribute_stores_on_an_input_object_are_replayed():
    def f(x, box):
        y = x + 1
        box.value = y
        box.count = getattr(box, "count", 0) + 1
        return y * 2

    eager = eager_copy(f)
    jit(f, fullgraph=True)
    a, b = Box(), Box()
    for _ in range(2):
        assert_same(f(torch.ones(2), a), eager(torch.ones(2), b))
        assert_same(a.value, b.value)
        assert a.count == b.count


def test_global_store_breaks():
    def f(x):
        global COUNTER
        y = x + 1
        COUNTER = COUNTER + 1
        return y * COUNTER

    global COUNTER
    eager = eager_copy(f)
    jit(f)
    for _ in range(2):
        COUNTER = 0
        expected = eager(torch.ones(2))
        COUNTER = 0
        assert_same(f(torch.ones(2)), expected)
        assert COUNTER == 1


def test_inplace_operator_on_an_input_tensor_is_traced_and_mutates_it():
    def f(x):
        y = x * 2
        x += 1
        return x + y

    eager = eager_copy(f)
    jit(f)
    for _ in range(2):
        a, b = torch.ones(3), torch.ones(3)
        assert_same(f(a), eager(b))
        assert_same(a, b)
    assert not breaks(f)


def test_item_store_into_an_input_list():
    def f(x, out):
        y = x.cos()
        out[0] = y
        return y + 1

    eager = eager_copy(f)
    jit(f)
    for _ in range(2):
        a, b = [None], [None]
        assert_same(f(torch.ones(2), a), eager(torch.ones(2), b))
        assert_same(a, b)


# -- closures ---------------------------------------------------------------------------------

def make_scaled(k):
    def f(x):
        y = x * k
        print("scaled")
        return y + k
    return f


def test_break_in_a_closure_uses_each_closures_own_cells(capsys):
    f2, f3 = make_scaled(2), make_scaled(3)
    for f, k in ((f2, 2), (f3, 3)):
        eager = eager_copy(f)
        jit(f)
        for _ in range(2):
            assert_same(f(torch.ones(2)), eager(torch.ones(2)))
        assert_same(f(torch.ones(2)), torch.ones(2) * k + k)
    assert breaks(f2) and breaks(f3)


def test_nonlocal_assignment_breaks_and_updates_the_cell():
    def make():
        calls = 0

        def f(x):
            nonlocal calls
            y = x + 1
            calls += 1
            return y * calls
        return f, lambda: calls

    f, read = make()
    g, read_g = make()
    eager = eager_copy(g)
    jit(f)
    for _ in range(3):
        assert_same(f(torch.ones(2)), eager(torch.ones(2)))
    assert read() == read_g() == 3


# -- loops ------------------------------------------------------------------------------------

def test_break_in_a_loop_over_an_input_list_that_grows():
    def grow(xs, t):
        if len(xs) < 4:
            xs.append(t * 10)

    rewrite.disable(grow)

    def f(xs):
        total = 0
        for t in xs:
            grow(xs, t)
            total = total + t.sum()
        return total, len(xs)

    eager = eager_copy(f)
    jit(f)
    for _ in range(2):
        a, b = [torch.ones(2), torch.ones(3)], [torch.ones(2), torch.ones(3)]
        assert_same(f(a), eager(b))
        assert_same(a, b)


def test_item_in_a_loop_over_a_list():
    def f(xs):
        total = 0.0
        for t in xs:
            total = total + t.sum().item()
        return total

    both(f, lambda: ([torch.ones(2), torch.ones(3)],))
    assert breaks(f)


# -- logging and warnings ----------------------------------------------------------------------

log = logging.getLogger("rewrite.tests.break_kinds")


def test_logging_calls_break_and_log_once_per_call(caplog):
    def f(x):
        y = x + 1
        log.warning("shape %s", tuple(y.shape))
        logging.getLogger("rewrite.tests.break_kinds").info("info")
        return y * 2

    with caplog.at_level(logging.INFO, logger="rewrite.tests.break_kinds"):
        both(f, lambda: (torch.ones(2),))
    msgs = [r.getMessage() for r in caplog.records if r.name == "rewrite.tests.break_kinds"]
    assert msgs == ["shape (2,)", "info"] * 4
    assert any("logging" in b for b in breaks(f))


def test_warning_from_a_break_names_the_users_line():
    def f(x):
        y = x + 1
        warnings.warn("careful")
        return y

    line = f.__code__.co_firstlineno + 2
    jit(f)
    for _ in range(2):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            f(torch.ones(2))
        assert [(x.filename, x.lineno) for x in w] == [(__file__, line)]


def test_exception_in_a_break_call_has_the_users_line_in_its_traceback():
    def bad(t):
        raise IndexError("bad")

    rewrite.disable(bad)

    def f(x):
        y = x + 1
        return bad(y)

    line = f.__code__.co_firstlineno + 2
    jit(f)
    with pytest.raises(IndexError) as info:
        f(torch.ones(2))
    frames = [(fr.filename, fr.lineno, fr.name) for fr in traceback.extract_tb(info.value.__traceback__)]
    assert (__file__, line, "f") in frames


def test_ambiguous_tensor_branch_raises_from_the_users_line():
    def f(x):
        if x > 0:
            return x
        return -x

    line = f.__code__.co_firstlineno + 1
    eager = eager_copy(f)
    with pytest.raises(RuntimeError) as expected:
        eager(torch.ones(2))
    jit(f)
    with pytest.raises(type(expected.value)) as info:
        f(torch.ones(2))
    frames = [(fr.filename, fr.lineno) for fr in traceback.extract_tb(info.value.__traceback__)]
    assert (__file__, line) in frames


# -- captured scalars ---------------------------------------------------------------------------

@pytest.fixture
def capture_scalars():
    rewrite.config.capture_scalar_outputs = True
    yield
    rewrite.config.capture_scalar_outputs = False


def test_capture_scalar_outputs_keeps_item_in_the_graph(capture_scalars):
    def f(x):
        s = x.sum().item()
        m = x.max().item()
        k = s * 2 + 1 - m
        return x * k + torch.full((2,), s), k, -s

    cnt = CompileCounter()
    both(f, lambda: (torch.ones(2),), lambda: (torch.arange(2.0),), backend=cnt, fullgraph=True)
    assert cnt.frame_count == 1  # one graph serves every value: the scalar is computed inside it


def test_branch_on_a_captured_scalar_still_breaks(capture_scalars):
    def f(x):
        s = x.sum().item()
        if s > 2:
            return x + 1
        return x - 1

    both(f, lambda: (torch.ones(2),), lambda: (torch.ones(4),))
    assert breaks(f)


def test_item_breaks_without_capture_scalar_outputs():
    def f(x):
        return x * x.sum().item()

    jit(f, fullgraph=True)
    with pytest.raises(rewrite.Unsupported, match="item"):
        f(torch.ones(2))


# -- imports inside a function -----------------------------------------------------------------

def test_import_of_an_imported_module_is_traced():
    def f(x):
        import math
        import torch.nn.functional as F
        from torch import nn  # noqa: F401
        return F.relu(x) * math.pi

    both(f, lambda: (torch.arange(3.0) - 1,), fullgraph=True)


def test_import_of_a_module_not_yet_imported_breaks(tmp_path, monkeypatch):
    (tmp_path / "rewrite_fresh_module_for_test.py").write_text("LOADED = 7\n")
    monkeypatch.syspath_prepend(str(tmp_path))

    def f(x):
        y = x + 1
        import rewrite_fresh_module_for_test as m
        return y * m.LOADED

    eager = eager_copy(f)
    jit(f)
    assert_same(f(torch.ones(2)), eager(torch.ones(2)))  # the first call imports the module
    assert any("import" in b for b in breaks(f))
    assert_same(f(torch.ones(2)), eager(torch.ones(2)))


def test_break_rebuilding_an_empty_size():  # fuzzer finding: torch.Size(()) was written `Size((,))`
    def f(x, box):
        t = torch.exp(x)
        box.seen = x.shape
        return t

    eager = eager_copy(f)
    jit(f)
    for _ in range(2):
        a, b = Box(), Box()
        assert_same(f(torch.tensor(1.0), a), eager(torch.tensor(1.0), b))
        assert a.seen == b.seen == torch.Size([])
