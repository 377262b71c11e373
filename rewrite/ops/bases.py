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

from ..errors import Unsupported
from ..guards.source import BaseCopySource
from ..trace.values import ConstVar, DictVar, ListVar, ObjectVar, Var

BASES = {dict: "dict", list: "list"}
READS = {  # method name -> apply it to the view (a DictVar or ListVar)
    "get": lambda frame, view, args, kwargs: _method(frame, view, "get", args, kwargs),
    "__getitem__": lambda frame, view, args, kwargs: _getitem(frame, view, *args),
    "__contains__": lambda frame, view, args, kwargs: ConstVar(_contains(frame, view, *args)),
    "__len__": lambda frame, view, args, kwargs: ConstVar(len(view.items)),
    "keys": lambda frame, view, args, kwargs: _method(frame, view, "keys", args, kwargs),
    "values": lambda frame, view, args, kwargs: _method(frame, view, "values", args, kwargs),
    "items": lambda frame, view, args, kwargs: _method(frame, view, "items", args, kwargs),
    "copy": lambda frame, view, args, kwargs: _method(frame, view, "copy", args, kwargs),
    "index": lambda frame, view, args, kwargs: _method(frame, view, "index", args, kwargs),
    "__iter__": lambda frame, view, args, kwargs: _iterate(frame, view),
    "count": lambda frame, view, args, kwargs: _method(frame, view, "count", args, kwargs),
}
# methods that change the builtin part: applied to the view, which the entry writes back into the
# object with the builtin's own methods (`dict.clear` + `dict.update`, `list.__setitem__`,
# OrderedDict's in order), past the subclass's (see side_effects.replay)
WRITES = {
    "__setitem__": lambda frame, view, args, kwargs: _setitem(frame, view, *args),
    "__delitem__": lambda frame, view, args, kwargs: _delitem(frame, view, *args),
    **{name: (lambda name: lambda frame, view, args, kwargs: _method(frame, view, name, args, kwargs))(name)
       for name in ("pop", "update", "setdefault", "clear", "popitem", "append", "extend", "insert", "remove",
                    "reverse", "sort")},
}


def _method(frame, view, name, args, kwargs):
    from . import _call_method
    from ..trace.values import MethodVar
    return _call_method(frame, MethodVar(view, name), args, kwargs)


def _getitem(frame, view, key):
    from .core import getitem
    return getitem(frame, view, key)


def _contains(frame, view, item):
    from .core import contains
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


OWNERS = (dict, list, collections.OrderedDict)
# the dict / list methods on the items of an object made while tracing: (rule, changes the object)
_MADE = {
    "__getitem__": (lambda frame, d, args, kwargs: _getitem(frame, d, *args), False),
    "__contains__": (lambda frame, d, args, kwargs: ConstVar(_contains(frame, d, *args)), False),
    "__len__": (lambda frame, d, args, kwargs: ConstVar(len(d.items)), False),
    "__iter__": (lambda frame, d, args, kwargs: _iterate(frame, d), False),
    "__setitem__": (lambda frame, d, args, kwargs: _setitem(frame, d, *args), True),
    "__delitem__": (lambda frame, d, args, kwargs: _delitem(frame, d, *args), True),
    "__init__": (lambda frame, d, args, kwargs: _init(frame, d, args, kwargs), True),
    "move_to_end": (lambda frame, d, args, kwargs: _move_to_end(d, *args, **kwargs), True),
    **{name: ((lambda name: lambda frame, d, args, kwargs: _method(frame, d, name, args, kwargs))(name), False)
       for name in ("get", "keys", "values", "items", "copy")},
    **{name: ((lambda name: lambda frame, d, args, kwargs: _method(frame, d, name, args, kwargs))(name), True)
       for name in ("pop", "update", "setdefault", "clear", "popitem", "append", "extend", "insert", "remove",
                    "reverse", "sort")},
    **{name: ((lambda name: lambda frame, d, args, kwargs: _method(frame, d, name, args, kwargs))(name), False)
       for name in ("index", "count")},
}


def _init(frame, items, args, kwargs):
    """dict.__init__ / list.__init__ of an object made in the call: its items."""
    if isinstance(items, ListVar):
        if kwargs or len(args) > 1:
            raise Unsupported("list() takes at most one argument (the call raises eagerly)")
        items.items.clear()
        return _method(frame, items, "extend", args, {}) if args else ConstVar(None)
    return _method(frame, items, "update", args, kwargs)


def _iterate(frame, d):
    from .core import iterate
    return iterate(frame, d)


def _setitem(frame, d, key, value):
    from .core import setitem
    setitem(frame, d, key, value)
    return ConstVar(None)


def _delitem(frame, d, key):
    from .core import delitem
    delitem(frame, d, key)
    return ConstVar(None)


def _move_to_end(d, key, last=ConstVar(True)):
    from .core import key_of, python_value
    k, at_end = key_of(key), python_value(last, "move_to_end(last=)")
    if k not in d.items:
        from ..errors import python_error
        raise python_error(KeyError, k)
    value = d.items.pop(k)
    d.items = {k: value, **d.items} if not at_end else {**d.items, k: value}
    return ConstVar(None)


def call(frame, fn, obj: Var, args: list[Var], kwargs) -> Var:
    """`fn(obj, *args)`, fn a builtin method of dict or list (a descriptor), obj of a subclass."""
    base = fn.__objclass__
    name = fn.__name__
    from ..trace.values import InstanceVar
    if isinstance(obj, InstanceVar) and obj.base is not None:  # an object made in the call: its items
        if name not in _MADE:
            raise Unsupported(f"{base.__name__}.{name} on an object of {obj.cls.__qualname__} made in the call")
        rule, changes = _MADE[name]
        if changes:
            from ..trace.values import note_mutation
            note_mutation(obj)
        return rule(frame, obj.base, args, kwargs)
    if base is collections.OrderedDict:
        base = dict  # (its own methods on the view: the view keeps its order)
    if not isinstance(obj, ObjectVar) or not isinstance(obj.value, base) or obj.source is None:
        raise Unsupported(f"{base.__name__}.{name} on {type(getattr(obj, 'value', obj)).__name__}")
    if name in WRITES:
        return WRITES[name](frame, view(frame, obj, base), args, kwargs)
    if name == "move_to_end" and isinstance(obj.value, collections.OrderedDict):
        d = view(frame, obj, base)
        from .objects import mutating
        mutating(frame, d)
        return _move_to_end(d, *args, **kwargs)
    if name not in READS:
        raise Unsupported(f"{base.__name__}.{name} on an object of {type(obj.value).__qualname__} that came in")
    return READS[name](frame, view(frame, obj, base), args, kwargs)


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
    from ..trace.values import InstanceVar
    if isinstance(obj, InstanceVar) and obj.base is not None:
        cls = obj.cls
    elif isinstance(obj, ObjectVar):
        cls = type(obj.value)
    else:
        return None
    base = builtin_of(cls)
    if base is None:
        return None
    from .instances import class_attr
    method = class_attr(cls, dunder)
    if not is_base_method(method):
        return None  # (the class's own: the caller's protocol rules run it)
    return call(frame, method, obj, list(args), {})
