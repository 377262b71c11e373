"""Graph ops inside try blocks: a `finally` cannot catch the graph's error (it goes on, as in
eager), so only a handler that may end the exception needs a graph that can run again."""
import pytest
import torch
import torch.nn.functional as F

import rewrite
from rewrite import dispatcher_of, jit

from conftest import assert_same, eager_copy


def compiled_and_eager(f, *args, seed=0):
    """Each call on fresh copies of `args` (some tests write into them), the same seed."""
    eager = eager_copy(f)
    jit(f)
    for _ in range(2):
        mine, theirs = [a.clone() for a in args], [a.clone() for a in args]
        torch.manual_seed(seed)
        got = f(*mine)
        torch.manual_seed(seed)
        assert_same(got, eager(*theirs))
        assert_same(mine, theirs)
    entry = dispatcher_of(f).entries[0]
    return entry


def test_random_ops_under_finally_compile():
    def f(x):
        try:
            y = F.dropout(x * 2, 0.5, True)
        finally:
            x.grad = None  # (a finally that does something)
        return y + 1

    entry = compiled_and_eager(f, torch.ones(64))
    assert entry.reason is None and entry.graph_module is not None


def test_writes_into_inputs_under_finally_compile():
    def f(x, buf):
        try:
            buf.add_(x)
            y = buf * 2
        finally:
            pass
        return y

    entry = compiled_and_eager(f, torch.ones(4), torch.zeros(4))
    assert entry.reason is None


def test_random_ops_under_an_except_compile_and_can_run_again():
    def f(x):
        try:
            y = F.dropout(x, 0.5, True)
        except RuntimeError:
            y = x
        return y

    entry = compiled_and_eager(f, torch.ones(64))
    # if the graph raised, the call would run again eagerly from the generator state it started with
    assert entry.reason is None and "dropout" in entry.graph_module.code and "___rng.save()" in entry.source


def test_a_return_in_finally_ends_the_exception():
    def f(x):
        try:
            y = F.dropout(x, 0.5, True)
        finally:
            return x  # noqa: B012 (it swallows whatever the try raised)

    entry = compiled_and_eager(f, torch.ones(64))
    assert entry.reason is None and "___rng.save()" in entry.source  # (a run again would draw the same)


def test_attention_without_dropout_is_not_random():
    def f(q):
        try:
            out = F.scaled_dot_product_attention(q, q, q, dropout_p=0.0, is_causal=True)
        except RuntimeError:
            out = q
        return out

    entry = compiled_and_eager(f, torch.randn(1, 2, 5, 8))
    assert entry.reason is None and entry.graph_module is not None


def test_attention_with_dropout_is_random():
    def f(q):
        try:
            out = F.scaled_dot_product_attention(q, q, q, dropout_p=0.3)
        except RuntimeError:
            out = q
        return out

    entry = compiled_and_eager(f, torch.randn(1, 2, 5, 8))
    assert entry.reason is None and "___rng.save()" in entry.source  # (random: the generator saved first)


def test_an_autocast_block_that_changes_nothing_is_not_recorded():
    def f(x):
        try:
            with torch.autocast(device_type="cpu", enabled=False):
                y = x.float() @ x.float().t()
        finally:
            pass
        return y.dtype, y

    entry = compiled_and_eager(f, torch.randn(3, 3))
    assert entry.reason is None
    assert "autocast" not in entry.graph_module.code
    with torch.autocast(device_type="cpu", dtype=torch.bfloat16):  # now the block does switch it off
        eager = eager_copy(f)
        for x in (torch.randn(3, 3).bfloat16(), torch.randn(3, 3)):
            assert_same(f(x), eager(x))
    assert len(dispatcher_of(f).entries) >= 2


@pytest.mark.parametrize("enabled", [True, False])
def test_autocast_blocks_give_eager_dtypes(enabled):
    def f(x, w):
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16, enabled=enabled):
            y = x @ w
        return y * 2

    compiled_and_eager(f, torch.randn(4, 4), torch.randn(4, 4))
