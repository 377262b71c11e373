"""Calls routed through a function, in the part of rewritten code that runs eagerly.

Dynamo's frame hook sees every frame its compiled functions' eager parts call. rewrite has
none, so when a jitted function's original bytecode runs -- a fallback entry, a call run
again eagerly -- the functions it calls would run uncompiled, and so on down: a model whose
top-level forward cannot be traced would compile nothing at all. So the original part of
the rewritten code passes each call's callable through `router` first (see
`rewrite.callees.router`): a user function comes back as its jitted copy, anything else as
it is. Only calls are touched; every other instruction, and every location, is the
original's. The version-dependent pieces (where a call's callable sits, how a method load
is spelled) are `compat`'s.
"""
from __future__ import annotations

import types

from bytecode import Bytecode, Instr

from . import compat


def route_calls(instrs: list, router, plain=None) -> list:
    """`instrs` (bytecode's Instr, Label and try markers) with every call's callable passed
    through `router` just before the call -- except where `plain(origin)` says the callable
    is one the router always hands back as it is (`origin`: where it was loaded from, see
    `producer`; a builtin, a torch function), so those calls cost nothing more. (A method
    load is made plain only for a call that is routed: one that is not keeps its fast form.)"""
    routes, keep = {}, set()  # call index -> its callable's depth; method loads left as they are
    for i, ins in enumerate(instrs):
        depth = compat.callable_depth(ins) if isinstance(ins, Instr) else None
        if depth is None:
            continue
        form = True if compat.NULL_ABOVE_CALLABLE else _plain_form(instrs, i, depth)
        if form is False or form is None and compat.method_form_call(instrs, i):
            continue
        at, where, _ = producer(instrs, i, depth)
        if plain is not None and where is not None and plain(where):
            if compat.is_method_load(instrs[at]):
                keep.add(at)
            continue
        routes[i] = depth
    out = []
    for i, ins in enumerate(instrs):
        if not isinstance(ins, Instr):
            out.append(ins)
            continue
        if i in routes:
            at = len(out)  # before what sets the call up (3.11: KW_NAMES, PRECALL), after any label
            while at > 0 and isinstance(out[at - 1], Instr) and out[at - 1].name in compat.CALL_PREFIXES:
                at -= 1
            out[at:at] = compat.routed(Instr, router, routes[i], ins.location)
        plain_load = None if i in keep else compat.plain_method_load(Instr, ins)
        out.extend([ins] if plain_load is None else plain_load)
    return out


def _plain_form(instrs: list, index: int, depth: int):
    """Whether the call at `index` has the NULL below its callable (or a method load that
    will push one): only then is the value `depth` deep its callable. The compiler makes some
    calls in method form with no method load -- a decorator applied (`dec(<new function>)`),
    a comprehension called on its iterator, a `with` block's `__exit__`, an assert's message
    -- and the value there is an argument, which must reach the call as it is. None when
    straight-line code does not tell (a conditional expression among the arguments): then
    compat.method_form_call knows those forms by their instructions."""
    at, _, h = producer(instrs, index, depth + 1)
    if at is None:
        return None
    ins = instrs[at]
    return ins.name == "PUSH_NULL" or h == 2 and (compat.is_method_load(ins) or ins.name == "LOAD_GLOBAL")


def producer(instrs: list, index: int, depth: int):
    """(index, origin, h) of the instruction that pushed the value `depth` deep on the stack
    just before `instrs[index]`, as far as straight-line code says -- origin: ("global", name),
    ("local", name), ("attr", <origin>, name) or None; h: which of its pushes it is (1: its
    last) -- or (None, None, None) when control flow joins on the way or an instruction on it
    is not in compat.STACK_IO."""
    h, i = depth, index - 1
    while i >= 0:
        ins = instrs[i]
        if not isinstance(ins, Instr):
            return None, None, None  # a label or a try boundary: more than one way here
        io = compat.stack_io(ins)
        if io is None:
            return None, None, None
        pops, pushes = io
        if h <= pushes:  # this instruction pushed it
            if ins.name == "LOAD_GLOBAL" and compat.pushes_value_at(ins, h):  # (not the NULL it may push)
                return i, ("global", ins.arg[1] if isinstance(ins.arg, tuple) else ins.arg), h
            if ins.name == "LOAD_FAST":
                return i, ("local", ins.arg), h
            if ins.name in ("LOAD_ATTR", "LOAD_METHOD"):  # (either slot of a method load)
                base = producer(instrs, i, 1)[1]
                return i, (None if base is None else ("attr", base, compat.attr_name(ins))), h
            return i, None, h
        h += pops - pushes
        i -= 1
    return None, None, None


def routed_code(code, router, plain_for=None):
    """`code` with every call's callable passed through `router`, in the functions it defines
    too (`_call_impl`'s closure `inner()`, which calls the forward), and no prologue: a frame
    of torch's own that calls the user's code, run as it is but for what it calls (see
    rewrite/callees.py's rule). `plain_for(code)`: the `plain` of each code (route_calls).
    Generators it defines are left as they are."""
    bc = Bytecode.from_code(code)
    at = compat.preamble_end(bc)
    bc[at:] = route_calls(bc[at:], router, plain_for(code) if plain_for is not None else None)
    for ins in bc:
        if isinstance(ins, Instr) and isinstance(ins.arg, types.CodeType) and \
                not ins.arg.co_flags & compat.CO_GENERATOR_LIKE:
            ins.arg = routed_code(ins.arg, router, plain_for)
    return compat.with_original_depths(compat.to_code(bc, code.co_stacksize + _ROUTING_DEPTH, code), code)


_ROUTING_DEPTH = 3  # (what a routed call pushes above its callable while it routes it: compat.routed)
