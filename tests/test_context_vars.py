"""`contextvars.ContextVar` get / set / reset inside a compiled call (issue 18, item 4): traced
as side effects replayed in order, guarded on what the var holds. Each run in its own
`contextvars.Context` on both sides, compared with eager (result and what the var holds after)."""
import contextvars

import pytest
import torch

import rewrite

LEVEL = contextvars.ContextVar("level", default=1)
SCALE = contextvars.ContextVar("scale")


def run(fn, *args, setup=()):
    """fn(*args) in a fresh Context where `setup` (var, value) pairs were set first; the result
    and what each var holds there afterwards."""
    def call():
        for var, value in setup:
            var.set(value)
        return fn(*args)
    ctx = contextvars.Context()
    try:
        result = ctx.run(call), None
    except Exception as e:  # noqa: BLE001 (eager's exception is the expected one)
        result = None, type(e)
    return result, [ctx.get(v, "unset") for v in (LEVEL, SCALE)]


def compare(fn, *args, setups=((),)):
    compiled = rewrite.jit(fn, fullgraph=True)
    for setup in setups:
        (got, got_err), got_vars = run(compiled, *args, setup=setup)
        (want, want_err), want_vars = run(fn, *args, setup=setup)
        assert got_err is want_err and got_vars == want_vars
        if want_err is None:
            torch.testing.assert_close(got, want)


def test_set_get_reset_within_the_call_leaves_the_var_as_it_was():
    def f(x):
        before = LEVEL.get()
        token = LEVEL.set(before + 4)
        y = x * LEVEL.get()
        LEVEL.reset(token)
        return y + LEVEL.get()
    compare(f, torch.ones(3), setups=((), ((LEVEL, 7),), ()))


def test_a_set_that_stays_is_replayed():
    def f(x):
        SCALE.set(2.5)
        LEVEL.set(LEVEL.get() + 1)
        return x * SCALE.get() + LEVEL.get()
    compare(f, torch.ones(3), setups=((), ((LEVEL, 3),), ((SCALE, 9.0),)))


def test_get_with_a_default_and_lookup_error_when_unset():
    def f(x):
        y = x + SCALE.get(0.5)
        try:
            return y * SCALE.get()
        except LookupError:
            return y - 1
    compare(f, torch.ones(3), setups=((), ((SCALE, 4.0),), ()))


def test_reset_twice_raises_as_eager():
    def f(x):
        token = LEVEL.set(3)
        LEVEL.reset(token)
        LEVEL.reset(token)
        return x
    compare(f, torch.ones(3))


def test_a_value_read_is_guarded():
    def f(x):
        return x * LEVEL.get()
    compiled = rewrite.jit(f, fullgraph=True)
    for level in (2, 3, 2):
        ctx = contextvars.Context()
        ctx.run(LEVEL.set, level)
        torch.testing.assert_close(ctx.run(compiled, torch.ones(2)), torch.full((2,), float(level)))
    assert len(rewrite.dispatcher_of(compiled).entries) == 2


def test_a_token_made_before_the_call_breaks_the_graph():
    def f(x, token):
        LEVEL.reset(token)
        return x + LEVEL.get()
    with pytest.raises(rewrite.Unsupported, match="token made before the call"):
        ctx = contextvars.Context()
        ctx.run(lambda: rewrite.jit(f, fullgraph=True)(torch.ones(2), LEVEL.set(5)))
