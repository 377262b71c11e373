"""`jit`: rewrite a function's code object in place, at decoration time."""
from __future__ import annotations

import functools
import types

import torch

from . import callees, codegen, registry  # noqa: F401  (codegen: registers the built-in backends)
from .bytecode import dynamo, is_rewritten, original_code
from .bytecode.compat import CO_GENERATOR_LIKE
from .callees import dispatcher_of, rewrite_code  # noqa: F401  (rewrite.dispatcher_of)
from .dispatch import Dispatcher, Options  # noqa: F401  (the import hook makes Dispatchers through this module)
from .registry import ALLOWED, DISABLED, OWNER, lookup_backend

dynamo.watch()  # torch.compile of jitted code (or of code calling it) reads the original instructions


def mark_dynamic(t: torch.Tensor, index) -> None:
    """Make size `index` (an int or a list of ints) of `t` symbolic in the next compile that reads it."""
    dims = [index] if isinstance(index, int) else list(index)
    t._rewrite_dynamic_dims = set(getattr(t, "_rewrite_dynamic_dims", ())) | {d % max(t.dim(), 1) for d in dims}


def mark_static(t: torch.Tensor, index) -> None:
    """Keep size `index` of `t` static (specialized), whatever the policy."""
    dims = [index] if isinstance(index, int) else list(index)
    t._rewrite_static_dims = set(getattr(t, "_rewrite_static_dims", ())) | {d % max(t.dim(), 1) for d in dims}


def jit(fn=None, *, backend=None, fullgraph: bool = False, dynamic: bool | None = None):
    """Compile `fn` just in time; returns `fn` itself, its `__code__` rewritten.

    `@jit`, `jit(fn)` and `@jit(backend=..., fullgraph=..., dynamic=...)` all work.
    backend: a registered name ("python", "eager", ...) or a callable `(gm, example_inputs) -> callable`;
    None picks the default for the inputs' device. fullgraph: raise instead of running eagerly
    what cannot be traced.
    """
    if isinstance(backend, str):
        lookup_backend(backend)  # an unknown name fails here, at decoration, as torch.compile does
    options = Options(backend, fullgraph, dynamic)
    if fn is None:
        return functools.partial(jit, backend=backend, fullgraph=fullgraph, dynamic=dynamic)
    if isinstance(fn, torch.nn.Module):
        return _jit_module(fn, backend, fullgraph, dynamic)
    target = fn.__func__ if isinstance(fn, types.MethodType) else fn
    if not isinstance(target, types.FunctionType):
        raise TypeError(f"jit expects a Python function, got {type(fn).__name__}")
    code = target.__code__
    if is_rewritten(code) or target in DISABLED or getattr(target, "_torchdynamo_disable", False) is True:
        return fn  # (the last: torch._dynamo.disable / torch.compiler.disable's wrapper)
    if code.co_flags & CO_GENERATOR_LIKE:
        return fn  # generators and coroutines run as they are
    rewrite_code(target, options, callees.share_key(target))
    return fn


def _jit_module(module, backend, fullgraph, dynamic):
    """`jit(module)` returns the module itself, its `forward` compiled for that instance: a
    jitted copy of the forward is bound on the instance, so `module(x)` still runs
    `__call__` (hooks included), state_dict, parameters, train()/eval() and .to() are the
    module's own, and instances of one class share compiled code (parameters are inputs).

    The forward compiled is what the instance's `forward` is: the class's method, or an
    instance attribute that wrappers put there (accelerate's hooks bind
    `functools.partial(new_forward, module)`, adapters a closure or another object's method)."""
    options = {"backend": backend, "fullgraph": fullgraph, "dynamic": dynamic}
    own = module.__dict__.get("forward")
    if getattr(own, "__rewrite_module_forward__", False):
        return module  # already jitted
    if own is None:
        bound = module.forward
        func = getattr(bound, "__func__", None)
        if not isinstance(func, types.FunctionType) or bound.__self__ is not module:
            raise TypeError(f"jit expects a module whose forward is a Python method, got {type(bound).__name__}")
        forward = types.MethodType(_jitted_copy(func, options), module)
    elif isinstance(own, types.MethodType) and isinstance(own.__func__, types.FunctionType):
        forward = types.MethodType(_jitted_copy(own.__func__, options), own.__self__)
    elif isinstance(own, types.FunctionType):
        forward = _jitted_copy(own, options)
    elif isinstance(own, functools.partial) and isinstance(own.func, types.FunctionType):
        forward = functools.partial(_jitted_copy(own.func, options), *own.args, **own.keywords)
        forward.__dict__.update(own.__dict__)  # (update_wrapper's __wrapped__, __name__, ...)
    else:
        raise TypeError(f"jit expects a module whose forward is a Python function, method or functools.partial "
                        f"of one, got an instance attribute of type {type(own).__name__}")
    try:
        forward.__rewrite_module_forward__ = True
    except AttributeError:  # a bound method: its function carries the mark
        forward.__func__.__rewrite_module_forward__ = True
    module.forward = forward
    return module


def _jitted_copy(func: types.FunctionType, options: dict) -> types.FunctionType:
    """A jitted copy of `func` (same code, globals, defaults, closure and attributes): the
    user's function itself is left as it is."""
    if is_rewritten(func.__code__) and OWNER in func.__dict__:
        return func
    copy = types.FunctionType(func.__code__, func.__globals__, func.__name__, func.__defaults__, func.__closure__)
    copy.__kwdefaults__ = func.__kwdefaults__
    functools.update_wrapper(copy, func)
    copy.__dict__.pop(OWNER, None)
    jit(copy, **options)
    return copy


def disable(fn):
    """`fn` always runs eagerly: never compiled, and a call to it from compiled code breaks the graph."""
    target = fn.__func__ if isinstance(fn, types.MethodType) else fn
    if isinstance(target, types.FunctionType) and is_rewritten(target.__code__):
        target.__code__ = original_code(target.__code__)
    DISABLED.add(target)
    callees.forget()  # (a jitted copy of it made before is not called again)
    return fn


def graph_break() -> None:
    """Break the graph here: what comes before and after compile as separate graphs."""


def allow_in_graph(fn):
    """Calls to `fn` are recorded as one opaque graph node (run as they are, never traced into)."""
    ALLOWED.add(fn.__func__ if isinstance(fn, types.MethodType) else fn)
    return fn


disable(graph_break)


registry.check()  # (every table the layers below own is filled once the face is imported)
