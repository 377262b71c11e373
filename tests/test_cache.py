"""The per-code-object cache: LRU order, recompile limits, run-only mode past the limit."""
import warnings

import pytest
import torch

import rewrite
from rewrite import config, dispatcher_of, jit
from rewrite.guards.guard import TensorMatch

from conftest import CompileCounter, assert_same, eager_copy


def make():
    def f(x):
        return x * 2 + 1
    return f


def sizes(entries):
    return [next(g for g in e.guard.guards if isinstance(g, TensorMatch)).shape[0] for e in entries]


def test_entries_are_newest_first_and_hits_never_reorder_them():
    f = make()
    eager = eager_copy(f)
    jit(f, dynamic=False)  # one static entry per size
    for n in (1, 2, 3):
        f(torch.ones(n))
    entries = dispatcher_of(f).entries
    assert sizes(entries) == [3, 2, 1]
    for n in (1, 2, 3, 1):  # a hit on any entry: the same entries, in the same order
        assert_same(f(torch.full((n,), 2.0)), eager(torch.full((n,), 2.0)))
    assert dispatcher_of(f).entries == entries


def test_the_dispatch_is_keyed_on_what_tells_entries_apart():
    f = make()
    jit(f, dynamic=False)
    for dtype in (torch.float32, torch.float64, torch.int64):
        f(torch.ones(2, dtype=dtype))
    d = dispatcher_of(f)
    keys, table = rewrite.dispatch.dispatch_key(d.entries)
    assert keys == ["x.dtype"] and set(table) == {torch.float32, torch.float64, torch.int64}
    import inspect
    assert "___table.get(x.dtype)" in inspect.getsource(d._published[-1])


def test_alternating_inputs_hit_without_recompiling():
    cnt = CompileCounter()
    f = make()
    jit(f, backend=cnt)
    a, b = torch.ones(2), torch.ones(3)
    for _ in range(5):
        assert_same(f(a), a * 2 + 1)
        assert_same(f(b), b * 2 + 1)
    assert cnt.frame_count == 2


def test_recompile_limit_runs_eagerly_with_one_warning(monkeypatch):
    monkeypatch.setattr(config, "recompile_limit", 8)
    f = make()
    eager = eager_copy(f)
    jit(f, dynamic=False)
    for n in range(1, 9):
        f(torch.ones(n))
    assert len(dispatcher_of(f).entries) == 8
    with pytest.warns(RuntimeWarning, match=r"hit config.recompile_limit \(8\)") as record:
        assert_same(f(torch.ones(9)), eager(torch.ones(9)))
    message = str(record[0].message)
    assert "make.<locals>.f" in message
    assert "tensor 'x' size mismatch at index 0: expected 8, actual 9" in message
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warned once only
        assert_same(f(torch.ones(10)), eager(torch.ones(10)))
    assert len(dispatcher_of(f).entries) == 8
    assert_same(f(torch.ones(3)), eager(torch.ones(3)))  # existing entries still hit


def test_accumulated_recompile_limit(monkeypatch):
    monkeypatch.setattr(config, "accumulated_recompile_limit", 3)
    f = make()
    jit(f, dynamic=False)
    for n in range(1, 4):
        f(torch.ones(n))
    with pytest.warns(RuntimeWarning, match="recompile_limit"):
        assert_same(f(torch.ones(7)), torch.full((7,), 3.0))
    assert dispatcher_of(f).compiles == 3


def test_recompile_limit_with_fullgraph_raises(monkeypatch):
    monkeypatch.setattr(config, "recompile_limit", 2)
    f = make()
    jit(f, fullgraph=True, dynamic=False)
    f(torch.ones(1)), f(torch.ones(2))
    with pytest.raises(rewrite.RecompileLimitExceeded):
        f(torch.ones(3))


def test_reset_clears_entries_and_recompiles():
    cnt = CompileCounter()
    f = make()
    jit(f, backend=cnt)
    x = torch.ones(2)
    f(x), f(x)
    rewrite.reset()
    assert dispatcher_of(f).entries == ()
    assert_same(f(x), x * 2 + 1)
    assert cnt.frame_count == 2


def test_hit_path_does_not_retrace():
    cnt = CompileCounter()
    f = make()
    jit(f, backend=cnt)
    for _ in range(20):
        f(torch.randn(4))
    assert cnt.frame_count == 1 and dispatcher_of(f).compiles == 1
