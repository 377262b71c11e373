"""The opcode handlers' table and what they share with the interpreter: one small function
per opcode, registered by opname (`@handler("LOAD_FAST")`), in `trace/handlers/`; the
interpreter (`trace/interpreter.py`) reads the table and runs them."""
from __future__ import annotations

import dis

from ..bytecode.compat import OPNAMES_ELSEWHERE
from ..values.vars import Var

HANDLERS: dict = {}


def handler(*opnames):
    """Register one small function as the handler of each named opcode (a name only another
    Python version has, `compat.OPNAMES_ELSEWHERE`, registers nothing here)."""
    def register(fn):
        for name in opnames:
            if name in OPNAMES_ELSEWHERE:
                continue
            assert name in dis.opmap, f"{name} is not an opcode of this Python"
            assert name not in HANDLERS, f"two handlers for {name}"
            HANDLERS[name] = fn
        return fn
    return register


SPECIALIZERS: dict = {}  # opname -> (instruction -> a handler of that one instruction, or None)


def specializer(opname):
    """Register `make(inst)`: a handler made for one instruction of `opname` (its argument
    known: the step table keeps one per instruction), or None where the shared one runs."""
    def register(make):
        SPECIALIZERS[opname] = make
        return make
    return register


class Return(Exception):
    """Raised by RETURN_VALUE to end a frame with a value."""

    def __init__(self, value: Var):
        self.value = value


class Yielded(Exception):
    """Raised by YIELD_VALUE: the generator's frame stops here until its next step."""

    def __init__(self, value: Var):
        self.value = value


class Lazy:
    """A root-frame argument not yet read: wrapped (and guarded) on first load."""
    __slots__ = ("value", "source")

    def __init__(self, value, source):
        self.value = value
        self.source = source
