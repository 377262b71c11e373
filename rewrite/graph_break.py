"""Graph breaks: compile what was traced before an unsupported call or tensor-valued branch,
run that one step eagerly, and continue in a resume function that is compiled in its turn.

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
Breaks inside `try`, in functions with closures or cells, or with a stack the entry cannot
rebuild still make the whole call run eagerly.
"""
from __future__ import annotations

import types

from . import api, logs
from .bytecode.resume import resume_code
from .errors import Unsupported
from .trace.values import NULL, ConstVar, IteratorVar, TensorVar, TupleVar, mutations

CALLS = {"CALL"}
JUMPS = {"POP_JUMP_FORWARD_IF_TRUE": True, "POP_JUMP_BACKWARD_IF_TRUE": True,
         "POP_JUMP_FORWARD_IF_FALSE": False, "POP_JUMP_BACKWARD_IF_FALSE": False}

_RESUMES: dict = {}  # (code, offset, n_stack, locals, options) -> jitted resume function


def plan(tracer, error: Unsupported):
    """The break to take for `error`, or None when the whole call must run eagerly."""
    root, cp = tracer.root, tracer.root.checkpoint
    code = tracer.code
    if cp is None or code.co_cellvars or code.co_freevars or code.co_flags & 0x20:
        return None
    inst = root.instructions[cp.ip]
    if inst.offset in root.handled:
        return None
    if inst.opname in CALLS:
        kind = "call"
    elif inst.opname in JUMPS and isinstance(cp.stack[-1], TensorVar):
        kind = "jump"
    else:
        return None
    if cp.ip + 1 >= len(root.instructions) or cp.mutations != mutations():
        return None  # a list or dict changed after the checkpoint: resuming would repeat that
    return Break(kind, inst, root.instructions[cp.ip + 1].offset, cp, error)


class Break:
    def __init__(self, kind, inst, next_offset, checkpoint, error):
        self.kind, self.inst, self.next_offset, self.cp, self.error = kind, inst, next_offset, checkpoint, error
        self.local_names = tuple(checkpoint.locals)  # the bound locals, in binding order

    def values(self, tracer):
        """The Vars the entry rebuilds: the stack (NULL as None), then the live locals."""
        from .trace.interpreter import _Lazy
        out = []
        for v in self.cp.stack:
            out.append(ConstVar(None) if v is NULL else v)
        for n in self.local_names:
            v = self.cp.locals[n]
            out.append(tracer.wrap(v.value, v.source) if isinstance(v, _Lazy) else v)
        return TupleVar(out)

    def body(self, tracer, dispatcher, consts) -> list[str]:
        """Entry lines after `___v = (<stack values>, <locals>)` has been computed."""
        stack = self.cp.stack
        n_stack, n_locals = len(stack), len(self.local_names)
        value = [f"___v[{i}]" for i in range(n_stack + n_locals)]
        local_args = value[n_stack:]
        if self.kind == "call":
            argc = self.inst.arg
            kw = self.cp.kw_names
            first = stack[-(argc + 2)]  # NULL below a plain callable, else (method, self)
            args = value[n_stack - argc:n_stack]
            fn, args = (value[n_stack - argc - 1], args) if first is NULL else \
                (value[n_stack - argc - 2], [value[n_stack - argc - 1], *args])
            npos = len(args) - len(kw)
            call_args = [*args[:npos], *(f"{k}={a}" for k, a in zip(kw, args[npos:]))]
            below = [v for v, s in zip(value[:n_stack - argc - 2], stack) if s is not NULL]
            resume = self.resume(tracer, dispatcher, self.next_offset, n_stack - argc - 1)
            consts["___resume"] = resume
            return [f"___r = {fn}({', '.join(call_args)})",
                    f"return ___resume({', '.join([*below, '___r', *local_args])})"]
        jump_if = JUMPS[self.inst.opname]
        below = [v for v, s in zip(value[:n_stack - 1], stack) if s is not NULL]
        taken = self.resume(tracer, dispatcher, self.inst.argval, n_stack - 1)
        fallthrough = self.resume(tracer, dispatcher, self.next_offset, n_stack - 1)
        consts["___resume_jump"], consts["___resume_next"] = taken, fallthrough
        args = ", ".join([*below, *local_args])
        test = f"___v[{n_stack - 1}]"
        return [f"if {test}:" if jump_if else f"if not {test}:",
                f"    return ___resume_jump({args})",
                f"return ___resume_next({args})"]

    def resume(self, tracer, dispatcher, offset: int, n_stack: int):
        """The jitted resume function for `offset` (one per code, offset and frame layout)."""
        code = tracer.code
        below = self.cp.stack[:n_stack]
        iterators = frozenset(i for i, v in enumerate(below) if isinstance(v, IteratorVar))
        nulls = frozenset(i for i, v in enumerate(below) if v is NULL)
        if self.kind == "call" and n_stack - 1 in nulls:
            nulls = nulls - {n_stack - 1}  # that slot is the call's result, not the NULL it replaced
        # code objects compare by value: the same source run in two modules must not share globals
        key = (code, id(dispatcher.globals), offset, n_stack, self.local_names, iterators, nulls,
               dispatcher.options)
        fn = _RESUMES.get(key)
        if fn is None:
            line = _line_of(tracer.root, offset)
            name = f"resume_in_{code.co_name}_at_{line}"
            new = resume_code(code, offset, n_stack, self.local_names, name, iterators, nulls)
            fn = types.FunctionType(new, dispatcher.globals, name)
            o = dispatcher.options
            api.jit(fn, backend=o.backend, fullgraph=o.fullgraph, dynamic=o.dynamic)
            _RESUMES[key] = fn
        return fn

    def log(self, qualname: str) -> None:
        if logs.enabled("graph_breaks"):
            logs.get("graph_breaks").debug("Graph break in %s: %s", qualname, self.error)


def _line_of(frame, offset: int) -> int:
    line = frame.code.co_firstlineno
    for inst in frame.instructions:
        if inst.positions is not None and inst.positions.lineno is not None:
            line = inst.positions.lineno
        if inst.offset >= offset:
            return line
    return line
