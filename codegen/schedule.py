"""Scheduling for the triton backend: which fx nodes run in which kernel, in what order.

Every node is one of
  - pointwise: a `lowering.POINTWISE` op (or a cast, floor division, ...) over tensors of one
    shape after broadcasting;
  - reduction: sum/mean/amax/amin/var/std over some dims, or a composite built from them
    (softmax, log_softmax, layer_norm) whose result has the input's shape;
  - extern: everything else (matmul, conv, indexing, views, in-place writes, int arithmetic),
    called through torch by the wrapper, between kernels.

A kernel iterates over a domain: a shape S and the dims D it reduces (none for a pointwise
kernel). Its nodes are elementwise over S ("elem"), or one value per row of the kept dims
("row": reduction results and pointwise ops over them). Nodes are placed greedily in graph
order: a node joins a kernel whose domain fits it and that runs after all of its inputs
exist -- the latest one that computes one of its inputs, else the latest one (so pointwise
consumers fuse into their producers, pointwise producers into the reductions that read them,
and ops on both sides of an extern op keep their own kernels);
a reduction over a pointwise kernel's shape turns that kernel into a reduction kernel.
Graphs that write into tensors keep graph order strictly (a node may only join the last item).
"""
from __future__ import annotations

import torch
import torch.fx

from .lowering import CASTS, FLOOR, POINTWISE, REDUCTIONS, TL, NoLowering, Operand, lower_pointwise, parse_reduction

ELEM, ROW = "elem", "row"


class Info:
    """What the backend knows about one node's value."""

    def __init__(self, node: torch.fx.Node, example):
        self.node, self.example = node, example
        self.is_tensor = isinstance(example, torch.Tensor)
        sym = node.meta.get("sym_shape")
        self.device = node.meta.get("device", getattr(example, "device", None))  # (intermediates: meta shadows)
        if self.is_tensor:
            self.dtype = example.dtype
            self.shape = tuple(sym) if sym is not None else tuple(example.shape)
            self.symbolic = sym is not None and any(not isinstance(s, int) for s in sym)
        else:
            self.dtype, self.shape, self.symbolic = None, None, sym is not None
        self.kind = "extern"
        self.op = None  # pointwise: (name, operands, options); reduction: parse_reduction's dict
        self.why = ""  # why an op runs through torch


def op_name(node: torch.fx.Node) -> str:
    t = node.target
    return t if isinstance(t, str) else getattr(t, "__name__", "")


def _operands(node: torch.fx.Node, infos) -> tuple[str, list, dict]:
    """(name, operands, options) of a pointwise call, or NoLowering. Operands are fx nodes
    (tensors, int scalars) or Python numbers; options are the op's keyword values."""
    name, args, kw = op_name(node), list(node.args), dict(node.kwargs)
    if "out" in kw:
        raise NoLowering("out=")
    if name in ("max", "min") and len(args) == 2 and isinstance(args[1], torch.fx.Node) and not kw:
        name = "maximum" if name == "max" else "minimum"
    if name in ("relu", "silu"):
        inplace = args.pop(1) if len(args) > 1 else kw.pop("inplace", False)
        if inplace:
            raise NoLowering(f"in-place {name}")
    if name == "gelu":
        approximate = args.pop(1) if len(args) > 1 else kw.pop("approximate", "none")
        return name, args, {"approximate": approximate, **_no(kw)}
    if name in ("add", "sub"):
        alpha = args.pop(2) if len(args) > 2 else kw.pop("alpha", 1)
        return name, args, {"alpha": alpha, **_no(kw)}
    if name == "div" and kw.get("rounding_mode") is not None:
        if kw.pop("rounding_mode") != "floor":
            raise NoLowering("div with rounding_mode='trunc'")
        name = "floordiv"
    if name in ("clamp", "clip"):
        lo = args[1] if len(args) > 1 else kw.pop("min", None)
        hi = args[2] if len(args) > 2 else kw.pop("max", None)
        return "clamp", [args[0], lo, hi], _no(kw)
    if name in ("to", "type") or name in CASTS:
        return "cast", args[:1], {"dtype": _cast_target(name, args, kw, infos)}
    if name == "invert":
        if infos[args[0]].dtype is not torch.bool:
            raise NoLowering("~ of an integer tensor")
        name = "logical_not"
    if name not in POINTWISE and name not in FLOOR:
        raise NoLowering(f"no lowering for {name}")
    return name, args, _no(kw)


def _no(kw: dict) -> dict:
    if kw:
        raise NoLowering(f"keyword arguments {sorted(kw)}")
    return {}


def _cast_target(name, args, kw, infos) -> torch.dtype:
    if name in CASTS:
        if len(args) > 1 or set(kw) - {"memory_format"} or kw.get("memory_format", torch.preserve_format) \
                is not torch.preserve_format:
            raise NoLowering(f".{name}() arguments")
        target = CASTS[name]
    else:
        rest = args[1:]
        target = kw.pop("dtype", rest.pop(0) if rest and isinstance(rest[0], torch.dtype) else None)
        kw.pop("non_blocking", None)
        if rest or kw or not isinstance(target, torch.dtype):
            raise NoLowering(f".{name}() with arguments other than a dtype")
    if target == infos[args[0]].dtype:
        raise NoLowering(f".{name}() to the same dtype (returns its input)")
    return target


# in-place ops that change a tensor's sizes or strides: the example values recorded while
# tracing show the sizes after them, not the sizes the op's input had when it was made
RESHAPES_IN_PLACE = {"unsqueeze_", "squeeze_", "t_", "transpose_", "swapdims_", "swapaxes_", "resize_",
                     "resize_as_", "as_strided_", "set_"}


def analyze(graph: torch.fx.Graph, example_inputs) -> dict:
    """An Info for every node, with its kind decided."""
    for n in graph.nodes:
        if n.op in ("call_function", "call_method") and op_name(n) in RESHAPES_IN_PLACE:
            raise NoLowering(f"{op_name(n)} changes sizes in place")
        if isinstance(n.kwargs.get("out"), torch.fx.Node):
            raise NoLowering(f"{op_name(n)}(out=) may resize its output tensor in place")
    infos = {}
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    examples = dict(zip(placeholders, example_inputs))
    for n in graph.nodes:
        infos[n] = Info(n, examples[n] if n in examples else n.meta.get("example_value"))
    for n in graph.nodes:
        if n.op in ("call_function", "call_method"):
            _classify(infos[n], infos)
    return infos


def _classify(info: Info, infos) -> None:
    n = info.node
    try:
        if not info.is_tensor or info.dtype not in TL:
            raise NoLowering("a result that is not a tensor of a supported dtype")
        tensors = [infos[a] for a in n.all_input_nodes if infos[a].is_tensor]
        if not tensors:
            raise NoLowering("no tensor operands")
        for t in tensors:
            if t.dtype not in TL or t.device != info.device:
                raise NoLowering("an operand of another dtype or device")
        for a in n.all_input_nodes:
            if not infos[a].is_tensor and not isinstance(infos[a].example, (int, bool)):
                raise NoLowering("an operand that is neither a tensor nor an int")
        name = op_name(n)
        if name in REDUCTIONS and not (name in ("max", "min") and len(n.args) == 2):
            x = n.args[0] if n.args else None
            if not isinstance(x, torch.fx.Node) or not infos[x].is_tensor or not infos[x].shape:
                raise NoLowering(f"{name} of a 0-dim tensor or a non-tensor")
            spec = parse_reduction(name, tuple(n.args[1:]), dict(n.kwargs), len(infos[x].shape))
            if spec["op"] in ("mean", "var", "std", "softmax", "log_softmax", "layer_norm") \
                    and not info.dtype.is_floating_point:
                raise NoLowering(f"{name} of an integer tensor")
            if spec["op"] in ("amax", "amin", "max", "min") and not info.dtype.is_floating_point:
                raise NoLowering(f"{name} of an integer tensor")
            if spec["op"] == "layer_norm" and any(
                    isinstance(infos.get(w), Info) and infos[w].dtype != infos[x].dtype
                    for w in (spec["weight"], spec["bias"]) if isinstance(w, torch.fx.Node)):
                raise NoLowering("layer_norm with weights of another dtype")
            info.kind, info.op = "reduction", spec
            info.input = x
            return
        info.op = _operands(n, infos)
        name, args, options = info.op
        lower_pointwise(name, [_dummy(a, infos) for a in args], options, info.dtype)  # or NoLowering
        info.kind = "pointwise"
    except NoLowering as e:
        info.kind, info.why = "extern", str(e)


def _dummy(a, infos):
    if a is None:
        return None
    if not isinstance(a, torch.fx.Node):
        return Operand(None, None, a)
    info = infos[a]
    return Operand("a", info.dtype if info.is_tensor else torch.int64, info.example)


# calls a graph makes to switch a mode (inference_mode, autocast) for the ops after them:
# nodes after them must not join a kernel that runs before them
MODES = {"_enter_autocast", "_exit_autocast", "_enter_inference_mode", "_exit_inference_mode"}


def writes(node: torch.fx.Node) -> bool:
    """Whether an extern op may write into a tensor (in-place ops, out=, random draws) or switch
    a mode: the graph then keeps its order strictly. rewrite's tracer records it per node
    (`meta["writes"]`: ATen's schemas said so while the op ran); a node of a graph it did
    not trace may write for all we know."""
    if node.op in ("placeholder", "output", "get_attr"):
        return False
    if op_name(node) in MODES or node.meta.get("seeded"):
        return True
    return node.meta.get("writes", True)


class Kernel:
    """A domain (shape S, reduced dims D) and the nodes computed in it, each at a level."""

    def __init__(self, shape: tuple, dims: tuple = ()):
        self.shape, self.dims = shape, dims
        self.nodes: list[torch.fx.Node] = []
        self.level: dict[torch.fx.Node, str] = {}

    @property
    def kept(self) -> tuple:
        return tuple(s for i, s in enumerate(self.shape) if i not in self.dims)

    def keep_shape(self) -> tuple:
        return tuple(1 if i in self.dims else s for i, s in enumerate(self.shape))

    def frame(self, shape: tuple) -> str | None:
        """How a value of `shape` sits in this domain: elementwise, per row, or not at all."""
        if shape == self.shape:
            return ELEM
        if self.dims and (shape == self.keep_shape() or shape == self.kept):
            return ROW
        return None

    def broadcasts_per_row(self, shape: tuple) -> bool:
        """Whether a row value of `shape` broadcasts over S along the reduced dims."""
        padded = (1,) * (len(self.shape) - len(shape)) + tuple(shape)
        return padded == self.keep_shape()

    def accepts(self, info: Info, infos) -> bool:
        inside = [a for a in info.node.all_input_nodes if a in self.level]
        if info.kind == "pointwise":
            frame = self.frame(info.shape)
            if frame == ROW and any(self.level[a] != ROW for a in inside):
                return False
            if frame == ELEM and any(self.level[a] == ROW and not self.broadcasts_per_row(infos[a].shape)
                                     for a in inside):
                return False  # x - x.sum(1) over a square x: torch broadcasts the sums along dim 1
            return frame is not None
        spec = info.op
        x = infos[info.input]
        side = [w for w in (spec.get("weight"), spec.get("bias")) if isinstance(w, torch.fx.Node)]
        if any(w in self.level for w in side):
            return False
        if not self.dims:
            return x.shape == self.shape
        return x.shape == self.shape and spec["dims"] == self.dims and \
            (info.input not in self.level or self.level[info.input] == ELEM)

    def add(self, info: Info) -> None:
        if info.kind == "reduction" and not self.dims:
            self.dims = info.op["dims"]
        self.nodes.append(info.node)
        if info.kind == "reduction":
            self.level[info.node] = ELEM if info.op["op"] in ("softmax", "log_softmax", "layer_norm") else ROW
        else:
            self.level[info.node] = self.frame(info.shape)


def schedule(graph: torch.fx.Graph, infos: dict) -> list:
    """Kernels and extern nodes, in the order the wrapper runs them."""
    items: list = []
    where: dict[torch.fx.Node, int] = {}
    strict = any(infos[n].kind == "extern" and writes(n) for n in graph.nodes if n.op != "placeholder")
    for n in graph.nodes:
        if n.op in ("placeholder", "output"):
            continue
        info = infos[n]
        if info.kind == "extern":
            items.append(n)
            where[n] = len(items) - 1
            continue
        ready = max((where[a] for a in n.all_input_nodes if a in where), default=-1)
        first = max(len(items) - 1 if strict else ready, 0)
        fits = [i for i in range(len(items) - 1, first - 1, -1)
                if isinstance(items[i], Kernel) and i >= ready and items[i].accepts(info, infos)]
        # prefer a kernel that computes one of the node's inputs (no read back from memory)
        producers = [i for i in fits if any(a in items[i].level for a in n.all_input_nodes)]
        chosen = (producers or fits or [None])[0]
        if chosen is None:
            x = infos[info.input] if info.kind == "reduction" else info
            items.append(Kernel(x.shape))
            chosen = len(items) - 1
        items[chosen].add(info)
        where[n] = chosen
    return items
