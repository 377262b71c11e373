"""`rewrite.explain(fn)(*args)`: what compiling one call produces, without touching fn's cache.

    >>> out = rewrite.explain(f)(x)
    >>> out.graph_count, out.graph_break_count, out.break_reasons
    >>> print(out)

The call runs on a fresh copy of `fn` (its own cache), with a backend that records each
graph before handing it to the usual one. Resume functions made by graph breaks during the
call are followed too.
"""
from __future__ import annotations

import functools
import types
from dataclasses import dataclass, field

import torch

from . import dispatch
from .api import dispatcher_of, jit
from .bytecode import original_code
from .ops.modules import wrapped
from .registry import default_backend, lookup_backend


@dataclass
class BreakReason:
    reason: str
    user_stack: list  # (filename, lineno, function), outermost first

    def __str__(self):
        where = "; ".join(f"{f}:{line}:{fn}" for f, line, fn in self.user_stack)
        return f"{self.reason.splitlines()[0]} ({where})" if where else self.reason.splitlines()[0]


@dataclass
class ExplainOutput:
    graphs: list = field(default_factory=list)  # torch.fx.GraphModule, in compile order
    graph_count: int = 0
    graph_break_count: int = 0
    break_reasons: list = field(default_factory=list)  # BreakReason, each graph break and each call run eagerly
    eager_reasons: list = field(default_factory=list)  # BreakReason, the calls of them that ran wholly eagerly
    ops_per_graph: list = field(default_factory=list)  # [[op names]]
    graph_sites: list = field(default_factory=list)  # where each graph was compiled: "qualname, file:line"
    guards: list = field(default_factory=list)  # guard source of each entry compiled
    result: object = None

    @property
    def op_count(self) -> int:
        return sum(len(ops) for ops in self.ops_per_graph)

    def __str__(self):
        lines = [f"Graph count: {self.graph_count}", f"Graph break count: {self.graph_break_count}",
                 f"Op count: {self.op_count}"]
        if self.break_reasons:
            lines.append("Break reasons:")
            lines += [f"  {i + 1}. {r}" for i, r in enumerate(self.break_reasons)]
        if self.eager_reasons:
            lines.append("Ran wholly eagerly (none of that frame's own code compiled; its callees compile apart):")
            lines += [f"  {i + 1}. {r}" for i, r in enumerate(self.eager_reasons)]
        for i, ops in enumerate(self.ops_per_graph):
            site = f" ({self.graph_sites[i]})" if i < len(self.graph_sites) and self.graph_sites[i] else ""
            lines.append(f"Ops in graph {i + 1}{site}: {', '.join(ops) if ops else '(none)'}")
        lines.append("Guards:")
        lines += ["  " + line for g in self.guards for line in g.strip().splitlines()]
        return "\n".join(lines)


def explain(fn, backend=None):
    """`explain(fn)(*args, **kwargs)` -> ExplainOutput for that one call."""
    if isinstance(fn, torch.nn.Module):  # its forward, bound to it (hooks aside, as Dynamo's explain)
        inner = wrapped(fn)  # (DDP: the forward of the module it wraps, what compiles)
        return explain((inner if inner is not None else fn).forward, backend=backend)
    if isinstance(fn, functools.partial):  # (a forward that wrappers made a partial)
        inner = explain(fn.func, backend=backend)
        return lambda *args, **kwargs: inner(*fn.args, *args, **{**fn.keywords, **kwargs})

    def run(*args, **kwargs):
        out = ExplainOutput()

        def recording(gm, example_inputs):
            out.graphs.append(gm)
            out.ops_per_graph.append([str(n.target) if n.op == "call_method" else getattr(n.target, "__name__", str(n.target))
                                      for n in gm.graph.nodes if n.op in ("call_function", "call_method")])
            name = backend if backend is not None else default_backend(example_inputs)
            return lookup_backend(name)[1](gm, example_inputs)

        recording.__name__ = backend if isinstance(backend, str) else "python"  # same guards as a real run
        # (and the same hand-off: rewrite's own backends take the graph as traced)
        recording.rewrite_native = backend is None or getattr(lookup_backend(backend)[1], "rewrite_native", False)

        target = fn.__func__ if isinstance(fn, types.MethodType) else fn
        copy = types.FunctionType(original_code(target.__code__), target.__globals__, target.__name__,
                                  target.__defaults__, target.__closure__)
        copy.__kwdefaults__ = target.__kwdefaults__
        jit(copy, backend=recording)
        dispatcher_of(copy).warn_eager = False  # (what ran eagerly is in the output)
        compiled: list = []
        dispatch.OBSERVERS.append(compiled)
        try:
            bound = types.MethodType(copy, fn.__self__) if isinstance(fn, types.MethodType) else copy
            out.result = bound(*args, **kwargs)
        finally:
            dispatch.OBSERVERS.remove(compiled)
        sites = {}
        for d, entry in compiled:
            if entry.graph_module is not None:
                sites[id(entry.graph_module)] = f"{d.qualname}, {d.code.co_filename}:{d.code.co_firstlineno}"
        out.graph_sites = [sites.get(id(gm), "") for gm in out.graphs]
        for _dispatcher, entry in compiled:
            out.guards.append(entry.guard.source)
            reason = entry.eager_reason
            if reason is not None:
                where = getattr(entry, "where", [])
                out.break_reasons.append(BreakReason(reason.split("\n  at ")[0], where))
                if entry.reason is not None:
                    out.eager_reasons.append(out.break_reasons[-1])
        out.graph_count = len(out.graphs)
        out.graph_break_count = len(out.break_reasons)
        return out

    return run
