"""The `triton` backend: a graph of pointwise ops becomes one fused Triton kernel and a small
Python wrapper that allocates the outputs and launches it.

    @triton.jit
    def kernel_f_0(in0, in1, out0, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(in0 + offs, mask=mask)
        y = tl.load(in1 + offs, mask=mask)
        mul = (x * 2.0)
        add = (mul + y)
        relu = tl.maximum(add, 0.0)
        tl.store(out0 + offs, relu, mask=mask)

This first version fuses graphs whose every op has a lowering (codegen/lowering.py) and
whose tensors all have one shape, contiguous, in one floating dtype (comparisons give
bools); any other graph, and any graph whose inputs require grad while grad mode is on
(no backward kernels yet), runs through torch (the `python` backend's code). On CPU tensors
the kernels run under Triton's interpreter: `TRITON_INTERPRET=1` is set before `triton` is
first imported, and blocks are large (the interpreter pays per program, not per element).
"""
from __future__ import annotations

import os
import sys
import warnings

import torch
import torch.fx

from rewrite import codeload, logs

from . import register_backend
from .lowering import NoLowering, lower

# Without a CUDA device Triton can only interpret: ask for that before anything imports triton
# (torch itself may, on the first traced op, through torch._dynamo).
if "triton" not in sys.modules and not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

FLOATS = {torch.float32: "tl.float32", torch.float16: "tl.float16", torch.bfloat16: "tl.bfloat16",
          torch.float64: "tl.float64"}
GPU_BLOCK = 1024
INTERPRETER_BLOCK = 1 << 16


def _import_triton(device: torch.device):
    """triton, under the interpreter for CPU tensors (None: it cannot run them here)."""
    if device.type == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
        if "triton" in sys.modules:
            return None  # imported without the interpreter: too late to ask for it
        os.environ["TRITON_INTERPRET"] = "1"
    import triton
    return triton


def _literal(a) -> str:
    if isinstance(a, bool):
        return "1" if a else "0"
    if isinstance(a, (int, float)):
        return repr(float(a)) if isinstance(a, float) else repr(a)
    if isinstance(a, str):
        return repr(a)
    if a is None:
        return "None"
    raise NoLowering(f"argument {a!r}")


class Plan:
    """What the kernel reads, computes and writes, or NoLowering."""

    def __init__(self, graph: torch.fx.Graph, example_inputs):
        nodes = list(graph.nodes)
        self.inputs = [n for n in nodes if n.op == "placeholder"]
        output = next(n for n in nodes if n.op == "output")
        self.outputs = list(output.args[0])
        values = {n: n.meta.get("example_value") for n in nodes}
        for n, ex in zip(self.inputs, example_inputs):
            values[n] = ex
        tensors = [v for v in values.values() if isinstance(v, torch.Tensor)]
        if not tensors or not self.outputs or any(
                not isinstance(o, torch.fx.Node) or not isinstance(values.get(o), torch.Tensor) for o in self.outputs):
            raise NoLowering("outputs that are not tensors")
        first = values[self.outputs[0]]
        self.shape, self.device = first.shape, first.device
        self.dtype = next((t.dtype for t in tensors if t.dtype in FLOATS), None)
        dynamic = any(n.meta.get("sym_shape") is not None for n in nodes)
        for t in tensors:
            if t.device != self.device:
                raise NoLowering("tensors on different devices")
            if t.shape != self.shape and (dynamic or not _covers(self.shape, t.shape)):
                raise NoLowering("a tensor the outputs' shape does not cover")
        if any(values[o].shape != self.shape for o in self.outputs):
            raise NoLowering("outputs of different shapes")
            if t.dtype not in FLOATS and t.dtype is not torch.bool:
                raise NoLowering(f"dtype {t.dtype}")
            if t.dtype in FLOATS and t.dtype is not self.dtype:
                raise NoLowering("mixed float dtypes")
        for n in self.inputs:
            if not isinstance(values[n], torch.Tensor):
                raise NoLowering("an input that is not a tensor")
            if values[n].dtype not in FLOATS:  # bools only as comparison results (bool + bool is or)
                raise NoLowering(f"an input of dtype {values[n].dtype}")
            if not values[n].is_contiguous() and dynamic:
                raise NoLowering("a non-contiguous input with symbolic sizes")
            if values[n].requires_grad and torch.is_grad_enabled():
                raise NoLowering("inputs that require grad (no backward kernels yet)")
        self.values = values
        self.body: list[str] = []
        names = {n: f"v_{n.name}" for n in nodes}
        for n in nodes:
            if n.op in ("placeholder", "output"):
                continue
            if n.op not in ("call_function", "call_method"):
                raise NoLowering(f"{n.op} node")
            name = n.target if isinstance(n.target, str) else getattr(n.target, "__name__", "")
            args = [names[a] if isinstance(a, torch.fx.Node) else _literal(a) for a in n.args]
            kwargs = {k: names[v] if isinstance(v, torch.fx.Node) else _literal(v) for k, v in n.kwargs.items()}
            self.body.append(f"{names[n]} = {lower(name, args, kwargs)}")
        self.names = names
        self.numel = first.numel()
        # how each input is read at output element `offs`: directly (same shape, contiguous), or
        # through the output's multi-index and the input's strides (0 where it broadcasts)
        self.offsets = {n: "offs" if values[n].shape == self.shape and values[n].is_contiguous()
                        else _offset_expr(values[n], self.shape) for n in self.inputs}


def _covers(shape, other) -> bool:
    """Whether `other` broadcasts to exactly `shape`."""
    try:
        return torch.broadcast_shapes(other, shape) == shape
    except RuntimeError:
        return False


def _offset_expr(t: torch.Tensor, shape) -> str:
    """The element offset of `t` for the output element `offs` (static sizes and strides)."""
    lead = len(shape) - t.dim()
    terms, inner = [], 1
    for d in range(len(shape) - 1, -1, -1):
        size = shape[d]
        td = d - lead
        if td >= 0 and t.shape[td] != 1 and size != 1:
            index = f"((offs // {inner}) % {size})" if inner > 1 else f"(offs % {size})"
            terms.append(f"{index} * {t.stride(td)}")
        inner *= size
    return " + ".join(reversed(terms)) or "offs * 0"


@register_backend
def triton(gm: torch.fx.GraphModule, example_inputs):
    from .python import python
    fallback = python(gm, example_inputs)
    try:
        plan = Plan(gm.graph, example_inputs)
    except NoLowering as e:
        if logs.enabled("output_code"):
            logs.get("output_code").debug("triton backend: %s runs through torch (%s)",
                                          getattr(gm, "_rewrite_name", "graph"), e)
        return fallback
    tr = _import_triton(plan.device)
    if tr is None:
        warnings.warn("rewrite: the triton backend needs TRITON_INTERPRET=1 before triton is imported to run "
                      "CPU tensors; running through torch", RuntimeWarning, stacklevel=2)
        return fallback
    return _build(gm, plan, tr)


def _build(gm, plan: Plan, tr):
    name = getattr(gm, "_rewrite_name", "graph")
    ins = [f"in{i}" for i in range(len(plan.inputs))]
    outs = [f"out{i}" for i in range(len(plan.outputs))]
    lines = ["import triton", "import triton.language as tl", "", "",
             "@triton.jit",
             f"def kernel_{name}({', '.join(ins + outs)}, n, BLOCK: tl.constexpr):",
             "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)",
             "    mask = offs < n"]
    lines += [f"    {plan.names[p]} = tl.load({i} + {plan.offsets[p]}, mask=mask)" for p, i in zip(plan.inputs, ins)]
    lines += [f"    {line}" for line in plan.body]
    lines += [f"    tl.store({o} + offs, {plan.names[node]}, mask=mask)" for node, o in zip(plan.outputs, outs)]
    source = "\n".join(lines) + "\n"
    ns = codeload.load("triton", f"kernel_{name}", source, {})
    kernel = ns[f"kernel_{name}"]
    block = INTERPRETER_BLOCK if plan.device.type == "cpu" else GPU_BLOCK
    block = min(block, max(16, 1 << (max(plan.numel, 1) - 1).bit_length()))
    out_dtypes = [plan.values[o].dtype for o in plan.outputs]
    if logs.enabled("output_code"):
        logs.get("output_code").debug("triton kernel for %s:\n%s", name, source)

    full = next((i for i, p in enumerate(plan.inputs) if plan.values[p].shape == plan.shape), None)
    static_shape = plan.shape

    def launch(*args):
        # the outputs' shape: an input's that has it (symbolic sizes too), else the traced one
        shape = args[full].shape if full is not None else static_shape
        n = shape.numel()
        outputs = [torch.empty(shape, dtype=dtype, device=args[0].device) for dtype in out_dtypes]
        kernel[(max(1, -(-n // block)),)](*args, *outputs, n, BLOCK=block)
        return tuple(outputs)

    launch.source = source
    return launch
