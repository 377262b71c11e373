"""Resume functions: the rest of a function after a graph break, as a function of its own.

`resume_code(code, offset, n_stack, local_names)` is `code` with a new start: it takes the
values that were on the stack at `offset` and the live locals as parameters, pushes the
stack values back, and jumps to `offset`. The original instructions (and their locations)
are all kept, so tracebacks in the resumed part point at the user's lines.
"""
from __future__ import annotations

import dis
import types

from bytecode import Bytecode, Instr, Label
from bytecode.instr import InstrLocation

from . import compat


def resume_code(code: types.CodeType, offset: int, n_stack: int, local_names: tuple[str, ...],
                name: str, iterators: frozenset = frozenset(), nulls: frozenset = frozenset()) -> types.CodeType:
    """`iterators`: stack slots that held a loop's iterator; they arrive as a tuple of what
    was left, and the new start turns each back into an iterator (GET_ITER). `nulls`: slots
    that held the NULL of a pending call; they are pushed again (PUSH_NULL), not passed."""
    bc = Bytecode.from_code(code)
    # the k-th instruction of dis (no EXTENDED_ARG, no CACHE) is the k-th Instr of the bytecode
    k = [i.offset for i in dis.get_instructions(code) if i.opname != "EXTENDED_ARG"].index(offset)
    target, seen = Label(), -1
    for pos, item in enumerate(bc):
        if isinstance(item, Instr):
            seen += 1
            if seen == k:
                bc.insert(pos, target)
                break
    prefix, level = "___stack", 0
    while any(v.startswith(prefix) for v in code.co_varnames):  # a resume of a resume
        level += 1
        prefix = f"___stack{level}_"
    stack_names = [f"{prefix}{i}" for i in range(n_stack) if i not in nulls]
    line = code.co_firstlineno
    loc = InstrLocation(line, line, None, None)
    start = compat.preamble_end(bc)
    prologue = []
    for i in range(n_stack):
        if i in nulls:
            prologue.append(Instr("PUSH_NULL", location=loc))
            continue
        prologue.append(Instr("LOAD_FAST", f"{prefix}{i}", location=loc))
        if i in iterators:
            prologue.append(Instr("GET_ITER", location=loc))
    bc[start:start] = [*prologue, compat.jump_forward(Instr, target, loc)]
    bc.argnames = [*stack_names, *local_names]
    bc.argcount = len(bc.argnames)
    bc.posonlyargcount = 0
    bc.kwonlyargcount = 0
    bc.flags &= ~(0x04 | 0x08)  # *args and **kwargs are plain parameters now
    bc.name = code.co_name  # tracebacks name the user's function
    bc.qualname = name
    return bc.to_code()
