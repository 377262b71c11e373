"""The graph a trace records: torch.fx's nodes and their fields, without fx's bookkeeping.

A trace makes one node per op, and the python backend (CPU's default) reads the nodes'
fields only -- `op`, `target`, `args`, `kwargs`, `name`, `meta`, `users`, `all_input_nodes`
-- to write its Python source. An `fx.Node` costs that first call ~1.5 µs more per op
(its checks, its C base's linked list, the graph's lookup tables and namespace); a `Node`
here is a slotted record. A backend of torch's world (or explain, a log, a graph's failing
run) gets `to_fx(graph)`: an `fx.Graph` with the same nodes, names and meta (the dicts
themselves, shared).

Names follow fx's rules (`torch.fx.graph._Namespace`: `relu`, `relu_1`, ...; no builtin
shadowed), so the generated code and a converted graph read as fx's would.
"""
from __future__ import annotations

import torch
import torch.fx
import torch.fx.graph as _fx_graph


class Node:
    """One value of the graph (an fx.Node's fields): made by `Graph.create_node`."""
    __slots__ = ("name", "op", "target", "args", "kwargs", "meta", "users", "all_input_nodes", "_dynamo_source")

    def __init__(self, name: str, op: str, target, args: tuple, kwargs: dict, inputs: list):
        self.name, self.op, self.target, self.args, self.kwargs = name, op, target, args, kwargs
        self.meta: dict = {}
        self.users: dict[Node, None] = {}  # (an ordered set, as fx's)
        self.all_input_nodes = inputs  # the nodes it reads, in the order its arguments name them
        for used in inputs:
            used.users[self] = None

    def __repr__(self) -> str:
        return self.name

    def set_arguments(self, target, args: tuple) -> None:
        """A new target and arguments reading the same nodes (a log node made to wait: ops.log_calls)."""
        if inputs_of(args, {}) != self.all_input_nodes:
            raise ValueError("set_arguments: the new arguments read other nodes")
        self.target, self.args = target, args


def inputs_of(args: tuple, kwargs: dict) -> list:
    """The nodes `args` and `kwargs` hold (in tuples, lists, dicts and slices too), each once,
    in the order fx's `all_input_nodes` gives them."""
    found: dict = {}
    for a in args:
        if type(a) is Node:
            found[a] = None
        elif isinstance(a, _NESTED):
            _walk(a, found)
    if kwargs:
        _walk(kwargs, found)
    return list(found)


_NESTED = (tuple, list, dict, slice)


def _walk(a, found: dict) -> None:
    if type(a) is Node:
        found[a] = None
    elif isinstance(a, (tuple, list)):
        for x in a:
            _walk(x, found)
    elif isinstance(a, dict):
        for x in a.values():
            _walk(x, found)
    elif isinstance(a, slice):
        _walk(a.start, found), _walk(a.stop, found), _walk(a.step, found)


def map_nodes(a, fn):
    """`a` with each node in it replaced by `fn(node)` (fx's `map_arg`, for these nodes)."""
    if type(a) is Node:
        return fn(a)
    if isinstance(a, tuple):
        made = [map_nodes(x, fn) for x in a]
        return type(a)(*made) if hasattr(a, "_fields") else tuple(made)
    if isinstance(a, list):
        return [map_nodes(x, fn) for x in a]
    if isinstance(a, dict):
        return {k: map_nodes(v, fn) for k, v in a.items()}
    if isinstance(a, slice):
        return slice(map_nodes(a.start, fn), map_nodes(a.stop, fn), map_nodes(a.step, fn))
    return a


class Graph:
    """The nodes of one trace: its inputs (placeholders) first, in the order they were met,
    then its ops in the order they ran, then the output node."""

    def __init__(self):
        self._placeholders: list[Node] = []
        self._body: list[Node] = []
        self._output: Node | None = None
        self._names = _fx_graph._Namespace()

    @property
    def nodes(self) -> list[Node]:
        out = [self._output] if self._output is not None else []
        return self._placeholders + self._body + out

    def placeholder(self, name: str) -> Node:
        node = Node(self._names.create_name(_target_name(name), None), "placeholder", name, (), {}, [])
        self._placeholders.append(node)
        return node

    def create_node(self, op: str, target, args: tuple = (), kwargs: dict | None = None) -> Node:
        """A node computing `target(*args, **kwargs)` (`op` "call_function" or "call_method"),
        after every node made before it."""
        kwargs = kwargs or _NO_KWARGS
        node = Node(self._name(target), op, target, args, kwargs, inputs_of(args, kwargs))
        self._body.append(node)
        return node

    def call_function(self, fn, args: tuple = (), kwargs: dict | None = None) -> Node:
        return self.create_node("call_function", fn, args, kwargs)

    def output(self, result) -> Node:
        if self._output is not None:
            raise ValueError("the graph has an output already")
        name = self._names.create_name("output", None)
        self._output = Node(name, "output", "output", (result,), _NO_KWARGS, inputs_of((result,), {}))
        return self._output

    def erase(self, doomed: set) -> None:
        """Remove the nodes in `doomed`; no node left may read one."""
        if any(u not in doomed for node in doomed for u in node.users):
            raise ValueError("erase: a node left reads one erased")
        for node in doomed:
            for used in node.all_input_nodes:
                used.users.pop(node, None)
        self._placeholders = [n for n in self._placeholders if n not in doomed]
        self._body = [n for n in self._body if n not in doomed]
        if self._output in doomed:
            self._output = None

    def _name(self, target) -> str:
        """A fresh name for a node calling `target`, as fx's namespace makes it."""
        try:
            candidate = _CANDIDATES.get(target)
        except TypeError:  # (an unhashable target: named each time)
            candidate = (_target_name(target), False)
        if candidate is None:
            name = _target_name(target)
            candidate = _CANDIDATES[target] = (name, _plain_name(name))
        if not candidate[1]:
            return self._names.create_name(candidate[0], None)
        base = candidate[0]  # (a plain base, most ops': create_name without its parse each time)
        namespace = self._names
        used, counts = namespace._used_names, namespace._base_count
        num, name = counts.get(base, 0), base
        while name in used:
            num += 1
            name = f"{base}_{num}"
        used.add(name)
        counts[base] = num
        return name


_NO_KWARGS: dict = {}  # (a node's keyword arguments when it has none: read, never written)
_CANDIDATES: dict = {}  # op target -> (the base of its nodes' names, whether that is plain: _plain_name)
_NAMER = torch.fx.Graph()  # (fx's own rule for a target's name)


def _target_name(target) -> str:
    return _NAMER._target_to_str(target)


def _plain_name(candidate: str) -> bool:
    """Whether fx's namespace takes `candidate` as a name's base as it is: an identifier with no
    numeric suffix that shadows no builtin or keyword (`add`, `relu`: most ops'). Such a base's
    names Graph._name makes itself, as fx's namespace would: the base, then base_1, base_2, ..."""
    match = _fx_graph._name_regex.match(candidate)
    return match is not None and match.group(2) is None and candidate not in _fx_graph._illegal_names


def copy_node(fx_graph: torch.fx.Graph, node: Node, env) -> torch.fx.Node:
    """`node` made in `fx_graph` (its arguments' nodes through `env`), with its name where free
    there and a copy of its meta (fx's `node_copy`)."""
    made = _made(fx_graph, node, env)
    made.meta = dict(node.meta)
    return made


def _made(fx_graph: torch.fx.Graph, node: Node, env) -> torch.fx.Node:
    if node.op == "placeholder":  # (each name is free there: unique here, made by the same rules)
        made = fx_graph.create_node("placeholder", node.target, name=node.name)
    elif node.op == "output":
        made = fx_graph.create_node("output", "output", (map_nodes(node.args[0], env),), name=node.name)
    else:
        made = fx_graph.create_node(node.op, node.target, map_nodes(node.args, env), map_nodes(node.kwargs, env),
                                    name=node.name)
    if hasattr(node, "_dynamo_source"):  # (the hand-off's mark on an input: rewrite/handoff.py)
        made._dynamo_source = node._dynamo_source
    return made


def to_fx(graph) -> torch.fx.Graph:
    """An fx.Graph of `graph` (returned as it is if it is one): the same nodes in the same
    order, named alike, each sharing its node's meta dict."""
    if isinstance(graph, torch.fx.Graph):
        return graph
    fx_graph, env = torch.fx.Graph(), {}
    for node in graph.nodes:
        made = env[node] = _made(fx_graph, node, env.__getitem__)
        made.meta = node.meta
    return fx_graph
