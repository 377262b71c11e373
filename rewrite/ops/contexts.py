"""Context managers in `with` blocks: which the tracer enters itself, and how.

    torch.no_grad(), enable_grad(), set_grad_enabled(b)
                               GradModeVar: grad-mode switches in the graph (graph breaks
                               inside re-enter them; see breaks.py)
    torch.inference_mode(b), torch.autocast(...), torch.amp.autocast(...),
    torch.profiler.record_function(name)
                               RecordedContextVar: entered for real while tracing (the ops
                               traced inside see the mode) and recorded in the graph as the
                               enter/exit calls torch provides for that, so the compiled
                               code switches the mode where eager does
    objects of user classes, contextlib.nullcontext, contextlib.suppress, @contextmanager
                               their Python __enter__ and __exit__ are inlined

BEFORE_WITH calls `enter(frame, ctx)`, which returns what goes on the stack for the block's
end (the `__exit__` to call) and what `as` binds.
"""
from __future__ import annotations

import contextlib
import functools
import sys
import threading
import types

import torch
from torch.amp import autocast_mode
from torch.autograd import grad_mode

from ..errors import PythonError, Raised, Unsupported
from ..guards.guard import StateMatch
from ..guards.source import AttrSource
from ..values.vars import ConstVar, ContextExitVar, GradModeVar, ModeDecoratedVar, RecordedContextVar, Var
from .core import CALLS, const, describe, fold, is_callable, python_value
from .instances import _heap_type, call_bound, dunder


def grad_mode_state(ctx: GradModeVar) -> dict:
    """The `__dict__` eager's object has now (what its `__exit__` reads): set_grad_enabled's
    `prev` and `mode` from when it was made; no_grad's and enable_grad's `prev` from their last
    `__enter__` (no_grad starts with False, enable_grad with none)."""
    if ctx.made_by_set:
        return {"prev": ctx.prev, "mode": ctx.mode}
    if ctx.prev is not None:
        return {"prev": ctx.prev}
    return {} if ctx.mode else {"prev": False}


def _set_grad_enabled(frame, args, kwargs) -> GradModeVar:
    mode = (args or list(kwargs.values()) or [None])[0]
    if len(args) + len(kwargs) != 1 or not isinstance(mode, ConstVar) or not isinstance(mode.value, bool):
        raise Unsupported(f"torch.set_grad_enabled({', '.join(map(describe, args))}) (a bool constant is traced)")
    ctx = GradModeVar(mode.value, prev=frame.tracer.read_grad_mode())
    frame.tracer.set_grad(mode.value)  # it switches when made, not only when entered
    return ctx


def _no_args(make):
    def construct(frame, args, kwargs):
        if len(args) == 1 and not kwargs and is_callable(args[0]):  # `@torch.no_grad` bare: the function, decorated
            return ModeDecoratedVar(make(), args[0])
        if args or kwargs:
            raise Unsupported("no_grad()/enable_grad() take no arguments (the call raises eagerly)")
        return make()
    return construct


def _inference_mode(frame, args, kwargs) -> RecordedContextVar:
    real = fold(torch.inference_mode, *(python_value(a, "inference_mode()") for a in args),
                **{k: python_value(v, "inference_mode()") for k, v in kwargs.items()})
    return RecordedContextVar("inference_mode", grad_mode._enter_inference_mode, grad_mode._exit_inference_mode,
                              (real.mode,), functools.partial(torch.inference_mode, real.mode))


def _autocast(frame, args, kwargs) -> RecordedContextVar:
    real = fold(torch.autocast, *(python_value(a, "autocast()") for a in args),
                **{k: python_value(v, "autocast()") for k, v in kwargs.items()})
    return RecordedContextVar("autocast", autocast_mode._enter_autocast, autocast_mode._exit_autocast,
                              (real.device, real.fast_dtype, real._enabled, real._cache_enabled),
                              functools.partial(torch.autocast, real.device, real.fast_dtype, real._enabled,
                                                real._cache_enabled))


def _record_function(frame, args, kwargs) -> RecordedContextVar:
    """`torch.profiler.record_function(name, args=None)`: the profiler range is recorded as the
    ops torch gives for it, so a profile of the compiled code shows it where eager does."""
    values = [python_value(a, "record_function()") for a in args]
    named = {k: python_value(v, "record_function()") for k, v in kwargs.items()}
    fold(torch.autograd.profiler.record_function, *values, **named)  # (its errors, eagerly)
    name, extra = (values + [named.get("name"), named.get("args")][len(values):])[:2]
    if not isinstance(name, str) or not (extra is None or isinstance(extra, str)):
        raise Unsupported("record_function() with a name that is not a string")
    ops = torch.ops.profiler
    return RecordedContextVar("record_function", ops._record_function_enter_new.default,
                              ops._record_function_exit._RecordFunction, (name, extra),
                              functools.partial(torch.autograd.profiler.record_function, name, extra))


CONSTRUCTORS = {
    torch.autograd.profiler.record_function: _record_function,
    torch.no_grad: _no_args(lambda: GradModeVar(False)),
    torch.enable_grad: _no_args(lambda: GradModeVar(True)),
    torch.set_grad_enabled: _set_grad_enabled,
    torch.inference_mode: _inference_mode,
    torch.autocast: _autocast,
    torch.amp.autocast: _autocast,
}


# context objects that may come in (a graph break hands its resume function a fresh one):
# the attributes a new, not yet entered one has, and those its constructor takes, in order
_FIELDS = {
    torch.autocast: ({"fast_dtype", "device", "custom_backend_name", "_cache_enabled", "_enabled"},
                     ("device", "fast_dtype", "_enabled", "_cache_enabled")),
    torch.inference_mode: ({"mode"}, ("mode",)),
    torch.autograd.profiler.record_function: ({"name", "args", "run_callbacks_on_exit", "record",
                                               "_cupti_monitor_external_id"}, ("name", "args")),
}


def field(ctx: RecordedContextVar, name: str):
    """`ctx.mode`, `ctx.name`, `ctx.fast_dtype`: a constructor argument of a traced context
    (what `clone()` reads when `@torch.inference_mode()` decorates a function), or None."""
    for cls, kind in _KINDS.items():
        taken = _FIELDS[cls][1]
        if ctx.kind == kind and name in taken:
            return ConstVar(ctx.args[taken.index(name)])
    return None


_KINDS = {torch.autocast: "autocast", torch.inference_mode: "inference_mode",
          torch.autograd.profiler.record_function: "record_function"}


# -- torch's other context managers: `@contextmanager` functions and classes of torch, made
# with constant arguments (`disable_saved_tensors_hooks(msg)`, `sdpa_kernel(backend)`,
# `save_on_cpu()`, `fork_rng()`): entered for real while tracing, and recorded as a node that
# makes a fresh one and enters it, and one that leaves it -----------------------------------------------------
_CONTEXTMANAGER_CODE = contextlib.contextmanager(lambda: iter(())).__code__


def is_torch_context(fn) -> bool:
    """A torch function made by `@contextlib.contextmanager`, or a torch class with __enter__."""
    if isinstance(fn, types.FunctionType) and fn.__code__ is _CONTEXTMANAGER_CODE:
        inner = getattr(fn, "__wrapped__", None)
        return f"{getattr(inner, '__module__', '')}.".startswith("torch.")
    return isinstance(fn, type) and _heap_type(fn) and f"{fn.__module__}.".startswith("torch.") \
        and hasattr(fn, "__enter__") and hasattr(fn, "__exit__") and not issubclass(fn, torch.nn.Module)
    # (classes written in Python only: torch.device is a context manager too, and a value)


def _enter_torch_context(factory, args, kwargs):
    manager = factory(*args, **kwargs)
    return manager, manager.__enter__()


def _exit_torch_context(handle):
    return handle[0].__exit__(None, None, None)


def torch_context(frame, factory, args, kwargs) -> RecordedContextVar:
    real_args = tuple(python_value(a, f"{factory.__qualname__}()") for a in args)
    real_kwargs = {k: python_value(v, f"{factory.__qualname__}()") for k, v in kwargs.items()}
    enter_fn = functools.partial(_enter_torch_context, factory, real_args, real_kwargs)
    enter_fn.__name__ = factory.__qualname__
    # (no `fresh`: a graph break inside does not split it -- fork_rng's exit restores what its
    # enter saw, so two blocks are not one)
    return RecordedContextVar(factory.__qualname__, enter_fn, _exit_torch_context, (), None)


# -- torch._dynamo.error_on_graph_break(b): whether a graph break in the block raises (fullgraph=False
# only; fullgraph=True raises at any break). A compile-time switch: nothing in the graph; the trace
# keeps the state (`Tracer.break_errors`); a break inside runs its eager step in a fresh one and the
# resume function enters another, so what compiles then (a callee's copy) sees torch's own flag set ---------
ERROR_ON_BREAK = "error_on_graph_break"


def is_error_on_graph_break(fn) -> bool:
    """torch._dynamo.error_on_graph_break (known by name: torch._dynamo is not imported for it)."""
    return getattr(fn, "__module__", None) == "torch._dynamo.decorators" and \
        getattr(fn, "__name__", None) == "error_on_graph_break" and isinstance(fn, types.FunctionType)


def _is_error_on_graph_break_object(value) -> bool:
    cls = type(value)
    return cls.__module__ == "torch._dynamo.decorators" and cls.__name__ == "ErrorOnGraphBreakDecoratorContextManager"


def error_on_graph_break(frame, fn, args, kwargs) -> RecordedContextVar:
    values = [python_value(a, "error_on_graph_break()") for a in args]
    named = {k: python_value(v, "error_on_graph_break()") for k, v in kwargs.items()}
    made = fold(fn, *values, **named)  # (its own TypeError for missing or unknown arguments)
    return _error_on_graph_break_var(made)


def _error_on_graph_break_var(made) -> RecordedContextVar:
    flag = made.error_on_graph_break
    if type(flag) is not bool:
        raise Unsupported(f"error_on_graph_break({flag!r}): a bool is traced")
    return RecordedContextVar(ERROR_ON_BREAK, None, None, (flag,), functools.partial(type(made), flag))


def errors_at_start() -> bool:
    """torch's error_on_graph_break flag now (False while torch._dynamo is not imported): what a
    compile starting now begins with, as Dynamo's does."""
    utils = sys.modules.get("torch._dynamo.utils")
    return getattr(utils, "_error_on_graph_break", False) is True


def _plain(value) -> bool:
    if type(value) in (dict, list, tuple):
        return all(_plain(v) for v in (value.values() if type(value) is dict else value))
    return type(value) in (int, float, bool, str, type(None))


def is_wrapped_context(value) -> bool:
    """An object `wrap_context` makes a RecordedContextVar of."""
    return type(value) in _FIELDS or _is_error_on_graph_break_object(value)


def wrap_context(tracer, value, source) -> RecordedContextVar | None:
    """An autocast, inference_mode or record_function object that came in and was not entered
    yet: a RecordedContextVar, its settings guarded (None for any other object)."""
    if _is_error_on_graph_break_object(value):
        if value.prev_error_on_graph_break:
            raise Unsupported("an error_on_graph_break object that was entered before the call")
        tracer.wrap(value.error_on_graph_break, AttrSource(source, "error_on_graph_break") if source else None)
        return _error_on_graph_break_var(value)
    fields = _FIELDS.get(type(value))
    if fields is None:
        return None
    made, taken = fields
    if set(vars(value)) != made or getattr(value, "record", None) is not None:
        raise Unsupported(f"a {type(value).__name__} object that was entered before the call")
    args = [tracer.wrap(getattr(value, f), AttrSource(source, f) if source is not None else None) for f in taken]
    return CONSTRUCTORS[type(value)](None, args, {})


# -- at run time: the recorded contexts a graph entered, per thread, so an error part-way out
# of the graph leaves them (`unwind`) as eager's `with` would --------------------------------------------------
_OPEN = threading.local()


def _stack() -> list:
    stack = getattr(_OPEN, "stack", None)
    if stack is None:
        stack = _OPEN.stack = []
    return stack


class Enter:
    """The graph node entering a recorded context: `enter_fn(*args)`, the handle registered."""

    def __init__(self, kind: str, enter_fn, exit_fn):
        self.kind, self.enter_fn, self.exit_fn = kind, enter_fn, exit_fn
        self.__name__ = getattr(enter_fn, "__name__", kind)  # (how graphs name the node)

    def __call__(self, *args):
        handle = self.enter_fn(*args)
        _stack().append((self, handle))
        return handle

    def __repr__(self):
        return f"<enter {self.kind}>"


class Exit:
    """The graph node leaving it: `exit_fn(handle)`, the handle unregistered."""

    def __init__(self, enter: Enter):
        self.enter = enter
        self.__name__ = getattr(enter.exit_fn, "__name__", enter.kind)

    def __call__(self, handle):
        stack = _stack()
        for i in range(len(stack) - 1, -1, -1):
            if stack[i][1] is handle:
                del stack[i]
                break
        return self.enter.exit_fn(handle)

    def __repr__(self):
        return f"<exit {self.enter.kind}>"


def unwind(enters: tuple) -> None:
    """After the graph raised: leave what its `enters` entered and did not leave, innermost first."""
    stack = _stack()
    while stack and stack[-1][0] in enters:
        enter_node, handle = stack.pop()
        try:
            enter_node.exit_fn(handle)
        except Exception:  # (the graph's own error is the one to see)
            pass


def enter(frame, ctx: Var, binds: bool = True) -> tuple[Var, Var]:
    """BEFORE_WITH: (the exit to call at the block's end, what `as` binds; with `binds` False,
    nothing does: `with torch.profiler.profile():` drops what its __enter__ returns)."""
    if isinstance(ctx, GradModeVar):
        ctx.entered_from = frame.tracer.read_grad_mode()
        if ctx.prev is None:
            ctx.prev = ctx.entered_from
        frame.tracer.set_grad(ctx.mode)
        return ContextExitVar(ctx), ConstVar(None)
    if isinstance(ctx, RecordedContextVar):
        if ctx.handle is not None:
            raise Unsupported(f"entering one {ctx.kind} object twice")
        if ctx.kind == ERROR_ON_BREAK:
            frame.tracer.break_errors.append(ctx.args[0])
            ctx.handle = _NOTHING
            return ContextExitVar(ctx), ConstVar(None)
        if _changes_nothing(frame, ctx):
            ctx.handle = _NOTHING
            return ContextExitVar(ctx), ConstVar(None)
        ctx.node = frame.tracer.graph.record_effect(Enter(ctx.kind, ctx.enter_fn, ctx.exit_fn), ctx.args)
        ctx.node.meta["mode_switch"] = ctx.kind != "record_function"  # (a profiler range changes no result)
        ctx.handle = ctx.enter_fn(*ctx.args)
        frame.tracer.open_contexts.append(ctx)
        bound = ConstVar(None)
        if ctx.exit_fn is _exit_torch_context and ctx.handle[1] is not None and binds:  # what `as` binds
            if not _plain(ctx.handle[1]):
                raise Unsupported(f"`with {ctx.kind}(...) as x`: what its __enter__ returns is an object of the call")
            bound = const(ctx.handle[1])  # (sdpa_kernel's `{}`: a new one each call, as the trace's is)
        return ContextExitVar(ctx), bound
    enter_fn, exit_fn = dunder(frame, ctx, "__enter__"), dunder(frame, ctx, "__exit__")
    if enter_fn is None or exit_fn is None:
        raise Unsupported(f"with block over {describe(ctx)}")
    return exit_fn, call_bound(frame, enter_fn, [], {})


_NOTHING = object()  # the handle of a block that changes no mode (not entered, not recorded)


def _changes_nothing(frame, ctx: RecordedContextVar) -> bool:
    """`autocast(..., enabled=False)` where autocast is off already (guarded when the caller
    decides it): the block changes no mode, so nothing is recorded (a mode switch would make
    the graph one that cannot run again; Llama's rotary embedding opens such a block). Its
    exit would only clear the cast cache, empty while autocast is off."""
    if ctx.kind != "autocast" or ctx.args[2]:
        return False
    device = ctx.args[0]
    if torch.is_autocast_enabled(device):
        return False
    if not any(c.kind == "autocast" for c in frame.tracer.open_contexts):  # the caller's state: guarded
        frame.tracer.guards.add(StateMatch(torch.is_autocast_enabled, (device,), False))
    return True


def decorate(frame, ctx: Var, args, kwargs) -> ModeDecoratedVar:
    """`torch.no_grad()(fn)`, `disable_saved_tensors_hooks(msg)(fn)`: a function that calls fn in
    an equal context (set_grad_enabled's object first puts back the mode it switched when made,
    as its `__call__` does)."""
    if len(args) != 1 or kwargs or not is_callable(args[0]):
        raise Unsupported(f"calling a context manager object with {len(args)} arguments")
    if isinstance(ctx, GradModeVar) and ctx.made_by_set:
        frame.tracer.set_grad(ctx.prev)
    if isinstance(ctx, RecordedContextVar) and ctx.handle is not None:
        raise Unsupported(f"a {ctx.kind} object used as a decorator while its block is open")
    return ModeDecoratedVar(ctx, args[0])


def call_decorated(frame, d: ModeDecoratedVar, args, kwargs) -> Var:
    t = d.ctx
    ctx = GradModeVar(t.mode) if isinstance(t, GradModeVar) else \
        RecordedContextVar(t.kind, t.enter_fn, t.exit_fn, t.args, t.fresh)
    enter(frame, ctx)
    try:
        result = CALLS.call(frame, d.fn, args, kwargs)
    except (Raised, PythonError):  # (an exception leaves the block: the mode is put back)
        leave(frame, ctx)
        raise
    leave(frame, ctx)
    return result


def leave(frame, ctx: Var) -> None:
    """The end of a traced `with` block (normal or by an exception): restore the mode."""
    if isinstance(ctx, GradModeVar):
        frame.tracer.set_grad(ctx.prev)
        return
    if ctx.handle is _NOTHING:
        ctx.handle = None
        if ctx.kind == ERROR_ON_BREAK and frame.tracer.break_errors:
            frame.tracer.break_errors.pop()
        return
    close(frame.tracer, ctx)
    frame.tracer.graph.record_effect(Exit(ctx.node.target), (ctx.node,))


def close(tracer, ctx: RecordedContextVar) -> None:
    """Leave a recorded context for real (also when tracing stops inside it)."""
    if tracer.open_contexts and tracer.open_contexts[-1] is ctx:
        tracer.open_contexts.pop()
        ctx.exit_fn(ctx.handle)
