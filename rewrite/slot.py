"""The prologue's constant and the values it is compared with -- torch-free, so the import hook
can instrument a program that never imports torch without importing it either."""
from __future__ import annotations

from dataclasses import dataclass


class _Miss:
    __slots__ = ()

    def __repr__(self):
        return "MISS"


MISS = _Miss()  # "run the original bytecode"


class Slot:
    """The prologue's constant: the newest entry's guard and entry, and the rest of dispatch."""
    __slots__ = ("guard", "entry", "call", "name", "off", "__weakref__")

    def __init__(self):
        self.off = False  # the import hook's bypass (rewrite/bytecode/fastsplice.py): run the original

    def __repr__(self):
        return f"<dispatch slot of {getattr(self, 'name', '?')}>"


def _never(*args):
    return False


@dataclass(frozen=True)
class Options:
    backend: object = None  # a name, a callable, or None for the device default
    fullgraph: bool = False
    dynamic: bool | None = None
