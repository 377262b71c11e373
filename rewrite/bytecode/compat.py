"""The one place that knows which Python version runs.

Everything that differs between CPython versions -- how a call is spelled in bytecode,
which opcodes exist, how a jump's target is named -- is decided here, from `dis` and
`sys.version_info`, so the rest of the project never checks a version itself.
"""
from __future__ import annotations

import dis
import sys

PY311 = sys.version_info[:2] == (3, 11)
PY312 = sys.version_info[:2] == (3, 12)
PY313 = sys.version_info[:2] == (3, 13)
SUPPORTED = PY311  # versions whose opcode handlers are complete

OPNAMES = frozenset(dis.opmap)
# Generated and coroutine code objects: the prologue cannot return a compiled result
# from them, so they are left as they are.
CO_GENERATOR_LIKE = 0x20 | 0x80 | 0x100 | 0x200  # GENERATOR, COROUTINE, ITERABLE_COROUTINE, ASYNC_GENERATOR


def call_sequence(Instr, load_callable: list, load_args: list, location) -> list:
    """A plain call: the callable, its NULL (below it until 3.12, above it from 3.13), the
    arguments, then the call instruction(s)."""
    null = Instr("PUSH_NULL", location=location)
    head = [*load_callable, null] if sys.version_info >= (3, 13) else [null, *load_callable]
    n = len(load_args)
    call = [Instr("PRECALL", n, location=location)] if PY311 else []
    return [*head, *load_args, *call, Instr("CALL", n, location=location)]


def call_unpacked(Instr, load_callable, load_args_tuple, location, load_kwargs=None) -> list:
    """`f(*args)` (or `f(*args, **kwargs)`): CALL_FUNCTION_EX, its NULL placed as each version wants."""
    null = Instr("PUSH_NULL", location=location)
    head = [load_callable, null] if sys.version_info >= (3, 13) else [null, load_callable]
    if load_kwargs is None:
        return [*head, load_args_tuple, Instr("CALL_FUNCTION_EX", 0, location=location)]
    return [*head, load_args_tuple, load_kwargs, Instr("CALL_FUNCTION_EX", 1, location=location)]


def load_cell(Instr, var, location):
    """Push a free variable's cell object (3.13 made LOAD_CLOSURE a pseudo-op of LOAD_FAST)."""
    if sys.version_info >= (3, 13):
        return Instr("LOAD_FAST", var, location=location)
    return Instr("LOAD_CLOSURE", var, location=location)


def load_attr(Instr, name: str, location):
    """LOAD_ATTR of a plain attribute (3.12 folded LOAD_METHOD into it, with a flag)."""
    return Instr("LOAD_ATTR", name if PY311 else (False, name), location=location)


def branch_if_not_miss(Instr, label, location):
    """Jump to `label` when the value on top (compared with `is`) is the MISS sentinel."""
    if PY311:
        return [Instr("IS_OP", 0, location=location),
                Instr("POP_JUMP_FORWARD_IF_TRUE", label, location=location)]
    return [Instr("IS_OP", 0, location=location), Instr("POP_JUMP_IF_TRUE", label, location=location)]


def branch_unless_same(Instr, label, location):
    """Jump to `label` unless the two values on top are the same object (`is`)."""
    return [Instr("IS_OP", 0, location=location), pop_jump_if_false(Instr, label, location)]


def pop_jump_if_not_none(Instr, label, location):
    return Instr("POP_JUMP_FORWARD_IF_NOT_NONE" if PY311 else "POP_JUMP_IF_NOT_NONE", label, location=location)


def pop_jump_if_false(Instr, label, location):
    return Instr("POP_JUMP_FORWARD_IF_FALSE" if PY311 else "POP_JUMP_IF_FALSE", label, location=location)


def jump_forward(Instr, label, location):
    return Instr("JUMP_FORWARD", label, location=location)


def preamble_end(instrs) -> int:
    """Index just after the instruction that ends the frame set-up (RESUME)."""
    for i, ins in enumerate(instrs):
        if getattr(ins, "name", None) == "RESUME":
            return i + 1
    return 0


# How the tracer reads a few version-specific instructions.
def load_global_pushes_null(inst) -> bool:
    """3.11+: LOAD_GLOBAL's low bit says whether a NULL is pushed before the value."""
    return bool(inst.arg & 1)


def handled_offsets(code) -> tuple[frozenset, frozenset]:
    """(covered, in_try): offsets of the instructions an exception handler covers (inside
    `try` or `with`), and those of them inside a `try` -- a `with` block's own cleanup
    handler only exits the context and re-raises, so it does not count unless the `with`
    itself sits inside a `try`."""
    entries = list(dis._parse_exception_table(code))  # 3.11+: the zero-cost exception table
    handler_of = {}
    for entry in entries:
        for offset in range(entry.start, entry.end, 2):
            handler_of[offset] = entry.target
    ops = {inst.offset: inst.opname for inst in dis.get_instructions(code)}
    body_start = {}  # with-cleanup handler -> first offset of its body (just after BEFORE_WITH)
    for entry in entries:
        if ops.get(entry.target) == "PUSH_EXC_INFO" and ops.get(entry.target + 2) == "WITH_EXCEPT_START":
            body_start[entry.target] = min(entry.start, body_start.get(entry.target, entry.start))
    memo: dict = {}

    def in_try(offset) -> bool:
        if offset not in memo:
            target = handler_of.get(offset)
            if target is None:
                memo[offset] = False
            elif target in body_start and ops.get(body_start[target] - 2) == "BEFORE_WITH":
                memo[offset] = in_try(body_start[target] - 2)  # as inside as the `with` statement
            else:
                memo[offset] = True
        return memo[offset]
    return frozenset(handler_of), frozenset(o for o in handler_of if in_try(o))


def exception_handlers(code) -> dict:
    """offset -> (handler offset, stack depth, push lasti?) for every instruction a handler covers."""
    out = {}
    for entry in dis._parse_exception_table(code):  # 3.11+: the zero-cost exception table
        for offset in range(entry.start, entry.end, 2):
            out[offset] = (entry.target, entry.depth, entry.lasti)
    return out


BINARY_OPS = dict(enumerate(symbol for _, symbol in dis._nb_ops))  # arg -> '+', '+=', ...

# -- the raw splice (fastsplice.py) writes 3.11's encodings: inline caches, exception table ---
FAST_SPLICE = PY311


def cache_entries(opcode: int) -> int:
    """Inline CACHE units after an instruction (3.11+)."""
    return dis._inline_cache_entries[opcode]


def exception_entries(code) -> list:
    """The exception table's entries (start, end, target in bytes; depth; lasti)."""
    return dis._parse_exception_table(code)
