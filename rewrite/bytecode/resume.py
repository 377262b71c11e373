"""Resume functions: the rest of a function after a graph break, as a function of its own.

`resume_code(code, offset, slots, local_names, name)` is `code` with a new start: it takes
the values that were on the stack at `offset` and the live locals as parameters, pushes the
stack values back, and jumps to `offset`. The original instructions (and their locations)
are all kept, so tracebacks in the resumed part point at the user's lines.
"""
from __future__ import annotations

import dis
import types
import weakref

from bytecode import Bytecode, Instr, Label
from bytecode.instr import InstrLocation

from . import compat
from .route import route_calls



def list_iterator_at(lst: list, pos: int):
    """A list's own (live) iterator that has already returned `pos` items: how a resume
    function gets back a `for` loop over a list that was running at a graph break."""
    it = iter(lst)
    it.__setstate__(pos)
    return it

def resume_code(code: types.CodeType, offset: int, slots: tuple[str, ...], local_names: tuple[str, ...],
                name: str, router=None, plain=None, raising: bool = False) -> types.CodeType:
    """(`router`, `plain`: what each call's callable is passed through, and where not, for a
    resume function that runs as it is: see route.py. `raising`: the function takes an
    exception after the stack slots and raises it at `offset`, inside the `try` and `with`
    blocks open there, as if the instruction there had raised it.) `slots` says what each
    stack slot at `offset` held, deepest first, and so how the new start rebuilds it:

    * "value" -- taken as a parameter and pushed back;
    * "null"  -- the NULL below a pending call: pushed again (PUSH_NULL), not passed;
    * "iter"  -- a loop's iterator: what was left of it arrives as a tuple and is turned back
                 into an iterator (GET_ITER);
    * "list_iter" -- a loop over a list: (the list, items already taken) arrives, and the list's
                 own iterator is re-created at that position (so later appends are still seen);
    * "ctx"   -- the `__exit__` of an open `with` block: a fresh context manager arrives and
                 is entered again (BEFORE_WITH), leaving its `__exit__` where the old one was.
    """
    bc = Bytecode.from_code(code)
    k = _index_of(code, offset)
    target, seen = Label(), -1
    for pos, item in enumerate(bc):
        if isinstance(item, Instr):
            seen += 1
            if seen == k:
                bc[pos:pos] = [target] if not raising else \
                    [target, Instr("LOAD_FAST", RAISED, location=item.location),
                     Instr("RAISE_VARARGS", 1, location=item.location)]  # (covered by what covers it)
                break
    prefix, level = STACK_PREFIX, 0
    while any(v.startswith(prefix) for v in code.co_varnames):  # a resume of a resume
        level += 1
        prefix = f"___stack{level}_"
    stack_names = [f"{prefix}{i}" for i, kind in enumerate(slots) if kind != "null"]
    line = code.co_firstlineno
    loc = InstrLocation(line, line, None, None)
    start = compat.preamble_end(bc)
    if router is not None and compat.ROUTES_CALLS:
        bc[start:] = route_calls(bc[start:], router, plain)
    prologue = []
    for i, kind in enumerate(slots):
        if kind == "null":
            prologue.append(Instr("PUSH_NULL", location=loc))
            continue
        if kind == "list_iter":
            prologue += compat.call_unpacked(Instr, Instr("LOAD_CONST", list_iterator_at, location=loc),
                                             Instr("LOAD_FAST", f"{prefix}{i}", location=loc), loc)
            continue
        prologue.append(Instr("LOAD_FAST", f"{prefix}{i}", location=loc))
        if kind == "iter":
            prologue.append(Instr("GET_ITER", location=loc))
        elif kind == "ctx":
            prologue += [Instr("BEFORE_WITH", location=loc), Instr("POP_TOP", location=loc)]
    bc[start:start] = [*prologue, compat.jump_forward(Instr, target, loc)]
    bc.argnames = [*stack_names, *([RAISED] if raising else []), *local_names]
    bc.argcount = len(bc.argnames)
    bc.posonlyargcount = 0
    bc.kwonlyargcount = 0
    bc.flags &= ~(0x04 | 0x08)  # *args and **kwargs are plain parameters now
    bc.name = code.co_name  # tracebacks name the user's function
    bc.qualname = name
    bound = code.co_stacksize + 3 * (len(prologue) + 1)  # (no instruction of the prologue pushes more than 3)
    new = compat.with_original_depths(compat.to_code(bc, bound, code), code, "a resume function")
    RESUMES.add(new)
    return new


_SUSPENDED: "weakref.WeakValueDictionary" = weakref.WeakValueDictionary()  # (code, offset, slots, locals) -> code


def suspended_code(code: types.CodeType, offset: int, slots: tuple[str, ...],
                   local_names: tuple[str, ...]) -> types.CodeType:
    """The code of a generator function whose generator, once primed (`primed`), stands
    suspended at the `yield` at `offset` as the one a trace ran: it takes the stack below
    what that yield yields (`slots`, as `resume_code` takes them, then a stand-in for the
    yielded value) and the live locals, and yields the stand-in at that very instruction --
    inside the same `try` and `with` blocks, so `send`, `throw` and `close` act there as on
    the original."""
    key = (code, offset, slots, local_names)
    new = _SUSPENDED.get(key)
    if new is None:
        new = _SUSPENDED[key] = resume_code(code, offset, (*slots, "value"), local_names, code.co_qualname)
    return new


def primed(gen):
    """A generator of `suspended_code`, advanced to the yield it stands at."""
    next(gen)
    return gen


def exhausted_generator(name: str, qualname: str):
    """A generator that has finished, named as the one a trace ran to its end."""
    def gen():
        return
        yield  # (a generator function)
    g = gen()
    g.__name__, g.__qualname__ = name, qualname
    next(g, None)
    return g


RESUMES: "weakref.WeakSet[types.CodeType]" = weakref.WeakSet()  # the code resume_code made
STACK_PREFIX = "___stack"  # the parameters a resume function rebuilds its stack from
RAISED = "___raised"  # a raising resume function's parameter: the exception it raises


def is_resume(code: types.CodeType) -> bool:
    return code in RESUMES


def _instr_at(code: types.CodeType, offset: int) -> Instr:
    """The `bytecode` Instr of `code`'s instruction at `offset` (its argument in the form the
    library gives it on this Python: a name, a Compare, an int)."""
    k = _index_of(code, offset)
    return [item for item in Bytecode.from_code(code) if isinstance(item, Instr)][k]


def _index_of(code: types.CodeType, offset: int) -> int:
    """The k-th instruction of dis (no EXTENDED_ARG, no CACHE) is the k-th Instr of the
    bytecode library: k for the instruction at `offset` -- or, when `offset` is that of an
    EXTENDED_ARG (a jump target), for the instruction it extends."""
    offsets = [i.offset for i in dis.get_instructions(code) if i.opname != "EXTENDED_ARG"]
    return next(k for k, o in enumerate(offsets) if o >= offset)


def at_user_line(code: types.CodeType, offset: int, what: str, n_in: int = 0, n_out: int = 1,
                 globals_: dict | None = None) -> types.FunctionType:
    """A tiny function that does one step of a graph break as an instruction carrying the
    location of `code`'s instruction at `offset`, in a frame named after `code`'s function:
    tracebacks and warnings raised by that step name the user's file, line and function, as
    in eager. `what` is

    * "call"  -- `fn(*args, **kwargs)`, taking (fn, args, kwargs);
    * "truth" -- `not not value`;
    * "step"  -- that very instruction, over `n_in` values (deepest first), returning what it
                 pushes: None (`n_out` 0), the value (1) or a tuple of them, deepest first.
                 `globals_` are the globals it sees (STORE_GLOBAL, IMPORT_NAME)."""
    inst = next(i for i in dis.get_instructions(code) if i.offset == offset)
    p = inst.positions
    loc = InstrLocation(p.lineno, p.end_lineno, p.col_offset, p.end_col_offset) if p and p.lineno else None
    first = InstrLocation(code.co_firstlineno, code.co_firstlineno, None, None)
    if what == "call":
        names = ["___fn", "___args", "___kwargs"]
        body = compat.call_unpacked(Instr, Instr("LOAD_FAST", "___fn", location=first),
                                    Instr("LOAD_FAST", "___args", location=first), loc,
                                    Instr("LOAD_FAST", "___kwargs", location=first))
    elif what == "truth":
        names = ["___value"]
        body = [Instr("LOAD_FAST", "___value", location=first), *compat.truth(Instr, loc)]
    else:
        names = [f"___a{i}" for i in range(n_in)]
        original = _instr_at(code, offset)
        step = Instr(original.name, original.arg, location=loc) if original.require_arg() else \
            Instr(original.name, location=loc)
        before = [Instr(compat.STEP_BEFORE[original.name], location=loc)] if original.name in compat.STEP_BEFORE else []
        body = [*(Instr("LOAD_FAST", n, location=first) for n in names), *before, step]
        if n_out == 0:
            body.append(Instr("LOAD_CONST", None, location=first))
        elif n_out > 1:
            body.append(Instr("BUILD_TUPLE", n_out, location=first))
    bc = Bytecode([Instr("RESUME", 0, location=first), *body, Instr("RETURN_VALUE", location=first)])
    bc.argnames = names
    bc.argcount = len(names)
    bc.filename, bc.name, bc.qualname = code.co_filename, code.co_name, code.co_qualname
    bc.first_lineno = code.co_firstlineno
    return types.FunctionType(compat.to_code(bc), globals_ if globals_ is not None else {}, code.co_name)
