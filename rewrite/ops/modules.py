"""Calls of nn.Module instances: inlined into the caller's graph, as Dynamo does.

`m(x)` runs `type(m).forward(m, x)` in the tracer, and the module's forward pre-hooks and
forward hooks around it as `nn.Module._call_impl` runs them (transformers' gradient
checkpointing registers one on the input embeddings), when `__call__` is not overridden and
there are no backward hooks and no global hooks. The hook dicts are guarded (empty ones with
one check), the method found by identity; parameters and buffers are read as attributes, so
they become graph inputs and two instances of one class share compiled code. Anything else is
a graph break at the call.
"""
from __future__ import annotations

import inspect
import sys
import types

import torch
import torch.nn.modules.module as module_globals

from ..errors import Unsupported
from ..guards.guard import ClassAttrMatch, IdMatch, NoHooksMatch, NotInDictMatch, TypeMatch
from ..guards.source import AttrSource
from ..values.vars import ConstVar, DictVar, ObjectVar, TupleVar, Var
from .core import CALLS, MODULES, const, plain_slice, python_value

HOOKS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")
CONTAINERS = (torch.nn.Sequential, torch.nn.ModuleList, torch.nn.ModuleDict)
GLOBAL_HOOKS = ("_global_forward_hooks", "_global_forward_pre_hooks", "_global_backward_hooks",
                "_global_backward_pre_hooks")


# distributed wrappers: a call of one runs as it is (a graph break), around a forward that compiles
# on its own (rewrite/callees.py binds it). Module name, class, the attribute holding the module
# whose forward compiles (None: the module itself), what runs as it is.
WRAPPERS = (
    ("torch.nn.parallel.distributed", "DistributedDataParallel", "module",
     "its own forward (the reducer's pre- and post-forward)"),
    ("torch.distributed.fsdp._fully_shard._fully_shard", "FSDPModule", None,
     "its FSDP hooks (all-gathers before the forward, reshards after)"),
)


def _wrapper(m):
    for module, name, attr, what in WRAPPERS:
        found = sys.modules.get(module)
        cls = getattr(found, name, None) if found is not None else None
        if cls is not None and isinstance(m, cls):
            return attr, what
    return None


def wrapped(m) -> "torch.nn.Module | None":
    """The module whose forward compiles when `m` is a distributed wrapper (DDP: the module it
    wraps; an FSDP2 module: itself, its hooks left to run as they are); None otherwise. Never
    imports the wrapper's module."""
    row = _wrapper(m)
    return None if row is None else m if row[0] is None else getattr(m, row[0])


def call_module(frame, var: ObjectVar, args: list[Var], kwargs: dict[str, Var]) -> Var:
    m, tracer = var.value, frame.tracer
    cls = type(m)
    row = _wrapper(m)
    if row is not None:
        raise Unsupported(f"call to {cls.__qualname__}: {row[1]} run as they are; the forward it calls compiles "
                          "on its own")
    if cls.__call__ is not torch.nn.Module.__call__:
        raise Unsupported(f"call to {cls.__qualname__}, which overrides nn.Module.__call__")
    if any(getattr(module_globals, name, None) for name in GLOBAL_HOOKS):
        raise Unsupported("call to an nn.Module while global module hooks are registered (they run eagerly)")
    for name in BACKWARD_HOOKS:
        if getattr(m, name, None):
            raise Unsupported(f"call to {cls.__qualname__} with {name.strip('_').replace('_', ' ')} "
                              "(the call runs eagerly, hooks and all)")
    hooked = bool(m._forward_hooks or m._forward_pre_hooks)
    if var.source is not None:
        tracer.guards.add(NoHooksMatch(var.source, BACKWARD_HOOKS if hooked else HOOKS))  # (one check for them all)
    fn, fn_source = _forward_of(frame, var)
    if hooked:
        return _call_with_hooks(frame, var, fn, fn_source, args, kwargs)
    return tracer.inline(fn, [var, *args], kwargs, fn_source, frame)


BACKWARD_HOOKS = ("_backward_hooks", "_backward_pre_hooks")


def _hook_table(frame, var: ObjectVar, name: str):
    """One of the module's hook dicts (or id sets) as a DictVar, its keys guarded."""
    value = getattr(var.value, name)
    return frame.tracer.wrap(value, AttrSource(var.source, name) if var.source is not None else None)


def _call_with_hooks(frame, var, fn, fn_source, args, kwargs) -> Var:
    """What nn.Module._call_impl does around forward with forward pre-hooks and forward hooks
    (in order, `with_kwargs` ones given the keyword arguments, a hook's non-None result taking
    the place of the arguments or of the output), traced."""
    tracer = frame.tracer
    args_var, kwargs_var = TupleVar(list(args)), DictVar(dict(kwargs))
    pre, pre_kw = _hook_table(frame, var, "_forward_pre_hooks"), _hook_table(frame, var, "_forward_pre_hooks_with_kwargs")
    for key, hook in list(pre.items.items()):
        if key in pre_kw.items:
            out = CALLS.call(frame, hook, [var, args_var, kwargs_var], {})
            if not (isinstance(out, ConstVar) and out.value is None):
                if not (isinstance(out, TupleVar) and len(out.items) == 2 and isinstance(out.items[0], TupleVar)
                        and isinstance(out.items[1], DictVar)):
                    raise Unsupported("a forward pre-hook that does not return (args, kwargs) (the call raises eagerly)")
                args_var, kwargs_var = out.items
        else:
            out = CALLS.call(frame, hook, [var, args_var], {})
            if not (isinstance(out, ConstVar) and out.value is None):
                args_var = out if isinstance(out, TupleVar) and out.py_type is tuple else TupleVar([out])
    if not all(isinstance(k, str) for k in kwargs_var.items):
        raise Unsupported("keyword arguments that are not strings (the call raises eagerly)")
    result = tracer.inline(fn, [var, *args_var.items], dict(kwargs_var.items), fn_source, frame)
    post, post_kw = _hook_table(frame, var, "_forward_hooks"), _hook_table(frame, var, "_forward_hooks_with_kwargs")
    for key, hook in list(post.items.items()):
        if key in post_kw.items:
            out = CALLS.call(frame, hook, [var, args_var, kwargs_var, result], {})
        else:
            out = CALLS.call(frame, hook, [var, args_var, result], {})
        if not (isinstance(out, ConstVar) and out.value is None):
            result = out
    return result


def _forward_of(frame, var: ObjectVar):
    """The forward `m(...)` runs, and its source (guarded)."""
    m, tracer = var.value, frame.tracer
    cls = type(m)
    own = m.__dict__.get("forward")
    if own is not None:  # jit(module) put a jitted forward on the instance
        if not (isinstance(own, types.MethodType) and own.__self__ is m and isinstance(own.__func__, types.FunctionType)):
            raise Unsupported(f"call to {cls.__qualname__} whose forward is replaced by {type(own).__name__}")
        fn = own.__func__
        fn_source = AttrSource(AttrSource(var.source, "forward"), "__func__") if var.source else None
        if fn_source is not None:
            tracer.guards.add(IdMatch(fn_source, fn))
    else:
        fn = inspect.getattr_static(cls, "forward", None)
        if not isinstance(fn, types.FunctionType):
            raise Unsupported(f"call to {cls.__qualname__}, whose forward is not a Python function")
        fn_source = AttrSource(AttrSource(var.source, "__class__"), "forward") if var.source else None
        if fn_source is not None:  # (checked on the class: once for all its instances)
            tracer.guards.add(TypeMatch(var.source, cls))
            tracer.guards.add(ClassAttrMatch(cls, "forward", fn))
            tracer.guards.add(NotInDictMatch(var.source, "forward"))
    return fn, fn_source


def container_modules(frame, var: Var):
    """The submodules of an nn.Sequential / ModuleList / ModuleDict (a DictVar over `_modules`,
    guarded by its keys), or None when `var` is not one with the standard protocol."""
    m = var.value if isinstance(var, ObjectVar) else None
    base = next((b for b in CONTAINERS if isinstance(m, b)), None)
    if base is None or any(getattr(type(m), n) is not getattr(base, n) for n in ("__iter__", "__len__", "__getitem__")):
        return None
    return frame.tracer.wrap(m._modules, AttrSource(var.source, "_modules") if var.source else None)


def iterate_modules(frame, var: Var):
    """`for layer in self.layers`: the submodules (a ModuleDict yields its keys), or None."""
    mods = container_modules(frame, var)
    if mods is None:
        return None
    if isinstance(var.value, torch.nn.ModuleDict):
        return [const(k) for k in mods.items]
    return list(mods.items.values())


def index_modules(frame, var: Var, index: Var):
    """`self.layers[i]`, `self.heads["a"]`; a slice or anything else: None (traced generically)."""
    mods = container_modules(frame, var)
    if mods is None:
        return None
    key = plain_slice(python_value(index, "a module index"))
    if isinstance(var.value, torch.nn.ModuleDict):
        if key not in mods.items:
            raise Unsupported(f"ModuleDict has no key {key!r} (the call raises eagerly)")
        return mods.items[key]
    items = list(mods.items.values())
    if isinstance(key, slice) and type(var.value) is torch.nn.ModuleList:
        # eager makes a new ModuleList of those modules: so does the entry, if it is returned
        return TupleVar(items[key], py_type=torch.nn.ModuleList)
    if type(key) is not int:
        return None
    if not -len(items) <= key < len(items):
        raise Unsupported("module index out of range (the call raises eagerly)")
    return items[key]


MODULES.fill(iterate=iterate_modules, index=index_modules)
