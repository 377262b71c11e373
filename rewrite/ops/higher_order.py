"""Calls that take a function and run it their own way: `torch.utils.checkpoint.checkpoint`
(recomputes it in backward) and `torch.cond` (runs one of two). Each body is traced into a
graph of its own, and the outer graph holds one node that runs it as torch would:

    checkpoint(layer, x, use_reentrant=False)   ->   ___o = <checkpoint of body>(x, w, b)
    torch.cond(p, f, g, (x,))                   ->   ___o = <cond of true, false>(p, x, w)

A body is traced in place, in the outer graph, then its nodes move to a graph of their own
(`extract`): the caller's values it reads (the function's arguments, the weights its closure
reaches) become that graph's placeholders, in order, and the outer node's arguments. A body
must not change anything (no side effect, no mutation of what existed before it), and returns
tensors, constants and tuples, lists or dicts of them; otherwise the call breaks the graph
and runs as it is.
"""
from __future__ import annotations

import functools
import types

import torch
import torch.fx

from .. import nodes
from ..errors import Unsupported
from ..values.vars import (ConstVar, DictVar, ListVar, ObjectVar, SymIntVar, TensorVar, TupleVar, Var, end_watch,
                           mutations, start_watch)
from .core import CALLS, describe, python_value, truthy, unpack
from .tensors import call_function

_VALUES = (TensorVar, SymIntVar)


def _leaves(v: Var, out: list) -> None:
    """The tensors (and symbolic ints) of a body's result, in order."""
    if isinstance(v, _VALUES):
        out.append(v)
    elif isinstance(v, (TupleVar, ListVar)):
        for item in v.items:
            _leaves(item, out)
    elif isinstance(v, DictVar) and v.py_type is dict and all(isinstance(k, (str, int)) for k in v.items):
        for item in v.items.values():
            _leaves(item, out)
    elif not isinstance(v, ConstVar):
        raise Unsupported(f"a function run by a higher-order op returned {describe(v)}")


def _rebuild(v: Var, new: iter) -> Var:
    if isinstance(v, _VALUES):
        return next(new)
    if isinstance(v, TupleVar):
        return TupleVar([_rebuild(i, new) for i in v.items], py_type=v.py_type)
    if isinstance(v, ListVar):
        return ListVar([_rebuild(i, new) for i in v.items])
    if isinstance(v, DictVar):
        return DictVar({k: _rebuild(i, new) for k, i in v.items.items()})
    return v


class Body:
    """A traced function moved to a graph of its own: `module(*params, *lifted)` computes
    `leaves`; `lifted` are the outer nodes it reads beyond its parameters."""

    def __init__(self, module: torch.fx.GraphModule, lifted: list, result: Var, leaves: list):
        self.module, self.lifted, self.result, self.leaves = module, lifted, result, leaves


def trace_body(frame, fn: Var, args: list[Var], kwargs: dict, params: list[Var], what: str) -> Body:
    """Trace `fn(*args, **kwargs)` into its own graph; `params` (tensors among the arguments)
    become its first placeholders, whatever else it reads from the caller the next ones."""
    tracer = frame.tracer
    graph = tracer.graph
    effects = tracer.side_effects
    before = (mutations(), len(effects.stores), len(effects.containers), len(tracer.open_contexts),
              tracer.grad_enabled)
    mark = graph.mark()
    watch = start_watch()  # (changes to anything made before the body: a list, a cell, an object)
    try:
        result = CALLS.call(frame, fn, args, kwargs)
    finally:
        changed = end_watch(watch)
    if changed or (mutations(), len(effects.stores), len(effects.containers), len(tracer.open_contexts),
                   tracer.grad_enabled) != before:
        raise Unsupported(f"a function run by {what} that changes state (side effects are not traced there)")
    leaves: list = []
    _leaves(result, leaves)
    body = [n for n in graph.created_since(mark) if n.op != "placeholder"]
    inside = set(body)
    sub = torch.fx.Graph()
    env: dict = {}
    lifted: list = []
    for p in params:
        node = sub.placeholder(f"arg{len(env)}")
        node.meta.update(p.node.meta)
        env.setdefault(p.node, node)

    def lift(n):
        if n not in env:
            node = sub.placeholder(f"lifted{len(lifted)}")
            node.meta.update(n.meta)
            env[n] = node
            lifted.append(n)
        return env[n]

    for n in body:
        for used in n.all_input_nodes:
            if used not in inside:
                lift(used)
        env[n] = nodes.copy_node(sub, n, env.__getitem__)
    sub.output(tuple(env[v.node] if v.node in env else lift(v.node) for v in leaves))
    if any(u not in inside for n in body for u in n.users):
        raise Unsupported(f"a value computed inside {what} is used outside it")
    graph.drop_since(mark)
    module = torch.fx.GraphModule(torch.nn.Module(), sub)
    return Body(module, lifted, result, leaves)


def _outer(frame, runner, inputs: list, body_result: Var, leaves: list) -> Var:
    """The one outer node running the body (or bodies): its results in the body's structure."""
    out = call_function(frame, runner, tuple(inputs), {})
    items = out.items if isinstance(out, TupleVar) else [out]
    if len(items) != len(leaves):
        raise Unsupported("a higher-order op's results do not match its body's")
    return _rebuild(body_result, iter(items))


# --- torch.utils.checkpoint.checkpoint ------------------------------------------------------------------------
def _run_checkpoint(body, n_args: int, options: dict, *values):
    """What the compiled code calls: checkpoint of the body over the user's own arguments (the
    values the body reads besides are bound, as a closure's are: not inputs of the checkpoint)."""
    args, lifted = values[:n_args], values[n_args:]
    out = torch.utils.checkpoint.checkpoint(lambda *a: body(*a, *lifted), *args, **options)
    return out


def checkpoint(frame, args: list[Var], kwargs: dict) -> Var:
    """`torch.utils.checkpoint.checkpoint(fn, *args, use_reentrant=..., **kwargs)` as one node."""
    if not args:
        raise Unsupported("checkpoint() without a function (the call raises eagerly)")
    fn, *fn_args = args
    options = {}
    passed = {}
    for k, v in kwargs.items():
        if k in ("use_reentrant", "preserve_rng_state", "determinism_check", "debug", "context_fn",
                 "early_stop"):
            options[k] = v.value if isinstance(v, (ConstVar, ObjectVar)) else python_value(v, f"checkpoint({k}=)")
        else:
            passed[k] = v  # the function's own keyword arguments
    if options.get("use_reentrant", False) is not False and passed:
        raise Unsupported("checkpoint(use_reentrant=True) with keyword arguments (the call raises eagerly)")
    if any(not isinstance(a, (TensorVar, ConstVar)) for a in [*fn_args, *passed.values()]):
        raise Unsupported("checkpoint() of arguments other than tensors and constants")
    params = [a for a in fn_args if isinstance(a, TensorVar)]
    body = trace_body(frame, fn, fn_args, passed, params, "checkpoint")
    runner = functools.partial(_run_checkpoint, body.module, len(params), options)
    runner.__name__ = "checkpoint"  # (how the graph names the node)
    inputs = [*params, *(frame.tracer.graph.var_of(n) for n in body.lifted)]
    return _outer(frame, runner, inputs, body.result, body.leaves)


# --- torch.cond -------------------------------------------------------------------------------------------------
def _run_cond(true_body, false_body, n_ops: int, n_true: int, pred, *values):
    """What the compiled code calls: the branch `pred` picks, as eager's torch.cond runs it."""
    ops = values[:n_ops]
    if bool(pred):
        return true_body(*ops, *values[n_ops:n_ops + n_true])
    return false_body(*ops, *values[n_ops + n_true:])


def cond(frame, args: list[Var], kwargs: dict) -> Var:
    """`torch.cond(pred, true_fn, false_fn, operands)`: both branches traced, one node picks."""
    names = ("pred", "true_fn", "false_fn", "operands")
    bound = dict(zip(names, args)) | kwargs
    if len(args) > 4 or set(bound) - set(names) or not {"pred", "true_fn", "false_fn"} <= set(bound):
        raise Unsupported("torch.cond() arguments (the call raises eagerly)")
    pred, true_fn, false_fn = bound["pred"], bound["true_fn"], bound["false_fn"]
    operands = unpack(frame, bound.get("operands", TupleVar([])))
    if not isinstance(pred, TensorVar):  # a Python bool or a size test: the branch is known now
        return CALLS.call(frame, true_fn if truthy(frame, pred) else false_fn, operands, {})
    if pred.value.numel() != 1:
        raise Unsupported("torch.cond with a predicate of more than one element (the call raises eagerly)")
    flat: list = []
    for op in operands:
        _leaves(op, flat)
    params = [v for v in flat if isinstance(v, TensorVar)]
    true = trace_body(frame, true_fn, operands, {}, params, "torch.cond")
    false = trace_body(frame, false_fn, operands, {}, params, "torch.cond")
    if len(true.leaves) != len(false.leaves) or any(
            not isinstance(a, TensorVar) or not isinstance(b, TensorVar) or a.value.shape != b.value.shape
            or a.value.dtype != b.value.dtype for a, b in zip(true.leaves, false.leaves)):
        raise Unsupported("torch.cond branches that return different kinds of results (the call raises eagerly)")
    runner = functools.partial(_run_cond, true.module, false.module, len(params), len(true.lifted))
    runner.__name__ = "cond"
    graph = frame.tracer.graph
    inputs = [pred, *params, *(graph.var_of(n) for n in true.lifted), *(graph.var_of(n) for n in false.lifted)]
    return _outer(frame, runner, inputs, true.result, true.leaves)


RULES = {  # (module, qualname) -> rule
    ("torch.utils.checkpoint", "checkpoint"): checkpoint,
    ("torch._higher_order_ops.cond", "cond"): cond,
}


def rule_of(fn):
    if not isinstance(fn, types.FunctionType):
        return None
    return RULES.get((fn.__globals__.get("__name__"), fn.__code__.co_qualname)) or \
        RULES.get((fn.__module__, fn.__qualname__))
