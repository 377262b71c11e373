"""Callees compiled on demand: what a frame hook would catch, without one.

Dynamo's frame hook sees every frame a compiled function's eager parts call. rewrite has no
hook, so where a graph break runs a call eagerly (the call the tracer gave up inside), the
entry calls the callee through `jitted(fn, options)`: a jitted *copy* of the user's function
(one per function and options, the user's function itself left as it is), so the callee's
frame gets its own graphs, graph breaks and resume functions -- and so on down the failing
path. A module called there goes through a jitted copy of its class's forward when it has
no hooks (`module(x)` otherwise). Functions of the standard library, torch, triton and
rewrite, disabled ones, generators and coroutines are called as they are.
"""
from __future__ import annotations

import functools
import os
import sysconfig
import types
import weakref

import torch

from .bytecode import is_rewritten, original_code
from .bytecode.compat import CO_GENERATOR_LIKE
from .slot import Options

# function -> {options: (jitted copy, code, defaults, kwdefaults)}: the copy is remade when the
# function's code or defaults are reassigned
_COPIES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_PATHS = sysconfig.get_paths()
_STDLIB = tuple(os.path.realpath(_PATHS[k]) + os.sep for k in ("stdlib", "platstdlib"))
_SITE = tuple(os.path.realpath(_PATHS[k]) + os.sep for k in ("purelib", "platlib"))  # (inside platstdlib in a venv)
_OURS = tuple(os.path.realpath(p) + os.sep for p in (os.path.dirname(torch.__file__), os.path.dirname(__file__)))
_SKIPPED_MODULES = ("torch", "triton", "rewrite")


def jitted(fn, options: Options):
    """What the entry calls in place of `fn` at a call break."""
    t = type(fn)
    if t is types.FunctionType:
        return _copy(fn, options)
    if t is types.MethodType and type(fn.__func__) is types.FunctionType:
        func = _copy(fn.__func__, options)
        return fn if func is fn.__func__ else types.MethodType(func, fn.__self__)
    if isinstance(fn, torch.nn.Module) and not _has_hooks(fn) and "forward" not in fn.__dict__:
        forward = getattr(type(fn), "forward", None)
        if type(forward) is types.FunctionType:
            func = _copy(forward, options)
            if func is not forward:
                return types.MethodType(func, fn)
    return fn


def _copy(fn: types.FunctionType, options: Options):
    if not _compilable(fn):
        return fn
    by_options = _COPIES.get(fn)
    if by_options is None:
        by_options = _COPIES[fn] = {}
    have = by_options.get(options)
    if have is not None and have[1] is fn.__code__ and have[2] is fn.__defaults__ and have[3] is fn.__kwdefaults__:
        return have[0]
    from .api import OWNER, jit, dispatcher_of
    copy = types.FunctionType(original_code(fn.__code__), fn.__globals__, fn.__name__, fn.__defaults__,
                              fn.__closure__)
    copy.__kwdefaults__ = fn.__kwdefaults__
    copy.__qualname__, copy.__module__, copy.__doc__ = fn.__qualname__, fn.__module__, fn.__doc__
    copy.__dict__.update((k, v) for k, v in fn.__dict__.items() if k != OWNER)  # (no __wrapped__: the cache
    jit(copy, backend=options.backend, fullgraph=options.fullgraph, dynamic=options.dynamic)  # holds fn weakly)
    dispatcher_of(copy).warn_eager = False  # (the caller's entry is compiled: this is its eager part)
    by_options[options] = (copy, fn.__code__, fn.__defaults__, fn.__kwdefaults__)
    return copy


@functools.lru_cache(maxsize=4096)
def _library_file(filename: str) -> bool:
    path = os.path.realpath(filename)
    return path.startswith(_OURS) or path.startswith(_STDLIB) and not path.startswith(_SITE)


def _compilable(fn: types.FunctionType) -> bool:
    from .api import DISABLED
    from .ops.markers import disabled
    code = fn.__code__
    if code.co_flags & CO_GENERATOR_LIKE or fn in DISABLED or disabled(fn) is not None:
        return False
    module = (fn.__module__ or "").partition(".")[0]
    if module in _SKIPPED_MODULES or _library_file(code.co_filename):
        return False
    return not is_rewritten(code)  # (a jitted function is called as it is: it has its own dispatcher)


def _has_hooks(module: torch.nn.Module) -> bool:
    from torch.nn.modules import module as m
    return bool(module._forward_hooks or module._forward_pre_hooks or module._backward_hooks
                or module._backward_pre_hooks or m._global_forward_hooks or m._global_forward_pre_hooks
                or m._global_backward_hooks or m._global_backward_pre_hooks)
