"""Wrap a real Python value read from a source into a Var, installing its guards.

The rules, by the value's type:

  tensor                          -> graph input + TensorMatch (type, dtype, device, shape, stride, requires_grad)
  int/float/bool/str/None/...     -> ConstVar + EqualsMatch
  torch.dtype                     -> ConstVar + IdMatch
  torch.device, range, slice      -> ConstVar + EqualsMatch
  tuple/list (incl. namedtuple,   -> TupleVar/ListVar + TypeMatch + LenMatch, items wrapped one by one
  torch.Size)
  dict                            -> DictVar + TypeMatch + KeysMatch, values wrapped one by one
  function/module/class/builtin   -> ObjectVar + IdMatch
  anything else                   -> ObjectVar + TypeMatch (its attributes are guarded when read)

Values without a source (constants the tracer computed itself) get no guard.
"""
from __future__ import annotations

import types

import torch

from ..errors import Unsupported
from ..guards.guard import AliasMatch, EqualsMatch, IdMatch, KeysMatch, LenMatch, TensorMatch, TypeMatch
from ..guards.source import ItemSource
from .values import ConstVar, DictVar, ListVar, ObjectVar, TupleVar

SCALARS = (int, float, bool, str, bytes, complex, type(None))
EQUAL_CONSTS = (torch.device, range, slice)
IDENTITY = (types.FunctionType, types.BuiltinFunctionType, types.ModuleType, type, types.MethodType,
            types.BuiltinMethodType, types.MethodWrapperType, types.WrapperDescriptorType,
            types.MethodDescriptorType, types.ClassMethodDescriptorType, type(Ellipsis), type(NotImplemented))


IDENTITY_BEARING = (list, dict, tuple)  # and tensors, and instances: `is` between them is observable


def wrap(tracer, value, source):
    t = type(value)
    add = tracer.guards.add if source is not None else (lambda g: None)
    if source is not None and (t in IDENTITY_BEARING or not isinstance(value, SCALARS + IDENTITY + EQUAL_CONSTS)) \
            and not isinstance(value, torch.dtype):
        seen = tracer.by_identity.get(id(value))
        if seen is not None:  # the same object reached through another source: the same Var
            add(AliasMatch(source, seen.source))
            return seen
        var = _wrap(tracer, value, source, t, add)
        tracer.by_identity[id(value)] = var
        return var
    return _wrap(tracer, value, source, t, add)


def _wrap(tracer, value, source, t, add):
    if isinstance(value, torch.Tensor):
        if source is None:
            raise Unsupported("a tensor the tracer cannot locate as an input (no source)")
        tracer.guards.add(TensorMatch.of(source, value), example=value)
        return tracer.graph.placeholder(source, value)
    if t in SCALARS:
        add(EqualsMatch(source, value))
        return ConstVar(value, source)
    if t is torch.dtype:
        add(IdMatch(source, value))
        return ConstVar(value, source)
    if t in EQUAL_CONSTS:
        add(EqualsMatch(source, value))
        return ConstVar(value, source)
    if t is tuple or t is list or t is torch.Size or (issubclass(t, tuple) and hasattr(t, "_fields")) \
            or t.__module__ == "torch.return_types":
        add(TypeMatch(source, t))
        add(LenMatch(source, len(value)))
        items = [tracer.wrap(v, ItemSource(source, i) if source else None) for i, v in enumerate(value)]
        if t is list:
            return ListVar(items, source, mutable=source is None)
        return TupleVar(items, source, py_type=t)
    if t is dict:
        if not all(type(k) in (str, int) for k in value):
            raise Unsupported("dict with keys other than str or int")
        add(TypeMatch(source, t))
        add(KeysMatch(source, tuple(value)))
        items = {k: tracer.wrap(v, ItemSource(source, k) if source else None) for k, v in value.items()}
        return DictVar(items, source, mutable=source is None)
    if isinstance(value, IDENTITY):
        add(IdMatch(source, value))
        return ObjectVar(value, source)
    if isinstance(value, torch.Generator):
        raise Unsupported("a torch.Generator (its state is not tracked yet)")
    add(TypeMatch(source, t))
    return ObjectVar(value, source)
