"""Graph breaks: compile what was traced before an unsupported step, run that one step
eagerly, and continue in a resume function that is compiled in its turn.

    def f(x):                      entry of f:
        y = x * 2                      ___v = (gt, y) from graph 1
        if y.sum() > 0:                if ___v[0]:
            z = y.relu()                   return resume_in_f_at_3(x=x, y=___v[1])   # graph 2
        else:                          return resume_in_f_at_5(x=x, y=___v[1])       # graph 3
            z = y.tanh()
        return z + 1

The break is taken at the root frame's instruction being run when the tracer gave up (a
call made there, even when the unsupported part is deep inside it, runs eagerly as a
whole), from a checkpoint of its stack and locals taken just before that instruction.
What the entry runs eagerly depends on that instruction (`kind`):

* call  -- the call itself (print, .item(), a C function, rewrite.graph_break()); a call of
           a Python function or module runs through a jitted copy of the callee
           (rewrite/callees.py), so the callee's frame gets its own graphs and breaks: the
           frame hook Dynamo has, along the path where the tracer gave up. `CALL` and
           `CALL_FUNCTION_EX` (`func(*args, **kwargs)`, as decorators call) both are;
* call_in_try -- a call inside a `try`, or inside a `with` block over a context manager
           whose `__exit__` is on the stack (the user's own, traced or not): run as `call`,
           and when it raises, a second resume function -- the rest of the frame as it is --
           raises the exception again where the call stood, so it meets the user's handler
           or `__exit__` there;
* jump  -- the branch test (`if y.sum() > 0`), picking one of two resume functions;
* with  -- entering a context manager the tracer does not know (the resume function
           starts inside the block, with its `__exit__` on the stack);
* step  -- one other instruction of compat's BREAK_STEPS table (an attribute or global store, an
           operator on values the tracer does not understand, ...).

A `with torch.no_grad()` (or enable_grad/set_grad_enabled, autocast, inference_mode,
record_function) open at the break is left by the graph, re-entered (a fresh, equal one)
around the eager step, and re-entered again by the resume function's first instructions, so
exceptions raised in any part still leave through the user's handler (a profiler range is
then three ranges of that name).
Breaks inside `try` other than at a call, other than at a call inside a `with` block over a
user's context manager (its `__exit__` may swallow exceptions), after a change to a list, dict
or object that existed at the checkpoint that cannot be undone, in functions whose locals a
closure made before the break captures (cells), in generators, or with a stack the entry
cannot rebuild make the whole call run eagerly. (What the failing part changed of values
that existed at the checkpoint is undone first: the eager step changes them again.)
"""
from __future__ import annotations

import types
import weakref

import torch

from . import logs, ops
from .bytecode.compat import (BACKWARD_JUMPS, BREAK_JUMPS, CALL_BREAKS, break_step, call_layout, call_start,
                              keyword_names, reached)
from .bytecode.resume import STACK_PREFIX, at_user_line, is_resume, resume_code
from .errors import Unsupported, WholeCallEager
from .guards.source import param_name
from .ops.builtins import FRAME_READER_NAMES
from .ops.contexts import Exit
from .registry import Protocol
from .trace.interpreter import untraced_with_open
from .trace.opcodes import Lazy
from .values.vars import (NULL, ConstVar, ContextExitVar, GradModeVar, IteratorVar, RecordedContextVar, TupleVar,
                          mutations, undo_to_checkpoint)

# what a break needs of the layer above (jitted functions: rewrite/callees.py fills it)
JIT = Protocol("JIT", "rewrite.breaks",
               "route_of",  # (dispatcher) -> the router its eagerly-run code passes callables through
               "plain_origin",  # (globals, code) -> what the routing pass may leave unrouted
               "jit_resume",  # (fn, dispatcher) -> None: a resume function jitted as its caller is
               "routes")  # (callable, dispatcher) -> whether its routed call runs compiled code of its own

# the one step written as source: a free variable's cell is the tiny function's to reach
STORE_DEREF = lambda inst, s: [f"{param_name(inst.argval)}.cell_contents = {s[0]}"]  # noqa: E731

# made once per key while the entries that call them live (each holds its globals, so the
# id in a key is not reused while its item is there)
_RESUMES: "weakref.WeakValueDictionary" = weakref.WeakValueDictionary()  # (code, id(globals), offset,
# slots, locals, options) -> jitted resume function
_AT_LINE: "weakref.WeakValueDictionary" = weakref.WeakValueDictionary()  # (code, offset, what, id(globals))
# -> at_user_line(...)


def _at_line(consts, code, offset: int, what: str, n_in: int = 0, n_out: int = 1, globals_=None) -> str:
    consts[f"___{what}_at_line"] = at_line(code, offset, what, n_in, n_out, globals_)
    return f"___{what}_at_line"


def at_line(code, offset: int, what: str, n_in: int = 0, n_out: int = 1, globals_=None):
    """`resume.at_user_line(...)`, made once per key; it carries how it was made
    (`__rewrite_made__`: the persistent cache makes it again from that)."""
    key = (code, offset, what, id(globals_))
    fn = _AT_LINE.get(key)
    if fn is None or (globals_ is not None and fn.__globals__ is not globals_):
        fn = _AT_LINE[key] = at_user_line(code, offset, what, n_in, n_out, globals_)
        fn.__rewrite_made__ = ("at_line", offset, what, n_in, n_out, globals_ is not None)
    return fn


def resume_function(dispatcher, offset: int, slots: tuple, local_names: tuple, name: str, compiled: bool = True,
                    raising: bool = False):
    """The resume function of `dispatcher`'s code at `offset` (see Break.resume), made once per
    key; it carries how it was made (`__rewrite_made__`, for the persistent cache)."""
    code = dispatcher.code
    # code objects compare by value: the same source run in two modules must not share globals
    key = (code, id(dispatcher.globals), offset, slots, local_names, dispatcher.options, compiled,
           raising, dispatcher.share)  # (a decorator's copies: one resume function per wrapped function)
    fn = _RESUMES.get(key)
    if fn is None or fn.__globals__ is not dispatcher.globals:
        router = None if compiled else JIT.route_of(dispatcher)  # (jit routes the others)
        new = resume_code(code, offset, slots, local_names, name, router,
                          JIT.plain_origin(dispatcher.globals, code), raising)
        fn = types.FunctionType(new, dispatcher.globals, name,
                                None, tuple(types.CellType() for _ in code.co_freevars) or None)
        if compiled:
            JIT.jit_resume(fn, dispatcher)
        fn.__rewrite_made__ = ("resume", offset, slots, local_names, name, compiled, raising)
        _RESUMES[key] = fn
    return fn


def plan(tracer, error: Unsupported):
    """The break to take for `error`, or None when the whole call must run eagerly."""
    root, cp = tracer.root, tracer.root.checkpoint
    code = tracer.code
    if isinstance(error, WholeCallEager) or FRAME_READER_NAMES & set(code.co_names):
        return None  # (a resume function's frame holds other locals than the original's)
    if cp is None or code.co_cellvars and tracer.root_cells_shared or code.co_flags & 0x20:
        return None  # (cells no closure shares yet go to the resume function as values)
    if any(gen.why_not_rebuilt() is not None for gen in tracer.pending):
        return None  # (a suspended generator the trace ran, whose closing runs code where eager's last
        # reference to it goes, that the entry cannot make again for the resume function to hold)
    inst = root.instructions[cp.ip]  # (a break point: compat.break_point, the kinds below)
    if untraced_with_open(cp.stack):  # an exception from the eager step must meet the user's __exit__:
        if inst.opname not in CALL_BREAKS:  # a call runs in the resume function, as in a `try`
            return None
        kind = "call_in_try"
    elif inst.offset in root.user_try:
        if inst.opname not in CALL_BREAKS:
            return None  # an exception from the eager step must meet the user's handler
        kind = "call_in_try"  # (what it raises is raised again in the user's handler)
    elif inst.opname in CALL_BREAKS:
        kind = "call"
    elif inst.opname in BREAK_JUMPS:
        kind = "jump"
    elif inst.opname == "BEFORE_WITH":
        kind = "with"
    elif break_step(inst) is not None or inst.opname == "STORE_DEREF" and inst.argval in code.co_freevars:
        kind = "step"
    else:
        return None
    if is_resume(code) and _in_loop(root.instructions, cp.ip):
        error.in_loop = True  # (resume functions would chain, one per turn of the loop)
        return None
    if cp.ip + 1 >= len(root.instructions):
        return None
    if cp.mutations != mutations():  # the failing part changed what existed at the checkpoint:
        if not undo_to_checkpoint():  # the eager step changes it again, so the trace forgets it
            return None
        tracer.side_effects.undo_to_checkpoint()
    if any(isinstance(v, ContextExitVar) and not isinstance(v.ctx, GradModeVar)
           and not (isinstance(v.ctx, RecordedContextVar) and v.ctx.fresh is not None) for v in cp.stack):
        return None  # (a context the entry could not enter again around the eager step)
    base = _grad_mode_outside(cp)
    if base is None:
        return None
    return Break(kind, inst, root.instructions[cp.ip + 1].offset, cp, error, base)


IN_LOOP = (" -- again inside a loop, in the resume function after a break there: the rest of the call runs "
           "eagerly (its callees compile on their own), not a new resume function for each turn")


def _in_loop(instructions: list, ip: int) -> bool:
    """Whether the instruction at `ip` sits in a loop: a backward jump that the code after it
    reaches without an exception goes back to it or before it. (3.12 puts a `with` block's
    exit handler after the function's end, jumping back to after the block: no loop.)"""
    offset = instructions[ip].offset
    return any(i.opname in BACKWARD_JUMPS and i.argval <= offset for i in reached(instructions, ip + 1))


def _grad_mode_outside(cp) -> bool | None:
    """The grad mode outside the traced `with` blocks open at the checkpoint, when entering
    fresh no_grad/enable_grad contexts from it in turn gives back the mode at the break and
    each restores what the original would (None: it does not, so do not break here)."""
    contexts = [v.ctx for v in cp.stack if isinstance(v, ContextExitVar) and isinstance(v.ctx, GradModeVar)]
    if not contexts:
        return cp.grad_enabled
    mode = base = contexts[0].prev
    for ctx in contexts:
        if ctx.prev != mode:
            return None
        mode = ctx.mode
    return base if mode == cp.grad_enabled else None


def slot_kind(v) -> str:
    if v is NULL:
        return "null"
    if isinstance(v, IteratorVar) and v.step is None and v.on_next is None:
        return "list_iter" if v.over is not None else "iter"
    if isinstance(v, ContextExitVar):
        return "ctx"
    return "value"


def slot_value(v, kind: str):
    """What a resume function takes for a stack slot of that kind (`resume.resume_code`): for a
    `for` loop's iterator, what its first instructions rebuild it from -- (the list, items
    taken) for a list, the items left otherwise; None for a NULL or a traced context."""
    if kind == "list_iter":
        return TupleVar([v.over, ConstVar(v.pos)])
    if kind == "iter":
        return TupleVar(v.items[v.pos:])
    return ConstVar(None) if kind in ("null", "ctx") else v


class Break:
    def __init__(self, kind, inst, next_offset, checkpoint, error, grad_mode_outside: bool):
        self.kind, self.inst, self.next_offset, self.cp, self.error = kind, inst, next_offset, checkpoint, error
        self.grad_mode_outside = grad_mode_outside
        # the bound locals, in binding order -- but a resume function's own parameters for the stack
        # it rebuilds (`___stack0`, ...): only its first instructions read them
        self.local_names = tuple(n for n in checkpoint.locals if not n.startswith(STACK_PREFIX))
        self.dispatcher = None
        # the stack slots below what the eager step consumes go on to the resume function
        names = keyword_names(inst, checkpoint.stack, checkpoint.kw_names, ops.python_value)
        self.call = call_layout(inst, checkpoint.stack, names, NULL) if kind.startswith("call") else None
        consumed = self.call["consumed"] if kind.startswith("call") else \
            {"jump": 1, "with": 1}.get(kind) or break_step(inst)[0]
        self.n_below = len(checkpoint.stack) - consumed

    def values(self, tracer):
        """The Vars the entry rebuilds: the stack, then the live locals. A `for` loop's iterator
        goes as what the resume function's first instructions rebuild it from: (the list, items
        taken) for a list, the items left otherwise; NULLs and traced contexts as None."""
        out = []
        local_vars = [self.cp.locals[n] for n in self.local_names]
        for i, v in enumerate(self.cp.stack):
            kind = slot_kind(v)
            if kind in ("list_iter", "iter") and i >= self.n_below:
                kind = "value"  # an argument of the eager step: passed as the iterator itself
            if kind in ("list_iter", "iter") and any(v is u for u in local_vars):
                raise Unsupported("a loop's iterator that is also a local variable")
            out.append(slot_value(v, kind))
        for v in local_vars:
            out.append(tracer.wrap(v.value, v.source) if isinstance(v, Lazy) else v)
        return TupleVar(out)

    def end_graph(self, graph) -> None:
        """The graph leaves the recorded contexts open at the break (innermost first), and grad
        mode as it is outside the open `with` blocks (the entry re-enters them all)."""
        for v in reversed(self.cp.stack):
            ctx = v.ctx if isinstance(v, ContextExitVar) else None
            if isinstance(ctx, RecordedContextVar) and ctx.node is not None:
                graph.record_effect(Exit(ctx.node.target), (ctx.node,))
        if self.grad_mode_outside != self.cp.grad_enabled:
            graph.set_grad(self.grad_mode_outside)

    def body(self, tracer, dispatcher, consts) -> list[str]:
        """Entry lines after `___v = (<stack values>, <locals>)` has been computed."""
        stack = self.cp.stack
        n_stack = len(stack)
        value = [f"___v[{i}]" for i in range(n_stack + len(self.local_names))]
        local_args = value[n_stack:]
        contexts = []  # a fresh no_grad()/enable_grad()/autocast(...) for each traced `with` open at the break
        for i, v in enumerate(stack):
            if isinstance(v, ContextExitVar):
                name = f"___ctx{len(contexts)}"
                if isinstance(v.ctx, RecordedContextVar):
                    consts[name] = v.ctx.fresh
                else:
                    consts[name] = torch.enable_grad if v.ctx.mode else torch.no_grad
                value[i] = f"{name}()"
                contexts.append(value[i])

        def passed(below):  # what the resume function takes for the stack slots below
            return [value[i] for i, v in enumerate(below) if v is not NULL]

        def inside_contexts(lines):
            if not contexts:
                return lines
            return [f"with {', '.join(contexts)}:", *("    " + line for line in lines)]

        below = stack[:self.n_below]
        if self.kind == "jump":
            taken = self.resume(tracer, dispatcher, consts, self.inst.argval, below, ())
            fallthrough = self.resume(tracer, dispatcher, consts, self.next_offset, below, ())
            args = ", ".join([*passed(below), *local_args])
            test = f"{_at_line(consts, tracer.code, self.inst.offset, 'truth')}({value[n_stack - 1]})"
            return [f"if {test}:" if BREAK_JUMPS[self.inst.opname] else f"if not {test}:",
                    f"    return {taken}({args})",
                    f"return {fallthrough}({args})"]
        if self.kind.startswith("call"):
            c = self.call
            args = [value[i] for i in ([c["self"]] if c["self"] is not None else []) + c["args"]]
            pos = f"({', '.join(args)}{',' if len(args) == 1 else ''})" if c["star"] is None else value[c["star"]]
            kwargs = "{" + ", ".join(f"{k!r}: {value[i]}" for k, i in c["kw"].items()) + "}" \
                if c["starstar"] is None else value[c["starstar"]]
            # the callee's frame gets its own graphs: a jitted copy (see rewrite/callees.py)
            consts["___route"] = JIT.route_of(dispatcher)
            fn = f"___route({value[c['fn']]})"
            # the user's line in tracebacks; the function's globals for what reads them (globals())
            call = _at_line(consts, tracer.code, self.inst.offset, "call", globals_=dispatcher.globals)
            lines, results = [f"___r0 = {call}({fn}, {pos}, {kwargs})"], ["___r0"]
        elif self.kind == "with":
            consts["___enter"] = enter
            lines, results = [f"___r0, ___r1 = ___enter({value[n_stack - 1]})"], ["___r0", "___r1"]
        elif self.inst.opname == "STORE_DEREF":
            lines, results = STORE_DEREF(self.inst, value[n_stack - 1:n_stack]), []
        else:
            n_in, n_out = break_step(self.inst)
            step = _at_line(consts, tracer.code, self.inst.offset, "step", n_in, n_out, dispatcher.globals)
            call = f"{step}({', '.join(value[n_stack - n_in:n_stack])})"
            results = [f"___r{i}" for i in range(n_out)]
            lines = [f"{call}" if n_out == 0 else f"___r0 = {call}" if n_out == 1 else
                     f"{', '.join(results)}, = {call}"]
        resume = self.resume(tracer, dispatcher, consts, self.next_offset, below, results)
        go_on = f"return {resume}({', '.join([*passed(below), *results, *local_args])})"
        if self.kind == "call_in_try":
            # inside a try (or a with block over the user's own context manager): what the call
            # raises goes to a resume function that raises it again where the call stood, so it
            # meets the user's handler (or __exit__) there, as eagerly -- outside this `except`, so
            # that nothing later takes it for the exception being handled
            start = call_start(tracer.root.instructions, self.cp.ip)  # (its KW_NAMES too)
            raising = self.resume(tracer, dispatcher, consts, start, stack, (), compiled=False, raising=True)
            return ["try:", *("    " + line for line in inside_contexts(lines)),
                    "except BaseException as ___e:", "    ___x = ___e",
                    "else:", f"    {go_on}",
                    f"return {raising}({', '.join([*passed(stack), '___x', *local_args])})"]
        return [*inside_contexts(lines), go_on]

    def resume(self, tracer, dispatcher, consts, offset: int, below, results, compiled: bool = True,
               raising: bool = False) -> str:
        """An expression for the jitted resume function at `offset` (`compiled=False`: not
        jitted; `raising`: one that raises the exception it is given there): one per code,
        offset and frame layout; made per call (sharing its code and cache) when the function
        has a closure."""
        code = tracer.code
        slots = (*map(slot_kind, below), *("value" for _ in results))
        fn = resume_function(dispatcher, offset, slots, self.local_names,
                             f"resume_in_{code.co_name}_at_{_line_of(tracer.root, offset)}", compiled, raising)
        name = f"___resume{sum(k.startswith('___resume') for k in consts)}"
        consts[name] = fn
        if not code.co_freevars:
            return name
        # the same code over this call's cells: FunctionType is cheap, the cache is per code
        consts["___function"], consts["___G"] = types.FunctionType, dispatcher.globals
        cells = ", ".join(param_name(n) for n in code.co_freevars)
        return f"___function({name}.__code__, ___G, {name}.__name__, None, ({cells},))"

    def log(self, qualname: str) -> None:
        if logs.enabled("graph_breaks"):
            logs.get("graph_breaks").debug("Graph break in %s: %s", qualname, self.error)


def enter(ctx):
    """What BEFORE_WITH does: (the bound __exit__, the result of __enter__)."""
    cls = type(ctx)
    try:
        enter_, exit_ = cls.__enter__, cls.__exit__
    except AttributeError:
        raise TypeError(f"'{cls.__name__}' object does not support the context manager protocol") from None
    bound_exit = exit_.__get__(ctx, cls)
    return bound_exit, enter_.__get__(ctx, cls)()


def _line_of(frame, offset: int) -> int:
    line = frame.code.co_firstlineno
    for inst in frame.instructions:
        if inst.positions is not None and inst.positions.lineno is not None:
            line = inst.positions.lineno
        if inst.offset >= offset:
            return line
    return line
