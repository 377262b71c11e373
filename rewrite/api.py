"""`jit`: rewrite a function's code object in place, at decoration time."""
from __future__ import annotations

import functools
import inspect
import types

import torch

from . import callees, codegen, registry  # noqa: F401  (codegen: registers the built-in backends)
from .bytecode import dynamo, is_rewritten, original_code
from .bytecode.compat import CO_GENERATOR_LIKE
from .callees import dispatcher_of, rewrite_code  # noqa: F401  (rewrite.dispatcher_of)
from .dispatch import Dispatcher, Options  # noqa: F401  (Dispatcher: the import hook makes Dispatchers through
# this module)
from .ops.modules import wrapped
from .registry import ALLOWED, DISABLED, OWNER, lookup_backend

dynamo.watch()  # torch.compile of jitted code (or of code calling it) reads the original instructions


# torch.compiler.set_stance, which rewrite follows too ("default", "force_eager",
# "eager_on_recompile", "fail_on_recompile"): a call, a context manager or a decorator. It
# imports torch._dynamo, where the stance lives; rewrite follows it from then on (dispatch).
set_stance = torch.compiler.set_stance


def mark_dynamic(t: torch.Tensor, index) -> None:
    """Make size `index` (an int or a list of ints) of `t` symbolic in the next compile that reads it."""
    dims = [index] if isinstance(index, int) else list(index)
    t._rewrite_dynamic_dims = set(getattr(t, "_rewrite_dynamic_dims", ())) | {d % max(t.dim(), 1) for d in dims}


def mark_static(t: torch.Tensor, index) -> None:
    """Keep size `index` of `t` static (specialized), whatever the policy."""
    dims = [index] if isinstance(index, int) else list(index)
    t._rewrite_static_dims = set(getattr(t, "_rewrite_static_dims", ())) | {d % max(t.dim(), 1) for d in dims}


def jit(fn=None, *, fullgraph: bool = False, dynamic: bool | None = None, backend=None, mode: str | None = None,
        options: dict | None = None, disable: bool = False):
    """Compile `fn` just in time; returns `fn` itself, its `__code__` rewritten.

    `@jit`, `jit(fn)` and `@jit(backend=..., fullgraph=..., dynamic=...)` all work, with
    torch.compile's keywords. backend: a name of rewrite's ("python", "triton", "eager") or of
    torch's Dynamo registry ("inductor", "aot_eager", "cudagraphs", any registered one), or a
    callable `(gm, example_inputs) -> callable`; None picks rewrite's default for the inputs'
    device. fullgraph: raise instead of running eagerly what cannot be traced. mode / options:
    as torch.compile passes them (Inductor's config patches; with no backend named, the backend
    is Inductor, torch.compile's default). disable: return `fn` as it is.
    """
    if fn is None:
        return functools.partial(jit, backend=backend, fullgraph=fullgraph, dynamic=dynamic, mode=mode,
                                 options=options, disable=disable)
    if disable:
        return fn
    if isinstance(backend, str):
        lookup_backend(backend)  # an unknown name fails here, at decoration, as torch.compile does
    backend = backend_with(backend, mode, options, dynamic)
    if isinstance(fn, torch.nn.Module):
        return _jit_module(fn, backend, fullgraph, dynamic)
    compile_options = Options(backend, fullgraph, dynamic)
    target = fn.__func__ if isinstance(fn, types.MethodType) else fn
    if not isinstance(target, types.FunctionType):
        raise TypeError(f"jit expects a Python function, got {type(fn).__name__}")
    code = target.__code__
    if target in DISABLED or getattr(target, "_torchdynamo_disable", False) is True:
        return fn  # (the last: torch._dynamo.disable / torch.compiler.disable's wrapper)
    if is_rewritten(code):  # jitted before: the same options are a no-op, others replace them
        owner = target.__dict__.get(OWNER)
        if not isinstance(owner, Dispatcher) or owner.options == compile_options:
            return fn  # (or rewritten by someone else: the import hook's lazy prologue)
        code = target.__code__ = original_code(code)  # its old entries go with its old dispatcher
        del target.__dict__[OWNER]
    if code.co_flags & CO_GENERATOR_LIKE:
        return fn  # generators and coroutines run as they are
    rewrite_code(target, compile_options, callees.share_key(target))
    return fn


def backend_with(backend, mode: str | None, options: dict | None, dynamic):
    """The backend with torch.compile's `mode` / `options` applied as torch.compile applies them:
    Inductor's config patches (its own wrapper, which checks each option now), or keywords
    passed to a Dynamo backend that takes them; a backend that takes neither is an error here,
    at decoration."""
    if mode is not None and options is not None:
        raise RuntimeError("Either mode or options can be specified, but both can't be specified at the same time.")
    if (mode is None or mode == "default") and not options:
        return backend
    if backend is None or backend == "inductor":
        return WithOptions(torch._TorchCompileInductorWrapper(mode, options, dynamic), "inductor", mode, options)
    name, fn = lookup_backend(backend)
    keyword = "mode" if mode is not None else "options"  # (not both: refused above)
    if name in registry.own_backends() or not _takes(fn, keyword):
        raise TypeError(f"backend {name!r} takes no {keyword} (torch.compile's mode and options are Inductor's, "
                        f"or keywords of a Dynamo backend that takes them)")
    return WithOptions(torch._TorchCompileWrapper(backend, mode, options, dynamic), backend, mode, options)


class WithOptions:
    """A backend called with torch.compile's mode / options (torch's own wrapper), equal to
    another for the same backend, mode and options (an Options key: hashable)."""

    def __init__(self, wrapper, backend, mode, options):
        self.wrapper = wrapper
        self.__name__ = getattr(backend, "__name__", str(backend))
        self.key = (backend if isinstance(backend, str) else id(backend), mode, repr(sorted((options or {}).items())))

    def __call__(self, gm, example_inputs):
        return self.wrapper(gm, example_inputs)

    def __eq__(self, other):
        return isinstance(other, WithOptions) and self.key == other.key

    def __hash__(self):
        return hash(self.key)

    def __repr__(self):
        return f"WithOptions({self.__name__}, mode={self.key[1]!r}, options={self.key[2]})"


def _takes(fn, keyword: str) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == keyword or p.kind is p.VAR_KEYWORD for p in params)


def _jit_module(module, backend, fullgraph, dynamic):
    """`jit(module)` returns the module itself, its `forward` compiled for that instance: a
    jitted copy of the forward is bound on the instance, so `module(x)` still runs
    `__call__` (hooks included), state_dict, parameters, train()/eval() and .to() are the
    module's own, and instances of one class share compiled code (parameters are inputs).

    The forward compiled is what the instance's `forward` is: the class's method, or an
    instance attribute that wrappers put there (accelerate's hooks bind
    `functools.partial(new_forward, module)`, adapters a closure or another object's method).
    A DistributedDataParallel is returned as it is, the module it wraps jitted: DDP's own
    forward (its reducer's pre- and post-forward) runs as it is, around the compiled one."""
    inner = wrapped(module)
    if inner is not None and inner is not module:  # DDP: its own forward (the reducer's) runs as it is
        _jit_module(inner, backend, fullgraph, dynamic)
        return module
    options = {"backend": backend, "fullgraph": fullgraph, "dynamic": dynamic}
    own = module.__dict__.get("forward")
    mark = getattr(own, "__rewrite_module_forward__", None)
    if mark is not None:  # jitted before: (the instance's forward before, the options then)
        before, then = mark
        if then == options:
            return module  # the same options: a no-op
        if before is None:  # other options: in force from now on, the old entries dropped
            del module.__dict__["forward"]
        else:
            module.forward = before
        own = before
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
        forward.__rewrite_module_forward__ = (own, options)
    except AttributeError:  # a bound method: its function carries the mark
        forward.__func__.__rewrite_module_forward__ = (own, options)
    module.forward = forward
    return module


def _jitted_copy(func: types.FunctionType, options: dict) -> types.FunctionType:
    """A jitted copy of `func` (same code, globals, defaults, closure and attributes): the
    user's function itself is left as it is."""
    owner = func.__dict__.get(OWNER)
    if is_rewritten(func.__code__) and isinstance(owner, Dispatcher) and owner.options == Options(**options):
        return func  # (a forward the user jitted with these options)
    copy = types.FunctionType(original_code(func.__code__), func.__globals__, func.__name__, func.__defaults__,
                              func.__closure__)
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
