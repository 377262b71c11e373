"""The one place that knows which Python version runs.

Everything that differs between CPython versions -- how a call is spelled in bytecode,
which opcodes exist, how a jump's target is named -- is decided here, from `dis` and
`sys.version_info`, so the rest of the project never checks a version itself.
"""
from __future__ import annotations

import dis
import sys
import types

from ..errors import Unsupported

PY311 = sys.version_info[:2] == (3, 11)
PY312 = sys.version_info[:2] == (3, 12)
PY313 = sys.version_info[:2] == (3, 13)
SUPPORTED = PY311 or PY312 or PY313  # versions whose opcode handlers are complete
VERSION = f"{sys.version_info[0]}.{sys.version_info[1]}"
# why nothing is traced on this Python (None: it is): every call runs eagerly, said once per process
UNTRACED = None if SUPPORTED else f"tracing Python {VERSION} bytecode is not supported yet (3.11 to 3.13 are)"

OPNAMES = frozenset(dis.opmap)
# the opcodes each version adds and removes (from its `dis.opmap`; the instrumented forms left
# out): a handler may be registered under a name this Python lacks, and is then not registered
# (trace/opcodes.py)
OPCODE_CHANGES = {
    (3, 12): {"added": {"BINARY_SLICE", "CALL_INTRINSIC_1", "CALL_INTRINSIC_2", "CLEANUP_THROW", "END_FOR",
                        "END_SEND", "LOAD_FAST_AND_CLEAR", "LOAD_FAST_CHECK", "LOAD_FROM_DICT_OR_DEREF",
                        "LOAD_FROM_DICT_OR_GLOBALS", "LOAD_LOCALS", "LOAD_SUPER_ATTR", "POP_JUMP_IF_FALSE",
                        "POP_JUMP_IF_NONE", "POP_JUMP_IF_NOT_NONE", "POP_JUMP_IF_TRUE", "RETURN_CONST",
                        "STORE_SLICE"},
              "removed": {"ASYNC_GEN_WRAP", "IMPORT_STAR", "JUMP_IF_FALSE_OR_POP", "JUMP_IF_TRUE_OR_POP",
                          "LIST_TO_TUPLE", "LOAD_CLASSDEREF", "POP_JUMP_BACKWARD_IF_FALSE",
                          "POP_JUMP_BACKWARD_IF_NONE", "POP_JUMP_BACKWARD_IF_NOT_NONE", "POP_JUMP_BACKWARD_IF_TRUE",
                          "POP_JUMP_FORWARD_IF_FALSE", "POP_JUMP_FORWARD_IF_NONE", "POP_JUMP_FORWARD_IF_NOT_NONE",
                          "POP_JUMP_FORWARD_IF_TRUE", "PRECALL", "PREP_RERAISE_STAR", "PRINT_EXPR",
                          "UNARY_POSITIVE"}},
    (3, 13): {"added": {"CALL_KW", "CONVERT_VALUE", "ENTER_EXECUTOR", "EXIT_INIT_CHECK", "FORMAT_SIMPLE",
                        "FORMAT_WITH_SPEC", "LOAD_FAST_LOAD_FAST", "SET_FUNCTION_ATTRIBUTE", "STORE_FAST_LOAD_FAST",
                        "STORE_FAST_STORE_FAST", "TO_BOOL"},
              "removed": {"FORMAT_VALUE", "KW_NAMES"}},
}
OPNAMES_ELSEWHERE = frozenset(set().union(*(c["added"] | c["removed"] for c in OPCODE_CHANGES.values())) - OPNAMES)
# Generated and coroutine code objects: the prologue cannot return a compiled result
# from them, so they are left as they are.
CO_GENERATOR_LIKE = 0x20 | 0x80 | 0x100 | 0x200  # GENERATOR, COROUTINE, ITERABLE_COROUTINE, ASYNC_GENERATOR
# where a call's NULL sits: [NULL | method, callable | self, *args] until 3.12; from 3.13
# [callable | method, NULL | self, *args] (the callable is then always at one depth)
NULL_ABOVE_CALLABLE = sys.version_info >= (3, 13)


def call_sequence(Instr, load_callable: list, load_args: list, location) -> list:
    """A plain call: the callable, its NULL (below it until 3.12, above it from 3.13), the
    arguments, then the call instruction(s)."""
    null = Instr("PUSH_NULL", location=location)
    head = [*load_callable, null] if NULL_ABOVE_CALLABLE else [null, *load_callable]
    n = len(load_args)
    call = [Instr("PRECALL", n, location=location)] if PY311 else []
    return [*head, *load_args, *call, Instr("CALL", n, location=location)]


def call_unpacked(Instr, load_callable, load_args_tuple, location, load_kwargs=None) -> list:
    """`f(*args)` (or `f(*args, **kwargs)`): CALL_FUNCTION_EX, its NULL placed as each version wants."""
    null = Instr("PUSH_NULL", location=location)
    head = [load_callable, null] if NULL_ABOVE_CALLABLE else [null, load_callable]
    if load_kwargs is None:
        return [*head, load_args_tuple, Instr("CALL_FUNCTION_EX", 0, location=location)]
    return [*head, load_args_tuple, load_kwargs, Instr("CALL_FUNCTION_EX", 1, location=location)]


# 3.13 made LOAD_CLOSURE a pseudo-op: LOAD_FAST of a cell or free variable pushes the cell
LOAD_FAST_LOADS_CELLS = sys.version_info >= (3, 13)


def load_cell(Instr, var, location):
    """Push a free variable's cell object (3.13 made LOAD_CLOSURE a pseudo-op of LOAD_FAST)."""
    if LOAD_FAST_LOADS_CELLS:
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


def load_attr_pushes_null(inst) -> bool:
    """3.12 folded LOAD_METHOD into LOAD_ATTR: its low bit asks for the method form (the tracer
    pushes NULL and the bound attribute, as for LOAD_METHOD)."""
    return not PY311 and bool(inst.arg & 1)


def super_attr(inst) -> tuple[bool, bool]:
    """LOAD_SUPER_ATTR (3.12): (method form, `super(cls, self)` spelled with two arguments)."""
    return bool(inst.arg & 1), bool(inst.arg & 2)


def for_iter_exit(inst) -> int:
    """Where an exhausted FOR_ITER goes (the iterator popped): its target (3.11), past the
    END_FOR there (3.12), past its END_FOR and POP_TOP (3.13)."""
    return inst.argval + _FOR_ITER_SKIPS


_FOR_ITER_SKIPS = 0 if PY311 else 2 if PY312 else 4
END_FOR_POPS = 2 if PY312 else 1  # (3.12: the iterator and its last item; 3.13: one, then POP_TOP)


# a generator's close() returns what the generator returned on GeneratorExit (3.13; None before)
CLOSE_RETURNS_VALUE = sys.version_info >= (3, 13)
# functions have `__type_params__` (PEP 695) from 3.12: read, set and copied by functools.wraps
FUNCTION_TYPE_PARAMS = sys.version_info >= (3, 12)

# an exhausted SEND (`yield from`) leaves the sub-iterator below the result for END_SEND (3.12)
SEND_KEEPS_ITERATOR = not PY311
# set.issubset of a non-set: a set made of all of it (3.11), an intersection that stops taking
# once it found every member (3.12)
ISSUBSET_INTERSECTS = not PY311
# exception handlers that are no `try` of the user's: 3.12's cleanup of an inlined comprehension
# (it puts the saved locals back: SWAP ...) and a generator's StopIteration -> RuntimeError
NOT_TRY_HANDLERS = ("SWAP", "CALL_INTRINSIC_1")


def handled_offsets(code, insts=None) -> tuple[frozenset, frozenset, dict]:
    """(covered, in_try, caught): offsets of the instructions an exception handler covers
    (inside `try` or `with`); those of them inside a `try` -- a `with` block's own cleanup
    handler only exits the context and re-raises, so it does not count unless the `with`
    itself sits inside a `try`; and those of them whose exception a handler may end (an
    `except` that does not re-raise: a `finally` only runs its block and lets it go on), each
    with those handlers, innermost first (whether one matches the exception is its clauses'
    business: `except_clauses`)."""
    entries = list(dis._parse_exception_table(code))  # 3.11+: the zero-cost exception table
    handler_of = {}
    for entry in entries:
        for offset in range(entry.start, entry.end, 2):
            handler_of[offset] = entry.target
    insts = list(dis.get_instructions(code)) if insts is None else insts  # (the caller's decoding, when it has one)
    ops = {inst.offset: inst.opname for inst in insts}
    body_start = {}  # with-cleanup handler -> first offset of its body (just after BEFORE_WITH)
    for entry in entries:
        if ops.get(entry.target) == "PUSH_EXC_INFO" and ops.get(entry.target + 2) == "WITH_EXCEPT_START":
            body_start[entry.target] = min(entry.start, body_start.get(entry.target, entry.start))
    swallows = _handlers_that_swallow(insts, {e.target for e in entries})

    def deciding(counts) -> dict:
        """offset -> the handlers that count for it, innermost first (an exception a counting
        handler lets go on is raised in its own code, covered in turn)."""
        memo: dict = {}

        def chain(offset) -> tuple:
            if offset not in memo:
                memo[offset] = ()  # (while deciding: handlers nest, they never loop)
                target = handler_of.get(offset)
                if target is None:
                    pass
                elif target in body_start and ops.get(body_start[target] - 2) == "BEFORE_WITH":
                    memo[offset] = chain(body_start[target] - 2)  # as inside as the `with` statement
                elif not counts(target):
                    memo[offset] = chain(target)  # as inside as the handler's own code
                else:
                    memo[offset] = (target, *chain(target))
            return memo[offset]
        return {o: chain(o) for o in handler_of if chain(o)}
    return (frozenset(handler_of), frozenset(deciding(lambda target: ops.get(target) not in NOT_TRY_HANDLERS)),
            deciding(lambda target: target in swallows))


# what loads an `except` clause's class (or tuple of classes), before its CHECK_EXC_MATCH
CLAUSE_LOADS = {"LOAD_GLOBAL", "LOAD_NAME", "LOAD_ATTR", "LOAD_FAST", "LOAD_DEREF", "BUILD_TUPLE", "PUSH_NULL"}


def except_clauses(insts, index_of: dict, target: int) -> list | None:
    """The `except` clauses of the handler at `target`, in order, each as the instructions that
    load its class (or tuple of classes); None where a clause catches anything (a bare `except:`)
    or the handler is not a chain of `except` clauses."""
    i = index_of[target]
    if insts[i].opname != "PUSH_EXC_INFO":
        return None
    i, clauses = i + 1, []
    while True:
        loads = []
        while insts[i].opname in CLAUSE_LOADS:
            loads.append(insts[i])
            i += 1
        if insts[i].opname == "RERAISE" and not loads:
            return clauses  # (no clause matched: the exception goes on)
        if insts[i].opname != "CHECK_EXC_MATCH" or not loads or not insts[i + 1].opname.startswith("POP_JUMP"):
            return None
        clauses.append(loads)
        i = index_of[insts[i + 1].argval]


_UNCONDITIONAL = {"JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT", "JUMP", "JUMP_NO_INTERRUPT"}
_LEAVES = {"RETURN_VALUE", "RETURN_CONST", "RERAISE", "RAISE_VARARGS"}


def reached(insts, start: int) -> list:
    """The instructions control reaches from `insts[start]` without an exception (falling
    through and jumping; a return or raise ends a path)."""
    at = {inst.offset: i for i, inst in enumerate(insts)}
    jumps = set(dis.hasjrel) | set(dis.hasjabs)
    seen, todo = set(), [start]
    while todo:
        i = todo.pop()
        if i is None or i >= len(insts) or i in seen:
            continue
        seen.add(i)
        inst = insts[i]
        if inst.opname in _LEAVES:
            continue
        if inst.opcode in jumps:
            todo.append(at.get(inst.argval))
            if inst.opname in _UNCONDITIONAL:
                continue
        todo.append(i + 1)
    return [insts[i] for i in sorted(seen)]


def _handlers_that_swallow(insts, targets) -> set:
    """The handlers (by offset) that may end the exception: on some path from the handler,
    not counting other exceptions, POP_EXCEPT is followed by anything but a re-raise (the
    end of an `except` body, a `return` in a `finally`). A `finally` block, an `except`
    that re-raises and a `with` block's cleanup only re-raise."""
    at = {inst.offset: i for i, inst in enumerate(insts)}
    jumps = set(dis.hasjrel) | set(dis.hasjabs)
    out = set()
    for target in targets:
        seen, todo = set(), [target]
        while todo:
            i = at.get(todo.pop())
            if i is None or i in seen:
                continue
            seen.add(i)
            inst = insts[i]
            if inst.opname == "POP_EXCEPT" and (i + 1 >= len(insts) or insts[i + 1].opname != "RERAISE"):
                out.add(target)
                break
            if inst.opname in _LEAVES:
                continue
            if inst.opcode in jumps:
                todo.append(inst.argval)
                if inst.opname in _UNCONDITIONAL:
                    continue
            if i + 1 < len(insts):
                todo.append(insts[i + 1].offset)
    return out


def exception_handlers(code) -> dict:
    """offset -> (handler offset, stack depth, push lasti?) for every instruction a handler covers."""
    out = {}
    for entry in dis._parse_exception_table(code):  # 3.11+: the zero-cost exception table
        for offset in range(entry.start, entry.end, 2):
            out[offset] = (entry.target, entry.depth, entry.lasti)
    return out


# -- graph breaks (breaks.py) ------------------------------------------------------------------
# what makes a value a branch takes, from 3.13: an exact bool (TO_BOOL before every branch and
# UNARY_NOT, or COMPARE_OP's bool bit); the tracer leaves values as they are, so that the
# branch decides (or breaks) on the value itself, and code it writes converts as 3.13 wants
TO_BOOL = sys.version_info >= (3, 13)


def truth(Instr, location) -> list:
    """`not not value`: the value on top made a bool."""
    return [*([Instr("TO_BOOL", location=location)] if TO_BOOL else []), Instr("UNARY_NOT", location=location),
            Instr("UNARY_NOT", location=location)]


# an instruction a graph break runs as its eager step, and what must come first (3.13: a bool)
STEP_BEFORE = {"UNARY_NOT": "TO_BOOL"} if TO_BOOL else {}

# a break at a conditional jump on a tensor's truth: opname -> whether it jumps when true
BREAK_JUMPS = {"POP_JUMP_FORWARD_IF_TRUE": True, "POP_JUMP_BACKWARD_IF_TRUE": True, "POP_JUMP_IF_TRUE": True,
               "POP_JUMP_FORWARD_IF_FALSE": False, "POP_JUMP_BACKWARD_IF_FALSE": False, "POP_JUMP_IF_FALSE": False}
# opname -> (values it pops, values it pushes): an instruction the entry runs eagerly as it
# is, at the user's line (`at_user_line(..., "step")`), so an error it raises is eager's
BREAK_STEPS = {
    "STORE_ATTR": (2, 0), "DELETE_ATTR": (1, 0), "STORE_SUBSCR": (3, 0), "DELETE_SUBSCR": (2, 0),
    "STORE_GLOBAL": (1, 0), "LOAD_ATTR": (1, 1), "BINARY_SUBSCR": (2, 1), "BINARY_OP": (2, 1),
    "COMPARE_OP": (2, 1), "CONTAINS_OP": (2, 1), "UNARY_NOT": (1, 1), "UNARY_NEGATIVE": (1, 1),
    "UNARY_INVERT": (1, 1), "IMPORT_NAME": (2, 1), "BINARY_SLICE": (3, 1), "STORE_SLICE": (4, 0),
    "UNPACK_SEQUENCE": (1, lambda inst: inst.arg),
}


def break_step(inst) -> tuple[int, int] | None:
    """(pops, pushes) of an instruction a break may run as its eager step, or None. A method
    load (3.12's LOAD_ATTR with its low bit, as 3.11's LOAD_METHOD) is none: it pushes a NULL."""
    io = BREAK_STEPS.get(inst.opname)
    if io is None or inst.opname == "LOAD_ATTR" and load_attr_pushes_null(inst):
        return None
    return io[0], io[1](inst) if callable(io[1]) else io[1]


# -- calls a graph break runs eagerly (breaks.py): where their operands sit on the stack -------
CALL_BREAKS = ("CALL", "CALL_KW", "CALL_FUNCTION_EX")  # (CALL_KW: 3.13)


def break_point(inst, code) -> bool:
    """Whether a graph break may resume at `inst` (breaks.plan's kinds: a call, a conditional
    jump, a `with`, a step the entry runs eagerly, a store into a closure's cell); at any other
    instruction a break runs the whole call eagerly, so the tracer keeps no checkpoint there."""
    return inst.opname in CALL_BREAKS or inst.opname in BREAK_JUMPS or inst.opname == "BEFORE_WITH" or \
        break_step(inst) is not None or inst.opname == "STORE_DEREF" and inst.argval in code.co_freevars


def checkpoint_kind(inst, code) -> int:
    """What the step loop keeps before `inst` (see break_point): 0, no checkpoint; 1 or 2, one
    unless the top 1 or 2 values are constants (a jump on a constant, `i % 2`: nothing there
    can break, and an unforeseen break without a checkpoint runs the whole call eagerly); 3,
    one always; 4 (a binary operator, not in place), as 2, and none either where its operands
    are tensors and numbers while nothing unusual is on; 5 (an attribute), as 1, and none either
    where it reads a module's attribute read before (see trace.interpreter.Frame._run)."""
    if not break_point(inst, code):
        return 0
    if inst.opname in BREAK_JUMPS:
        return 1
    if inst.opname == "BINARY_OP" and not BINARY_OPS[inst.arg].endswith("="):
        return 4
    if inst.opname == "LOAD_ATTR":
        return 5
    return ON_CONSTANTS.get(inst.opname, 3)


# operators that compute on Python constants without leaving the trace (not IMPORT_NAME, whose
# operands are constants too): how many of the top values they take
ON_CONSTANTS = {"BINARY_OP": 2, "COMPARE_OP": 2, "CONTAINS_OP": 2, "BINARY_SUBSCR": 2, "UNARY_NOT": 1,
                "UNARY_NEGATIVE": 1, "UNARY_INVERT": 1}


# jumps that close a loop (3.12 drops the conditional ones: a loop's test jumps forward)
BACKWARD_JUMPS = ("JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT", "POP_JUMP_BACKWARD_IF_TRUE",
                  "POP_JUMP_BACKWARD_IF_FALSE", "POP_JUMP_BACKWARD_IF_NONE", "POP_JUMP_BACKWARD_IF_NOT_NONE")


def keyword_names(inst, stack: list, kw_names: tuple, value_of) -> tuple:
    """The keyword names of the call `inst` about to run: KW_NAMES' (3.11, 3.12: the tracer
    keeps them as `kw_names`), or the constant on top of the stack (3.13's CALL_KW)."""
    return value_of(stack[-1]) if inst.opname == "CALL_KW" else kw_names


def call_layout(inst, stack: list, kw_names: tuple, null) -> dict:
    """For a call instruction about to run with `stack`: how many slots it consumes and the
    stack indices of the callable, its `self` (a method call), positional arguments and
    keyword arguments (`kw`: name -> index), or of the `*args` tuple and `**kwargs` mapping.
    `kw_names`: KW_NAMES' names (3.11, 3.12), or the constant CALL_KW finds on top (3.13)."""
    n = len(stack)
    if inst.opname in ("CALL", "CALL_KW"):
        # [NULL | method, callable | self, *args] (3.11, 3.12: names from KW_NAMES), or
        # [callable | method, NULL | self, *args] (3.13: CALL_KW takes the names from the top)
        names = n - 1 if inst.opname == "CALL_KW" else None
        if names is not None:
            n -= 1
        argc = inst.arg
        below, above = n - argc - 2, n - argc - 1
        if stack[below] is null:
            fn, self_ = above, None
        else:
            fn, self_ = below, None if stack[above] is null else above
        args = list(range(n - argc, n))
        npos = argc - len(kw_names)
        return {"consumed": argc + 2 + (names is not None), "fn": fn, "self": self_, "args": args[:npos],
                "kw": dict(zip(kw_names, args[npos:])), "star": None, "starstar": None}
    if inst.opname == "CALL_FUNCTION_EX":  # [NULL?, callable, args, kwargs if arg & 1] (3.13: callable, NULL)
        kw = inst.arg & 1
        star = n - 1 - kw
        fn = star - 2 if NULL_ABOVE_CALLABLE else star - 1
        below_null = not NULL_ABOVE_CALLABLE and fn > 0 and stack[fn - 1] is null
        return {"consumed": 2 + kw + (1 if NULL_ABOVE_CALLABLE else below_null), "fn": fn, "self": None,
                "args": [], "kw": {}, "star": star, "starstar": star + 1 if kw else None}
    raise ValueError(inst.opname)


CALL_PREFIXES = ("PRECALL", "KW_NAMES")  # instructions that set up the call just after them, not the stack
# (3.12 has no PRECALL; KW_NAMES stays)


def call_start(instructions: list, index: int) -> int:
    """The offset where the call at `instructions[index]` starts running: its KW_NAMES (the
    keyword names it takes from there, not from the stack) and PRECALL come first."""
    while index > 0 and instructions[index - 1].opname in CALL_PREFIXES:
        index -= 1
    return instructions[index].offset


# -- calls routed in code that runs eagerly (route.py) -------------------------------------
ROUTES_CALLS = SUPPORTED


def is_method_load(ins) -> bool:
    """Whether the `bytecode` Instr `ins` pushes [method, self] or [NULL, bound]: 3.11's
    LOAD_METHOD, 3.12's LOAD_ATTR and LOAD_SUPER_ATTR with their method flag."""
    if ins.name == "LOAD_METHOD":
        return True
    return ins.name in ("LOAD_ATTR", "LOAD_SUPER_ATTR") and isinstance(ins.arg, tuple) and ins.arg[0] is True


def attr_name(ins) -> str:
    """The attribute a `bytecode` LOAD_ATTR / LOAD_METHOD / LOAD_SUPER_ATTR Instr loads."""
    return ins.arg[-1] if isinstance(ins.arg, tuple) else ins.arg


def plain_method_load(Instr, ins):
    """A method load (which pushes [method, self] or [NULL, bound]) rewritten to push the
    attribute and its NULL as a plain call does -- so every call finds its callable in one
    place -- or None when `ins` loads no method."""
    if NULL_ABOVE_CALLABLE or not is_method_load(ins):
        return None  # (3.13: the callable is always in one place)
    loc = ins.location
    if ins.name == "LOAD_METHOD":
        load = Instr("LOAD_ATTR", ins.arg, location=loc)
    else:  # (3.12: the same instruction without its method flag)
        load = Instr(ins.name, (False, *ins.arg[1:]), location=loc)
    return [load, Instr("PUSH_NULL", location=loc), Instr("SWAP", 2, location=loc)]


def callable_depth(ins):
    """How deep (1: the top) the callable of call instruction `ins` sits, its method loads
    made plain (see plain_method_load); None for other instructions."""
    above = NULL_ABOVE_CALLABLE  # (3.13: [callable, NULL | self, ...])
    if ins.name == "CALL":  # [NULL, callable, *args] (after PRECALL, which leaves the stack as it is)
        return ins.arg + 1 + above
    if ins.name == "CALL_KW":  # [callable, NULL | self, *args, names] (3.13)
        return ins.arg + 3
    if ins.name == "CALL_FUNCTION_EX":  # [NULL, callable, args, kwargs if arg & 1]
        return 2 + (ins.arg & 1) + above
    return None


# (pops, pushes) of the instructions a call's callable and arguments are usually made of
# (3.11): enough to find, walking back from a call, which instruction pushed its callable
STACK_IO = {
    "LOAD_FAST": (0, 1), "LOAD_CONST": (0, 1), "LOAD_DEREF": (0, 1), "LOAD_CLOSURE": (0, 1),
    "LOAD_NAME": (0, 1), "LOAD_CLASSDEREF": (0, 1), "PUSH_NULL": (0, 1),
    "LOAD_METHOD": (1, 2), "LOAD_GLOBAL": lambda arg: (0, 2 if arg[0] else 1), "BINARY_OP": (2, 1),
    "BINARY_SUBSCR": (2, 1), "COMPARE_OP": (2, 1), "IS_OP": (2, 1), "CONTAINS_OP": (2, 1),
    "UNARY_NEGATIVE": (1, 1), "UNARY_NOT": (1, 1), "UNARY_INVERT": (1, 1), "UNARY_POSITIVE": (1, 1),
    "LOAD_ATTR": lambda arg: (1, 2 if isinstance(arg, tuple) and arg[0] else 1),
    "BUILD_TUPLE": lambda n: (n, 1), "BUILD_LIST": lambda n: (n, 1), "BUILD_SET": lambda n: (n, 1),
    "BUILD_MAP": lambda n: (2 * n, 1), "BUILD_CONST_KEY_MAP": lambda n: (n + 1, 1),
    "BUILD_SLICE": lambda n: (n, 1), "BUILD_STRING": lambda n: (n, 1), "LIST_TO_TUPLE": (1, 1),
    "FORMAT_VALUE": lambda flags: (2 if flags & 4 else 1, 1), "GET_ITER": (1, 1),
    "PRECALL": (0, 0), "KW_NAMES": (0, 0), "NOP": (0, 0),
    # 3.12
    "LOAD_FAST_CHECK": (0, 1), "LOAD_FAST_AND_CLEAR": (0, 1), "BINARY_SLICE": (3, 1), "CALL_INTRINSIC_1": (1, 1),
    "LOAD_SUPER_ATTR": lambda arg: (3, 2 if arg[0] else 1),
    "CALL": lambda n: (n + 2, 1), "CALL_FUNCTION_EX": lambda flags: (3 + (flags & 1), 1),
    "LIST_EXTEND": lambda i: (i + 1, i), "DICT_MERGE": lambda i: (i + 1, i), "DICT_UPDATE": lambda i: (i + 1, i),
    # 3.13
    "LOAD_FAST_LOAD_FAST": (0, 2), "TO_BOOL": (1, 1), "CALL_KW": lambda n: (n + 3, 1), "CONVERT_VALUE": (1, 1),
    "FORMAT_SIMPLE": (1, 1), "FORMAT_WITH_SPEC": (2, 1),
}


def pushes_value_at(ins, h: int) -> bool:
    """Whether push `h` (1: the last) of LOAD_GLOBAL / a method load `ins` is the value, not the
    NULL it may push with it (below it until 3.12, above it from 3.13)."""
    if NULL_ABOVE_CALLABLE and stack_io(ins)[1] == 2:
        return h == 2
    return h == 1


def stack_io(ins):
    """(pops, pushes) of `ins`, or None for an instruction not in STACK_IO."""
    io = STACK_IO.get(ins.name)
    return io(ins.arg) if callable(io) else io


def method_form_call(instrs: list, index: int) -> bool:
    """Whether the call at `instrs[index]` is one 3.11's compiler makes in method form, with no
    NULL below the callable (the value callable_depth points at is an argument): a decorator
    applied to what MAKE_FUNCTION or the decorator below it made, a comprehension called on
    its iterator (GET_ITER), an assert's `AssertionError(message)`, a `with` block's
    `__exit__(None, None, None)`. (A call of a call's result, `f()()`, looks like a chain
    of decorators: it is not routed.)"""
    if NULL_ABOVE_CALLABLE:
        return False  # (3.13: the callable is always in one place)
    ins = instrs[index]
    end = index  # (3.11: the call's PRECALL comes first)
    if PY311:
        if getattr(instrs[index - 1], "name", None) != "PRECALL":
            return False
        end -= 1
    prev = [getattr(i, "name", None) for i in instrs[max(0, end - 3):end]]
    if ins.name == "CALL" and ins.arg == 0:
        if prev[-1:] in (["MAKE_FUNCTION"], ["GET_ITER"], ["CALL"]):
            return True
        nxt = instrs[index + 1] if index + 1 < len(instrs) else None
        return getattr(nxt, "name", None) == "RAISE_VARARGS"  # (assert x, message)
    return ins.name == "CALL" and ins.arg == 2 and len(prev) == 3 and all(
        name == "LOAD_CONST" and i.arg is None for name, i in zip(prev, instrs[end - 3:end]))


def routed(Instr, router, depth: int, location) -> list:
    """Instructions that replace the callable `depth` deep with `router(callable)`."""
    if NULL_ABOVE_CALLABLE:  # [c] -> [router, c] -> [router, NULL, c] -> [router(c)]
        wrap = [Instr("LOAD_CONST", router, location=location), Instr("SWAP", 2, location=location),
                Instr("PUSH_NULL", location=location), Instr("SWAP", 2, location=location),
                Instr("CALL", 1, location=location)]
    else:  # [c] -> [NULL, c] -> [NULL, router, c] -> [router(c)]
        wrap = [Instr("PUSH_NULL", location=location), Instr("SWAP", 2, location=location),
                Instr("LOAD_CONST", router, location=location), Instr("SWAP", 2, location=location),
                *([Instr("PRECALL", 1, location=location)] if PY311 else []), Instr("CALL", 1, location=location)]
    if depth == 1:
        return wrap
    return [Instr("SWAP", depth, location=location), *wrap, Instr("SWAP", depth, location=location)]


BINARY_OPS = dict(enumerate(symbol for _, symbol in dis._nb_ops))  # arg -> '+', '+=', ...

# -- the raw splice (fastsplice.py) writes 3.11's encodings: inline caches, exception table ---
FAST_SPLICE = SUPPORTED
# the forward conditional jumps it writes, and how a call and an attribute load are encoded
RAW_JUMPS = ({"true": "POP_JUMP_FORWARD_IF_TRUE", "false": "POP_JUMP_FORWARD_IF_FALSE",
              "not_none": "POP_JUMP_FORWARD_IF_NOT_NONE"} if PY311 else
             {"true": "POP_JUMP_IF_TRUE", "false": "POP_JUMP_IF_FALSE", "not_none": "POP_JUMP_IF_NOT_NONE"})
RAW_PRECALL = PY311  # a call is PRECALL n; CALL n (3.11) or CALL n
RAW_LOAD_CLOSURE = "LOAD_FAST" if LOAD_FAST_LOADS_CELLS else "LOAD_CLOSURE"


def raw_load_attr_arg(name_index: int) -> int:
    """LOAD_ATTR's oparg for a plain attribute load (3.12 keeps the method flag in bit 0)."""
    return name_index if PY311 else name_index << 1


def cache_entries(opcode: int) -> int:
    """Inline CACHE units after an instruction (3.11+; 3.13 keys them by name)."""
    table = dis._inline_cache_entries
    return table.get(dis.opname[opcode], 0) if isinstance(table, dict) else table[opcode]


def exception_entries(code) -> list:
    """The exception table's entries (start, end, target in bytes; depth; lasti)."""
    return dis._parse_exception_table(code)


def except_varint(value: int, start: bool = False) -> bytes:
    chunks = [value & 63]
    value >>= 6
    while value:
        chunks.append(value & 63)
        value >>= 6
    chunks.reverse()
    out = bytearray(c | 0x40 for c in chunks[:-1]) + bytes((chunks[-1],))
    if start:
        out[0] |= 0x80
    return bytes(out)


# 3.13's instructions on two locals (4 bits of the oparg each), and the pair each one is
SUPER_INSTRUCTIONS = {"LOAD_FAST_LOAD_FAST": ("LOAD_FAST", "LOAD_FAST"),
                      "STORE_FAST_LOAD_FAST": ("STORE_FAST", "LOAD_FAST"),
                      "STORE_FAST_STORE_FAST": ("STORE_FAST", "STORE_FAST")}


def to_code(bc, stacksize: int | None = None, original: types.CodeType | None = None) -> types.CodeType:
    """`bc.to_code()` (a `bytecode` library Bytecode), with 3.13's two-local instructions split
    in two where a local's index no longer fits in 4 bits: the library numbers the locals
    anew (a resume function's parameters come first) and packs the fields unchecked, so
    `return (a, b)` would read the wrong locals. `stacksize` (a bound on what the code pushes) and
    `original` (the code it was made from): where the library's own count fails -- a start inside a
    `with` whose handler it reaches from a `raise` before the block's unreachable beginning -- the
    code is made with that size and its handlers get the original's depths (Unsupported where they
    do not correspond one to one: then no depth can be trusted)."""
    code = _to_code(bc, stacksize, original)
    index = {name: i for i, name in enumerate(code.co_varnames)}
    far = [i for i, ins in enumerate(bc) if getattr(ins, "name", None) in SUPER_INSTRUCTIONS
           and any(index.get(name, 16) > 15 for name in ins.arg)]
    if not far:
        return code
    for i in reversed(far):
        ins = bc[i]
        first, second = SUPER_INSTRUCTIONS[ins.name]
        bc[i:i + 1] = [type(ins)(first, ins.arg[0], location=ins.location),
                       type(ins)(second, ins.arg[1], location=ins.location)]
    return _to_code(bc, stacksize, original)


def _to_code(bc, stacksize: int | None, original: types.CodeType | None) -> types.CodeType:
    try:
        return bc.to_code()
    except RuntimeError as e:
        if stacksize is None or original is None or "stacksize" not in str(e):
            raise
    code = bc.to_code(stacksize=stacksize, compute_exception_stack_depths=False)
    return with_original_depths(code, original, "code whose stack the bytecode library could not count")


def with_original_depths(new: types.CodeType, code: types.CodeType, what: str | None = None) -> types.CodeType:
    """`new` (made from `code` by the `bytecode` library) with each exception handler at the
    stack depth the original gives it, when their handlers correspond one to one. The library
    derives the depths anew, and gets some wrong: a resume function that starts inside a `try`
    (a break at a call there) leaves the `try`'s own beginning unreachable; 3.12's nested
    handlers (a `raise` in an `except` in a `try`). An exception would then unwind to a stack
    that is not there. Code between the handlers (a prologue, routed calls) leaves them as
    deep as they were. Handlers that do not correspond: `new` as it is, or (`what` given,
    a resume function) Unsupported."""
    old_entries, new_entries = exception_entries(code), exception_entries(new)
    if [e.depth for e in old_entries] == [e.depth for e in new_entries]:
        return new
    if len(old_entries) != len(new_entries) or any(o.lasti != n.lasti for o, n in zip(old_entries, new_entries)):
        if what is None:
            return new
        raise Unsupported(f"{code.co_name}: {what} whose handlers do not match the original's")
    table = bytearray()
    for o, n in zip(old_entries, new_entries):
        table += except_varint(n.start // 2, start=True) + except_varint((n.end - n.start) // 2)
        table += except_varint(n.target // 2) + except_varint((o.depth << 1) | int(n.lasti))
    stack = max(new.co_stacksize, code.co_stacksize + len(new.co_varnames))
    return new.replace(co_exceptiontable=bytes(table), co_stacksize=stack)
