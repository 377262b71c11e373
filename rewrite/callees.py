"""Callees compiled on demand: what a frame hook would catch, without one.

Dynamo's frame hook sees every frame a compiled function's eager parts call. rewrite has no
hook, so wherever a jitted function's code runs eagerly -- a call a graph break runs, a
fallback entry's original bytecode (rewrite/bytecode/route.py), a resume function that runs
as it is -- the callable goes through `jitted(fn, options)` first: a jitted *copy* of the
user's function (one per function and options, the user's function itself left as it is),
so the callee's frame gets its own graphs, graph breaks and resume functions -- and so on
down. A module goes through a jitted copy of its class's forward when `module(x)` would
only call that forward (no hooks, no `__call__` of its own, no `module.compile()`), a
callable object through its class's `__call__`, a `functools.partial` through its
function. Functions of the standard library, torch (but its Python libraries:
`markers.PYTHON_MODULES`), triton and rewrite, disabled ones, generators and coroutines are
called as they are -- but for torch's own frames that call the user's code, routed so that a
break inside one block costs that block only (issue 44). The rule:

* a torch module with child modules (nn.Sequential, nn.TransformerEncoder over its
  ModuleList): a jitted copy of its class's forward, traced as user code is (`_library_copy`):
  its graph splits at the child that broke, and goes on in its resume function;
* a module with hooks, or a forward set on the instance: `Module._call_impl` as a routed copy
  (`_routed`: torch's code as it is, every call in it and in the closures it defines passed
  through the router), so the hooks run as torch runs them and the forward compiles;
* a wrapper of torch's around a user function, made with functools.wraps (`@torch.no_grad()`
  as a decorator): a routed copy;
* `torch.utils.checkpoint.checkpoint` (ARGUMENT_CALLERS): called with its function jitted.

A leaf module of torch's (nn.Linear) is called as it is: one op gains nothing from a graph.
"""
from __future__ import annotations

import dis
import functools
import io
import os
import sysconfig
import threading
import types
import weakref

import torch
import torch.utils.checkpoint
from torch.nn.modules import module as module_globals

from . import breaks, logs
from .bytecode import is_rewritten, original_code, splice_prologue
from .bytecode.compat import CO_GENERATOR_LIKE
from .bytecode.route import routed_code
from .dispatch import MISS, Dispatcher
from .ops.markers import disabled, python_library
from .ops.modules import wrapped
from .registry import DISABLED, OWNER
from .slot import Options, slot_of

# one rewritten code object (and so one dispatcher) per (original code, globals, options), as
# long as a function runs it: the functions that run the code hold its dispatcher, nothing
# else does, so deleting the function (or its module) frees its code, dispatcher and entries
# (the dispatcher holds the globals, so their id is not reused while the item lives)
_REWRITTEN: "weakref.WeakValueDictionary[tuple, types.CodeType]" = weakref.WeakValueDictionary()

# id(function) -> (weak reference to it, {_key(options): (copy, code, defaults, kwdefaults)}): the
# copy is remade when the function's code or defaults are reassigned; a function that is not
# compiled maps to itself. (Keyed by id for speed: a routed call looks it up every time.)
_COPIES: dict = {}
_LOCK = threading.RLock()  # (making a copy; looking one up takes no lock)
_PATHS = sysconfig.get_paths()
_STDLIB = tuple(os.path.realpath(_PATHS[k]) + os.sep for k in ("stdlib", "platstdlib"))
_SITE = tuple(os.path.realpath(_PATHS[k]) + os.sep for k in ("purelib", "platlib"))  # (inside platstdlib in a venv)
_OURS = tuple(os.path.realpath(p) + os.sep for p in (os.path.dirname(torch.__file__), os.path.dirname(__file__)))
_SKIPPED_MODULES = ("torch", "triton", "rewrite")
_FUNCTION, _METHOD, _PARTIAL = types.FunctionType, types.MethodType, functools.partial
_MODULE_CALL = torch.nn.Module.__call__
_CALL_IMPL = torch.nn.Module._call_impl
# functions of torch's that call a function they are given: (its position, its keyword)
ARGUMENT_CALLERS = {torch.utils.checkpoint.checkpoint: (0, "function")}
# types whose instances are never routed: what most calls call
_PLAIN = frozenset({types.BuiltinFunctionType, types.BuiltinMethodType, type, types.MethodWrapperType,
                    types.WrapperDescriptorType, types.MethodDescriptorType, types.ClassMethodDescriptorType,
                    type(None)})


def jitted(fn, options: Options):
    """What eagerly-run code of a jitted function calls in place of `fn`."""
    t = type(fn)
    if t is _FUNCTION:
        return _copy(fn, options)
    if t in _PLAIN:
        return fn
    if t is _METHOD:
        func = fn.__func__
        if type(func) is not _FUNCTION:
            return fn
        copy = _copy(func, options)
        return fn if copy is func else _METHOD(copy, fn.__self__)
    if t is _PARTIAL:
        func = jitted(fn.func, options)
        return fn if func is fn.func else _PARTIAL(func, *fn.args, **fn.keywords)
    if isinstance(fn, torch.nn.Module):
        return _module(fn, options)
    if isinstance(t, type) and issubclass(t, type):
        return fn  # a class (of a metaclass): its __init__ runs as it is
    call = getattr(t, "__call__", None)
    if type(call) is _FUNCTION:  # a callable object of a user class
        copy = _copy(call, options)
        if copy is not call:
            return _METHOD(copy, fn)
    return fn


def router(dispatcher):
    """The function `dispatcher`'s eagerly-run code passes each call's callable through (see
    bytecode/route.py; a call break's entry calls it too). It keeps the copies it hands out
    alive for as long as the dispatcher lives (`dispatcher.callees`, one per code): a closure
    made anew by each call of its function gets a new copy each time, and that copy shares the
    compiled code and cache of the one before. (It holds the dispatcher weakly: the rewritten
    code holds the router.)"""
    return _router(dispatcher.options, weakref.ref(dispatcher))


def _router(options: Options, owner):
    """The router of code run under `options`; `owner()`: the dispatcher that keeps what it
    hands out alive (None for a routed copy of torch's: see _routed)."""
    key = _key(options)

    def route(fn, _function=_FUNCTION, _plain=_PLAIN, _copies=_COPIES):
        t = type(fn)
        if t is _function:  # the fast path: a function seen before
            have = _copies.get(id(fn))
            if have is not None:
                made = have[1].get(key)
                if made is not None and made[1] is fn.__code__ and made[2] is fn.__defaults__ and \
                        made[3] is fn.__kwdefaults__ and have[0]() is fn:
                    return made[0]
        elif t in _plain:
            return fn
        try:
            out = jitted(fn, options)
            if out is not fn:
                _keep(owner(), out)
        except Exception:  # (never the user's error: calling fn itself is what eager does)
            return fn
        return out
    route.__qualname__ = route.__name__ = "route"
    return route


def _keep(d, out) -> None:
    """The caller's dispatcher `d` keeps the copy `out` alive; the copy's breaks count as its."""
    func = getattr(out, "__func__", getattr(out, "func", out))
    if d is None or type(func) is not _FUNCTION or not is_rewritten(func.__code__):  # (a routed copy: kept by
        return  # _COPIES, compiled nowhere)
    d.callees[(func.__code__, share_key(func))] = out
    copy = dispatcher_of(func)
    if copy.root is None and copy is not d:
        copy.root = d.root or weakref.ref(d)


def plain_origin(globals_: dict, code=None):
    """For the routing pass (bytecode/route.py): whether a callable loaded from `origin` is
    one `jitted` hands back as it is, judged from what `globals_` (and the builtins and
    modules they lead to) hold now -- a builtin, a class, a torch or standard-library
    function -- so its calls are not routed at all. (A name rebound later to a user function
    is then not compiled apart: routing only ever adds compiled callees, never changes what
    a call does.) A method whose name is one of a tensor's or a builtin container's, called on
    a local other than the first parameter (`self`), is taken to be that: `x.view(...)`,
    `out.append(...)`."""
    first = code.co_varnames[0] if code is not None and code.co_argcount else None
    builtins = globals_.get("__builtins__", {})
    builtins = builtins if isinstance(builtins, dict) else getattr(builtins, "__dict__", {})

    def resolve(origin):
        if origin is None:
            return _UNKNOWN
        if origin[0] == "local":
            return _UNKNOWN
        if origin[0] == "global":
            name = origin[1]
            return globals_[name] if name in globals_ else builtins.get(name, _UNKNOWN)
        base = resolve(origin[1])
        if not isinstance(base, types.ModuleType):
            return _UNKNOWN  # (an attribute of anything else may be computed: not looked at)
        return base.__dict__.get(origin[2], _UNKNOWN)  # (not getattr: a lazy module would import)

    def plain(origin) -> bool:
        if origin is not None and origin[0] == "attr" and origin[1] is not None and origin[1][0] == "local":
            return origin[1][1] != first and origin[2] in _DATA_METHODS
        value = resolve(origin)
        if value is _UNKNOWN:
            return False
        t = type(value)
        if t in _PLAIN or isinstance(value, type):
            return True
        if t is _FUNCTION:
            return _in_library(value) and not _calls_user_code(value)
        return False
    return plain


_UNKNOWN = object()
_DATA_METHODS = frozenset(name for t in (torch.Tensor, list, dict, set, tuple, str, bytes) for name in dir(t)
                          if not name.startswith("__"))
_OPTION_KEYS: dict = {}  # Options -> a small int (an Options hashes in Python: too slow per call)


def _key(options: Options) -> int:
    key = _OPTION_KEYS.get(options)
    if key is None:
        key = _OPTION_KEYS.setdefault(options, len(_OPTION_KEYS))
    return key


def copy_of(fn, options: Options):
    """The jitted copy of function `fn` made for `options` (None if none was made)."""
    copy = _lookup(fn, _key(options))
    return copy if copy is not fn else None


def route_of(dispatcher):
    """The dispatcher's router, made now if jit did not make it (the import hook's)."""
    if dispatcher.route is None:
        dispatcher.route = router(dispatcher)
    return dispatcher.route


def forget() -> None:
    """Drop every copy (a function was disabled: it is called as it is from now on)."""
    with _LOCK:
        _COPIES.clear()


def _module(module: torch.nn.Module, options: Options):
    if wrapped(module) is not None:  # DDP, FSDP2: the wrapper runs as it is, the forward it calls compiles
        compile_in_place(module, options)
        return module
    if type(module).__call__ is not _MODULE_CALL or getattr(module, "_compiled_call_impl", None) is not None:
        return module
    if _has_hooks(module) or "forward" in module.__dict__:  # the hooks, and the forward, as _call_impl runs them
        return _METHOD(_routed(_CALL_IMPL, options), module)
    forward = getattr(type(module), "forward", None)
    if type(forward) is _FUNCTION:
        func = _copy(forward, options)
        if func is forward and module._modules:  # torch's own container (nn.Sequential): routed, see _library_copy
            func = _library_copy(forward, options)
        if func is not forward:
            return _METHOD(func, module)
    return module


def compile_in_place(module: torch.nn.Module, options: Options) -> None:
    """Bind a jitted copy of the module's class forward on the module itself (once; not over a
    forward the instance has of its own): what a wrapper calls (DDP's `self.module(...)`, an
    FSDP2 module's `__call__` between its hooks). DDP's wrapped module goes the same way."""
    inner = wrapped(module)
    if inner is not None and inner is not module:
        compile_in_place(inner, options)
        return
    forward = getattr(type(module), "forward", None)  # (torch's own too -- nn.Sequential -- as jit(module) does)
    if "forward" not in module.__dict__ and type(forward) is _FUNCTION and _compilable(forward, library=True):
        module.forward = _METHOD(_make(forward, options), module)


def _copy(fn: types.FunctionType, options: Options):
    return _cached(fn, _key(options),
                   lambda: _make(fn, options) if _compilable(fn) else _library_route(fn, options))


def _cached(fn: types.FunctionType, key, make):
    """What `fn` is called as under `key` (see _lookup): made by `make()` the first time."""
    copy = _lookup(fn, key)
    if copy is None:
        with _LOCK:
            copy = make()
            _store(fn, key, copy)
    return copy


def _library_route(fn: types.FunctionType, options: Options):
    """What a routed call of `fn`, a function the router does not compile, calls: a function of
    torch's that calls the function it is given (`checkpoint(block, x)`) with that argument
    jitted; a wrapper of torch's around a user function (`@torch.no_grad()`, made with
    functools.wraps) as a routed copy; anything else as it is."""
    at = ARGUMENT_CALLERS.get(fn)
    if at is not None:
        return _JittedArgument(fn, at, options)
    return _routed(fn, options) if _calls_user_code(fn) else fn


def _calls_user_code(fn: types.FunctionType) -> bool:
    """Whether `fn`, a function of torch's (or the standard library's), calls a function of the
    user's it was given: torch.utils.checkpoint (ARGUMENT_CALLERS), or a wrapper made with
    functools.wraps around a user function that compiles (not a disabled one)."""
    if fn in ARGUMENT_CALLERS:
        return True
    if fn in DISABLED or disabled(fn) is not None or fn.__code__.co_flags & CO_GENERATOR_LIKE or \
            not _in_library(fn) or is_rewritten(fn.__code__):
        return False
    inner, depth = getattr(fn, "__wrapped__", None), 0
    while isinstance(inner, types.FunctionType) and depth < 8:
        if inner in DISABLED or disabled(inner) is not None:
            return False
        if _compilable(inner):
            return True
        inner, depth = getattr(inner, "__wrapped__", None), depth + 1
    return False


class _JittedArgument:
    """`fn` (torch.utils.checkpoint.checkpoint) called with its function argument jitted: the
    function it calls -- again in the backward pass, for a checkpoint -- has its own graphs."""

    def __init__(self, fn, at: tuple, options: Options):
        self.fn, self.at, self.options = fn, at, options
        functools.update_wrapper(self, fn)

    def __call__(self, *args, **kwargs):
        position, keyword = self.at
        if len(args) > position:
            args = (*args[:position], jitted(args[position], self.options), *args[position + 1:])
        elif keyword in kwargs:
            kwargs[keyword] = jitted(kwargs[keyword], self.options)
        return self.fn(*args, **kwargs)


def _routed(fn: types.FunctionType, options: Options):
    """A routed copy of `fn`, a function of torch's that calls the user's code: its own code as
    it is, every call in it (and in the functions it defines) through the router -- not traced
    (see the rule in the module docstring). One per function and options."""
    return _cached(fn, (_key(options), "routed"), lambda: _like(fn, routed_code(
        original_code(fn.__code__), _router(options, _NO_OWNER), lambda c: plain_origin(fn.__globals__, c))))


def _NO_OWNER():
    return None


def _library_copy(fn: types.FunctionType, options: Options):
    """The jitted copy of a function of torch's own that calls the user's code (a container's
    forward): traced as user code is, its eagerly-run parts routed (see the module docstring's
    rule). Kept apart from `_copy`'s (under its own key): a routed call of `fn` itself is not."""
    return _cached(fn, (_key(options), "library"),
                   lambda: _make(fn, options) if _compilable(fn, library=True) else fn)


def _lookup(fn: types.FunctionType, key):
    """What `fn` is called as under options `key` (its copy, or itself), while its code and
    defaults are those it had then; None when that is not known. (The router inlines this.)"""
    have = _COPIES.get(id(fn))
    if have is None or have[0]() is not fn:
        return None
    made = have[1].get(key)
    if made is not None and made[1] is fn.__code__ and made[2] is fn.__defaults__ and \
            made[3] is fn.__kwdefaults__:
        return made[0]
    return None


def _store(fn: types.FunctionType, key, copy) -> None:
    """(Under _LOCK.) From now on `fn` is called as `copy` under options `key`."""
    have = _COPIES.get(id(fn))
    if have is None or have[0]() is not fn:
        def gone(ref, ident=id(fn), copies=_COPIES):
            if copies.get(ident, (None,))[0] is ref:
                del copies[ident]
        have = _COPIES[id(fn)] = (weakref.ref(fn, gone), {})
    have[1][key] = (copy, fn.__code__, fn.__defaults__, fn.__kwdefaults__)


def _like(fn: types.FunctionType, code: types.CodeType) -> types.FunctionType:
    """A function of `code` with `fn`'s globals, defaults, closure, names and attributes (its
    owner's mark aside)."""
    copy = types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    copy.__kwdefaults__ = fn.__kwdefaults__
    copy.__qualname__, copy.__module__, copy.__doc__ = fn.__qualname__, fn.__module__, fn.__doc__
    copy.__dict__.update((k, v) for k, v in fn.__dict__.items() if k != OWNER)  # (no __wrapped__: nothing holds fn)
    return copy


def _make(fn: types.FunctionType, options: Options):
    copy = _like(fn, original_code(fn.__code__))
    rewrite_code(copy, options, share_key(copy))
    d = dispatcher_of(copy)
    if d.plain:
        return fn
    d.warn_eager = False  # (the caller's entry is compiled: this is its eager part)
    d.on_plain = functools.partial(_plain, d, weakref.ref(fn), options)
    return copy


def _plain(dispatcher, ref, options) -> None:
    """A copy's compile found no tensors and no ops (Python-only work, as Dynamo skips frames
    without tensors): its function, and any closure of its code made later, is called as it
    is -- the prologue and guards would only cost."""
    dispatcher.plain = True
    fn = ref()
    if fn is not None:
        with _LOCK:
            _store(fn, _key(options), fn)


_BY_IDENTITY = (types.FunctionType, types.MethodType, type, functools.partial, types.BuiltinFunctionType,
                types.ModuleType)


def share_key(fn: types.FunctionType) -> tuple:
    """What else two copies of one code share a dispatcher by: the functions, classes and
    modules their cells hold. A decorator's wrapper is one code over many wrapped functions:
    each gets its own dispatcher (one cache would hold an entry per wrapped function and hit
    the recompile limit), while a closure its function makes anew on every call, over the
    same functions, shares one cache with the one before. (The copy holds its cells: no id
    here is reused while it lives.)"""
    key = []
    for cell in fn.__closure__ or ():
        try:
            value = cell.cell_contents
        except ValueError:  # (an empty cell)
            key.append(None)
            continue
        key.append(id(value) if isinstance(value, _BY_IDENTITY) else None)
    return tuple(key)


@functools.lru_cache(maxsize=4096)
def _library_file(filename: str) -> bool:
    path = os.path.realpath(filename)
    return path.startswith(_OURS) or path.startswith(_STDLIB) and not path.startswith(_SITE)


def _in_library(fn: types.FunctionType) -> bool:
    """Whether `fn` is torch's, triton's, rewrite's or the standard library's."""
    module = (fn.__module__ or "").partition(".")[0]
    return module in _SKIPPED_MODULES or _library_file(fn.__code__.co_filename)


def _compilable(fn: types.FunctionType, library: bool = False) -> bool:
    """Whether a routed call compiles `fn`; with `library`, torch's own functions too (a module's
    forward compiled as jit(module) compiles it)."""
    code = fn.__code__
    if code.co_flags & CO_GENERATOR_LIKE or fn in DISABLED or disabled(fn) is not None:
        return False
    if python_library(fn) or library:  # torch.optim, torch.amp: Python libraries, compiled as user code is
        return not is_rewritten(code)
    if _in_library(fn):
        return False
    return not is_rewritten(code)  # (a jitted function is called as it is: it has its own dispatcher)


def _has_hooks(module: torch.nn.Module) -> bool:
    m = module_globals
    return bool(module._forward_hooks or module._forward_pre_hooks or module._backward_hooks
                or module._backward_pre_hooks or m._global_forward_hooks or m._global_forward_pre_hooks
                or m._global_backward_hooks or m._global_backward_pre_hooks)


# --- jitted functions: the rewritten code and its dispatcher -------------------------------------
def rewrite_code(target: types.FunctionType, options: Options, share: tuple = ()) -> None:
    """Give `target` the rewritten code of its code, globals and options (and `share`: what
    else must match for two functions to share one dispatcher -- see callees.share_key)."""
    code = target.__code__
    key = (code, id(target.__globals__), options, share)
    new = _REWRITTEN.get(key)
    dispatcher = slot_of(new).owner() if new is not None else None
    if dispatcher is None or dispatcher.globals is not target.__globals__:
        dispatcher = Dispatcher(code, target.__globals__, options, target.__qualname__)
        dispatcher.warn_eager = True
        dispatcher.share = share
        dispatcher.route = router(dispatcher)
        new = splice_prologue(code, dispatcher.slot, MISS, dispatcher.route,  # (its eager parts: routed)
                              plain_origin(target.__globals__, code))
        _REWRITTEN[key] = new
        if logs.enabled("bytecode"):
            logs.get("bytecode").debug("ORIGINAL BYTECODE %s\n%s\nMODIFIED BYTECODE %s\n%s",
                                       target.__qualname__, _dis(code), target.__qualname__, _dis(new))
    target.__code__ = new
    target.__dict__[OWNER] = dispatcher  # the function owns its compiled code (see rewrite.slot.Slot)


def dispatcher_of(fn) -> Dispatcher:
    """The dispatcher behind a jitted function (its cache entries, guards and graphs); of a
    jitted module, its forward's; of a DDP, its wrapped module's."""
    if isinstance(fn, torch.nn.Module):
        inner = wrapped(fn)  # (DDP: the module it wraps is what compiles)
        fn = dispatcher_of(inner) if inner is not None and inner is not fn else fn.forward
        if isinstance(fn, Dispatcher):
            return fn
    target = fn.__func__ if isinstance(fn, types.MethodType) else fn
    code = getattr(target, "__code__", None)
    slot = slot_of(code) if isinstance(code, types.CodeType) and is_rewritten(code) else None
    owner = slot.owner() if slot is not None and slot.owner is not None else None
    if not isinstance(owner, Dispatcher):
        raise ValueError(f"{fn!r} is not a jitted function")
    return owner


def jit_resume(fn: types.FunctionType, caller) -> None:
    """A resume function `fn` of `caller`'s frame (a graph break's rest) jitted as its caller
    is: the same options and share key; its compiled entries are part of the caller's call."""
    rewrite_code(fn, caller.options, caller.share)  # (equal code objects: shared only as the caller's)
    d = dispatcher_of(fn)
    d.warn_eager = False  # (part of a call whose entry is compiled)
    d.root = caller.root or weakref.ref(caller)


def _dis(code) -> str:
    out = io.StringIO()
    dis.dis(code, file=out)
    return out.getvalue()


def routes(fn, dispatcher) -> bool:
    """Whether a call of `fn` that `dispatcher`'s eagerly-run code routes calls something else
    than `fn` (a jitted or routed copy: kept, and counted under its root, as the router does)."""
    try:
        out = jitted(fn, dispatcher.options)
        if out is not fn:
            _keep(dispatcher, out)
        return out is not fn
    except Exception:
        return False


breaks.JIT.fill(route_of=route_of, plain_origin=plain_origin, jit_resume=jit_resume, routes=routes)
