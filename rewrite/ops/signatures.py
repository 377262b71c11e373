"""What arguments a builtin takes, checked before its rule reads them.

A rule reads the arguments it knows (`bool(x)` reads `x`); a call eager rejects (`bool(42, 42)`,
`d.get()`, `len(obj=x)`) must raise eager's TypeError instead, never run. The signature of a
builtin is data: `inspect.signature` reads most (Argument Clinic's text signatures); the rest
are written below as Python would write them. A call that does not bind raises the error the
real builtin gives for the same count of arguments and the same keywords, found by calling it
with stand-ins: CPython checks a builtin's arguments before it uses any of them.
"""
from __future__ import annotations

import collections
import functools
import inspect
import itertools
import operator
import types

from ..errors import PythonError, Unsupported

# builtins whose signature inspect cannot read on some Python (3.11 knows fewer), written out
WRITTEN = {
    getattr: lambda obj, name, default=None, /: None,
    range: lambda start_or_stop, stop=None, step=None, /: None,
    slice: lambda start_or_stop, stop=None, step=None, /: None,
    zip: lambda *iterables, strict=False: None,
    iter: lambda obj, sentinel=None, /: None,
    next: lambda iterator, default=None, /: None,
    set: lambda iterable=None, /: None,
    frozenset: lambda iterable=None, /: None,
    dict: lambda mapping=None, /, **kwargs: None,
    min: lambda first, /, *rest, key=None, default=None: None,
    max: lambda first, /, *rest, key=None, default=None: None,
    bool: lambda x=None, /: None,
    int: lambda x=None, /, base=None: None,
    float: lambda x=None, /: None,
    str: lambda object=None, encoding=None, errors=None: None,
    map: lambda function, iterable, /, *iterables: None,
    filter: lambda function, iterable, /: None,
    collections.deque: lambda iterable=None, maxlen=None: None,
    collections.OrderedDict: lambda mapping=None, /, **kwargs: None,
    collections.defaultdict: lambda default_factory=None, mapping=None, /, **kwargs: None,
    itertools.chain: lambda *iterables: None,
    itertools.product: lambda *iterables, repeat=1: None,
    itertools.zip_longest: lambda *iterables, fillvalue=None: None,
    itertools.islice: lambda iterable, a, b=None, c=None, /: None,
    functools.partial: lambda func, /, *args, **keywords: None,
    functools.reduce: lambda function, iterable, initial=None, /: None,
    operator.itemgetter: lambda item, /, *items: None,
    operator.attrgetter: lambda attr, /, *attrs: None,
    # sorted() takes its iterable whole before list.sort rejects a keyword: its rule checks those
    sorted: lambda iterable, /, **keywords: None,
    # the methods of builtin containers (self first) whose signature 3.11 does not know
    **{getattr(owner, name): lambda self, /: None for owner in (dict, set, frozenset, collections.deque)
       for name in ("clear", "copy", "items", "keys", "values", "pop", "popleft", "reverse") if hasattr(owner, name)},
    dict.pop: lambda self, key, default=None, /: None,
    dict.update: lambda self, other=None, /, **kwargs: None,
    collections.OrderedDict.pop: lambda self, /, key, default=None: None,
    **{getattr(owner, name): lambda self, object, /: None for owner in (set, frozenset)
       for name in ("add", "discard", "remove", "isdisjoint", "issubset", "issuperset", "symmetric_difference",
                    "symmetric_difference_update") if hasattr(owner, name)},
    **{getattr(owner, name): lambda self, /, *others: None for owner in (set, frozenset)
       for name in ("difference", "difference_update", "intersection", "intersection_update", "union", "update")
       if hasattr(owner, name)},
    **{getattr(collections.deque, name): lambda self, x, /: None
       for name in ("append", "appendleft", "count", "extend", "extendleft", "remove")},
    collections.deque.index: lambda self, x, start=None, stop=None, /: None,
    collections.deque.insert: lambda self, i, x, /: None,
    collections.deque.rotate: lambda self, n=1, /: None,
}
OWNERS = (list, dict, set, frozenset, tuple, collections.deque, collections.OrderedDict, collections.defaultdict)


class _Arg:
    """A stand-in argument: only counted (by the time a builtin would use it, it has raised).
    Callable and iterable (empty), as a builtin that checks one argument before it counts the
    others (defaultdict's factory) or takes one whole first (sorted's iterable) wants."""

    def __call__(self, *args, **kwargs):
        return None

    def __iter__(self):
        return iter(())


_BINDS: dict = {}  # (fn, owner, count, keyword names) -> None (binds) or the TypeError eager raises


def check(fn, args, kwargs, owner: type | None = None) -> None:
    """Raise eager's TypeError (as the user's error) when `fn(*args, **kwargs)` -- or, with
    `owner`, the method `fn` of a builtin container called on one -- does not bind."""
    key = (fn, owner, len(args), tuple(kwargs))
    try:
        error = _BINDS[key]
    except KeyError:
        error = _BINDS[key] = _check(fn, owner, len(args), tuple(kwargs))
    except TypeError:  # (an unhashable callable: not a builtin)
        return
    if error is not None:
        raise PythonError(type(error)(*error.args))


def check_method(owner: type, name: str, args, kwargs) -> None:
    """`obj.name(*args, **kwargs)` on a builtin container of class `owner`."""
    if owner in OWNERS:
        fn = getattr(owner, name, None)
        if isinstance(inspect.getattr_static(owner, name, None), (types.ClassMethodDescriptorType, classmethod)):
            check(fn, args, kwargs)  # (`d.fromkeys(...)`: bound to the class, not to `d`)
        elif fn is not None:
            check(fn, args, kwargs, owner)


def _check(fn, owner, count: int, names: tuple):
    signature = _signature(fn)
    if signature is None:
        return None
    stand_ins = [_Arg()] * (count + (owner is not None))
    try:
        signature.bind(*stand_ins, **dict.fromkeys(names, _Arg()))
        return None
    except TypeError:
        pass
    return eager_error(fn, count, names, owner)


def eager_error(fn, count: int, names, owner: type | None = None) -> TypeError:
    """The TypeError `fn` raises for `count` positional arguments and keywords `names` (the
    arguments a signature says it does not take)."""
    try:  # the real builtin's own message
        fn(*([owner()] if owner is not None else []), *[_Arg()] * count, **dict.fromkeys(names, _Arg()))
    except TypeError as e:
        return e
    except Exception:  # noqa: BLE001  (it took the arguments: the signature above is wrong)
        pass
    raise Unsupported(f"the arguments of {getattr(fn, '__qualname__', fn)} (a signature rewrite does not know)")


@functools.lru_cache(maxsize=None)
def _signature(fn):
    written = WRITTEN.get(fn)
    try:
        return inspect.signature(written if written is not None else fn)
    except (TypeError, ValueError):
        return None
