"""Calls of nn.Module instances: inlined into the caller's graph, as Dynamo does.

`m(x)` runs `type(m).forward(m, x)` in the tracer when nothing else would run around it:
no hooks on the module (forward, pre-forward, backward), none registered globally, and
`__call__` not overridden. The hook dicts get a length guard, the method found an identity
guard; parameters and buffers are read as attributes, so they become graph inputs and two
instances of one class share compiled code. Anything else is a graph break at the call.
"""
from __future__ import annotations

import inspect
import types

import torch
import torch.nn.modules.module as module_globals

from ..errors import Unsupported
from ..guards.guard import IdMatch, NoHooksMatch, NotInDictMatch
from ..guards.source import AttrSource
from ..trace.values import ObjectVar, TupleVar, Var

HOOKS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")
CONTAINERS = (torch.nn.Sequential, torch.nn.ModuleList, torch.nn.ModuleDict)
GLOBAL_HOOKS = ("_global_forward_hooks", "_global_forward_pre_hooks", "_global_backward_hooks",
                "_global_backward_pre_hooks")


def call_module(frame, var: ObjectVar, args: list[Var], kwargs: dict[str, Var]) -> Var:
    m, tracer = var.value, frame.tracer
    cls = type(m)
    if cls.__call__ is not torch.nn.Module.__call__:
        raise Unsupported(f"call to {cls.__qualname__}, which overrides nn.Module.__call__")
    if any(getattr(module_globals, name, None) for name in GLOBAL_HOOKS):
        raise Unsupported("call to an nn.Module while global module hooks are registered (they run eagerly)")
    for name in HOOKS:
        if getattr(m, name, None):
            raise Unsupported(f"call to {cls.__qualname__} with {name.strip('_').replace('_', ' ')} "
                              "(the call runs eagerly, hooks and all)")
    if var.source is not None:
        tracer.guards.add(NoHooksMatch(var.source, HOOKS))  # (one check for the four)
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
        if fn_source is not None:
            tracer.guards.add(IdMatch(fn_source, fn))
            tracer.guards.add(NotInDictMatch(var.source, "forward"))
    return tracer.inline(fn, [var, *args], kwargs, fn_source, frame)


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
        from .core import const
        return [const(k) for k in mods.items]
    return list(mods.items.values())


def index_modules(frame, var: Var, index: Var):
    """`self.layers[i]`, `self.heads["a"]`; a slice or anything else: None (traced generically)."""
    mods = container_modules(frame, var)
    if mods is None:
        return None
    from .core import plain_slice, python_value
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
