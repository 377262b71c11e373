"""Filling a container from an iterable, as CPython fills it: one table (FILLS), one helper (`fill`).

CPython is not uniform here, and a generator that reads the container it fills shows it
(`xs.extend(len(xs) + i for i in range(3))`):

* EACH: the items are taken one at a time and the container changes in between, so the
  generator sees it grow: list.extend and `+=`, deque.extend / extendleft / `+=`, set.update and
  difference_update, dict.update / `|=`, Counter.update, `__init__` (which empties a list or
  set first).
* WHOLE: every argument is taken before the container changes: set.intersection_update /
  symmetric_difference_update and the in-place set operators (slice assignment and
  bytearray.extend too). An intersection stops taking once it found all it can keep, as
  CPython's set_intersection does (`{1, 2}.intersection_update(gen)` may leave gen unfinished).

The container as its own argument is a case of its own (`itself`): `xs.extend(xs)` takes it
whole first (COPY: it doubles), `s.update(s)` and `d.update(d)` do NOTHING, `s -= s` and
`s ^= s` CLEAR it. In-place set operators take sets only: `s |= gen` is not in place at all
(a TypeError; `s |= d.keys()` makes a new set).

`tests/test_fills.py` runs statements made from every row against eager (a generator reading
the container, the container itself, a list, a set, an iterator, a generator that raises
part-way, pairs of the wrong length): the rows are CPython's behaviour as measured. Rows
whose `where` is not "fill" are applied elsewhere (`count`: collections._count_elements,
Counter.update's C helper; slice assignment by `core.setitem`), are Python code the tracer
traces as such (Counter.subtract), or are not traced ("eager": the tracer holds no bytearray,
and `deque.__init__` / `defaultdict.__init__` may change maxlen or the factory); they are in
the table so that the test covers them too.
"""
from __future__ import annotations

import collections
import dataclasses

from ..errors import Unsupported, python_error
from ..guards.source import BaseCopySource
from ..values.vars import AttrDictVar, ConstVar, DictVar, InstanceVar, ListVar, ObjectVar, SetVar, Var, key_var
from . import sets
from .core import ATTRDICT, describe, find_key, is_same, iterate, mutating, unpack

EACH, WHOLE = "each", "whole"
COPY, NOTHING, CLEAR = "copy", "nothing", "clear"


@dataclasses.dataclass(frozen=True)
class Fill:
    consumes: str  # EACH or WHOLE (see above)
    put: str  # what an item does: a key of PUTS (or, for rows applied elsewhere, a word for it)
    itself: str  # the container as its own argument: COPY, NOTHING or CLEAR
    clears: bool = False  # emptied first (`xs.__init__(it)`)
    takes: str = "one"  # positional arguments: "one", "optional" (none or one), "many" (each in turn)
    keywords: bool = False  # keyword arguments are items too (dict.update(a=1))
    sets_only: bool = False  # in-place set operators: a set or frozenset, else not in place
    where: str = "fill"  # who applies it: "fill" (here), "count" (here, for _count_elements), "core.setitem",
    # "python" (the method is Python code, traced as such), "eager" (not traced: the call runs eagerly)


deque, OrderedDict, defaultdict, Counter = (collections.deque, collections.OrderedDict, collections.defaultdict,
                                            collections.Counter)

FILLS = {
    (list, "extend"): Fill(EACH, "append", COPY),
    (list, "__iadd__"): Fill(EACH, "append", COPY),
    (list, "__init__"): Fill(EACH, "append", NOTHING, clears=True, takes="optional"),
    (list, "__setitem__"): Fill(WHOLE, "slice", COPY, where="core.setitem"),  # xs[i:j] = it
    (deque, "extend"): Fill(EACH, "append", COPY),  # (each item trims the other end past maxlen)
    (deque, "extendleft"): Fill(EACH, "appendleft", COPY),
    (deque, "__iadd__"): Fill(EACH, "append", COPY),
    (deque, "__init__"): Fill(EACH, "append", NOTHING, clears=True, takes="optional", where="eager"),
    (set, "update"): Fill(EACH, "add", NOTHING, takes="many"),
    (set, "difference_update"): Fill(EACH, "discard", CLEAR, takes="many"),
    (set, "intersection_update"): Fill(WHOLE, "keep", NOTHING, takes="many"),
    (set, "symmetric_difference_update"): Fill(WHOLE, "toggle", CLEAR),
    (set, "__init__"): Fill(EACH, "add", NOTHING, clears=True, takes="optional"),
    (set, "__ior__"): Fill(WHOLE, "add", NOTHING, sets_only=True),
    (set, "__iand__"): Fill(WHOLE, "keep", NOTHING, sets_only=True),
    (set, "__isub__"): Fill(WHOLE, "discard", CLEAR, sets_only=True),
    (set, "__ixor__"): Fill(WHOLE, "toggle", CLEAR, sets_only=True),
    (dict, "update"): Fill(EACH, "pair", NOTHING, takes="optional", keywords=True),
    (dict, "__ior__"): Fill(EACH, "pair", NOTHING),
    (dict, "__init__"): Fill(EACH, "pair", NOTHING, takes="optional", keywords=True),
    (defaultdict, "__init__"): Fill(EACH, "pair", NOTHING, takes="many", keywords=True, where="eager"),  # (a factory first)
    # OrderedDict's (C's mutablemapping_update): its own messages for a pair of the wrong length
    (OrderedDict, "update"): Fill(EACH, "odict_pair", NOTHING, takes="optional", keywords=True),
    (OrderedDict, "__ior__"): Fill(EACH, "odict_pair", NOTHING),
    (OrderedDict, "__init__"): Fill(EACH, "odict_pair", NOTHING, takes="optional", keywords=True),
    # Counter.update is Python: a mapping is read by its items (`c.update(c)` doubles the counts),
    # anything else goes to the C helper collections._count_elements (its rule: `count`)
    (Counter, "update"): Fill(EACH, "count", COPY, takes="optional", keywords=True, where="count"),
    (Counter, "subtract"): Fill(EACH, "count", COPY, takes="optional", keywords=True, where="python"),
    (bytearray, "extend"): Fill(WHOLE, "append", COPY, where="eager"),
    (bytearray, "__iadd__"): Fill(WHOLE, "append", COPY, where="eager"),  # (a buffer only: `ba += gen` raises)
}
# augmented assignment -> the method that does it in place
INPLACE = {"+=": "__iadd__", "|=": "__ior__", "&=": "__iand__", "-=": "__isub__", "^=": "__ixor__"}


def kind(v: Var) -> type | None:
    """The Python type of a container the tracer holds as items, or None."""
    if isinstance(v, (ListVar, DictVar)):
        return v.py_type
    if isinstance(v, SetVar):
        return frozenset if v.frozen else set
    return None


def row(v: Var, name: str) -> Fill | None:
    """The row for `v.name(...)` that `fill` applies, or None (also for frozensets: they have none)."""
    cls = kind(v)
    for base in cls.__mro__ if cls is not None else ():
        found = FILLS.get((base, name))
        if found is not None:  # (the row of the class whose method it is)
            return found if found.where == "fill" and getattr(cls, name) is getattr(base, name) else None
    return None


def fill(frame, target: Var, name: str, args: list[Var], kwargs: dict[str, Var]) -> Var:
    """`target.name(*args, **kwargs)` for a method of FILLS: applied as CPython applies it."""
    r = row(target, name)
    low, high = {"one": (1, 1), "optional": (0, 1), "many": (0, len(args))}[r.takes]
    if not low <= len(args) <= high or kwargs and not r.keywords:
        raise Unsupported(f"{kind(target).__name__}.{name}() arguments (the call raises eagerly)")
    mutating(frame, target)
    if r.clears:
        _clear(target)
    if r.consumes == WHOLE:  # every argument is taken before anything changes
        taken, running = [], set(target.items)
        for arg in args:
            if _is_target(frame, arg, target):
                taken.append(None)
                continue
            other, real = sets.operand(frame, arg, running if r.put == "keep" else None)
            if r.put == "keep":  # (intersections stop taking once all they keep was found)
                running = {k for k in running if k in other.items}
            taken.append((other.items, real))
        for members in taken:
            _itself(frame, r, target) if members is None else _set_with(target, name, r, *members)
    else:
        for arg in args:
            _consume(frame, r, target, name, arg)
    for k, v in kwargs.items():
        _put_key(frame, target, ConstVar(k), v)
    return ConstVar(None)


def count(frame, target: DictVar, iterable: Var) -> None:
    """collections._count_elements(target, iterable): Counter.update from an iterable, item by
    item (`target`: the Counter's dict part, whose get and __setitem__ are dict's)."""
    mutating(frame, target)
    _consume(frame, FILLS[Counter, "update"], target, "update", iterable)


def _consume(frame, r: Fill, target: Var, name: str, arg: Var) -> None:
    """One argument of an EACH row: item by item, each put before the next is asked for."""
    if _is_target(frame, arg, target):
        return _itself(frame, r, target)
    if isinstance(target, SetVar) and set_like(arg):  # (no code of the user's runs in between)
        other, real = sets.operand(frame, arg)
        return _set_with(target, name, r, other.items, real)
    mapping = _mapping(frame, arg) if isinstance(target, DictVar) else None
    if mapping is not None:
        for k, v in list(mapping.items.items()):
            _put_key(frame, target, key_var(k), v)
        return
    put, it, index = PUTS[r.put], iterate(frame, arg), 0
    while (item := it.next()) is not None:
        put(frame, target, item, index)
        index += 1


def inplace(frame, sym: str, a: Var, b: Var) -> Var | None:
    """`a <sym>= b` for a container FILLS says fills in place: `a`, changed; None when it is not
    in place (a frozenset, a set with a non-set operand: the plain operator decides)."""
    name = INPLACE.get(sym)
    r = row(a, name) if name is not None else None
    if r is None or r.sets_only and not set_like(b):
        return None
    fill(frame, a, name, [b], {})
    return a


# --- arguments ---------------------------------------------------------------------------------
def _is_target(frame, arg: Var, target: Var) -> bool:
    """Whether `arg` is the container itself: the same Var, an object of a subclass whose
    builtin part `target` is (made in the call, or the view of one that came in)."""
    if isinstance(arg, InstanceVar) and arg.base is target:
        return True
    if isinstance(arg, ObjectVar) and arg.source is not None and isinstance(target.source, BaseCopySource):
        return target.source.base == arg.source
    return type(arg) is type(target) and is_same(arg, target, frame)


def _itself(frame, r: Fill, target: Var) -> None:
    if r.itself == CLEAR:
        _clear(target)
    elif r.itself == COPY:
        put = PUTS[r.put]
        for i, item in enumerate(list(target.items)):
            put(frame, target, item, i)


def set_like(v: Var) -> bool:
    return isinstance(v, SetVar) or isinstance(v, ConstVar) and isinstance(v.value, (set, frozenset))


def _mapping(frame, arg: Var) -> DictVar | None:
    """What dict.update reads as a mapping (by its keys), or None (an iterable of pairs)."""
    if isinstance(arg, DictVar):
        return arg
    if isinstance(arg, InstanceVar) and isinstance(arg.base, DictVar):
        if any(getattr(arg.cls, m) is not getattr(dict, m) for m in ("keys", "__getitem__", "__iter__")) \
                and not issubclass(arg.cls, OrderedDict):
            raise Unsupported(f"dict.update from {describe(arg)}, whose keys or items are its own")
        return arg.base
    if isinstance(arg, AttrDictVar):
        return ATTRDICT.whole(frame, arg)
    if isinstance(arg, ObjectVar) and hasattr(arg.value, "keys"):
        raise Unsupported(f"dict.update from {describe(arg)} (a mapping read through its keys())")
    return None


# --- what one item does ----------------------------------------------------------------------
def _clear(target: Var) -> None:
    if isinstance(target, SetVar):
        target.items.clear()
        target.real = set()
    else:
        target.items.clear()


def _append(frame, d: ListVar, item: Var, _index) -> None:
    d.items.append(item)
    if d.maxlen is not None and len(d.items) > d.maxlen:
        del d.items[0]


def _appendleft(frame, d: ListVar, item: Var, _index) -> None:
    d.items.insert(0, item)
    if d.maxlen is not None and len(d.items) > d.maxlen:
        del d.items[-1]


def _add(frame, s: SetVar, item: Var, _index) -> None:
    sets.add(s, item)


def _discard(frame, s: SetVar, item: Var, _index) -> None:
    sets.discard(s, sets.member_key(item))


def _set_with(s: SetVar, name: str, r: Fill, members: dict, real_arg) -> None:
    """`s.name(arg)` with `arg` taken (`members` by key, `real_arg`: see sets.operand): on the
    members' keys, and, while both hold constants only, on the real set too (CPython's set
    algorithms decide eager's iteration order)."""
    real = s.real if real_arg is not None else None
    s.real = None
    if r.put == "add":
        for v in members.values():
            sets.add(s, v)
    elif r.put == "discard":
        for k in members:
            sets.discard(s, k)
    elif r.put == "keep":
        for k in [k for k in s.items if k not in members]:
            sets.discard(s, k)
    else:  # toggle
        for k, v in members.items():
            if not sets.discard(s, k):
                sets.add(s, v)
    if real is not None and all(k[0] == "value" for k in s.items):
        getattr(real, name)(real_arg)
        s.real = real
        sets.settle(s)


def _pair(frame, d: DictVar, item: Var, index: int) -> None:
    """One item of an iterable of pairs, with dict.update's checks and messages."""
    if isinstance(item, ConstVar) and not isinstance(item.value, (str, bytes, tuple, range, frozenset)):
        raise python_error(TypeError, f"cannot convert dictionary update sequence element #{index} to a sequence")
    parts = unpack(frame, item)
    if len(parts) != 2:
        raise python_error(ValueError, f"dictionary update sequence element #{index} has length {len(parts)}; "
                                       "2 is required")
    _put_key(frame, d, *parts)


def _odict_pair(frame, d: DictVar, item: Var, _index) -> None:
    """One item of an iterable of pairs, with OrderedDict.update's checks and messages."""
    if isinstance(item, ConstVar) and not isinstance(item.value, (str, bytes, tuple, range, frozenset)):
        raise python_error(TypeError, f"{type(item.value).__name__!r} object is not iterable")
    parts = unpack(frame, item)
    if len(parts) != 2:
        raise python_error(ValueError, "too many values to unpack (expected 2)" if len(parts) > 2 else
                           f"need more than {len(parts)} value{'' if len(parts) == 1 else 's'} to unpack")
    _put_key(frame, d, *parts)


def _count(frame, d: DictVar, item: Var, _index) -> None:
    key = find_key(frame, d.items, item)
    held = d.items.get(key, ConstVar(0))
    if not (isinstance(held, ConstVar) and type(held.value) is int):
        raise Unsupported(f"counting into a Counter that holds {describe(held)}")
    d.items[key] = ConstVar(held.value + 1)


def _put_key(frame, d: DictVar, key: Var, value: Var) -> None:
    d.items[find_key(frame, d.items, key)] = value


# what one item of an EACH row does
PUTS = {"append": _append, "appendleft": _appendleft, "add": _add, "discard": _discard, "pair": _pair,
        "odict_pair": _odict_pair, "count": _count}
