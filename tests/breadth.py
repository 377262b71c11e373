"""Shared helpers of the breadth suite (issue 5, item 6): compile, run, compare with eager.

    check(fn, make_args)

`make_args(seed)` returns the argument tuple of one call; seeds 0 and 1 give the same shapes,
dtypes and Python constants but new tensor values. `check` runs an un-jitted copy of `fn` (the
oracle) and `jit(fn, fullgraph=True)` on equal but distinct deep copies of the arguments, twice,
and compares

  * the results (`assert_state`: like `assert_same`, and objects by their attributes),
  * the arguments afterwards (mutated lists, dicts, objects, tensors and their `.grad`s),
  * with `shared=("NAME", ...)`: those globals or closure cells (each side starts from the same value),
  * with `raises=SomeError`: eager must raise it, and compiled the same error and message,
  * with `backward=True`: the `.grad`s after back-propagating the sum of the result's tensors,

and asserts that the second call compiled nothing (no new graph, no new entry anywhere,
resume functions included). `fullgraph=False` is for constructs that break the graph in
Dynamo too. `fn` may be an `nn.Module`: then `jit(module)` is compiled, a deep copy of the
module is the oracle, and each side keeps its own module over both calls.

`check_each(fn, args1, args2, ...)` compares calls whose Python values differ (the guards must
notice a change), without the cache assertion.
"""
import contextlib
import copy
import types

import pytest
import torch

import rewrite

from conftest import CompileCounter, assert_same, eager_copy


def todo(reason):
    """A construct the compiler does not handle yet: this test must fail until issue 5 fixes it."""
    return pytest.mark.xfail(strict=True, reason=f"TODO(issue 5): {reason}")


def rand(seed, *shape, **kw):
    """Tensor values that differ per seed (same shape and dtype)."""
    g = torch.Generator().manual_seed(1000 + seed)
    return torch.randn(*shape, generator=g, **kw)


def assert_state(actual, expected, path="state"):
    """Like assert_same, but also for objects (their attributes), requires_grad and leaves' `.grad`."""
    assert type(actual) is type(expected), (path, type(actual), type(expected))
    if isinstance(expected, torch.nn.Module):
        assert actual.training == expected.training, path
        assert_state(dict(actual.state_dict(keep_vars=True)), dict(expected.state_dict(keep_vars=True)), path)
        # jit(module) binds the compiled forward on the instance: not state
        plain = lambda m: {k: v for k, v in vars(m).items() if not k.startswith("_") and k != "forward"}
        assert_state(plain(actual), plain(expected), path)
    elif isinstance(expected, torch.Tensor):
        assert actual.requires_grad == expected.requires_grad, (path, "requires_grad")
        assert_same(actual.detach(), expected.detach())
        if expected.is_leaf:
            assert (actual.grad is None) == (expected.grad is None), (path, "grad")
            if expected.grad is not None:
                assert_same(actual.grad, expected.grad)
    elif isinstance(expected, (list, tuple)):
        assert len(actual) == len(expected), path
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_state(a, e, f"{path}[{i}]")
    elif isinstance(expected, dict):
        assert list(actual) == list(expected), path
        for k in expected:
            assert_state(actual[k], expected[k], f"{path}[{k!r}]")
    elif isinstance(expected, (type({}.keys()), type({}.values()), type({}.items()))):
        assert_state(list(actual), list(expected), path)
    elif isinstance(expected, (type, types.FunctionType, types.ModuleType)):
        assert actual is expected, (path, actual, expected)
    elif hasattr(expected, "__dict__") or hasattr(type(expected), "__slots__"):
        slots = [n for c in type(expected).__mro__ for n in _slots(c) if hasattr(expected, n)]
        assert_state({n: getattr(actual, n) for n in slots}, {n: getattr(expected, n) for n in slots}, path)
        if hasattr(expected, "__dict__"):
            assert_state(vars(actual), vars(expected), path)
    else:
        assert actual == expected or (actual != actual and expected != expected), (path, actual, expected)


def _slots(cls):
    names = getattr(cls, "__slots__", ())
    return (names,) if isinstance(names, str) else names


def _tensors(value):
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _tensors(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _tensors(v)


def _backward(result):
    ts = [t for t in _tensors(result) if t.requires_grad]
    assert ts, "backward=True but the result has no tensor that requires grad"
    sum(t.float().sum() for t in ts).backward()


def compiles():
    """Compiles so far of every jitted code object, resume functions included."""
    from rewrite.dispatch import _ALL
    return {d: d.compiles for d in list(_ALL)}


def _call(fn, args, kwargs, raises):
    try:
        return fn(*args, **kwargs), None
    except rewrite.RewriteError:
        raise  # Unsupported and friends are the compiler's, never the user's
    except Exception as e:
        if raises is None:
            raise
        return None, e


class _Shared:
    """Globals and closure cells that both sides read and write: each side starts from `start`."""

    def __init__(self, fn, names):
        self.spaces = []
        cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))
        for name in names:
            if name in cells:
                self.spaces.append((name, cells[name], True))
            else:
                assert name in fn.__globals__, f"{name} is neither a global nor a closure cell of {fn.__name__}"
                self.spaces.append((name, fn.__globals__, False))
        self.start = copy.deepcopy(self.read())

    def read(self):
        return [space.cell_contents if is_cell else space[name] for name, space, is_cell in self.spaces]

    def restore(self):
        for (name, space, is_cell), value in zip(self.spaces, copy.deepcopy(self.start)):
            now = space.cell_contents if is_cell else space.get(name)
            if type(now) is type(value) and isinstance(value, (list, dict, set)):
                now.clear()  # in place: the object the function sees stays the same object
                now.update(value) if not isinstance(value, list) else now.extend(value)
            elif is_cell:
                space.cell_contents = value
            else:
                space[name] = value


@contextlib.contextmanager
def _isolated():
    """A failing test must not leave grad, inference or anomaly mode changed for the tests after it."""
    with torch.set_grad_enabled(torch.is_grad_enabled()), \
            torch.inference_mode(torch.is_inference_mode_enabled()), \
            torch.autograd.set_detect_anomaly(torch.is_anomaly_enabled()):
        yield


def check(fn, make_args, **options):
    """Compile `fn` with fullgraph, run it and eager on two calls, compare everything; returns the counter."""
    with _isolated():
        return _check(fn, make_args, **options)


def _check(fn, make_args, *, shared=(), backward=False, kwargs=None, fullgraph=True, raises=None):
    cnt = CompileCounter()
    eager = copy.deepcopy(fn) if isinstance(fn, torch.nn.Module) else eager_copy(fn)
    compiled = rewrite.jit(fn, fullgraph=fullgraph, backend=cnt)
    state = _Shared(fn, shared) if shared else None
    try:
        for seed in (0, 1):
            args = make_args(seed)
            assert isinstance(args, tuple), "make_args must return a tuple of arguments"
            kw = kwargs(seed) if kwargs else {}
            (e_args, e_kw), (c_args, c_kw) = copy.deepcopy((args, kw)), copy.deepcopy((args, kw))
            if state:
                state.restore()
            expected, e_error = _call(eager, e_args, e_kw, raises)
            assert raises is None or isinstance(e_error, raises), f"eager did not raise {raises}"
            if backward and e_error is None:
                _backward(expected)
            if state:
                e_state = copy.deepcopy(state.read())
                state.restore()
            actual, c_error = _call(compiled, c_args, c_kw, raises)
            if e_error is not None or c_error is not None:  # the same exception as eager, or none
                assert type(c_error) is type(e_error), f"compiled raised {c_error!r}, eager raised {e_error!r}"
                assert str(c_error) == str(e_error)
            elif backward:
                _backward(actual)
            assert_state(actual, expected, "result")
            assert_state((c_args, c_kw), (e_args, e_kw), "arguments")
            if isinstance(fn, torch.nn.Module):
                assert_state(fn, eager, "module")  # jit(module) may return a wrapper: fn holds the state
            if state:
                assert_state(state.read(), e_state, "shared")
            if seed == 0:
                first = (cnt.frame_count, compiles())
            else:
                again = {d.qualname: n for d, n in compiles().items() if n != first[1].get(d, 0)}
                assert cnt.frame_count == first[0] and not again, \
                    f"the second call (new values, same types and shapes) recompiled: {again}"
    finally:
        if state:
            state.restore()  # leave the globals and cells as the test found them
    return cnt


def check_each(fn, *calls, fullgraph=True):
    """Compile `fn` and compare with eager on each call, where Python values may change between
    calls (so recompiles are allowed: this checks the guards, not the cache). Each call is an
    argument tuple, or a function returning one (it may first change state both sides read)."""
    eager = eager_copy(fn)
    rewrite.jit(fn, fullgraph=fullgraph, backend=CompileCounter())
    with _isolated():
        _each(fn, eager, calls)


def _each(fn, eager, calls):
    for args in calls:
        args = args() if callable(args) else args
        e_args, c_args = copy.deepcopy(args), copy.deepcopy(args)
        assert_state(fn(*c_args), eager(*e_args), "result")
        assert_state(c_args, e_args, "arguments")
