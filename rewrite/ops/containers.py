"""collections' containers as the tracer holds them: `deque` (a ListVar with `py_type` deque
and its `maxlen`), `OrderedDict` and `defaultdict` (DictVars with `py_type`, the latter with its
`default_factory`), and `fromkeys` of the three dict types. Registered in the BUILTINS table.
"""
from __future__ import annotations

import collections
import itertools
import operator
import types

from ..errors import Unsupported, python_error
from ..values.vars import ConstVar, DictVar, InstanceVar, ListVar, ObjectVar, Var, note_mutation
from . import fills
from .builtins import _dict
from .core import CALLS, describe, fold, is_callable, key_of, mutating, python_value, rule, unpack
from .library import chain_from_iterable
from .signatures import WRITTEN, check
from .objects import list_method


@rule(collections.deque)
def _deque(frame, args, kwargs):
    bound = dict(zip(("iterable", "maxlen"), args)) | kwargs
    if len(args) > 2 or set(bound) - {"iterable", "maxlen"}:
        raise python_error(TypeError, "deque() takes at most 2 arguments")
    maxlen = python_value(bound.get("maxlen", ConstVar(None)), "deque(maxlen=)")
    fold(collections.deque, (), maxlen)  # (its own checks of `maxlen`)
    made = ListVar([], py_type=collections.deque, maxlen=maxlen)
    for item in unpack(frame, bound["iterable"]) if "iterable" in bound else []:
        fills.PUTS["append"](frame, made, item, 0)  # (past maxlen, each item trims the other end)
    return made


@rule(collections.OrderedDict)
def _ordered_dict(frame, args, kwargs):
    return _dict(frame, args, kwargs, py_type=collections.OrderedDict)


@rule(collections.defaultdict)
def _defaultdict(frame, args, kwargs):
    factory = args[0] if args else ConstVar(None)
    if not (isinstance(factory, ConstVar) and factory.value is None) and not is_callable(factory):
        raise python_error(TypeError, "first argument must be callable or None")
    return _dict(frame, list(args[1:]), kwargs, py_type=collections.defaultdict, factory=factory)


@rule(collections._count_elements)
def _count_elements(frame, args, kwargs):
    """Counter.update(iterable)'s C helper, on a Counter made in the call (its dict part) or a dict."""
    if len(args) != 2 or kwargs:
        raise Unsupported("_count_elements() arguments")
    mapping, iterable = args
    if isinstance(mapping, InstanceVar) and isinstance(mapping.base, DictVar) and \
            mapping.cls.get is dict.get and mapping.cls.__setitem__ is dict.__setitem__:
        note_mutation(mapping)
        fills.count(frame, mapping.base, iterable)
    elif isinstance(mapping, DictVar) and mapping.py_type is dict:
        fills.count(frame, mapping, iterable)
    else:
        raise Unsupported(f"counting into {describe(mapping)}")
    return ConstVar(None)


def deque_method(frame, d: ListVar, name: str, args: list[Var], kwargs) -> Var:
    """collections.deque's methods on a ListVar that is one (`maxlen` trims the other end)."""
    items = d.items
    if kwargs:
        raise Unsupported(f"deque.{name} with keyword arguments (the call raises eagerly)")
    if name in ("append", "appendleft") and len(args) == 1:
        mutating(frame, d)
        (fills.PUTS[name])(frame, d, args[0], 0)
        return ConstVar(None)
    if name in ("pop", "popleft"):
        if args:
            raise python_error(TypeError, f"deque.{name}() takes no arguments ({len(args)} given)")
        if not items:
            raise python_error(IndexError, f"{name} from an empty deque")
        mutating(frame, d)
        return items.pop() if name == "pop" else items.pop(0)
    if name == "rotate":
        n = fold(operator.index, python_value(args[0], "deque.rotate()")) if args else 1
        mutating(frame, d)
        if items:
            n %= len(items)
            items[:] = items[-n:] + items[:-n] if n else items
        return ConstVar(None)
    if name == "insert":
        if d.maxlen is not None and len(items) >= d.maxlen:
            raise python_error(IndexError, "deque already at its maximum size")
        return list_method(frame, d, name, args, kwargs)
    if name == "copy":
        return ListVar(items, py_type=d.py_type, maxlen=d.maxlen)
    if name in ("clear", "reverse", "index", "count", "remove"):
        return list_method(frame, d, name, args, kwargs)
    raise Unsupported(f"deque.{name}")


def dict_fromkeys(cls, iterable, value=None):
    """`dict.fromkeys` / `OrderedDict.fromkeys` / `defaultdict.fromkeys`, a name the tracer
    can hold (the classmethod is bound anew on each access)."""
    return cls.fromkeys(iterable, value)


WRITTEN[dict_fromkeys] = lambda cls, /, *args, **kwargs: None  # (its rule checks the classmethod's own)


@rule(dict_fromkeys)
def _dict_fromkeys(frame, args, kwargs):
    cls = args[0].value
    check(cls.fromkeys, args[1:], kwargs)  # (the classmethod's own: dict_fromkeys stands in for it)
    value = args[2] if len(args) == 3 else ConstVar(None)
    made = DictVar({key_of(k): value for k in unpack(frame, args[1])}, py_type=cls)
    if cls is collections.defaultdict:
        made.factory = ConstVar(None)
    return made


# class attributes that are classmethods of builtin types, as Vars (see getattr_ in ops/__init__)
CLASS_METHODS = {
    (dict, "fromkeys"): dict_fromkeys, (collections.OrderedDict, "fromkeys"): dict_fromkeys,
    (collections.defaultdict, "fromkeys"): dict_fromkeys, (itertools.chain, "from_iterable"): chain_from_iterable,
}


def class_method(cls_var: ObjectVar, name: str):
    """`dict.fromkeys`: the real bound classmethod (what it says of itself is its own); a call
    of it is `call_class_method`'s."""
    fn = CLASS_METHODS.get((cls_var.value, name)) if issubclass(type(cls_var.value), type) else None
    if fn is None:
        return None
    return ObjectVar(getattr(cls_var.value, name))


def call_class_method(frame, method, args, kwargs):
    """A call of a classmethod of CLASS_METHODS (a bound builtin), or None: not one."""
    owner = getattr(method, "__self__", None)
    fn = CLASS_METHODS.get((owner, getattr(method, "__name__", None))) if isinstance(owner, type) else None
    if fn is None or not isinstance(method, types.BuiltinMethodType):
        return None
    return CALLS.call(frame, ObjectVar(fn), [ObjectVar(owner)] + list(args) if fn is dict_fromkeys else list(args),
                      kwargs)
