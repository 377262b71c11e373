"""Built-in methods of a container base, on an object of a subclass that came in:
`super().get(key)` in a dict subclass, `dict.__getitem__(self, k)`, `list.__len__(self)`.

The builtin part of the object is read as a copy taken past the subclass's own methods
(`dict.copy(obj)`, `list.copy(obj)`, an OrderedDict's through its own `items` in its links'
order: a BaseCopySource), wrapped and guarded as a plain dict or list, and the method applied
to that view. Methods that change the object are applied to that view and written back by the
entry with the builtin's own methods.
"""
from __future__ import annotations

import collections
import types

from ..errors import Unsupported, python_error
from ..guards.source import BaseCopySource
from ..values.vars import ConstVar, DictVar, InstanceVar, ListVar, MethodVar, ObjectVar, Var, note_mutation
from .core import (_MISSING, CALLS, USER, class_attr, contains, delitem, describe, getitem, iterate, key_of, mutating,
                   python_value, setitem)

BASES = {dict: "dict", list: "list"}
OWNERS = (dict, list, collections.OrderedDict)  # whose methods these are


def _named(name: str):
    return lambda frame, items, args, kwargs: _method(frame, items, name, args, kwargs)


# dict / list / OrderedDict methods on what the builtin part holds (a DictVar or ListVar: an
# object's items made in the call, or the view of one that came in): (rule, changes the object)
METHODS = {
    "__getitem__": (lambda frame, items, args, kwargs: _getitem(frame, items, *args), False),
    "__contains__": (lambda frame, items, args, kwargs: ConstVar(_contains(frame, items, *args)), False),
    "__len__": (lambda frame, items, args, kwargs: ConstVar(len(items.items)), False),
    "__iter__": (lambda frame, items, args, kwargs: _iterate(frame, items), False),
    "__setitem__": (lambda frame, items, args, kwargs: _setitem(frame, items, *args), True),
    "__delitem__": (lambda frame, items, args, kwargs: _delitem(frame, items, *args), True),
    "__init__": (lambda frame, items, args, kwargs: _init(frame, items, args, kwargs), True),
    "move_to_end": (lambda frame, items, args, kwargs: _move_to_end(items, *args, **kwargs), True),
    **{name: (_named(name), False) for name in ("get", "keys", "values", "items", "copy", "index", "count")},
    **{name: (_named(name), True) for name in ("pop", "update", "setdefault", "clear", "popitem", "append",
                                                "extend", "insert", "remove", "reverse", "sort")},
}


def _method(frame, view, name, args, kwargs):
    return CALLS.call_method(frame, MethodVar(view, name), args, kwargs)


def _getitem(frame, view, key):
    return getitem(frame, view, key)


def _contains(frame, view, item):
    return contains(frame, view, item)


def builtin_of(cls: type):
    """The builtin container class a user class derives from (dict, list), or None."""
    for base in BASES:
        if issubclass(cls, base) and cls is not base:
            return base
    return None


def is_base_method(fn) -> bool:
    return isinstance(fn, (types.MethodDescriptorType, types.WrapperDescriptorType)) and \
        getattr(fn, "__objclass__", None) in OWNERS


def _init(frame, items, args, kwargs):
    """dict.__init__ / list.__init__ of an object made in the call: its items (ops/fills.py)."""
    return _method(frame, items, "__init__", args, kwargs)


def _iterate(frame, d):
    return iterate(frame, d)


def _setitem(frame, d, key, value):
    setitem(frame, d, key, value)
    return ConstVar(None)


def _delitem(frame, d, key):
    delitem(frame, d, key)
    return ConstVar(None)


def _move_to_end(d, key, last=ConstVar(True)):
    k, at_end = key_of(key), python_value(last, "move_to_end(last=)")
    if k not in d.items:
        raise python_error(KeyError, k)
    d.items.move_to_end(k, at_end)
    return ConstVar(None)


def call(frame, fn, obj: Var, args: list[Var], kwargs) -> Var:
    """`fn(obj, *args)`, fn a builtin method of dict, OrderedDict or list (a descriptor), obj of
    a subclass: made in the call (its items) or one that came in (a view of them)."""
    owner, name = fn.__objclass__, fn.__name__
    made = isinstance(obj, InstanceVar) and obj.base is not None
    cls = obj.cls if made else type(getattr(obj, "value", None))
    if not issubclass(cls, owner) or not made and (not isinstance(obj, ObjectVar) or obj.source is None) \
            or name not in METHODS:
        raise Unsupported(f"{owner.__name__}.{name} on {describe(obj)}")
    rule, changes = METHODS[name]
    items = obj.base if made else view(frame, obj, builtin_of(cls))
    if name == "__getitem__" and isinstance(items, DictVar) and class_attr(cls, "__missing__") is not _MISSING \
            and not contains(frame, items, args[0]):  # (dict's lookup, in a subclass, asks its __missing__)
        found = USER.call_dunder(frame, obj, "__missing__", args[0])
        if found is None:
            raise Unsupported(f"__missing__ of {cls.__qualname__}, not a Python function")
        return found
    if changes and made:
        note_mutation(obj)
    elif changes:  # one that came in: its view changes, and the entry writes it back
        mutating(frame, items)
    return rule(frame, items, args, kwargs)


def view(frame, obj: ObjectVar, base: type) -> Var:
    """The object's builtin part as a DictVar / ListVar read from a copy (guarded as one)."""
    tracer = frame.tracer
    ordered = isinstance(obj.value, collections.OrderedDict)
    source = BaseCopySource(obj.source, "odict" if ordered else BASES[base])
    known = tracer.wrapped.get(source)
    if known is not None:
        return known
    copy = dict(collections.OrderedDict.items(obj.value)) if ordered else base.copy(obj.value)
    tracer.kept.append(copy)
    var = tracer.wrap(copy, source)
    if not isinstance(var, (DictVar, ListVar)):
        raise Unsupported(f"the {base.__name__} part of {type(obj.value).__qualname__}")
    return var


def protocol(frame, obj: Var, dunder: str, *args: Var) -> Var | None:
    """`len(obj)`, `obj[k]`, `k in obj` on an object of a dict or list subclass that came in
    and does not define that method in Python: the builtin's. None: not such an object."""
    if isinstance(obj, InstanceVar) and obj.base is not None:
        cls = obj.cls
    elif isinstance(obj, ObjectVar):
        cls = type(obj.value)
    else:
        return None
    base = builtin_of(cls)
    if base is None:
        return None
    method = class_attr(cls, dunder)
    if not is_base_method(method):
        return None  # (the class's own: the caller's protocol rules run it)
    return call(frame, method, obj, list(args), {})


USER.fill(base_protocol=protocol)
