"""The `python` backend: a graph (the trace's own, or an FX graph) becomes straight-line Python
source calling torch.

    def forward(x, y):
        mul = x * 2
        add = mul + y
        del mul
        relu = torch.relu(add)
        ...
        return (relu,)

No GraphModule, no interpreter: one Python function whose statements are the graph's
nodes, with intermediates deleted after their last use. A value used once, by the statement
right after its own, is written into that statement instead (`relu = torch.relu(x * 2 + y)`):
the ops run in the same order, the intermediate dies as soon as its user has it, and the
source -- which Python compiles on every first call -- is a third as long. The source is
written to a file in the cache directory (see `rewrite.codeload`) so tracebacks land in it.
"""
from __future__ import annotations

import math
import operator
import sys

import torch
import torch.fx

from rewrite import codeload, logs, nodes
from rewrite.guards.source import attr_expr, comment, is_identifier, is_literal, py_str
from rewrite.registry import register_backend

BINARY = {operator.add: "+", operator.sub: "-", operator.mul: "*", operator.truediv: "/",
          operator.floordiv: "//", operator.mod: "%", operator.pow: "**", operator.matmul: "@",
          operator.lshift: "<<", operator.rshift: ">>", operator.and_: "&", operator.or_: "|",
          operator.xor: "^", operator.lt: "<", operator.le: "<=", operator.eq: "==", operator.ne: "!=",
          operator.gt: ">", operator.ge: ">="}
INPLACE = {operator.iadd: "+=", operator.isub: "-=", operator.imul: "*=", operator.itruediv: "/=",
           operator.ifloordiv: "//=", operator.imod: "%=", operator.ipow: "**=", operator.imatmul: "@=",
           operator.iand: "&=", operator.ior: "|=", operator.ixor: "^=", operator.ilshift: "<<=",
           operator.irshift: ">>="}
UNARY = {operator.neg: "-", operator.pos: "+", operator.invert: "~"}
# how tightly each operator binds (Python's precedence, loosest first): an inlined expression is
# parenthesized where it binds looser than the place it goes (see Renderer.operand)
COMPARISON, UNARY_LEVEL, POWER, PRIMARY = 3, 10, 11, 12
LEVEL = {**{fn: COMPARISON for fn in (operator.lt, operator.le, operator.eq, operator.ne, operator.gt, operator.ge)},
         operator.or_: 4, operator.xor: 5, operator.and_: 6, operator.lshift: 7, operator.rshift: 7,
         operator.add: 8, operator.sub: 8, operator.mul: 9, operator.matmul: 9, operator.truediv: 9,
         operator.floordiv: 9, operator.mod: 9, operator.pow: POWER}
# each binary operator's (" sym ", level, whether a left operand binding as tightly is parenthesized,
# whether a right one is): comparisons chain, `**` groups to the right, the others to the left
FORMS = {fn: (f" {sym} ", LEVEL[fn], LEVEL[fn] in (COMPARISON, POWER), LEVEL[fn] != POWER) for fn, sym in BINARY.items()}
RESERVED = {"torch", "operator"}
Node, Traced = torch.fx.Node, nodes.Node  # (a graph of torch's world; a trace's own)
NODES = (Traced, Node)
SET_GRAD = torch._C._set_grad_enabled
MAX_NESTING = 6  # values written into one statement at most (a longer chain starts a new one)


class _Names(dict):
    """node -> the name the code gives its value: the node's own, past the names it must not
    shadow -- or a placeholder's parameter itself. Made when first asked for: a value written
    into its user's statement (most of them) never is."""

    def __init__(self, avoid: set, inputs: dict):
        super().__init__()
        self.avoid, self.inputs = avoid, inputs

    def __missing__(self, n):
        expr = self.inputs.get(n.name)
        if expr is not None and expr.isidentifier():
            name = expr  # the parameter itself
        else:
            name = n.name
            while name in self.avoid or name.startswith("___"):
                name += "_"
        self[n] = name
        return name


class Renderer:
    def __init__(self, graph, taken=(), inputs: dict | None = None):
        """`graph`: an fx.Graph or a trace's (rewrite.nodes.Graph); `taken`: names the code must
        not shadow; `inputs`: a placeholder's name -> the expression it reads (by name: a
        backend that hands the graph on may hand on a copy, torch.fx's, of the trace's)."""
        self.graph = graph
        self.consts: dict[str, object] = {}
        self._const_ids: dict[int, str] = {}
        self.inputs = inputs or {}
        self.taken = set(taken)
        self.names = _Names(RESERVED | self.taken, self.inputs)  # node -> its name (made when first asked)
        self.inline: dict[Node | Traced, str] = {}  # node -> its expression, where its user holds it
        self._level: dict[Node | Traced, int] = {}  # inlined node -> how tightly its expression binds
        self._refs: dict = {}  # id(function) -> how the code names it (function_ref)

    def const(self, obj) -> str:
        key = id(obj)
        if key not in self._const_ids:
            name = f"___k{len(self._const_ids)}"
            self._const_ids[key] = name
            self.consts[name] = obj
        return self._const_ids[key]

    def arg(self, a) -> str:
        t = type(a)
        if t is Traced or t is Node:
            return self.inline.get(a) or self.names[a]
        if t is int or t is bool or t is float and math.isfinite(a):
            return repr(a)  # (numbers: most constants, without the walk below)
        if isinstance(a, NODES):
            return self.inline.get(a) or self.names[a]
        if isinstance(a, tuple):
            inner = ", ".join(self.arg(x) for x in a)
            return f"({inner},)" if len(a) == 1 else f"({inner})"
        if isinstance(a, list):
            return "[" + ", ".join(self.arg(x) for x in a) + "]"
        if isinstance(a, dict):
            return "{" + ", ".join(f"{self.arg(k)}: {self.arg(v)}" for k, v in a.items()) + "}"
        if isinstance(a, slice):
            return f"slice({self.arg(a.start)}, {self.arg(a.stop)}, {self.arg(a.step)})"
        if isinstance(a, torch.dtype) and "torch" not in self.taken:
            return str(a)  # 'torch.float32'
        if isinstance(a, float) and not math.isfinite(a) and "float" not in self.taken:
            return f"float({str(a)!r})"  # float('inf'), float('nan')
        if is_literal(a) and not isinstance(a, tuple):
            return repr(a)
        return self.const(a)

    def operand(self, a, level: int = PRIMARY, tie: bool = True) -> str:
        """`arg(a)` where an operator binding at `level` (or a subscript, an attribute: PRIMARY)
        applies to it: in parentheses if it binds looser -- or as tightly, where `tie` (the
        right operand of a left-associative operator, either side of a comparison, the left
        of `**`). A negative number is parenthesized too (`(-2) ** x`)."""
        t = type(a)
        if t is Traced or t is Node:
            text = self.inline.get(a)
            if text is None:
                return self.names[a]  # (a name binds tightest)
            inner = self._level[a]
        elif t is float and math.isfinite(a) or t is int:  # (a number: most constants)
            text = repr(a)
            return f"({text})" if text[0] == "-" and (UNARY_LEVEL < level or UNARY_LEVEL == level and tie) else text
        else:
            text = self.arg(a)
            inner = self._level.get(a, PRIMARY) if isinstance(a, NODES) else UNARY_LEVEL if text[:1] == "-" else PRIMARY
        return f"({text})" if inner < level or inner == level and tie and inner != PRIMARY else text

    def _binary(self, t, a) -> str:
        sym, level, left_tie, right_tie = FORMS[t]
        return self.operand(a[0], level, left_tie) + sym + self.operand(a[1], level, right_tie)

    def index(self, idx) -> str:
        """A subscript, written as Python writes it: x[1:3, None, ...]."""
        parts = idx if isinstance(idx, tuple) else (idx,)
        out = []
        for p in parts:
            if isinstance(p, slice):
                s = "" if p.start is None else self.arg(p.start)
                s += ":" + ("" if p.stop is None else self.arg(p.stop))
                if p.step is not None:
                    s += ":" + self.arg(p.step)
                out.append(s)
            elif p is Ellipsis:
                out.append("...")
            else:
                out.append(self.arg(p))
        if isinstance(idx, tuple) and len(idx) == 1:
            return out[0] + ","
        return ", ".join(out) if out else "()"

    def call_args(self, node) -> str:
        if not node.kwargs:
            return ", ".join(map(self.arg, node.args))
        return ", ".join([*map(self.arg, node.args), *self.keywords(node.kwargs)])

    def keywords(self, kwargs: dict) -> list[str]:
        """`k=v`, or `**{'k': v}` for a keyword that is not a plain identifier."""
        return [f"{k}={self.arg(v)}" if is_identifier(k) else f"**{{{py_str(k)}: {self.arg(v)}}}"
                for k, v in kwargs.items()]

    def function_ref(self, fn) -> str:
        """`torch.relu` when that dotted path names `fn` itself, else a bound constant (found
        once per function in a render)."""
        ref = self._refs.get(id(fn))  # (the graph holds each function while it renders)
        if ref is not None:
            return ref
        mod, name = getattr(fn, "__module__", None), getattr(fn, "__name__", None)
        if mod and name and mod.split(".")[0] == "torch" and "torch" not in self.taken \
                and getattr(sys.modules.get(mod), name, None) is fn:
            ref = f"{mod}.{name}"
        else:
            ref = self.const(fn)
        self._refs[id(fn)] = ref
        return ref

    def expression(self, node) -> tuple[str, int] | None:
        """(The expression computing `node`, how tightly it binds), for a node computed by one
        expression; None for the others (see statement)."""
        t, a = node.target, node.args
        if node.op == "call_function":
            if t in FORMS:
                return self._binary(t, a), LEVEL[t]
            if t is SET_GRAD or t in INPLACE or t is operator.setitem:
                return None
            if t in UNARY:
                return f"{UNARY[t]} {self.operand(a[0], UNARY_LEVEL, tie=False)}", UNARY_LEVEL
            if t is operator.getitem:
                return f"{self.operand(a[0])}[{self.index(a[1])}]", PRIMARY
            if t is getattr and is_identifier(a[1]):
                return f"{self.operand(a[0])}.{a[1]}", PRIMARY
            return f"{self.function_ref(t)}({self.call_args(node)})", PRIMARY
        if node.op == "call_method":
            self_, *rest = node.args
            parts = [self.arg(x) for x in rest] + self.keywords(node.kwargs)
            return f"{attr_expr(self.operand(self_), t)}({', '.join(parts)})", PRIMARY
        if node.op == "get_attr":
            raise NotImplementedError("get_attr nodes: the python backend takes graphs without module state")
        raise NotImplementedError(f"python backend: node kind {node.op}")

    def statement(self, node, expression: tuple[str, int] | None = None) -> list[str]:
        """Python lines computing `node` into its name (`expression`: its expression, made already)."""
        out, t, a = self.names[node], node.target, node.args
        made = expression or self.expression(node)
        if made is not None:
            return [f"{out} = {made[0]}"]
        if t is SET_GRAD:  # run for its effect: `with torch.no_grad()` edges
            return [f"{self.function_ref(t)}({self.arg(a[0])})"]
        if t in INPLACE:
            return [f"{out} = {self.arg(a[0])}", f"{out} {INPLACE[t]} {self.arg(a[1])}"]
        return [f"{self.operand(a[0])}[{self.index(a[1])}] = {self.arg(a[2])}", f"{out} = None"]  # (setitem)

    def _inlines(self, node, after, nesting: dict) -> bool:
        """Whether `node` is written into the statement of `after`, the next node: its only user,
        which reads it once (so `after`'s other operands are names or constants, and the ops
        still run in the graph's order)."""
        users = node.users
        if len(users) != 1 or after not in users or after.op == "output" or nesting.get(node, 0) >= MAX_NESTING:
            return False  # (after None, the last node: in no node's users)
        if not after.kwargs:  # (flat arguments, most ops': counted without the walk)
            uses = 0
            for a in after.args:
                if a is node:
                    uses += 1
                elif type(a) in (tuple, list, dict, slice):
                    break
            else:
                return uses == 1
        return _uses((after.args, after.kwargs), node) == 1

    def render(self, fn_name: str = "forward", params=None, result=None, on_error=None) -> str:
        """The function's source. By default it takes the placeholders and returns the output
        tuple; `params` and `result` (a function of the output names) fuse it into an entry;
        `on_error` (lines) runs if one of the graph's statements raises."""
        nodes = list(self.graph.nodes)
        if params is None:
            params = [self.names[n] for n in nodes if n.op == "placeholder"]
        position = {n: i for i, n in enumerate(nodes)}  # (a value dies after its last user)
        lines = [f"def {fn_name}({', '.join(params)}):"]
        body, end = [], []
        nesting: dict[Node | Traced, int] = {}  # node -> values written into its statement
        names, inline = self.names, self.inline
        for n, after in zip(nodes, [*nodes[1:], None]):
            op = n.op
            if op == "placeholder":
                if names[n] != self.inputs.get(n.name, names[n]):
                    lines.append(f"    {names[n]} = {self.inputs[n.name]}")
                continue
            if op == "output":
                outs = [self.arg(o) for o in n.args[0]]
                if result is None:
                    end.append(f"    return {self.arg(n.args[0])}")
                else:
                    end += ["    " + line for line in result(outs)]
                continue
            made = self.expression(n)
            if made is not None and self._inlines(n, after, nesting):
                inline[n], self._level[n] = made
                nesting[after] = nesting.get(n, 0) + 1
                continue
            body += ["    " + s for s in self.statement(n, made)]
            here = position[n]
            dying = [names[value] for value in n.all_input_nodes if value.op != "placeholder" and value not in inline
                     and max(map(position.__getitem__, value.users)) == here]
            if dying:
                body.append(f"    del {', '.join(sorted(dying))}")
        if on_error and body:  # the graph's statements only: what follows them must not run twice
            body = ["    try:", *("    " + line for line in body), "    except Exception:",
                    *(f"        {line}" for line in on_error)]
        return "\n".join(lines + body + end) + "\n"


def _uses(a, node) -> int:
    """How many times `a` (arguments: tuples, lists, dicts, slices of them) holds `node`."""
    if a is node:
        return 1
    if isinstance(a, (tuple, list)):
        return sum(_uses(x, node) for x in a)
    if isinstance(a, dict):
        return sum(_uses(x, node) for x in a.values())
    if isinstance(a, slice):
        return _uses(a.start, node) + _uses(a.stop, node) + _uses(a.step, node)
    return 0


def fused_entry_source(graph, params, inputs: dict, result, taken, on_error=None) -> tuple[str, dict]:
    """An entry function with the graph's statements inlined: no call, no output tuple.

    `inputs` maps each placeholder's name to the expression reading it from the frame, `result`
    turns the list of output names into the statements that end the entry (a `return`).
    """
    r = Renderer(graph, taken=set(params) | set(taken), inputs=inputs)
    return r.render("entry", params=params, result=result, on_error=on_error), r.consts


class CompiledGraph:
    """The python backend's result: calls like the graph; its source is compiled on first call.

    Its `fused_entry_source` lets rewrite inline the statements into the cache entry instead
    of calling this at all (no call, no output tuple), which is what happens for @jit (the
    compiler finds the method on the object: it imports no backend).
    """

    def __init__(self, graph, name: str):
        self.graph = graph
        self.name = name
        self._fn = None

    def fused_entry_source(self, params, inputs: dict, result, taken, on_error=None) -> tuple[str, dict]:
        """rewrite's entry with this graph's statements inlined (see `fused_entry_source`)."""
        return fused_entry_source(self.graph, params, inputs, result, taken, on_error)

    def source(self) -> tuple[str, dict]:
        r = Renderer(self.graph)
        return f"# python backend: {comment(self.name)}\nimport torch\nimport operator\n\n" + r.render(), r.consts

    def __call__(self, *args):
        if self._fn is None:
            source, consts = self.source()
            if logs.enabled("output_code"):
                logs.get("output_code").debug("python backend source for %s:\n%s", self.name, source)
            self._fn = codeload.load("python", self.name, source, dict(consts))["forward"]
        return self._fn(*args)


@register_backend(native=True)
def python(gm: torch.fx.GraphModule, example_inputs):
    return CompiledGraph(gm.graph, getattr(gm, "_rewrite_name", "graph"))
