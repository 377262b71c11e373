"""Sets made while tracing: displays (`{a, b}`), comprehensions, `set(...)`, their methods
and operators.

A SetVar keeps its members as Vars keyed as Python would hash them: a constant by its
value, a tensor or any other object by identity (their `__hash__` is `id`). While every
member is a constant, a real set is kept in step with every change, so iterating gives
exactly eager's order; with identity members the order is insertion order (eager's
depends on addresses, which no program can rely on).
"""
from __future__ import annotations

import operator

from ..bytecode.compat import ISSUBSET_INTERSECTS
from ..errors import Unsupported, python_error
from ..values.vars import ConstVar, DictViewVar, Entries, InstanceVar, ObjectVar, SetVar, TensorVar, Var
from .core import SETS, class_attr, const, describe, foldable, iterate, mutating, unpack

def member_key(v: Var):
    """The key a set member is found by: ("value", the real value) for values eager holds
    too (constants, functions, objects that came in), ("id", ...) for the trace's own
    objects (tensors, objects made while tracing), whose hash is their identity."""
    if isinstance(v, TensorVar):
        return ("id", id(v.value))
    if isinstance(v, InstanceVar):
        h = class_attr(v.cls, "__hash__")
        if h is None:
            raise python_error(TypeError, f"unhashable type: {v.cls.__name__!r}")
        if h is not object.__hash__:
            raise Unsupported(f"set member {describe(v)} with its own __hash__")
        return ("id", id(v))
    if foldable(v) or isinstance(v, ObjectVar) and type(v.value).__hash__ is object.__hash__:
        value = v.python_value()
        try:
            hash(value)
        except TypeError as e:
            raise python_error(TypeError, str(e)) from None
        return ("value", value)
    raise Unsupported(f"set member {describe(v)}")


def make(frame, items, frozen: bool = False) -> SetVar:
    s = SetVar(frozen=frozen)
    for item in items:
        add(s, item)
    return s


def add(s: SetVar, item: Var) -> None:
    key = member_key(item)
    if key not in s.items:
        s.items[key] = item
    if s.real is not None:
        if key[0] == "value":
            s.real.add(key[1])
        else:
            s.real = None  # identity members: insertion order from here on


def update(frame, s: SetVar, v: Var) -> None:
    """`s.update(v)` as CPython's set_update_internal does it: from another set (a SetVar, a
    set or frozenset constant: `{'a', 'b'}` is `SET_UPDATE` of a frozenset constant) by
    merging its table -- where members' hashes collide, the slots they take and so the order
    they iterate in are not those of adding them one by one -- else item by item."""
    other = v if isinstance(v, SetVar) else None
    if other is None and isinstance(v, ConstVar) and isinstance(v.value, (set, frozenset)):
        other = make(frame, [ConstVar(x) for x in v.value])
        other.real = set(v.value)
    if other is None:
        for item in unpack(frame, v):
            add(s, item)
        return
    if s.real is not None and other.real is not None and all(k[0] == "value" for k in other.items):
        s.real.update(other.real)
        for key, item in other.items.items():
            if key not in s.items:
                s.items[key] = item
        settle(s)
        return
    for item in members(other):
        add(s, item)


def discard(s: SetVar, key) -> bool:
    if key not in s.items:
        return False
    del s.items[key]
    if s.real is not None:
        s.real.discard(key[1])
    return True


def members(s: SetVar) -> list[Var]:
    """The members in the order iterating over the set yields them."""
    if s.real is not None and all(k[0] == "value" for k in s.items):
        return [s.items[("value", v)] for v in s.real]
    return list(s.items.values())


def method(frame, s: SetVar, name: str, args: list[Var], kwargs) -> Var:
    if kwargs:
        raise Unsupported(f"set.{name} with keyword arguments")
    if name == "add":
        mutating(frame, s)
        add(s, args[0])
    elif name in ("discard", "remove"):
        mutating(frame, s)
        if not discard(s, member_key(args[0])) and name == "remove":
            raise python_error(KeyError, args[0].python_value() if isinstance(args[0], ConstVar) else None)
    elif name == "pop":
        mutating(frame, s)
        if not s.items:
            raise python_error(KeyError, "pop from an empty set")
        if s.real is not None and all(k[0] == "value" for k in s.items):
            return s.items.pop(("value", s.real.pop()))  # (the real set's pop: CPython's finger moves on)
        item = members(s)[0]
        discard(s, member_key(item))
        return item
    elif name == "clear":
        mutating(frame, s)
        s.items.clear()
        s.real = set()
    elif name == "copy":
        return _copy(s, s.frozen)
    elif name in SET_OPERATIONS:
        others, reals, running = [], [], set(s.items)
        for a in args:  # (each taken as CPython takes it: intersection stops early, see `intersected`)
            other, real = operand(frame, a, running if name == "intersection" else None)
            if name == "intersection":
                running = {k for k in running if k in other.items}
            others.append(other)
            reals.append(real)
        exact = _real_op(name, [s, *others], reals, s.frozen)
        if exact is not None:
            return exact
        result = _copy(s, s.frozen)
        for other in others:
            result = SET_OPERATIONS[name](frame, result, dict(other.items))
        return result
    elif name in ("issubset", "issuperset", "isdisjoint") and len(args) == 1:
        return ConstVar(_compare(frame, s, name, args[0]))
    else:
        raise Unsupported(f"set.{name}")
    return ConstVar(None)


def _copy(s: SetVar, frozen: bool) -> SetVar:
    out = SetVar(frozen=frozen)
    out.items = Entries(s.items)
    out.real = s.real.copy() if s.real is not None else None
    return out


def _real_op(name: str, sets: list[SetVar], reals: list, frozen: bool) -> SetVar | None:
    """The operation on the real sets when every member is a constant: eager's exact result
    (CPython's set algorithms decide the order and which of equal members is kept). `reals`:
    the other operands as CPython gets them (a set, or a non-set's values in order)."""
    if sets[0].real is None or any(r is None for r in reals):
        return None
    real = getattr(sets[0].real, name)(*reals)
    out = SetVar(frozen=frozen)
    out.real = real if isinstance(real, set) else set(real)
    for v in real:
        key = ("value", v)
        out.items[key] = next(s.items[key] for s in sets if key in s.items)
    settle(out)
    return out


def settle(s: SetVar) -> None:
    """After an operation on the real set: each constant member is the object the real set
    holds (of `1` and `True`, eager keeps the one its algorithm met first)."""
    for v in s.real:
        held = s.items[("value", v)]
        if isinstance(held, ConstVar) and (type(held.value), repr(held.value)) != (type(v), repr(v)):
            s.items[("value", v)] = ConstVar(v)


def operand(frame, v: Var, intersecting: set | None = None) -> tuple[SetVar, object]:
    """A set operation's other operand: as a SetVar, and as CPython's method gets it when every
    member is a constant (the real set, or a non-set's values in the order taken; else None).
    A non-set is taken item by item; with `intersecting` (the keys of the set it is intersected
    with), taking stops once all of them were found, as CPython's set_intersection stops."""
    if isinstance(v, SetVar):
        return v, v.real
    if isinstance(v, ConstVar) and isinstance(v.value, (set, frozenset)):
        return make(frame, [ConstVar(x) for x in v.value]), v.value
    if intersecting is None:
        items = unpack(frame, v)
    else:
        items, found, it = [], set(), iterate(frame, v)
        while (len(found) < len(intersecting) or not intersecting) and (item := it.next()) is not None:
            items.append(item)
            if member_key(item) in intersecting:
                found.add(member_key(item))
    keys = [member_key(item) for item in items]
    real = [k[1] for k in keys] if all(k[0] == "value" for k in keys) else None
    return make(frame, items), real


def _compare(frame, s: SetVar, name: str, other: Var) -> bool:
    """issubset / issuperset / isdisjoint; a non-set is taken as CPython takes it: issubset
    whole (3.11) or as an intersection, which stops once it found every member (3.12), the
    other two item by item up to the first item that decides."""
    is_set = isinstance(other, SetVar) or isinstance(other, ConstVar) and isinstance(other.value, (set, frozenset))
    if name == "issubset" and not is_set and ISSUBSET_INTERSECTS:
        found = set(operand(frame, other, set(s.items))[0].items)
        return set(s.items) <= found
    if name == "issubset" or is_set:
        theirs = set(operand(frame, other)[0].items)
        mine = set(s.items)
        return {"issubset": mine <= theirs, "issuperset": mine >= theirs, "isdisjoint": not mine & theirs}[name]
    it = iterate(frame, other)
    while (item := it.next()) is not None:
        if (member_key(item) in s.items) == (name == "isdisjoint"):
            return False
    return True


def from_iterable(frame, v: Var, frozen: bool) -> SetVar:
    """set(v) / frozenset(v): a copy of a set keeps eager's order."""
    if isinstance(v, SetVar):
        out = _copy(v, frozen)
        if out.real is not None:
            out.real = set(v.real)
        return out
    out = SetVar(frozen=frozen)
    update(frame, out, v)
    return out


def _union(frame, s: SetVar, other: dict) -> SetVar:
    for v in other.values():
        add(s, v)
    return s


def _keep(frame, s: SetVar, keep) -> SetVar:
    for key in [k for k in s.items if not keep(k)]:
        discard(s, key)
    return s


def _symmetric(frame, s: SetVar, other: dict) -> SetVar:
    common = [k for k in other if k in s.items]
    for k, v in other.items():
        if k not in s.items:
            add(s, v)
    for k in common:
        discard(s, k)
    return s


SET_OPERATIONS = {
    "union": _union,
    "intersection": lambda frame, s, other: _keep(frame, s, lambda k: k in other),
    "difference": lambda frame, s, other: _keep(frame, s, lambda k: k not in other),
    "symmetric_difference": _symmetric,
}
OPERATORS = {operator.or_: "union", operator.and_: "intersection", operator.sub: "difference",
             operator.xor: "symmetric_difference", operator.ior: "union", operator.iand: "intersection",
             operator.isub: "difference", operator.ixor: "symmetric_difference"}
COMPARISONS = {operator.eq: operator.eq, operator.ne: operator.ne, operator.le: operator.le,
               operator.lt: operator.lt, operator.ge: operator.ge, operator.gt: operator.gt}


def binary(frame, fn, a: Var, b: Var) -> Var | None:
    views = [isinstance(v, DictViewVar) and v.kind != "values" for v in (a, b)]
    if any(views) and all(v or isinstance(o, SetVar) or isinstance(o, ConstVar) and isinstance(o.value, (set, frozenset))
                          or isinstance(o, DictViewVar) and o.kind != "values" for v, o in zip(views, (a, b))):
        # keys and items views are sets: `d.keys() == {"a"}`, `d1.keys() & d2.keys()` (a set)
        a, b = (make(frame, v.current()) if is_view else v for v, is_view in zip((a, b), views))
    if not (isinstance(a, SetVar) and isinstance(b, SetVar)):
        if isinstance(a, SetVar) and isinstance(b, ConstVar) and isinstance(b.value, (set, frozenset)):
            b = make(frame, [const(v) for v in b.value])
        elif isinstance(b, SetVar) and isinstance(a, ConstVar) and isinstance(a.value, (set, frozenset)):
            a = make(frame, [const(v) for v in a.value], frozen=True)
        else:
            return None
    if fn in COMPARISONS:
        return ConstVar(COMPARISONS[fn](set(a.items), set(b.items)))
    if fn not in OPERATORS:
        return None
    name = OPERATORS[fn]  # (in place, `s |= t` of two sets: ops/fills.py; here a new set)
    exact = _real_op(name, [a, b], [b.real], a.frozen)
    if exact is not None:
        return exact
    return SET_OPERATIONS[name](frame, _copy(a, a.frozen), dict(b.items))


SETS.fill(member_key=member_key, members=members)
