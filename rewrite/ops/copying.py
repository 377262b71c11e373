"""`copy.copy` and `copy.deepcopy` over the tracer's values (what Python's copy module does,
without running its C-level protocol: `__reduce_ex__`, the dispatch tables).

Atoms (constants, classes, functions, dtypes, enum members) are themselves; tuples, lists and
dicts are copied item by item; an object of a plain class -- made in the call, or one that
came in -- becomes an object made in the call whose `__dict__` holds the copies (what
`copyreg.__newobj__` and `__dict__.update` give), the memo keeping shared parts shared. Objects
that customize copying (`__deepcopy__`, `__reduce__`, `__getstate__`, `__setstate__`, a copyreg
entry), have `__slots__` or a builtin base, and tensors, are not traced.
"""
from __future__ import annotations

import copy
import copyreg
import enum
import types
import weakref

import torch

from ..errors import Unsupported
from ..guards.guard import KeysMatch, TypeMatch
from ..guards.source import ObjectAttrSource
from ..values.vars import ConstVar, DictVar, Entries, InstanceVar, ListVar, ObjectVar, TupleVar, Var
from .attrdict import of, read
from .instances import _MISSING, _heap_type, class_attr, class_source

ATOMS = (type, types.FunctionType, types.BuiltinFunctionType, types.CodeType, types.ModuleType, range, property,
         weakref.ref, torch.dtype, torch.layout, torch.memory_format, enum.Enum)


def _plain(cls: type) -> bool:
    """Copying an object of `cls` is `cls.__new__(cls)` and its `__dict__` copied."""
    return (_heap_type(cls) and cls not in copy._deepcopy_dispatch and cls not in copyreg.dispatch_table
            and all(_heap_type(b) for b in cls.__mro__[:-1]) and cls.__new__ is object.__new__
            and cls.__reduce_ex__ is object.__reduce_ex__ and cls.__reduce__ is object.__reduce__
            and getattr(cls, "__getstate__", object.__getstate__) is object.__getstate__
            and all(class_attr(cls, n) is _MISSING for n in ("__deepcopy__", "__copy__", "__setstate__", "__slots__"))
            and bool(cls.__dictoffset__))


def _fields(frame, v: Var) -> dict:
    """What `v.__dict__` holds (an object made in the call, or one that came in: guarded)."""
    if isinstance(v, InstanceVar):
        return dict(v.attrs)
    real = object.__getattribute__(v.value, "__dict__")
    if v.source is None or any(where[0] == id(v.value) for where in frame.tracer.side_effects.located):
        raise Unsupported(f"copying {type(v.value).__qualname__} written to in the call")
    source = ObjectAttrSource(v.source, "__dict__")
    frame.tracer.guards.add(TypeMatch(source, dict))
    frame.tracer.guards.add(KeysMatch(source, tuple(real)))
    view = of(frame, v)
    return {k: read(frame, view, k) for k in real}


def _class_of(v: Var):
    return v.cls if isinstance(v, InstanceVar) else type(v.value)


def copy_var(frame, v: Var, memo: dict | None) -> Var:
    """copy.copy(v) (memo None) or copy.deepcopy(v, memo)."""
    deep = memo is not None
    if deep and id(v) in memo:
        return memo[id(v)][1]
    if isinstance(v, ConstVar) or isinstance(v, ObjectVar) and isinstance(v.value, ATOMS):
        return v
    again = (lambda i: copy_var(frame, i, memo)) if deep else (lambda i: i)
    if isinstance(v, TupleVar):
        return TupleVar([again(i) for i in v.items], py_type=v.py_type) if deep else v
    if isinstance(v, ListVar):
        out = ListVar([])
        _remember(memo, v, out)
        out.items = [again(i) for i in v.items]
        return out
    if isinstance(v, DictVar):
        out = DictVar({})
        _remember(memo, v, out)
        out.items = Entries({k: again(i) for k, i in v.items.items()}) if deep else Entries(v.items)
        return out
    if isinstance(v, (InstanceVar, ObjectVar)) and not isinstance(getattr(v, "value", None), torch.Tensor):
        cls = _class_of(v)
        if _plain(cls) and not (isinstance(v, InstanceVar) and v.base is not None):
            cls_source = v.cls_source if isinstance(v, InstanceVar) else \
                (class_source(v.source, cls) if v.source is not None else None)
            out = InstanceVar(cls, cls_source)
            _remember(memo, v, out)
            out.attrs = Entries({k: again(i) for k, i in _fields(frame, v).items()}, filled=None)
            return out
        raise Unsupported(f"copying an object of {cls.__qualname__} (it customizes copying, or has a builtin base)")
    raise Unsupported(f"copying {type(v).__name__}")


def _remember(memo, original: Var, copied: Var) -> None:
    if memo is not None:
        memo[id(original)] = (original, copied)  # (original kept alive: its id stays its own)


def deepcopy(frame, args, kwargs):
    if len(args) != 1 or kwargs:
        raise Unsupported("copy.deepcopy with a memo")
    return copy_var(frame, args[0], {})


def shallow(frame, args, kwargs):
    if len(args) != 1 or kwargs:
        raise Unsupported("copy.copy() takes one argument")
    return copy_var(frame, args[0], None)
