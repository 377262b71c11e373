"""A graph with symbolic sizes, handed to a backend as Dynamo hands one over.

rewrite keeps sizes in its own ShapeEnv (`guards/shapes.py`: sympy symbols, a `>= 2` floor,
duck sizing) and traces on real tensors. A backend from torch's world -- Inductor,
aot_eager, any AOTAutograd backend, any callable that reads the fake tensors in the graph's
meta -- expects what Dynamo gives it: real example inputs (SymInts for symbolic Python ints),
with a `TracingContext` whose `FakeTensorMode` (over one torch `ShapeEnv`) already holds each
input's fake tensor, its sizes `SymInt`s where they are dynamic; and node meta (`val`,
`example_value`) computed under that mode. Given real inputs alone, AOTAutograd fakes them
with static sizes, and the code it makes asserts them: after a size change every call fails
and runs eagerly.

So, for such a backend (`Handoff`): one torch symbol per dynamic size (duck-sized, as
rewrite's) and per symbolic int, those the trace pinned replaced by their sizes (as Dynamo's
specialized ones are); the meta propagated under the fake mode; the backend called inside
the tracing context. What the backend assumed about sizes while
compiling (guards in the torch ShapeEnv: Inductor's `s0 // 2 <= 4096`, divisibility,
equalities) comes back as `BackendShapeMatch` guards over rewrite's sources, in the entry's
guard closure: a size they exclude misses and compiles again, never runs code made for other
sizes.

rewrite's own backends read sizes from the real example inputs and the graph: they keep
what they have. Torch's pieces are imported here on first use (only a trace with symbolic
sizes, for such a backend, comes here).
"""
from __future__ import annotations

import sys

import torch
import torch.fx

from .guards.guard import BackendShapeMatch
from .guards.source import SizeSource


def needed(backend) -> bool:
    """Whether a backend gets the hand-off: every one not marked `rewrite_native` (rewrite's
    own, or a wrapper of one). Static graphs too: Dynamo always gives a fake mode over a
    ShapeEnv, and a graph holding `nonzero` cannot be faked without one."""
    return not getattr(backend, "rewrite_native", False)


class Handoff:
    """One graph's hand-off (see the module's docstring): made before the GraphModule (each
    symbol of the inputs' sizes becomes a graph input of its own, as in Dynamo's graphs, so
    what caches compiled code by its SymInt inputs -- Inductor's FX graph cache -- sees them),
    then `propagate(gm)`, `call(backend, gm)`, `guards(...)`."""

    def __init__(self, graph):
        from torch._dynamo.source import LocalSource  # (deferred: torch's tracing stack, for torch's backends)
        from torch._guards import TracingContext
        from torch._subclasses.fake_tensor import FakeTensorMode
        from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StatefulSymbolicContext
        # (what the graph holds, rewrite recorded: ops whose output size is data's, numbers from .item())
        self.env = ShapeEnv(allow_dynamic_output_shape_ops=True, allow_scalar_outputs=True)
        self.mode = FakeTensorMode(shape_env=self.env)
        self.context = TracingContext(self.mode)
        self.examples: list = []  # what the backend is called with: real tensors, SymInts for ints
        self.sources: dict = {}  # torch symbol -> rewrite's source of its value
        fakes, sizes = [], []
        for source, value, node in list(graph.inputs):
            origin = node._dynamo_source = LocalSource(node.name)  # (where Dynamo's graphs keep theirs)
            if isinstance(value, torch.Tensor):
                sym = node.meta.get("sym_shape") or (0,) * value.dim()
                dims = [DimDynamic.STATIC if isinstance(s, int) else DimDynamic.DUCK for s in sym]
                symbolic = StatefulSymbolicContext(dynamic_sizes=dims, constraint_sizes=[None] * value.dim(),
                                                   tensor_source=origin)
                fake = self.mode.from_tensor(value, symbolic_context=symbolic, source=origin)
                self.context.tensor_to_context[value] = symbolic
                if isinstance(value, torch.nn.Parameter):  # (what CUDA graphs keep in place, as Dynamo marks it)
                    node.meta["tensor_dict"] = {"_dynamo_static_input_type": "unguarded"}
                for i, size in enumerate(fake.shape):
                    if isinstance(size, torch.SymInt) and size.node.expr not in self.sources:
                        self.sources[size.node.expr] = SizeSource(source, i)
                        sizes.append((SizeSource(source, i), size))
                self.examples.append(value)
                fakes.append(fake)
            else:  # a symbolic int argument
                symbol = self.env.create_symbol(value, origin, dynamic_dim=DimDynamic.DYNAMIC)
                self.sources[symbol] = source
                fake = self.env.create_symintnode(symbol, hint=value, source=origin)
                self.examples.append(fake)
                fakes.append(fake)
        pinned = pinned_sizes(graph.shape_env) if graph.shape_env is not None else {}
        self._specialize(pinned)
        for source, size in sizes:  # each symbol a graph input of its own, read from its first source
            if source in pinned:
                continue  # (a constant now)
            node = graph.size_input(source, size.node.hint)
            node._dynamo_source = LocalSource(node.name)
            self.examples.append(size)
            fakes.append(size)
        self.fakes = fakes

    def _specialize(self, pinned: dict) -> None:
        """Each symbol whose size the trace pinned (`pinned`: source -> size; an op with no
        symbolic rule pins its inputs' sizes) specialized in the torch ShapeEnv too, as Dynamo
        specializes one: replaced by its size, the graph is static there for the backend. Else
        it would fake and compile for sizes the entry never serves, through ops that cannot
        take them symbolic (`F.interpolate`'s, Inductor's adaptive pooling)."""
        from torch.fx.experimental.symbolic_shapes import guard_int
        for sym, source in self.sources.items():
            if source in pinned:
                guard_int(self.env.create_symintnode(sym, hint=pinned[source]))

    def propagate(self, gm: torch.fx.GraphModule) -> bool:
        """Each node's `val` / `example_value`: what it computes under the fake mode. False
        (the meta left as traced) where a static graph's node cannot run on fake values (a
        function allowed in the graph that reads data): such a graph goes to the backend as
        traced, with real inputs. A graph with symbolic sizes cannot: that raises."""
        traced = {node: node.meta.get("example_value") for node in gm.graph.nodes}
        try:
            with self.mode, _GlobalState():
                _Propagate(gm, self.env).run(*self.fakes)
        except Exception:
            if self.sources:
                raise
            for node, value in traced.items():
                node.meta["example_value"] = value
                node.meta.pop("val", None)
                node.meta.pop("unbacked_bindings", None)
            return False
        return True

    def call(self, backend, gm):
        """What `backend` makes of `gm`. A 0-d CPU float64 input is faked with a float symbol for
        its value (FakeTensorMode's item memo); AOTAutograd, finding that symbol neither used as a
        tensor's value nor specialized, asks Dynamo to start over with it specialized
        (`TensorifyScalarRestartAnalysis`, after marking it so): here the backend is called once
        more, over the same symbols, which it now finds specialized."""
        from torch._dynamo.exc import TensorifyScalarRestartAnalysis
        from torch._guards import tracing
        gm._param_name_to_source, gm._source_to_user_stacks = {}, {}  # (as Dynamo's: its inputs are placeholders)
        for attempt in (1, 2):
            try:
                with tracing(self.context):
                    return _split_for_ddp(backend)(gm, self.examples)
            except TensorifyScalarRestartAnalysis:
                if attempt == 2:
                    raise

    def guards(self, pinned: dict) -> list:
        """What the torch ShapeEnv assumed (the propagation's and the backend's own guards, and
        its replacements), over rewrite's sources, simplified: those its value ranges prove
        (every symbol is >= 2) left out, and those that hold for the sizes rewrite's own guards
        pin (`pinned`: source -> size)."""
        import sympy  # (deferred: imported with torch's ShapeEnv)
        # what the ShapeEnv replaced a symbol by (a size it specialized, `s0 == 8`; two it found
        # equal): a guard each -- once replaced, the guards that decided it read as trivially true
        now = {sym: self.env.replace(sym) for sym in self.sources}
        checks = [sympy.Eq(sym, expr) for sym, expr in now.items() if expr != sym]
        checks += self._ranges([sym for sym, expr in now.items() if expr == sym])
        checks += [self.env.simplify(g.expr) for g in self.env.guards  # (not those its ranges prove)
                   if self.env._maybe_evaluate_static(g.expr, axioms=()) is None]
        out = []
        for expr in checks:
            unknown = expr.free_symbols - self.sources.keys()
            if unknown:  # (a symbol rewrite cannot read: the entry would not be checkable)
                raise NotImplementedError(f"the backend guards {expr} over {sorted(map(str, unknown))}, which "
                                          "no input's size gives")
            symbols = tuple((sym, self.sources[sym]) for sym in sorted(expr.free_symbols, key=str))
            if not symbols or all(src in pinned for _, src in symbols) and \
                    bool(expr.xreplace({sym: pinned[src] for sym, src in symbols})):
                continue
            out.append(BackendShapeMatch(expr, symbols))
        return out


    def _ranges(self, symbols: list) -> list:
        """Each (unreplaced) symbol's range beyond `>= 2`, as the ShapeEnv refined it: a guard on
        one symbol (`s0 <= 4096`) narrows its range, and is then proved by it, so the range is
        the guard."""
        import sympy  # (deferred: imported with torch's ShapeEnv)
        from torch.utils._sympy.numbers import int_oo
        out = []
        for sym in symbols:
            bounds = self.env.var_to_range.get(sym)
            if bounds is None:
                continue
            if bounds.lower > 2:
                out.append(sympy.Ge(sym, bounds.lower))
            if bounds.upper not in (int_oo, sympy.oo):
                out.append(sympy.Le(sym, bounds.upper))
        return out


def _split_for_ddp(backend):
    """Inside a DDP's forward (DDP marks itself active around the wrapped module's call, where
    that module's forward compiles), the backend compiles the graph split at DDP's bucket
    boundaries, by torch's own DDPOptimizer as Dynamo does: each bucket's gradients are ready,
    and its all-reduce can start, while backward still runs through the graphs before it. (With
    rewrite's own backends backward is eager autograd: DDP's per-parameter hooks overlap
    already.) `torch._dynamo.config.optimize_ddp` other than "ddp_optimizer" turns it off."""
    ddp = sys.modules.get("torch.nn.parallel.distributed")
    active = ddp.DistributedDataParallel._get_active_ddp_module() if ddp is not None else None
    if active is None:
        return backend
    from torch._dynamo.backends.distributed import DDPOptimizer
    from torch._dynamo.utils import get_optimize_ddp_mode
    if get_optimize_ddp_mode() != "ddp_optimizer":
        return backend
    first = min(getattr(torch.distributed, "_DEFAULT_FIRST_BUCKET_BYTES", active.bucket_bytes_cap),
                active.bucket_bytes_cap)  # (a bucket_cap_mb under DDP's 1 MiB first bucket: DDPOptimizer asserts)
    return DDPOptimizer(bucket_bytes_cap=active.bucket_bytes_cap, backend_compile_fn=backend,
                        first_bucket_cap=first).compile_fn


def pinned_sizes(env) -> dict:
    """source -> size, for every size rewrite's own ShapeEnv pins to a constant (`s0 == 8`)."""
    import sympy  # (deferred: imported with the first symbolic size, as everywhere)
    out = {}
    for rel in env.relations:
        if isinstance(rel, sympy.Eq) and isinstance(rel.lhs, sympy.Symbol) and isinstance(rel.rhs, sympy.Integer):
            for src in env.sources.get(rel.lhs, ()):
                out[src] = int(rel.rhs)
    return out


class _Propagate(torch.fx.Interpreter):
    """Runs the graph on fake values, keeping each node's result in its meta; a call made for
    an effect outside the program (a log record) is not made. A size an op makes from data
    (`nonzero`) is an unbacked symbol, bound to the node that made it, as Dynamo binds it."""

    def __init__(self, gm, shapes):
        super().__init__(gm)
        self.shapes = shapes  # (the torch ShapeEnv; an Interpreter's `env` is its values)

    def run_node(self, node):
        from torch.fx.experimental.symbolic_shapes import compute_unbacked_bindings
        result = None if node.meta.get("outward") else super().run_node(node)
        if node.op != "output":
            node.meta["val"] = node.meta["example_value"] = result
            if self.shapes.pending_fresh_unbacked_symbols:
                bindings = compute_unbacked_bindings(self.shapes, result)
                if bindings:
                    node.meta["unbacked_bindings"] = bindings
        return result


class _GlobalState:
    """Grad mode and autocast as they were, whatever the graph's switches did meanwhile."""

    DEVICES = ("cpu", "cuda")

    def __enter__(self):
        self.grad = torch.is_grad_enabled()
        self.autocast = {d: (torch.is_autocast_enabled(d), torch.get_autocast_dtype(d)) for d in self.DEVICES}
        return self

    def __exit__(self, *exc):
        torch._C._set_grad_enabled(self.grad)
        for device, (enabled, dtype) in self.autocast.items():
            torch.set_autocast_enabled(device, enabled)
            torch.set_autocast_dtype(device, dtype)
        return False
