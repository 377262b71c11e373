"""The prologue of `splice.py`, spliced into raw `co_code` without re-assembling the function.

`splice_prologue` disassembles a code object with the `bytecode` library and assembles it
again: simple, and ~2 ms per function. Instrumenting every function of a program at import
time (`rewrite.hook`) needs the same prologue at a tiny fraction of that, so here it is
assembled on its own and inserted as bytes after the frame set-up (COPY_FREE_VARS,
MAKE_CELL, RESUME). Nothing in the original bytecode moves relative to itself: jumps are
relative, so they stay valid; the exception table's absolute offsets are shifted; the
location table is re-encoded from `co_positions()` with the prologue's units at the `def`
line; the slot, MISS, NEXT, `_next` and three attribute names are appended to
`co_consts`/`co_names`.

The result runs exactly the instructions `splice_prologue` produces (tests compare them),
plus, first, a bypass `if slot.off: <original>` the import hook uses for functions it has
decided not to compile. CPython 3.11's to 3.13's encodings are written here (the jumps, a
call, where its NULL goes, an attribute load, a cell: `compat`); `compat.FAST_SPLICE` says
whether it applies, and callers fall back to `splice_prologue` otherwise.
"""
from __future__ import annotations

import dis
import types

from ..slot import NEXT, _next
from . import compat

OP = dis.opmap
NAMES = ("off", "ref", "call")


_INS: dict[tuple[int, int], bytes] = {}


def _ins(op: int, arg: int = 0) -> bytes:
    """One instruction: EXTENDED_ARG prefixes, the op, its inline CACHE units (zeros)."""
    key = (op, arg)
    out = _INS.get(key)
    if out is None:
        out = _INS[key] = _encode_ins(op, arg)
    return out


def _encode_ins(op: int, arg: int) -> bytes:
    prefix = b""
    for shift in (24, 16, 8):
        if arg >> shift:
            prefix += bytes((OP["EXTENDED_ARG"], (arg >> shift) & 0xFF))
    return prefix + bytes((op, arg & 0xFF)) + b"\0\0" * compat.cache_entries(op)


def _preamble_end(code: types.CodeType) -> int:
    """Byte offset just after RESUME (the frame set-up the prologue must follow)."""
    raw, resume = code.co_code, OP["RESUME"]
    for at in range(0, len(raw), 2):  # the set-up ops carry no inline caches
        if raw[at] == resume:
            return at + 2
    raise ValueError(f"{code.co_name}: no RESUME")


def _localsplus(code: types.CodeType) -> dict[str, int]:
    """name -> index in the frame's fast locals (what LOAD_DEREF/LOAD_CLOSURE take in 3.11)."""
    names = list(code.co_varnames)
    names += [c for c in code.co_cellvars if c not in code.co_varnames]
    names += list(code.co_freevars)
    index: dict[str, int] = {}
    for i, name in enumerate(names):
        index.setdefault(name, i)
    return index


def _name_index(names: list, name: str) -> int:
    try:
        return names.index(name)
    except ValueError:
        names.append(name)
        return len(names) - 1


def fast_splice(code: types.CodeType, slot, miss, argument_names: tuple) -> types.CodeType:
    """`code` with the dispatcher prologue calling `slot` spliced in, as raw bytes."""
    if not compat.FAST_SPLICE:
        raise NotImplementedError(f"the raw splice is not written for Python {compat.VERSION}'s bytecode")
    consts, names = code.co_consts + (slot, miss, NEXT, _next), list(code.co_names)  # all new to this code object
    k_slot, k_miss, k_next, k_next_fn = range(len(consts) - 4, len(consts))
    attr = {n: _name_index(names, n) for n in NAMES}
    fast = _localsplus(code)
    cells = set(code.co_cellvars)

    op = OP
    jump_if = {k: op[name] for k, name in compat.RAW_JUMPS.items()}

    def call(n: int) -> bytes:
        return (_ins(op["PRECALL"], n) if compat.RAW_PRECALL else b"") + _ins(op["CALL"], n)

    def load_attr(name: str) -> bytes:
        return _ins(op["LOAD_ATTR"], compat.raw_load_attr_arg(attr[name]))

    args = b"".join(_ins(op["LOAD_DEREF"] if name in cells else op["LOAD_FAST"], fast[name])
                    for name in argument_names)
    args += b"".join(_ins(op[compat.RAW_LOAD_CLOSURE], fast[name]) for name in code.co_freevars)
    n = len(argument_names) + len(code.co_freevars)
    dead = _ins(op["POP_TOP"]) + _ins(op["LOAD_CONST"], k_next_fn)  # a dead slot.ref: _next
    def with_null(callable_: bytes) -> bytes:  # (3.13: the NULL above the callable)
        null = _ins(op["PUSH_NULL"])
        return callable_ + null if compat.NULL_ABOVE_CALLABLE else null + callable_

    entry = (with_null(_ins(op["LOAD_CONST"], k_slot) + load_attr("ref")) + call(0)
             + _ins(op["COPY"], 1) + _ins(jump_if["not_none"], len(dead) // 2) + dead)
    calls = {which: with_null(callable_) + args + call(n)
             for which, callable_ in (("entry", entry), ("call", _ins(op["LOAD_CONST"], k_slot) + load_attr("call")))}
    # forward jumps count code units from the end of the jump instruction
    check = (_ins(op["COPY"], 1) + _ins(op["LOAD_CONST"], k_miss) + _ins(op["IS_OP"], 0)
             + _ins(jump_if["true"], 1) + _ins(op["RETURN_VALUE"]) + _ins(op["POP_TOP"]))
    missed = _ins(op["POP_TOP"]) + calls["call"]
    rest = (calls["entry"] + _ins(op["COPY"], 1) + _ins(op["LOAD_CONST"], k_next) + _ins(op["IS_OP"], 0)
            + _ins(jump_if["false"], len(missed) // 2) + missed + check)
    prologue = (_ins(op["LOAD_CONST"], k_slot) + load_attr("off") + _ins(jump_if["true"], len(rest) // 2) + rest)

    at = _preamble_end(code)
    raw = code.co_code
    units = len(prologue) // 2
    linetable = _splice_locations(code, at // 2, units)
    stack = len(argument_names) + len(code.co_freevars) + 3
    return code.replace(
        co_code=raw[:at] + prologue + raw[at:], co_consts=consts, co_names=tuple(names),
        co_stacksize=max(code.co_stacksize, stack),
        co_exceptiontable=_shift_exceptions(code, units), co_linetable=linetable)


# -- tables ---------------------------------------------------------------------------------

def _shift_exceptions(code: types.CodeType, units: int) -> bytes:
    """The exception table with every offset moved `units` code units later."""
    if not code.co_exceptiontable:
        return code.co_exceptiontable
    out = bytearray()
    for e in compat.exception_entries(code):
        out += compat.except_varint(e.start // 2 + units, start=True)
        out += compat.except_varint((e.end - e.start) // 2)
        out += compat.except_varint(e.target // 2 + units)
        out += compat.except_varint((e.depth << 1) | int(e.lasti))
    return bytes(out)


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 64:
        out.append(0x40 | (value & 63))
        value >>= 6
    out.append(value)
    return bytes(out)


def _svarint(value: int) -> bytes:
    return _varint(((-value) << 1) | 1 if value < 0 else value << 1)


def _encode_positions(positions: list, firstlineno: int) -> bytes:
    """A 3.11 location table for one (line, end line, column, end column) per code unit:
    runs of equal positions, at most 8 units per entry, in the long form (or "none")."""
    out = bytearray()
    line = firstlineno
    i, n = 0, len(positions)
    while i < n:
        pos = positions[i]
        j = i + 1
        while j < n and j - i < 8 and positions[j] == pos:
            j += 1
        length = j - i
        start, end, col, end_col = pos
        if start is None:
            out.append(0x80 | (15 << 3) | (length - 1))
        else:
            out.append(0x80 | (14 << 3) | (length - 1))
            out += _svarint(start - line)
            out += _varint((end if end is not None else start) - start)
            out += _varint(col + 1 if col is not None else 0)
            out += _varint(end_col + 1 if end_col is not None else 0)
            line = start
        i = j
    return bytes(out)


def _splice_locations(code: types.CodeType, at: int, units: int) -> bytes:
    """The location table with `units` code units at the `def` line inserted after unit `at`.

    Entries are relative (each line is a delta from the previous entry's), so when the
    set-up ends on an entry boundary at the `def` line -- the usual case -- the prologue's
    entries go in between and the rest of the table is kept byte for byte; otherwise the
    whole table is re-encoded from `co_positions()`."""
    table, first = code.co_linetable, code.co_firstlineno
    i, covered, line = 0, 0, first
    while covered < at and i < len(table):
        head = table[i]
        kind, covered = (head >> 3) & 15, covered + (head & 7) + 1
        i += 1
        if kind == 15:
            continue
        if kind == 14:
            delta, i = _read_svarint(table, i)
            for _ in range(3):
                _, i = _read_varint(table, i)
        elif kind == 13:
            delta, i = _read_svarint(table, i)
        elif kind >= 10:
            delta, i = kind - 10, i + 2
        else:
            delta, i = 0, i + 1
        line += delta
    here = (first, first, None, None)
    if covered != at or line != first:
        positions = list(code.co_positions())
        positions[at:at] = [here] * units
        return _encode_positions(positions, first)
    return table[:i] + _prologue_locations(units) + table[i:]


_PROLOGUE_LOCATIONS: dict[int, bytes] = {}


def _prologue_locations(units: int) -> bytes:
    """Location entries for `units` code units at the current line, no columns (line delta 0)."""
    out = _PROLOGUE_LOCATIONS.get(units)
    if out is None:
        out = _PROLOGUE_LOCATIONS[units] = _encode_positions([(0, 0, None, None)] * units, 0)
    return out


def _read_varint(table: bytes, i: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        b = table[i]
        i += 1
        value |= (b & 63) << shift
        shift += 6
        if not b & 64:
            return value, i


def _read_svarint(table: bytes, i: int) -> tuple[int, int]:
    value, i = _read_varint(table, i)
    return (-(value >> 1) if value & 1 else value >> 1), i
