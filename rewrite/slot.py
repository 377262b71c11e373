"""The prologue's constant and the values it is compared with -- torch-free, so the import hook
can instrument a program that never imports torch without importing it either."""
from __future__ import annotations

import weakref
from dataclasses import dataclass


class _Miss:
    __slots__ = ()

    def __repr__(self):
        return "MISS"


MISS = _Miss()  # "run the original bytecode"


class _Next:
    __slots__ = ()

    def __repr__(self):
        return "NEXT"


NEXT = _Next()  # "no cache entry's guards hold": the prologue calls slot.call (the miss path)


class Slot:
    """The prologue's constant: `ref`, a weak reference to the entry function (guards inlined:
    it returns the result, MISS or NEXT), and `call` (the miss path). Each is rebound as a
    whole: a thread calling reads one or the other.

    Code objects are invisible to the cycle collector, so nothing a code object holds may
    hold, strongly, what holds the code (the function, its globals): a slot reaches its
    dispatcher (`owner`) and the entries only through weak references. The functions that
    run the code own the dispatcher (`fn.__dict__`); when it goes, the slot runs the
    original bytecode. (A weak reference called, then its result called, costs ~30 ns more
    than a strong one; a `weakref.proxy` ~120 ns: it has no vectorcall.)"""
    __slots__ = ("ref", "call", "name", "off", "owner", "__weakref__")

    def __init__(self):
        self.ref = NEXT_REF
        self.owner = None  # a weak reference to the Dispatcher
        self.off = False  # the import hook's bypass (rewrite/bytecode/fastsplice.py): run the original

    def __repr__(self):
        return f"<dispatch slot of {getattr(self, 'name', '?')}>"


def _next(*args):
    return NEXT


def _miss(*args):
    return MISS


NEXT_REF = weakref.ref(_next)  # (never dead: the prologue also reads a dead reference as this one)


def orphan(slot: Slot) -> None:
    """The slot's dispatcher is gone: its prologue runs the original bytecode."""
    slot.ref, slot.call = NEXT_REF, _miss


@dataclass(frozen=True)
class Options:
    backend: object = None  # a name, a callable, or None for the device default
    fullgraph: bool = False
    dynamic: bool | None = None


def slot_of(code) -> Slot | None:
    """The slot a rewritten code object's prologue calls (one of its constants)."""
    for const in reversed(code.co_consts):
        if isinstance(const, Slot):
            return const
    return None
