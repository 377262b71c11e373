"""`obj.__dict__` of an object that came in (an AttrDictVar): key by key.

A key read is the attribute as the instance holds it (`ItemSource` of the real dict, read
past a class's own `__getattribute__`), after any store the trace made to it; a key that is
absent is guarded absent. Stores and deletes are the attribute's side effects (replayed with
`object.__setattr__`). What needs the whole dict (`keys()`, `dict.update(obj.__dict__)`) reads
a copy, its keys guarded in order; of an object the call set attributes on, a graph break.
"""
from __future__ import annotations

from ..errors import Unsupported, python_error
from ..guards.guard import KeysMatch, NotInDictMatch
from ..guards.source import ItemSource, ObjectAttrSource
from ..values.side_effects import DELETED, location
from ..values.vars import AttrDictVar, ConstVar, DictVar, DictViewVar, Var
from .core import ATTRDICT, OBJECTS, python_value

_MISSING = object()


def of(frame, obj: Var) -> AttrDictVar:
    if obj.source is None or not type(obj.value).__dictoffset__:
        raise Unsupported(f"__dict__ of an object the tracer cannot locate ({type(obj.value).__qualname__})")
    return AttrDictVar(obj)


def _key(key: Var) -> str:
    k = python_value(key, "a __dict__ key")
    if type(k) is not str:
        raise Unsupported(f"a __dict__ key of type {type(k).__name__}")
    return k


def read(frame, d: AttrDictVar, key: str):
    """The Var at `key`, or _MISSING (guarded absent)."""
    obj = d.obj
    stored = frame.tracer.side_effects.stored(ObjectAttrSource(obj.source, key), location(obj.value, key))
    if stored is DELETED:
        return _MISSING
    if stored is not None:
        return stored
    real = object.__getattribute__(obj.value, "__dict__")
    if key not in real:
        frame.tracer.guards.add(NotInDictMatch(obj.source, key, raw=True))
        return _MISSING
    return frame.tracer.wrap(real[key], ItemSource(ObjectAttrSource(obj.source, "__dict__"), key))


def getitem(frame, d: AttrDictVar, key: Var) -> Var:
    k = _key(key)
    found = read(frame, d, k)
    if found is _MISSING:
        raise python_error(KeyError, k)
    return found


def contains(frame, d: AttrDictVar, key: Var) -> bool:
    return read(frame, d, _key(key)) is not _MISSING


def setitem(frame, d: AttrDictVar, key: Var, value) -> None:
    """`obj.__dict__[key] = value` (value DELETED: `del obj.__dict__[key]`)."""
    k = _key(key)
    if value is DELETED and read(frame, d, k) is _MISSING:
        raise python_error(KeyError, k)
    static = type(d.obj.value).__dict__.get(k, None)
    if hasattr(type(static), "__set__"):  # (setattr would go to the descriptor, the dict does not)
        raise Unsupported(f"__dict__[{k!r}] shadowed by a descriptor of the class")
    OBJECTS.raw_setattr(frame, d.obj, k, value)


def whole(frame, d: AttrDictVar) -> DictVar:
    """A copy of the whole dict (`wrapper.__dict__.update(wrapped.__dict__)`), its keys guarded
    in order; of an object the trace set attributes on, a graph break (its keys are not known)."""
    obj = d.obj
    if frame.tracer.side_effects.changed(obj.source):
        raise Unsupported(f"the whole __dict__ of {type(obj.value).__qualname__}, which the call set attributes on")
    real = object.__getattribute__(obj.value, "__dict__")
    source = ObjectAttrSource(obj.source, "__dict__")
    frame.tracer.guards.add(KeysMatch(source, tuple(real)))
    return DictVar({k: frame.tracer.wrap(v, ItemSource(source, k)) for k, v in real.items()})


def method(frame, d: AttrDictVar, name: str, args: list[Var], kwargs) -> Var:
    if name == "get" and 1 <= len(args) <= 2 and not kwargs:
        found = read(frame, d, _key(args[0]))
        return (args[1] if len(args) > 1 else ConstVar(None)) if found is _MISSING else found
    if name == "__contains__" and len(args) == 1 and not kwargs:
        return ConstVar(contains(frame, d, args[0]))
    if name == "__getitem__" and len(args) == 1 and not kwargs:
        return getitem(frame, d, args[0])
    if name in ("keys", "values", "items", "copy") and not args and not kwargs:
        copy = whole(frame, d)
        return copy if name == "copy" else DictViewVar(copy, name)
    raise Unsupported(f"__dict__.{name}() of {type(d.obj.value).__qualname__} (the whole dict)")


ATTRDICT.fill(getitem=getitem, setitem=setitem, contains=contains, whole=whole)
