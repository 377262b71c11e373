"""From one call's arguments to one cache entry, as a flat list of named passes:

    capture  -> trace the frame symbolically into a graph (rewrite.nodes), guards and an output Var
    outputs  -> decide what the graph returns and how the entry rebuilds the Python result
    backend  -> backend(GraphModule, example_inputs) -> callable
    guards   -> generate the guard closure
    entry    -> generate the entry function (graph inputs from the frame, result rebuilt)
"""
from __future__ import annotations

import functools
import gc
import sys
import threading
import time
import types
from dataclasses import dataclass, field

import torch
import torch.fx
from torch.autograd.graph import increment_version

from . import breaks, codeload, config, handoff, logs, registry, strict
from .bytecode.resume import exhausted_generator, list_iterator_at, primed, suspended_code
from .nodes import to_fx
from .slot import NEXT

try:  # generates the GraphModule's own Python code only if someone asks for it
    from torch.fx._lazy_graph_module import _LazyGraphModule as GraphModule
except ImportError:  # pragma: no cover
    from torch.fx import GraphModule
from .errors import (BackendCompilerFailed, EagerOnce, RaisesEagerly, Unsupported, UserError, WholeCallEager, settle,
                     WritesInputs)
from .guards.codegen import GuardCode, GuardFunction, GuardSet, render_guards
from .guards.guard import Consts, UnaliasedMatch
from .guards.source import GLOBALS, ArrayTensorSource, BaseCopySource, Source, attr_expr, comment, param_name
from .ops.arrays import NDARRAY, NUMPY_SCALAR, read_only
from .ops.builtins import TracedId
from .ops.contexts import Enter, grad_mode_state, unwind
from .ops.core import python_type
from .ops.exceptions import CALLERS, new_exception
from .ops.instances import made_as_called, new_instance
from .ops.log_calls import DEFERRED, defer
from .ops.sets import members
from .trace.builder import DynamicPolicy
from .trace.graph import default_generator, example_values, storage_key as graph_storage
from .trace.interpreter import Tracer
from .values.vars import (ArrayVar, BoundVar, ConstVar, DictVar, DictViewVar, ExceptionVar, FunctionVar, GradModeVar,
                          IdentityKey, InstanceVar, IteratorVar, ListVar, MethodVar, ObjectVar, PartialVar, ScalarVar,
                          SetVar, SymIntVar, TensorVar, TupleVar, Var, call_owned, key_var)


# backends that run the graph's torch calls as they are, so grad mode applies at run time
GRAD_MODE_AGNOSTIC = {"python", "eager"}


@dataclass
class Entry:
    """One cache entry: the guard closure and what runs when it passes."""
    guard: GuardFunction
    fn: object  # the entry function, or a function returning MISS (run the original bytecode)
    index: int
    _graph_module: object = None  # a GraphModule, or a LazyModule (see graph_module)
    source: str = codeload.LazyText()  # the entry function's source (a loaded entry's: read when first asked for)
    reason: str | None = None  # why the entry runs eagerly, if it does
    compile_seconds: float = 0.0
    ops: int = 0
    eager_ops: int = 0  # ops the trace saw that its calls run outside any graph (at least: see _eager_ops)
    graph_break: str | None = None  # why the traced part ends early (the rest is a resume function)
    where: list = field(default_factory=list)  # user stack of the break or fallback: (file, line, function)
    raises: bool = False  # a fallback because eager raises there, or initializes lazy modules (no warning)
    first: object = None  # runs the compiling call from what the trace computed (see first_call_source)
    resumes: list = field(default_factory=list)  # the resume functions a break entry calls
    error: BaseException | None = None  # a fallback's: how the trace ended (strict mode checks eager's run)
    persist: dict | None = None  # what the persistent cache writes of it (rewrite/persist.py), until written
    loaded: bool = False  # read from the persistent cache, not traced in this process
    graph: bool = False  # it runs a compiled graph (a loaded entry has no graph_module: it has the graph's code)

    @property
    def graph_module(self) -> torch.fx.GraphModule | None:
        """The captured graph, as a GraphModule (made when first asked for: LazyModule)."""
        if isinstance(self._graph_module, LazyModule):
            self._graph_module = self._graph_module.get()
        return self._graph_module

    @property
    def eager_reason(self) -> str | None:
        """Why not all of the call is one graph: a fallback or a graph break (None: it is)."""
        return self.reason or self.graph_break


@dataclass
class Capture:
    tracer: Tracer
    result: Var
    graph_outputs: list = field(default_factory=list)  # graph nodes (rewrite.nodes), in output order
    output_values: list = field(default_factory=list)  # what the trace computed for each of them
    render: object = None  # (i -> how graph output i is read, assign) -> statements; see plan_outputs
    consts: Consts = field(default_factory=Consts)
    hooks_aside: bool = False  # saved-tensor hooks were in force, set aside for the trace (compile_entry)

    def release(self) -> None:
        """Let go of the call's values, the trace's and what the capture holds (`render`
        closes over it: a cycle), once the entry is built (see Tracer.release)."""
        self.tracer.release()
        self.result = self.render = None
        self.output_values = []


def capture(code, globals_, params, args, dynamic=None, facts: bool = True) -> Capture:
    """Trace on the real inputs; if the code writes into one, again on copies of them (the
    trace must leave the inputs as they are: the entry does the writing, when it runs).
    `dynamic`: the dispatcher's DynamicPolicy (which sizes are symbols); `facts`: whether the
    backend may read the facts of the ops' results (see reads_facts)."""
    tracer = Tracer(code, globals_, params, args, dynamic=dynamic, facts=facts)
    try:
        try:
            result = tracer.run()
        except WritesInputs:
            tracer.release()
            tracer = Tracer(code, globals_, params, args, clone_inputs=True, dynamic=dynamic, facts=facts)
            result = tracer.run()
    except Unsupported as e:
        e.guards = tracer.guards  # a fallback entry is guarded by what was read before the break
        e.tracer = tracer
        raise
    return Capture(tracer, result)


def reads_facts(backend) -> bool:
    """Whether the backend a dispatcher's `backend` option names may read the facts of the ops'
    results (trace.graph._describe): any backend but the python backend -- which is also the
    default where no tensor can be on a CUDA device (registry.default_backend)."""
    if backend is None:
        return _cuda_available()
    return backend != "python" and backend is not registry.lookup_backend("python")[1]


@functools.cache
def _cuda_available() -> bool:
    return torch.cuda.is_available()


def plan_outputs(cap: Capture) -> None:
    """Graph outputs are the tensors the result holds; everything else is rebuilt in Python.

    `cap.render(output_expr, assign)` writes the statements that replay the trace's side
    effects and return the result (or assign it to `assign`), given how graph output i is
    read (`___o[i]` after a call, or a name when the graph's statements are inlined).
    """
    index: dict[torch.fx.Node, int] = {}
    _guard_unaliased(cap.tracer)

    def render(output_expr, assign: str | None = None) -> list[str]:
        built: dict[int, str] = {}  # a list or dict returned twice is one object, built once

        def rebuild(v: Var) -> str:
            if v.source is not None and not call_owned(v):
                return v.source.expr()  # an input returned as it is: the very same object
            if isinstance(v, (ListVar, DictVar, InstanceVar, SetVar, IteratorVar, GradModeVar, ArrayVar)):
                # (one object, however often held)
                if id(v) not in built:
                    name = built[id(v)] = f"___b{len(built)}"
                    return f"({name} := {build(v)})"
                return built[id(v)]
            return build(v)

        def build(v: Var) -> str:
            if isinstance(v, ArrayVar):
                return _array(cap, v, build, rebuild)
            if isinstance(v, (TensorVar, ScalarVar, SymIntVar)):
                if v.node not in index:
                    index[v.node] = len(cap.graph_outputs)
                    cap.graph_outputs.append(v.node)
                    cap.output_values.append(v.value)
                return output_expr(index[v.node])
            if isinstance(v, ConstVar):
                if isinstance(v.value, TracedId):
                    raise Unsupported("id() of a value made in the call leaves it (eager's id is not known)")
                return cap.consts.ref(v.value)
            if isinstance(v, TupleVar):
                inner = ", ".join(rebuild(i) for i in v.items)
                if v.py_type is tuple:
                    return f"({inner},)" if len(v.items) == 1 else f"({inner})"
                if hasattr(v.py_type, "_fields"):
                    return f"{cap.consts.ref(v.py_type)}({inner})"
                return f"{cap.consts.ref(v.py_type)}(({inner}{',' if v.items else ''}))"
            if isinstance(v, ListVar):
                inner = "[" + ", ".join(rebuild(i) for i in v.items) + "]"
                return inner if v.py_type is list else f"{cap.consts.ref(v.py_type)}({inner}, {v.maxlen!r})"
            if isinstance(v, DictVar):
                inner = "{" + ", ".join(f"{rebuild(key_var(k)) if isinstance(k, IdentityKey) else cap.consts.ref(k)}: "
                                        f"{rebuild(i)}" for k, i in v.items.items()) + "}"
                if v.py_type is dict:
                    return inner
                factory = f"{rebuild(v.factory)}, " if v.factory is not None else ""
                return f"{cap.consts.ref(v.py_type)}({factory}{inner})"
            if isinstance(v, ObjectVar):
                return cap.consts.ref(v.value)
            if isinstance(v, InstanceVar):
                made = made_as_called(v)
                if made is not None:  # as it was made: the class called again (its __init__ runs, as eager's)
                    args, kwargs = made
                    kw = "".join(f"**{{{cap.consts.ref(k)}: {rebuild(a)}}}, " for k, a in kwargs.items())
                    return f"{cap.consts.ref(v.cls)}({''.join(rebuild(a) + ', ' for a in args)}{kw})"
                # changed since: its class, attributes (and items)
                attrs = ", ".join(f"{cap.consts.ref(k)}: {rebuild(i)}" for k, i in v.attrs.items())
                items = "" if v.base is None else f", {rebuild(v.base)}"  # (a dict or list literal)
                return f"{cap.consts.ref(new_instance)}({cap.consts.ref(v.cls)}, {{{attrs}}}{items})"
            if isinstance(v, GradModeVar):  # `ctx = torch.set_grad_enabled(False)` held across a break
                state = ", ".join(f"{k!r}: {b!r}" for k, b in grad_mode_state(v).items())  # (bools)
                return f"{cap.consts.ref(new_instance)}({cap.consts.ref(python_type(v))}, {{{state}}})"
            if isinstance(v, SetVar):
                inner = ", ".join(rebuild(i) for i in members(v))
                return (f"frozenset({{{inner}}})" if inner else "frozenset()") if v.frozen else \
                    (f"{{{inner}}}" if inner else "set()")
            if isinstance(v, PartialVar):
                args = "".join(f"{rebuild(a)}, " for a in v.args)
                kw = "".join(f"**{{{cap.consts.ref(k)}: {rebuild(a)}}}, " for k, a in v.kwargs.items())
                return f"{cap.consts.ref(functools.partial)}({rebuild(v.func)}, {args}{kw})"
            if isinstance(v, ExceptionVar):
                if v.traceback is not None or v.context is CALLERS:
                    raise Unsupported(f"a {v.cls.__name__} raised in the call leaves it (its traceback is the trace's)")
                args = "".join(rebuild(a) + ", " for a in v.args)
                attrs = ", ".join(f"{cap.consts.ref(k)}: {rebuild(i)}" for k, i in v.attrs.items())
                cause, context = (rebuild(c) if c is not None else "None" for c in (v.cause, v.context))
                return (f"{cap.consts.ref(new_exception)}({cap.consts.ref(v.cls)}, ({args}), {{{attrs}}}, {cause}, "
                        f"{context}, {v.suppress})")
            if isinstance(v, BoundVar):
                return f"{cap.consts.ref(types.MethodType)}({cap.consts.ref(v.func)}, {rebuild(v.self_var)})"
            if isinstance(v, MethodVar):  # `x.item` of a call the break runs
                return attr_expr(rebuild(v.self_var), v.name)
            if isinstance(v, DictViewVar):
                return f"{rebuild(v.dict_var)}.{v.kind}()"
            if isinstance(v, IteratorVar) and v.generator is not None and not v.generator.started \
                    and not v.generator.done and v.generator.made_by is not None:
                fn, fn_source, args, kwargs = v.generator.made_by  # a generator never run: the function called
                kw = "".join(f"**{{{cap.consts.ref(k)}: {rebuild(a)}}}, " for k, a in kwargs.items())  # again
                return f"{fn_source.expr() if fn_source is not None else cap.consts.ref(fn)}({''.join(rebuild(a) + ', ' for a in args)}{kw})"
            if isinstance(v, IteratorVar) and v.step is None and v.on_next is None and v.over is not None:
                # iter(lst) handed to a call a graph break runs: the list's own iterator, as far on
                return f"{cap.consts.ref(list_iterator_at)}({rebuild(v.over)}, {v.pos})"
            if isinstance(v, IteratorVar) and v.step is None and v.on_next is None:
                rest = ", ".join(rebuild(i) for i in v.items[v.pos:])  # over a tuple or a range: no later changes
                return f"iter(({rest}{',' if rest else ''}))"
            if isinstance(v, IteratorVar) and v.generator is not None:
                return _generator(cap, v.generator, rebuild)
            if isinstance(v, IteratorVar) and v.remake is not None:  # zip(...), enumerate(...) over what is left
                fn, parts, named = v.remake()
                kw = "".join(f", {k}={value!r}" for k, value in named.items())  # (bools)
                return f"{cap.consts.ref(fn)}({', '.join(rebuild(p) for p in parts)}{kw})"
            raise Unsupported(f"returning {type(v).__name__} from a compiled function")

        effects = cap.tracer.side_effects
        if not effects:
            result = rebuild(cap.result)
            return [f"return {result}"] if assign is None else [f"{assign} = {result}"]
        # every value (the result too) is read before the first write: a write cannot change them
        values, writes = effects.replay(rebuild)
        name = assign or "___result"
        lines = [*values, f"{name} = {rebuild(cap.result)}", *writes]
        return lines + ([f"return {name}"] if assign is None else [])

    render(lambda i: f"___o[{i}]")  # decides the graph outputs
    cap.render = render
    cap.tracer.graph.output(cap.graph_outputs)


def _array(cap: Capture, v: ArrayVar, build, rebuild) -> str:
    """A NumPy value leaving the call: the tensor out of the graph as the array eager has (its
    memory), read-only where eager's is; one that views another's memory in NumPy (np.flip's)
    made again as NumPy made it, from that other one."""
    if isinstance(v.unshared, tuple):  # (NumPy's view of another array: the same call, on what it viewed)
        fn, args, kwargs = v.unshared
        given = "".join(f"{rebuild(a)}, " for a in args)
        named = "".join(f"**{{{cap.consts.ref(k)}: {rebuild(i)}}}, " for k, i in kwargs.items())
        return f"{cap.consts.ref(fn)}({given}{named})"
    out = build(v.tensor)
    if v.kind is not NDARRAY:
        return f"{out}.numpy()[()]" if issubclass(v.kind, NUMPY_SCALAR) else f"{out}.item()"
    return f"{cap.consts.ref(read_only)}({out}.numpy())" if v.readonly else f"{out}.numpy()"


def _guard_unaliased(tracer) -> None:
    """The objects that came in and that the call changes -- and every other one of their
    classes the trace holds -- were different objects while tracing: the entry's writes assume
    it, so a call that passes one object for two of them must not use it (`UnaliasedMatch`)."""
    effects = tracer.side_effects
    changed = {c.source for c in effects.containers.values() if c.source is not None}
    changed |= {target.base for target in effects.stores if isinstance(getattr(target, "base", None), Source)}
    changed = {s.base if isinstance(s, BaseCopySource) else s for s in changed}
    if not changed:
        return
    held = {v.source: python_type(v) for v in tracer.by_identity.values() if v.source is not None}
    kinds = {held[s] for s in changed if s in held}
    group = [s for s, kind in held.items() if kind in kinds]
    if len(group) > 1:
        tracer.guards.add(UnaliasedMatch(group[0], tuple(group[1:])))


def _generator(cap: Capture, gen, rebuild) -> str:
    """A generator the call ran (part of), made again for the entry to return or hand on: one
    that finished, finished; one stopped at a `yield`, a generator of the same code standing at
    that `yield` with the values the trace's frame holds (`resume.suspended_code`)."""
    code = gen.frame.code
    if gen.done:
        return f"{cap.consts.ref(exhausted_generator)}({code.co_name!r}, {code.co_qualname!r})"
    frame = gen.frame
    why = gen.why_not_rebuilt()
    if why is not None:
        raise Unsupported(f"a generator the call ran (part of), {why}, leaves the call")
    fn, fn_source, _, _ = gen.made_by
    slots, args = [], []
    for v in frame.stack:
        kind = breaks.slot_kind(v)
        slots.append(kind)
        if kind != "null":  # (pushed again by the new code, not passed; no "ctx" here: why_not_rebuilt)
            args.append(rebuild(breaks.slot_value(v, kind)))
    names = tuple(frame.locals)
    args += ["None", *(rebuild(frame.locals[n]) for n in names)]  # (the stand-in the primed one yields)
    new = suspended_code(code, frame.instructions[frame.ip - 1].offset, tuple(slots), names)
    closure = f"{fn_source.expr()}.__closure__" if fn_source is not None else cap.consts.ref(fn.__closure__)
    factory = (f"{cap.consts.ref(types.FunctionType)}({cap.consts.ref(new)}, {cap.consts.ref(fn.__globals__)}, "
               f"{code.co_name!r}, None, {closure})")
    return f"{cap.consts.ref(primed)}({factory}({', '.join(args)}))"


class LazyModule:
    """What the python backend is given of a graph: the trace's graph itself (it reads nothing
    else), and the GraphModule made of its torch.fx copy (nodes.to_fx) when first asked for --
    by explain, the logs, a failing graph's run (GraphFailure): torch makes a class for each
    GraphModule, which costs a first call more than any op does."""
    __slots__ = ("graph", "_rewrite_name", "_made")

    def __init__(self, graph, name: str):
        self.graph, self._rewrite_name, self._made = graph, name, None

    def get(self) -> torch.fx.GraphModule:
        if self._made is None:
            self._made = GraphModule(torch.nn.Module(), to_fx(self.graph))
            self._made._rewrite_name = self._rewrite_name
        return self._made


def call_backend(cap: Capture, backend_name: str, backend, name: str):
    """(The GraphModule, what the backend made of it); a backend from torch's world gets the
    graph as Dynamo hands one over (`handoff`), its guards on sizes added to the entry's."""
    graph = cap.tracer.graph
    if not cap.graph_outputs and all(n.op in ("placeholder", "output") for n in graph.graph.nodes):
        return None, None
    try:
        native = backend is registry.lookup_backend("python")[1]
        if not native:  # (it reads no example values: graph._describe;
            if not graph.facts:  # (see reads_facts)
                raise Unsupported(f"backend {backend_name!r} was not foreseen when the trace began: it kept no "
                                  "facts of the ops' results for it")
            example_values(graph.graph)  # explain's recording backend hands the graph on to whichever)
        given = handoff.Handoff(graph) if handoff.needed(backend) else None  # (before the module:
        fx_graph, records = _records_apart(to_fx(graph.graph)) if handoff.needed(backend) else (graph.graph, [])
        if native and given is None:
            gm = LazyModule(fx_graph, name)
        else:
            gm = GraphModule(torch.nn.Module(), to_fx(fx_graph))  # it adds graph inputs)
            gm._rewrite_name = name
        if given is not None and not given.propagate(gm):
            given = None  # (a static graph whose meta cannot be faked: as traced)
        if given is not None:
            compiled = given.call(backend, gm)
            for guard in given.guards(handoff.pinned_sizes(cap.tracer.shape_env)):
                cap.tracer.guards.add(guard)
        else:
            compiled = backend(gm, [value for _, value, _ in graph.inputs])
    except Exception as e:
        raise BackendCompilerFailed(backend_name, e) from e
    finally:
        for node in graph.graph.nodes:  # the entry keeps the graph: drop the traced tensors
            meta = node.meta
            if "example_value" in meta or "val" in meta:
                meta.pop("example_value", None)
                meta.pop("val", None)
    if not callable(compiled):
        raise BackendCompilerFailed(backend_name, TypeError(f"backend returned {type(compiled).__name__}, not a callable"))
    if records:
        compiled = _making_records(compiled, records)
    return gm, compiled


def _records_apart(fx_graph: torch.fx.Graph) -> tuple[torch.fx.Graph, list]:
    """(What a backend of torch's gets of `fx_graph`, the records its log nodes make, in order,
    for the entry to make once that backend's code has run). Torch's backends trace a graph by
    running it and keep only what its outputs need: a log node (it waits for the graph's end,
    see `_defer_logs`, and reads no value the graph computes) is left out, and a random op
    whose result no output needs (`dropout` before an op that raised, in a `try`) is made an
    output of the copy after the graph's own -- dropped, its draw would not be made, and every
    draw after it would differ from eager's."""
    records = [n.args for n in fx_graph.nodes if n.meta.get("deferred")]
    dead = _dead_draws(fx_graph)
    if not records and not dead:
        return fx_graph, []
    copy, env = torch.fx.Graph(), {}
    for node in fx_graph.nodes:
        if node.op == "output":
            outputs = torch.fx.node.map_arg(node.args[0], env.__getitem__)
            copy.output((*outputs, *(env[n] for n in dead)) if dead else outputs)
        elif not node.meta.get("deferred"):
            env[node] = copy.node_copy(node, env.__getitem__)
            if hasattr(node, "_dynamo_source"):  # (the hand-off's mark on an input: see handoff.Handoff)
                env[node]._dynamo_source = node._dynamo_source
    return copy, records


def _dead_draws(fx_graph: torch.fx.Graph) -> list:
    """The random ops (meta["seeded"]) whose results no output of `fx_graph` needs."""
    if not any(n.meta.get("seeded") for n in fx_graph.nodes):
        return []
    live, stack = set(), [n for n in fx_graph.nodes if n.op == "output"]
    while stack:
        node = stack.pop()
        if node not in live:
            live.add(node)
            stack.extend(node.all_input_nodes)
    return [n for n in fx_graph.nodes if n.meta.get("seeded") and n not in live]


def _making_records(compiled, records: list):
    """`compiled`, then the graph's log records, made at its end as deferred records are
    (ops/log_calls.Deferred: the entry begins them before the graph, ends them after it)."""
    def run(*args):
        out = compiled(*args)
        for thunk, fn, args_, kwargs in records:
            DEFERRED.add(thunk, fn, args_, kwargs)
        return out
    return run


def rerunnable(graph, redraws: bool = True, if_logs_wait: bool = False, copies: bool = False) -> bool:
    """Whether the call can run again eagerly after the graph raised part-way: the graph
    changed nothing before (no writes into inputs, no log records made, no mode switches other
    than grad mode, which the entry puts back). Random draws do not stop it where the backend
    `redraws` (an entry that may run its call again puts the generators back first: `RngState`;
    a CUDA-graph backend keeps its own generator state, which that would not rewind); log
    records do not where they wait for the graph's end (`_defer_logs`; `if_logs_wait`: were
    they made to); writes into inputs do not where the caller writes the trace's copies back
    (`copies`: see _write_back)."""
    return (copies or not graph.clone_inputs) and not any(
        n.meta.get("outward") and not (if_logs_wait or n.meta.get("deferred")) or n.meta.get("mode_switch") or
        not redraws and n.meta.get("seeded") for n in graph.marked)  # (mode_switch: entering autocast, ...)


def makes_logs(graph) -> bool:
    """Whether the graph makes log records."""
    return any(n.meta.get("outward") for n in graph.marked)


def logs_wait(graph) -> bool:
    """Whether the graph's log records wait for its end."""
    return any(n.meta.get("deferred") for n in graph.marked)


def redraws(backend_name: str) -> bool:
    """Whether an entry of that backend can put the generators back before running again."""
    return "cudagraph" not in backend_name


def draws(graph) -> bool:
    """Whether the graph draws random numbers."""
    return any(n.meta.get("seeded") for n in graph.marked)


def may_run_again(tracer) -> bool:
    """Whether the entry must be able to run its call again eagerly where the graph raises: an
    `except` of the call's may meet the error, or side effects replayed after the graph would be
    lost (elsewhere an error the graph raises is the one eager raises, from the same op)."""
    return tracer.ops_in_try or bool(tracer.side_effects) and any(n.meta.get("may_raise")
                                                                  for n in tracer.graph.marked)


class RngState:
    """The default generators of the devices a graph draws from (`GraphBuilder.drawn`): saved
    before the graph runs, in the entries that may run their call again only (a save costs more
    than the rest of a cache hit), and put back before that eager run -- which then draws what
    the graph drew, what eager draws. Putting them back also rewinds what other threads drew
    meanwhile (README, Threads)."""

    def __init__(self, devices):
        self.generators = [g for g in (default_generator(d) for d in devices) if g is not None]

    def save(self) -> list:
        return [g.get_state() for g in self.generators]

    def restore(self, states: list) -> None:
        for g, state in zip(self.generators, states):
            g.set_state(state)


def check_eager_parity(tracer, fullgraph: bool = False, backend_name: str = "python", backend=None) -> None:
    """Raise WholeCallEager when an error the graph may raise at run time could not be given
    as eager gives it (see the two checks), or its log records could not be made as eager
    makes them (see _defer_logs)."""
    _defer_logs(tracer, redraws(backend_name), backend is not None and handoff.needed(backend))
    _check_rerunnable(tracer, redraws(backend_name))
    _check_effects_survive(tracer, fullgraph, redraws(backend_name))


def _defer_logs(tracer, redraw: bool, handed_off: bool = False) -> None:
    """A graph whose call may have to run again, and that only its log records would keep from
    it, makes them at its end (ops/log_calls.Deferred): where it raises, the eager run makes
    eager's records, once. Elsewhere they are made where eager makes them -- but for torch's
    backends (`handed_off`), which trace a graph by running it (a log node would make its
    record then, and be left out of what they compile), they always wait for the end, made by
    the entry (see _records_apart); a record of a value the graph computes runs the call
    eagerly there."""
    graph = tracer.graph
    if not makes_logs(graph) or logs_wait(graph):
        return
    if handed_off:
        if not defer(graph.graph) or any(n.all_input_nodes for n in graph.marked if n.meta.get("deferred")):
            raise WholeCallEager("a log record of a value the graph computes, for a backend of torch's (it would "
                                 "make the record while it compiles, not when the graph runs)")
    elif may_run_again(tracer) and rerunnable(graph, redraw, if_logs_wait=True):
        defer(graph.graph)


def _check_rerunnable(tracer, redraw: bool) -> None:
    """Graph ops that an `except` or a context manager's `__exit__` covers may raise at run
    time where eager's handler would see it: the entry then runs the call again eagerly,
    which only a rerunnable graph allows. Otherwise the whole call runs eagerly."""
    if tracer.ops_in_try and not rerunnable(tracer.graph, redraw):
        raise WholeCallEager("graph ops under a try (or a with block whose __exit__ may swallow errors) in a "
                             "function whose graph writes into inputs, logs or switches inference_mode/autocast: "
                             "it could not run again eagerly if it raised")


class GraphFailure:
    """What an entry does when its compiled graph raised (a rerunnable graph only): the call
    runs again eagerly (MISS), so the error, the handler it meets and the side effects before
    it are eager's. If the captured graph itself does not raise on those inputs, the backend's
    code is at fault: one warning, and the entry runs its calls eagerly from then on (a
    fallback in its place: the next call does not compile the same failure again). In strict
    mode, where no `try` covers the graph's ops, the eager run must raise what the graph
    raised (rewrite/strict.py): a backend's fault is an InternalError there."""

    def __init__(self, dispatcher, backend_name: str, ops_in_try: bool):
        self.dispatcher, self.backend_name = dispatcher, backend_name
        self.ops_in_try = ops_in_try  # (else strict mode checks the eager run: see rewrite/strict.py)
        self.entry: Entry | None = None
        self.rng: RngState | None = None  # (a graph that draws: the generators it draws from)

    def __call__(self, inputs: tuple, args: tuple, rng: list | None = None):
        """(`rng`: the generators' states before the graph ran, put back before each run again.)"""
        error = sys.exception()
        if torch._C._autograd._top_saved_tensors_default_hooks(False) is not None:
            raise error  # (hooks saw the graph's ops: no second run -- a checkpoint's recompute stops
            # itself early by raising from its hook)
        if rng is not None:
            self.rng.restore(rng)
        if strict.enabled() and not self.ops_in_try:
            return strict.checked_run(self.dispatcher, args, type(error), "the compiled graph raised")
        miss = self.dispatcher.MISS
        gm = self.entry.graph_module if self.entry is not None else None
        if gm is None or self.backend_name == "eager":
            return miss
        grad = torch.is_grad_enabled()
        records = DEFERRED.begin()  # (its log records, if they wait: none made)
        try:
            getattr(gm, "real_recompile", lambda: None)()  # a lazy GraphModule's code, made now
            gm.forward(*inputs)  # (not gm(...): fx prints the traceback of an error to stderr)
        except Exception:
            return miss  # the graph raises too: a data-dependent error eager raises as well
        finally:
            DEFERRED.end(records, False)
            torch._C._set_grad_enabled(grad)
            if rng is not None:
                self.rng.restore(rng)
        self.dispatcher.disable_entry(self.entry, f"the code backend {self.backend_name!r} compiled raised "
                                                  f"{type(error).__name__}: {error}, where the captured graph "
                                                  "does not")
        return miss


def _check_effects_survive(tracer, fullgraph: bool, redraw: bool) -> None:
    """Side effects are replayed after the graph. If the graph may raise part-way (an op whose
    values can make it raise) and cannot run again, eager's effects before the raise would be
    lost: then the whole call runs eagerly -- except under `fullgraph=True`, where the graph's
    error goes to the caller as torch.compile's does (the effects before the failing op are
    not replayed: README, What is captured)."""
    if tracer.side_effects and not rerunnable(tracer.graph, redraw) and not fullgraph and \
            any(n.meta.get("may_raise") for n in tracer.graph.marked):
        raise WholeCallEager("side effects after graph ops that may raise on their values, in a graph that "
                             "writes into inputs, logs or switches modes")


def _on_graph_error(cap: Capture, consts: Consts, failure: GraphFailure | None, args: list[str],
                    guard: GuardCode) -> tuple[list[str] | None, list[str]]:
    """(What the entry does if running the graph raises, what it does before the graph runs.)
    If the graph raises (a data-dependent error: an index out of range, an integer division by
    zero), the entry runs the call eagerly (see GraphFailure). Only for rerunnable graphs;
    others let the error go (eager raises it too, from the same op, when it is data-dependent;
    a backend's bug shows as that error), and so do graphs that draw random numbers where the
    call need not run again (`may_run_again`): saving the generators costs on every call."""
    graph = cap.tracer.graph
    enters = tuple(n.target for n in graph.marked if isinstance(n.target, Enter))
    leave = []  # the contexts the graph entered and did not leave: left, as eager's `with` leaves them
    if enters:
        consts.values["___unwind"], consts.values["___enters"] = unwind, enters
        leave = ["___unwind(___enters)"]
    grad = any(n.target is torch._C._set_grad_enabled for n in graph.marked)
    restore = [f"torch._C._set_grad_enabled({cap.tracer.grad_at_start})"] if grad else []
    random = draws(graph)
    if failure is None or not rerunnable(graph, redraws(failure.backend_name)) or \
            random and not may_run_again(cap.tracer):
        return ([*leave, *restore, "raise"] if leave else None), []
    consts.values["___graph_failed"] = failure
    inputs = "".join(f"{guard.expr(src)}, " for src, _, _ in graph.inputs)
    call = f"return ___graph_failed(({inputs}), ({''.join(a + ', ' for a in args)})"
    if not random:
        return [*leave, *restore, call + ")"], []
    failure.rng = consts.values["___rng"] = RngState(graph.drawn)
    return [*leave, *restore, call + ", ___s)"], ["___s = ___rng.save()"]


def entry_source(cap: Capture | None, compiled, params, name: str, consts: Consts, guard: GuardCode,
                 miss=None, brk=None, failure: GraphFailure | None = None) -> str:
    """Source defining `___make_entry(G, <consts>)`: check the guards (NEXT when one fails),
    read graph inputs from the frame, run the compiled graph (or its statements, inlined),
    rebuild the Python result -- or, at a graph break, rebuild the frame's values and run
    the break and the resume function. A fallback entry (no capture) returns MISS."""
    args = [param_name(p) for p in params]
    consts.values["___NEXT"] = NEXT
    checks = guard.lines("return ___NEXT")
    prelude = ["try:", *(f"    {line}" for line in checks), "except Exception:", "    return ___NEXT"] if checks else []
    on_error, before = _on_graph_error(cap, consts, failure, args, guard) if compiled is not None else (None, [])
    done = []  # what runs once the graph ran to its end
    if compiled is not None and logs_wait(cap.tracer.graph):  # its records: made at its end, or by the eager run
        consts.values["___records"] = DEFERRED
        before = [*before, "___r = ___records.begin()"]
        on_error = ["___records.end(___r, False)", *on_error] if on_error else ["___records.end(___r, True)", "raise"]
        done = ["___records.end(___r, True)"]
    fused = getattr(compiled, "fused_entry_source", None)  # (the python backend's)
    if cap is None:  # a fallback entry: the original bytecode runs
        consts.values["___MISS"] = miss
        body = f"def entry({', '.join(args)}):\n    return ___MISS\n"
    elif fused is not None:  # the python backend's statements, inlined into the entry
        inputs = {node.name: guard.expr(src) for src, _, node in cap.tracer.graph.inputs}

        def ending(outs):  # the result rebuilt and returned -- or, at a graph break, the break and the rest
            if brk is None:
                return [*done, *cap.render(outs.__getitem__)]
            return [*done, *cap.render(outs.__getitem__, "___v"),
                    *brk.body(cap.tracer, brk.dispatcher, consts.values)]
        body, extra = fused(args, inputs, ending, taken=[GLOBALS, *consts.values], on_error=on_error)
        consts.values.update(extra)
    else:
        lines = []
        if compiled is not None:
            inputs = ", ".join(guard.expr(src) for src, _, _ in cap.tracer.graph.inputs)
            consts.values["___graph"] = compiled
            if on_error:
                lines += ["try:", f"    ___o = ___graph({inputs})", "except Exception:"]
                lines += [f"    {line}" for line in on_error]
            else:
                lines.append(f"___o = ___graph({inputs})")
            lines += done
        if brk is None:
            lines += cap.render(lambda i: f"___o[{i}]")
        else:
            lines += cap.render(lambda i: f"___o[{i}]", "___v")
            lines += brk.body(cap.tracer, brk.dispatcher, consts.values)
        body = f"def entry({', '.join(args)}):\n" + _indented(lines, "    ")
    head, rest = body.split("\n", 1)  # the guards first, inside the entry: one call per hit
    body = head + "\n" + _indented([*prelude, *before], "    ") + rest
    free = ", ".join([GLOBALS, *consts.values])
    return (f"# entry of {comment(name)}: its guards, then what it runs\n"
            f"def ___make_entry({free}):\n"
            + _indented(body.splitlines(), "    ")
            + "    return entry\n")


def _indented(lines: list[str], prefix: str) -> str:
    """`lines`, each after `prefix` and before a newline (joined in C: an entry has thousands)."""
    return prefix + f"\n{prefix}".join(lines) + "\n" if lines else ""


def first_call_source(cap: Capture, params, name: str, consts: Consts) -> tuple[str, list]:
    """Source defining `___make_first(G, <consts>)` -> `first(<params>, ___o)`: the rest of the
    entry (side effects replayed, the result rebuilt) over graph outputs `___o` given. The
    trace ran every op for real, so the call that compiled returns what it computed instead of
    running the graph a second time. Returns the source and the constants it takes -- none of
    either where all it does is return the graph's one output (most functions': `_first_output`)."""
    lines = cap.render(lambda i: f"___o[{i}]")
    tracer = cap.tracer
    if lines == ["return ___o[0]"] and tracer.grad_enabled == tracer.grad_at_start:
        return "", []
    if tracer.grad_enabled != tracer.grad_at_start:  # (the graph leaves grad mode switched: so does this)
        lines.insert(0, f"torch._C._set_grad_enabled({tracer.grad_enabled})")
    args = [param_name(p) for p in params]
    names = [GLOBALS, *consts.values]
    return (f"# the call that compiled {comment(name)}: the graph's outputs as the trace computed them\n"
            f"def ___make_first({', '.join(names)}):\n"
            f"    def first({', '.join([*args, '___o'])}):\n"
            + _indented(lines, "        ")
            + "    return first\n"), names[1:]


def _first_from_trace(cap: Capture | None, compiled, brk, backend_name) -> list | None:
    """Whether the compiling call may return what the trace computed: for a backend that runs
    the graph's torch calls as they are (another backend's code runs from the first call on,
    as under torch.compile: what it computes may differ), a whole-frame graph (at a
    break, ops traced past the checkpoint ran too and may have changed its values) that the
    trace ran on the real inputs -- or on copies of some that it wrote into, whose contents
    can be written back (see _write_back) -- switching no modes (see rerunnable), drawing no
    random numbers (the trace draws from its own copy of each generator: the call must draw
    from the real one) and making no log records (the trace makes none), whose outputs the
    trace holds for real. None where it may not; else what to write back first (a list of
    (real storage, the copy's storage))."""
    if cap is None or compiled is None or brk is not None or backend_name not in GRAD_MODE_AGNOSTIC or \
            draws(cap.tracer.graph) or makes_logs(cap.tracer.graph) or cap.hooks_aside:
        return None
    graph = cap.tracer.graph
    back = _write_back(cap) if graph.clone_inputs else []
    if back is None or not rerunnable(graph, copies=True):
        return None
    for node, value in zip(cap.graph_outputs, cap.output_values):
        facts = node.meta.get("facts")  # (what the op computed: trace.graph._describe)
        if isinstance(value, torch.Tensor) and value.device.type == "meta" and \
                (facts[4] if facts is not None else node.meta.get("device", value.device)).type != "meta":
            return None
    return back


def _write_back(cap: Capture) -> list | None:
    """The trace ran on copies of inputs it writes into (a BatchNorm's running statistics; see
    GraphBuilder._copy_written): the compiling call can still return what it computed if the
    copies' final contents, written into the real inputs' memory, leave them as eager leaves
    them -- no copy or original requires grad (the outputs' autograd history would lead to a
    copy), each copy's sizes, strides, offset and memory size are its original's still (a
    metadata change, `x.unsqueeze_(0)`, is not written back), still over the memory made for it
    (`x.data = y` moves it), no other input over that memory (two inputs' version counters may
    be one or two), and no output is held in a copy's memory (eager returns the input itself).
    Each written-back input's version counter steps as eager's in-place ops step it (autograd
    checks them). (real storage, copy's storage, the real input, its steps) of each, or None."""
    graph = cap.tracer.graph
    pairs, copied = {}, set()
    for source, value, _ in graph.inputs:
        if not isinstance(value, torch.Tensor):
            continue
        real = graph.original(value)
        if real is value:
            continue
        if isinstance(source, ArrayTensorSource):  # (a NumPy array's memory: the entry writes it its own way)
            return None
        key = graph_storage(value)
        if real.requires_grad or value.requires_grad or real.shape != value.shape or \
                real.stride() != value.stride() or real.storage_offset() != value.storage_offset() or \
                real.untyped_storage().nbytes() != value.untyped_storage().nbytes() or \
                not graph.copy_over_own_memory(value) or key in copied:
            return None
        copied.add(key)
        pairs[key] = (real.untyped_storage(), value.untyped_storage(), real, graph.writes_into_copy(value))
    for value in cap.output_values:
        for t in value if isinstance(value, (tuple, list)) else (value,):
            if isinstance(t, torch.Tensor) and t.device.type != "meta" and graph_storage(t) in copied:
                return None
    return list(pairs.values())


def load_entry(guards: GuardSet, cap, compiled, params, globals_, name, miss=None, brk=None, failure=None,
               backend_name=None, phases: Phases | None = None):
    """Generate the entry function (guards inlined) and the guard closure on its own (for
    explanations), written to one file and loaded once."""
    phases = phases or Phases()
    consts = cap.consts if cap is not None else Consts()
    reads = [src for src, _, _ in cap.tracer.graph.inputs] if cap is not None else ()
    guard = render_guards(guards, name, consts, reads)
    phases.done("guards")
    e_source = entry_source(cap, compiled, params, name, consts, guard, miss, brk, failure)
    first, f_source = None, ""
    back = _first_from_trace(cap, compiled, brk, backend_name)
    if back is not None:
        f_source, f_names = first_call_source(cap, params, name, consts)
    g_source = guard.closure_source(params)  # (after the entry: it takes every constant too)
    phases.done("codegen")
    module = "import torch\n\n" + e_source + "\n\n" + f_source
    code = codeload.compile_source("entries", name, module)
    ns = codeload.run(code, module, {})
    phases.done("load")
    values = list(consts.values.values())
    persist = None
    if config.persistent_cache == "readwrite":
        persist = {"code": code, "source": module, "guard": g_source, "guards": guard.ordered,
                   "consts": dict(consts.values), "tensors": guard.tensor_record(), "name": name}
    fn = ns["___make_entry"](globals_, *values)
    fn.__qualname__ = fn.__name__ = f"entry_{name}"
    if back is not None:
        made = ns["___make_first"](globals_, *(consts.values[n] for n in f_names)) if f_source else _first_output
        outputs = tuple(cap.output_values)
        cap.output_values = []

        def first(*args):
            for real, copy, tensor, steps in back:  # (what the trace wrote into copies of inputs: theirs now)
                real.copy_(copy)
                for _ in range(steps):
                    increment_version(tensor)
            return made(*args, outputs)
    guard_fn = GuardFunction(guard_maker(name, g_source, globals_, values), g_source, guard.ordered, params, globals_,
                             lazy=True)
    return guard_fn, fn, e_source, first, persist


def _first_output(*args):
    """The compiling call's `first` (see first_call_source) of an entry that returns the graph's
    one output and does nothing else: `first(<params>, ___o)`."""
    return args[-1][0]


def guard_maker(name: str, source, globals_: dict, values: list):
    """The function that compiles the guard closure `source` (see GuardCode.closure_source; or a
    function returning it) over the entry's constants `values`, when first needed (see
    GuardFunction): a traced entry's, or one the persistent cache loaded. A loaded entry whose
    guard source cannot be read any more gets a guard that accepts nothing."""
    def make_guard():
        text = source() if callable(source) else source
        if not text:
            return _accepts_nothing
        made = codeload.load("entries", f"guard_{name}", "import torch\n\n" + text, {})["___make_guard"](
            globals_, *values)
        made.__qualname__ = made.__name__ = f"guard_{name}"
        return made
    return make_guard


def _accepts_nothing(*args) -> bool:
    return False


def compile_entry(dispatcher, args) -> Entry:
    """Trace one call and build its cache entry (or a guarded fallback entry on Unsupported);
    then the trace lets go of the call's values (`Tracer.release`). The cyclic garbage collector
    waits meanwhile (see _GcPause)."""
    traced: list = []
    hooks = _saved_tensor_hooks_aside()
    with GC_PAUSE:  # (the trace let go of first: the collection that follows walks what stays)
        try:
            return _compile_entry(dispatcher, args, traced, hooks_aside=bool(hooks))
        finally:
            for pack, unpack in reversed(hooks):
                torch._C._autograd._push_saved_tensors_default_hooks(pack, unpack)
            for tracer in traced:
                tracer.release()


def _saved_tensor_hooks_aside() -> list:
    """Take the saved-tensor hooks in force off for the compile (a checkpoint's, `save_on_cpu`'s),
    outermost first: the trace's ops are not the call's -- the compiling call then runs the
    compiled code (see _first_from_trace), whose ops the hooks see once, as eager's. (A
    non-reentrant checkpoint counts the tensors its forward saves: its recompute runs the
    compiled code again and must save as many.)"""
    hooks = []
    while (top := torch._C._autograd._top_saved_tensors_default_hooks(False)) is not None:
        hooks.append(top)
        torch._C._autograd._pop_saved_tensors_default_hooks()
    return hooks[::-1]


class _GcPause:
    """`with GC_PAUSE:` -- no cyclic collection while a compile runs (in any thread). A trace
    makes tens of thousands of objects that live until it ends; each collection the allocations
    set off walks them all, and in a process holding a large heap (a model, torch.compile's
    state) each costs more than the objects it could free: 10 % of a GPT's first call. What
    became garbage meanwhile is collected at the next collection after the last compile ends.
    Nested and concurrent compiles share one pause; a collector the program turned off stays
    off."""

    def __init__(self):
        self._lock = threading.Lock()
        self._depth = 0
        self._resume = False

    def __enter__(self):
        with self._lock:
            if self._depth == 0:
                self._resume = gc.isenabled()
                gc.disable()
            self._depth += 1

    def __exit__(self, *exc):
        with self._lock:
            self._depth -= 1
            if self._depth == 0 and self._resume:
                gc.enable()


GC_PAUSE = _GcPause()


class Phases:
    """Where a compile's time goes (REWRITE_LOGS=perf_hints): each `done(phase)` adds the time
    since the previous one to that phase."""

    def __init__(self):
        self.start = self.last = time.perf_counter()
        self.spent: dict[str, float] = {}

    def done(self, phase: str) -> None:
        now = time.perf_counter()
        self.spent[phase] = self.spent.get(phase, 0.0) + now - self.last
        self.last = now

    def log(self, name: str, tracer=None) -> None:
        if not logs.enabled("perf_hints"):
            return
        total = self.last - self.start
        parts = ", ".join(f"{phase} {seconds * 1e3:.2f} ms" for phase, seconds in self.spent.items())
        sizes = ""
        if tracer is not None:
            ops = tracer.graph.op_count
            per_op = f", {self.spent.get('trace', 0.0) * 1e6 / ops:.1f} µs of trace per op" if ops else ""
            sizes = f" ({tracer.steps} instructions, {ops} ops{per_op})"
        logs.get("perf_hints").debug("compile of %s: %.2f ms: %s%s", name, total * 1e3, parts, sizes)


def _compile_entry(dispatcher, args, traced: list, hooks_aside: bool = False) -> Entry:
    phases = Phases()
    start = phases.start
    code, globals_, params = dispatcher.code, dispatcher.globals, dispatcher.params
    name = f"{dispatcher.qualname.rpartition('.')[2]}_{dispatcher.compiles}"
    try:
        cap = capture(code, globals_, params, args, DynamicPolicy(dispatcher.options.dynamic, dispatcher.frame_state),
                      reads_facts(dispatcher.options.backend))
        cap.hooks_aside = hooks_aside
        traced.append(cap)
        phases.done("trace")
        check_eager_parity(cap.tracer, dispatcher.options.fullgraph, *dispatcher.backend_for(cap))
        plan_outputs(cap)
        phases.done("plan")
    except Unsupported as e:
        if getattr(e, "tracer", None) is not None:
            traced.append(e.tracer)
        if dispatcher.options.fullgraph:
            if isinstance(e, (RaisesEagerly, EagerOnce)):
                raise UserError(e) from e  # the user's own exception, or a lazy module's first call: eager's run
            raise
        tracer = getattr(e, "tracer", None)
        if tracer is not None and tracer.errors_on_break() and not isinstance(e, (RaisesEagerly, EagerOnce)):
            raise  # (inside torch._dynamo.error_on_graph_break(True): this break is an error, as under Dynamo)
        brk = breaks.plan(tracer, e) if tracer is not None else None
        if brk is not None:
            entry = _break_entry(dispatcher, tracer, brk, name, start, traced)
            if entry is not None:
                settle(e)
                return entry
        guards = getattr(e, "guards", None) or GuardSet()
        guard, fn, source, _, persist = load_entry(guards, None, None, params, globals_, name, miss=dispatcher.MISS)
        head, newline, rest = str(e).partition("\n")
        reason = head + (breaks.IN_LOOP if getattr(e, "in_loop", False) else "") + newline + rest
        settle(e)
        return Entry(guard, fn, dispatcher.compiles, source=source, reason=reason,
                     eager_ops=tracer.root_ops if tracer is not None else 0,
                     compile_seconds=time.perf_counter() - start, where=list(e.where),
                     raises=isinstance(e, (RaisesEagerly, EagerOnce)), error=e, persist=persist)
    backend_name, backend = dispatcher.backend_for(cap)
    if backend_name not in GRAD_MODE_AGNOSTIC:
        cap.tracer.read_grad_mode()  # other backends may bake grad mode into what they build
    gm, compiled = call_backend(cap, backend_name, backend, name)
    phases.done("backend")
    failure = GraphFailure(dispatcher, backend_name, cap.tracer.ops_in_try)
    guard, fn, source, first, persist = load_entry(cap.tracer.guards, cap, compiled, params, globals_, name,
                                                   miss=dispatcher.MISS, failure=failure, backend_name=backend_name,
                                                   phases=phases)
    entry = Entry(guard, fn, dispatcher.compiles, gm, source, compile_seconds=time.perf_counter() - start,
                  ops=cap.tracer.graph.op_count, first=first, persist=persist, graph=gm is not None)
    failure.entry = entry
    _log(entry, name)
    phases.log(name, cap.tracer)
    return entry


def _break_entry(dispatcher, tracer, brk, name: str, start: float, traced: list) -> Entry | None:
    """An entry that runs the graph traced before the break, the break, then a resume function."""
    eager_ops = _eager_ops(tracer, brk, dispatcher)
    tracer.graph.rollback(brk.cp.graph_mark)
    brk.end_graph(tracer.graph)
    try:
        cap = Capture(tracer, brk.values(tracer))
        traced.append(cap)
        check_eager_parity(tracer, dispatcher.options.fullgraph, *dispatcher.backend_for(cap))
        plan_outputs(cap)
    except Unsupported:
        return None  # the frame's values cannot be rebuilt: run the whole call eagerly
    brk.dispatcher = dispatcher
    backend_name, backend = dispatcher.backend_for(cap)
    if backend_name not in GRAD_MODE_AGNOSTIC:
        tracer.read_grad_mode()
    gm, compiled = call_backend(cap, backend_name, backend, name)
    failure = GraphFailure(dispatcher, backend_name, tracer.ops_in_try)
    try:
        guard, fn, source, _, persist = load_entry(tracer.guards, cap, compiled, dispatcher.params,
                                                   dispatcher.globals, name, miss=dispatcher.MISS, brk=brk,
                                                   failure=failure)
    except Unsupported:
        return None  # (no resume function for this break: the whole call runs eagerly)
    brk.log(dispatcher.qualname)
    entry = Entry(guard, fn, dispatcher.compiles, gm, source, compile_seconds=time.perf_counter() - start,
                  ops=tracer.graph.op_count, eager_ops=eager_ops, graph_break=str(brk.error),
                  where=list(brk.error.where),
                  graph=gm is not None, persist=persist,
                  resumes=[v for k, v in cap.consts.values.items() if k.startswith("___resume")])
    failure.entry = entry
    _log(entry, name)
    return entry


def _eager_ops(tracer, brk, dispatcher) -> int:
    """The ops the trace recorded inside the break's eager step (a call it gave up in the middle
    of) that run outside any graph: none when the call runs through a jitted or routed copy
    (rewrite/callees.py: its ops are its own graphs'), else as many as the trace saw before it
    gave up -- a lower bound (what the callee does after that point is not known)."""
    dropped = tracer.graph.op_count - brk.cp.graph_mark[1]
    if dropped <= 0 or not brk.kind.startswith("call"):
        return 0
    var = brk.cp.stack[brk.call["fn"]]
    if isinstance(var, FunctionVar):  # (made by the traced code: the router copies it, as any user function)
        return 0
    callee = var.value if isinstance(var, ObjectVar) else var.func if isinstance(var, BoundVar) else None
    return 0 if callee is not None and breaks.JIT.routes(callee, dispatcher) else dropped


def _log(entry: Entry, name: str) -> None:
    if logs.enabled("guards"):
        logs.get("guards").debug("%s", entry.guard.source)
    if logs.enabled("output_code"):
        graph = entry.graph_module.code.strip() if entry.graph_module is not None else "(no graph)"
        logs.get("output_code").debug("graph of %s:\n%s\n%s", name, graph, entry.source)
