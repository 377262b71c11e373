"""Splice a dispatcher prologue in front of a function's original bytecode.

The rewritten code is::

    <frame set-up: COPY_FREE_VARS, MAKE_CELL ..., RESUME>
    PUSH_NULL
    PUSH_NULL; LOAD_CONST <Slot>; LOAD_ATTR ref; PRECALL/CALL 0   # the slot is a constant, not a global
    COPY 1; POP_JUMP_IF_NOT_NONE entry; POP_TOP; LOAD_CONST _next   # (a dead reference: no entry)
  entry:
    LOAD_FAST    <each argument>  (LOAD_DEREF for arguments that are cells)
    LOAD_CLOSURE <each free variable's cell>
    PRECALL/CALL n
    COPY 1; LOAD_CONST NEXT; IS_OP; POP_JUMP_IF_FALSE check
    POP_TOP
    PUSH_NULL; LOAD_CONST <Slot>; LOAD_ATTR call; <args>; CALL n
  check:
    COPY 1; LOAD_CONST MISS; IS_OP; POP_JUMP_IF_TRUE original
    RETURN_VALUE
  original:
    POP_TOP
    <the original bytecode: with a router (@jit), each call's callable passed through it>

(As 3.11 and 3.12 spell it; 3.13 pushes each NULL after its callable, has no PRECALL and
loads a cell with LOAD_FAST: `compat` writes each version's form.)

`slot.ref()` is one function with the guards inlined: the newest cache entry, or the
dispatch over all of them. It returns the result, MISS (run the original bytecode) or NEXT
(no entry's guards hold: `slot.call`, the miss path, compiles). A hit is one attribute load
and one call of what it refers to, so a thread never pairs one entry's guard with another
entry's body; the dispatcher publishes a new entry by rebinding that one attribute. (The
reference is weak: see `rewrite.slot.Slot`.) Every original
instruction keeps its location, so tracebacks, `inspect` and debuggers see the user's
lines. The code object itself never changes again.
"""
from __future__ import annotations

import functools
import types
import weakref

from bytecode import Bytecode, CellVar, FreeVar, Instr, Label
from bytecode.instr import InstrLocation

from ..slot import NEXT, _next
from . import compat
from .route import route_calls

_ORIGINALS: "weakref.WeakKeyDictionary[types.CodeType, types.CodeType]" = weakref.WeakKeyDictionary()


def argument_names(code: types.CodeType) -> tuple[str, ...]:
    """Names of all parameters, in frame order (positional, keyword-only, *args, **kwargs)."""
    n = code.co_argcount + code.co_kwonlyargcount
    n += bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)
    return code.co_varnames[:n]


def _template():
    return None


@functools.lru_cache(maxsize=1024)
def _signature_stub(code: types.CodeType) -> types.CodeType:
    names = argument_names(code)
    flags = _template.__code__.co_flags & ~0xC | code.co_flags & 0xC  # (its *args and **kwargs)
    return _template.__code__.replace(co_argcount=code.co_argcount, co_posonlyargcount=code.co_posonlyargcount,
                                      co_kwonlyargcount=code.co_kwonlyargcount, co_flags=flags, co_varnames=names,
                                      co_nlocals=len(names), co_name=code.co_name, co_qualname=code.co_qualname)


def binding_error(code: types.CodeType, defaults: int, kwdefaults, args: int, keywords) -> TypeError | None:
    """The TypeError Python raises when a function of `code` with `defaults` positional
    defaults and keyword-only defaults for `kwdefaults` (names) is called with `args`
    positional arguments and `keywords` (names): the same call of a function of the same
    signature with an empty body (None: the call binds)."""
    stub = types.FunctionType(_signature_stub(code), {}, code.co_name, (None,) * defaults or None)
    stub.__kwdefaults__ = dict.fromkeys(kwdefaults) or None
    try:
        stub(*[None] * args, **dict.fromkeys(keywords))
    except TypeError as e:
        return e
    return None


def prologue_names(code: types.CodeType) -> tuple[str, ...]:
    """What the prologue passes to the dispatcher: every argument, then every free cell."""
    return argument_names(code) + code.co_freevars


def splice_prologue(code: types.CodeType, slot, miss, router=None, plain=None) -> types.CodeType:
    """Return `code` with a prologue that calls `slot.call(*args, *cells)` first; `router`:
    what the original part passes each call's callable through, but where `plain` says
    (see route.py)."""
    if code.co_flags & compat.CO_GENERATOR_LIKE:
        raise TypeError(f"cannot rewrite generator or coroutine code {code.co_name!r}")
    bc = Bytecode.from_code(code)
    at = compat.preamble_end(bc)
    if router is not None and compat.ROUTES_CALLS:
        bc[at:] = route_calls(bc[at:], router, plain)
    loc = InstrLocation(code.co_firstlineno, code.co_firstlineno, None, None)
    cells = set(code.co_cellvars)
    loads = []
    for name in argument_names(code):
        if name in cells:
            loads.append(Instr("LOAD_DEREF", CellVar(name), location=loc))
        else:
            loads.append(Instr("LOAD_FAST", name, location=loc))
    for name in code.co_freevars:
        loads.append(compat.load_cell(Instr, FreeVar(name), loc))
    original, check, entry = Label(), Label(), Label()
    read = [Instr("LOAD_CONST", slot, location=loc), compat.load_attr(Instr, "ref", loc)]
    the_entry = [*compat.call_sequence(Instr, read, [], loc),  # slot.ref(), or _next if it is dead
                 Instr("COPY", 1, location=loc), compat.pop_jump_if_not_none(Instr, entry, loc),
                 Instr("POP_TOP", location=loc), Instr("LOAD_CONST", _next, location=loc), entry]
    slot_call = [Instr("LOAD_CONST", slot, location=loc), compat.load_attr(Instr, "call", loc)]

    prologue = [
        # the newest entry, its guards inlined (or the dispatch over the entries)
        *compat.call_sequence(Instr, the_entry, loads, loc),
        Instr("COPY", 1, location=loc),
        Instr("LOAD_CONST", NEXT, location=loc),
        *compat.branch_unless_same(Instr, check, loc),
        Instr("POP_TOP", location=loc),
        *compat.call_sequence(Instr, slot_call, loads, loc),  # no entry's guards hold: the miss path
        check,
        Instr("COPY", 1, location=loc),
        Instr("LOAD_CONST", miss, location=loc),
        *compat.branch_if_not_miss(Instr, original, loc),
        Instr("RETURN_VALUE", location=loc),
        original,
        Instr("POP_TOP", location=loc),
    ]
    bc[at:at] = prologue
    bound = code.co_stacksize + 3 * len(prologue)  # (no instruction of the prologue pushes more than 3)
    new = compat.with_original_depths(compat.to_code(bc, bound, code), code)
    _ORIGINALS[new] = code
    return new


def is_rewritten(code: types.CodeType) -> bool:
    return code in _ORIGINALS


def original_code(code: types.CodeType) -> types.CodeType:
    return _ORIGINALS.get(code, code)
