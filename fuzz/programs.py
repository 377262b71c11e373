"""Hypothesis strategies for random PyTorch programs, written as Python source.

A program is a function `f(<inputs>)` whose body is drawn statement by statement from the
rule tables below. Each drawn statement is first run on small sample inputs (sizes d0=2,
d1=3, d2=5): if it raises there it is dropped, so most programs are valid (kernels that do
not exist for a dtype included), and the tables stay simple templates instead of
hand-written shape and dtype rules. A few statements are
deliberately outside what the tracer supports (data-dependent `if`, `.item()`, `print`,
appending to a passed-in list, in-place ops on inputs): those must still give eager's
result.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from hypothesis import strategies as st

from .inputs import DTYPES, LAYOUTS, BoxSpec, ListSpec, ScalarSpec, TensorSpec, make

META_DIMS = {"d0": 2, "d1": 3, "d2": 5}
SYMS = ("d0", "d1", "d2")

# --- rule tables: templates over operands {a}, {b} (tensors), {k} (a Python int), {d}, {e} (dims) -------
UNARY = [
    "torch.exp({a})", "torch.sigmoid({a})", "torch.tanh({a})", "torch.sin({a})", "torch.sqrt({a}.abs())",
    "torch.log1p({a}.abs())", "{a}.relu()", "-{a}", "{a}.abs()", "torch.neg({a})", "F.gelu({a})", "F.silu({a})",
    "torch.logical_not({a})", "~{a}", "{a}.float()", "{a}.to(torch.float64)", "{a}.to(torch.int64)",
    "{a}.to(torch.bool)", "{a}.clamp(min=-1, max=1)", "torch.clamp({a}, min=0)", "{a}.sign()", "{a}.floor()",
    "{a} ** 2", "{a}.reciprocal()", "torch.rsqrt({a}.abs() + 1)", "F.softplus({a})", "{a}.round()",
]
BINARY = [
    "{a} + {b}", "{a} - {b}", "{a} * {b}", "{a} / {b}", "{a} // {b}", "{a} % {b}", "torch.maximum({a}, {b})",
    "torch.minimum({a}, {b})", "{a} > {b}", "{a} <= {b}", "{a} == {b}", "{a} != {b}", "{a} & {b}", "{a} | {b}",
    "{a} ^ {b}", "torch.where({a} > 0, {a}, {b})", "torch.where({a} > {b}, {b}, 0)", "torch.add({a}, {b}, alpha=2)",
    "torch.atan2({a}, {b})", "{a} + {k}", "{a} * {k}", "{a} - 0.5", "2 ** {a}", "{a} / ({k} + 1)", "{a} ** {b}",
]
REDUCE = [
    "{a}.sum(dim={d}, keepdim={kd})", "{a}.mean(dim={d})", "{a}.amax(dim={d}, keepdim={kd})", "{a}.amin({d})",
    "torch.softmax({a}, dim={d})", "torch.log_softmax({a}, dim={d})", "F.layer_norm({a}, {a}.shape[-1:])",
    "{a}.var(dim={d})", "{a}.std(dim={d}, keepdim={kd})", "{a}.sum()", "{a}.prod(dim={d})", "{a}.max(dim={d}).values",
    "{a}.argmax(dim={d})", "{a}.any(dim={d})", "{a}.all()", "{a}.cumsum(dim={d})", "{a}.norm(dim={d})",
]
VIEW = [
    "{a}.transpose({d}, {e})", "{a}.permute(*reversed(range({a}.dim())))", "{a}.flatten()", "{a}.unsqueeze({d})",
    "{a}.squeeze({d})", "{a}.reshape({a}.shape[0], -1)", "{a}.view(-1)", "{a}.unsqueeze(0).expand(2, *{a}.shape)",
    "{a}.t()", "{a}.contiguous()", "{a}.mT", "{a}.T", "{a}.flatten(0, -1).unflatten(0, {a}.shape)",
    "{a}.movedim({d}, {e})",
]
INDEX = [
    "{a}[0]", "{a}[1:]", "{a}[:, :1]", "{a}[..., None]", "{a}[{a}.shape[0] // 2:]", "{a}[None, ..., -1]",
    "{a}[torch.arange({a}.shape[0]).flip(0)]", "{a}[::2]", "{a}[-1, ...]", "{a}[[0, -1]]",
]
COMBINE = [
    "torch.cat([{a}, {b}], dim={d})", "torch.stack([{a}, {a}], dim={d})", "{a}.split(1, dim={d})[0]",
    "torch.chunk({a}, 2, dim={d})[-1]", "{a} @ {b}", "{a} @ {a}.transpose(-1, -2)", "torch.matmul({a}, {b})",
    "torch.cat(({a}, {a} * 2))", "sum([{a}, {b}, {a}])", "torch.broadcast_tensors({a}, {b})[1]",
]
SIZES = [
    "{a}.shape[{d}] * 2", "{a}.numel() + {k}", "len({a})", "{a}.dim() - 1", "{a}.size({d}) // 2 + 1",
    "max({a}.shape) if {a}.dim() else 1", "{k} * 3 - 1",
]
CREATE = [
    "torch.zeros({k})", "torch.ones({k}, {k})", "torch.arange({k}).float()", "torch.full(({k},), 2.5)",
    "torch.zeros_like({a})", "torch.ones_like({a}, dtype=torch.float64)", "{a}.new_zeros({a}.shape)",
    "torch.eye({k})", "torch.linspace(0, 1, {k})",
]
INPLACE = [
    "{a}.add_(1)", "{a}.mul_(2)", "{a}[0] = 0", "{a}.clamp_(min=0)", "{a}.zero_()", "{a} += {b}",
    "{a}.copy_({b})", "torch.relu_({a})",
]


class _Discard(Exception):
    pass


@dataclass
class Program:
    inputs: list
    body: list[str] = field(default_factory=list)
    helpers: list[str] = field(default_factory=list)
    returns: str = "None"

    def source(self) -> str:
        params = ", ".join(spec.name for spec in self.inputs)
        lines = ["import torch", "import torch.nn.functional as F", ""]
        for h in self.helpers:
            lines += [h, ""]
        lines.append(f"def f({params}):")
        lines += ["    " + line for line in self.body]
        lines.append(f"    return {self.returns}")
        return "\n".join(lines) + "\n"


class Gen:
    """Builds one program: the body so far and the meta values of its variables."""

    def __init__(self, program: Program):
        self.program = program
        self.meta: dict[str, object] = {}
        for spec in program.inputs:
            if isinstance(spec, TensorSpec):
                self.meta[spec.name] = make(spec, META_DIMS, 0)
            elif isinstance(spec, ScalarSpec):
                self.meta[spec.name] = spec.value
            elif isinstance(spec, BoxSpec):
                self.meta[spec.name] = make(spec, META_DIMS, 0)
            else:
                self.meta[spec.name] = []
        self.count = 0

    def names(self, kind) -> list[str]:
        return [n for n, v in self.meta.items()
                if isinstance(v, kind) and not isinstance(v, bool) and not n.startswith("_")]

    def new(self, prefix="t") -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def attempt(self, lines: list[str], meta_lines: list[str] | None = None) -> bool:
        """Keep `lines` if they (or their meta stand-in) run on the meta values."""
        env = dict(self.meta)
        try:
            exec("\n".join(meta_lines if meta_lines is not None else lines),
                 {"torch": torch, "F": F, "__builtins__": __builtins__, **_helper_ns(self.program)}, env)
        except Exception:
            return False
        self.meta = env
        self.program.body += lines
        return True


def _helper_ns(program):
    ns = {"torch": torch, "F": F}
    for h in program.helpers:
        exec(h, ns)
    return ns


def _fill(draw, g: Gen, template: str) -> str:
    tensors, ints = g.names(torch.Tensor), g.names(int)
    if not tensors:
        raise _Discard
    a = draw(st.sampled_from(tensors))
    rank = g.meta[a].dim()
    dim = (lambda: draw(st.integers(-rank, rank - 1))) if rank else (lambda: 0)
    return template.format(
        a=a, b=draw(st.sampled_from(tensors)), k=draw(st.sampled_from(ints)) if ints else "2",
        d=dim(), e=dim(), kd=draw(st.booleans()))


def rule_assign(table, prefix="t"):
    def rule(draw, g):
        expr = _fill(draw, g, draw(st.sampled_from(table)))
        line = f"{g.new(prefix)} = {expr}"
        return [line], None
    return rule


def rule_inplace(draw, g):
    return [_fill(draw, g, draw(st.sampled_from(INPLACE)))], None


def rule_if_python(draw, g):
    ints, tensors = g.names(int), g.names(torch.Tensor)
    if not tensors:
        raise _Discard
    a = draw(st.sampled_from(tensors))
    cond = draw(st.sampled_from([f"{draw(st.sampled_from(ints))} > 2" if ints else "True",
                                 f"{a}.shape[0] > 2" if g.meta[a].dim() else f"{a}.dim() == 0",
                                 f"{a}.dtype == torch.float32", f"{a}.is_floating_point()",
                                 f"len({a}.shape) >= 2"]))
    then, other = draw(st.sampled_from(UNARY)), draw(st.sampled_from(UNARY))
    lines = [f"if {cond}:", f"    {a} = {then.format(a=a)}", "else:", f"    {a} = {other.format(a=a)}"]
    meta = [f"_t = {then.format(a=a)}", f"_o = {other.format(a=a)}",
            "assert _t.shape == _o.shape and _t.dtype == _o.dtype", f"{a} = _t", "del _t, _o"]
    return lines, meta


def rule_for(draw, g):
    tensors = g.names(torch.Tensor)
    if not tensors:
        raise _Discard
    a = draw(st.sampled_from(tensors))
    n = draw(st.integers(0, 3))
    body = draw(st.sampled_from(["{a} = {a} + _i", "{a} = {a} * 0.5", "{a} = {a}.relu() - _i"])).format(a=a)
    lines = [f"for _i in range({n}):", f"    {body}"]
    # run at least once on the samples, and keep the loop only if it does not change the dtype
    meta = [f"_d = {a}.dtype", f"for _i in range({max(n, 1)}):", f"    {body}", f"assert {a}.dtype == _d",
            "del _d, _i"]
    return lines, meta


GRAD_CONTEXTS = ["torch.no_grad()", "torch.enable_grad()", "torch.set_grad_enabled(False)",
                 "torch.set_grad_enabled(True)"]


def rule_grad_block(draw, g):
    """A statement (possibly one that breaks the graph) inside a grad-mode `with` block."""
    inner = draw(st.sampled_from([rule_assign(UNARY), rule_assign(BINARY), rule_assign(REDUCE), rule_unsupported]))
    lines, meta = inner(draw, g)
    ctx = draw(st.sampled_from(GRAD_CONTEXTS))
    wrap = lambda body: [f"with {ctx}:", *("    " + line for line in body)]  # noqa: E731
    return wrap(lines), wrap(meta if meta is not None else lines)


HELPERS = [
    "def h{i}(a, b=2, *, scale=1.0):\n    return a * b + scale",
    "def h{i}(*ts, **kw):\n    out = ts[0]\n    for t in ts[1:]:\n        out = out + t\n    return out * kw.get('w', 1)",
    "def h{i}(a):\n    def inner(b):\n        return b.relu() + a.shape[-1] if a.dim() else b\n    return inner(a)",
    "def h{i}(a, n=3):\n    return [a * j for j in range(n)][-1]",
]
CALLS = {0: ["h{i}({a})", "h{i}({a}, 3)", "h{i}({a}, b=0.5, scale=2.0)"], 1: ["h{i}({a}, {a})", "h{i}({a}, {a}, w=3)"],
         2: ["h{i}({a})"], 3: ["h{i}({a})", "h{i}({a}, n=2)"]}


def rule_helper(draw, g):
    which = draw(st.integers(0, len(HELPERS) - 1))
    i = len(g.program.helpers)
    template = draw(st.sampled_from(CALLS[which])).replace("{i}", str(i))
    g.program.helpers.append(HELPERS[which].format(i=i))
    expr = _fill(draw, g, template)
    return [f"{g.new()} = {expr}"], None


def rule_unsupported(draw, g):
    """What the tracer cannot put in a graph yet: the call must still give eager's result."""
    tensors, lists = g.names(torch.Tensor), [n for n, v in g.meta.items() if isinstance(v, list)]
    if not tensors:
        raise _Discard
    a = draw(st.sampled_from(tensors))
    kind = draw(st.sampled_from(["if", "item", "print", "append"] if lists else ["if", "item", "print"]))
    if kind == "if":
        return [f"if {a}.float().sum() > 0:", f"    {a} = {a} * 2"], [f"{a} = {a} * 2"]
    if kind == "item":
        k = g.new("s")
        return [f"{k} = {a}.float().sum().item()"], [f"{k} = 1.0"]
    if kind == "print":
        return [f"print('shape', tuple({a}.shape))"], []
    return [f"{lists[0]}.append({a})"], []


def rule_box(draw, g):
    """Read a passed-in object's attributes, or set one (a side effect eager makes)."""
    boxes = [n for n, v in g.meta.items() if type(v).__name__ == "Box"]
    tensors = g.names(torch.Tensor)
    if not boxes or not tensors:
        raise _Discard
    box, a = boxes[0], draw(st.sampled_from(tensors))
    template = draw(st.sampled_from([
        f"{g.new()} = {a} * {box}.w + {box}.k", f"{g.new()} = {box}.w.sum() * {box}.k",
        f"{box}.seen = {a}.shape", f"{box}.k = {box}.k + 1"]))
    return [template], None


RULES = [
    (8, rule_assign(UNARY)), (8, rule_assign(BINARY)), (5, rule_assign(REDUCE)), (5, rule_assign(VIEW)),
    (4, rule_assign(INDEX)), (4, rule_assign(COMBINE)), (3, rule_assign(SIZES, "k")), (2, rule_assign(CREATE)),
    (2, rule_inplace), (2, rule_if_python), (2, rule_for), (2, rule_helper), (1, rule_unsupported),
    (2, rule_box), (1, rule_grad_block),
]
_WEIGHTED = [rule for weight, rule in RULES for _ in range(weight)]


@st.composite
def tensor_specs(draw, name: str) -> TensorSpec:
    rank = draw(st.integers(0, 3))
    return TensorSpec(name, SYMS[3 - rank:], draw(st.sampled_from(DTYPES)), draw(st.sampled_from(LAYOUTS)))


@st.composite
def programs(draw, max_statements: int = 8) -> Program:
    n_tensors = draw(st.integers(1, 3))
    inputs = [draw(tensor_specs(f"x{i}")) for i in range(n_tensors)]
    if draw(st.booleans()):
        inputs.append(ScalarSpec("n", "int", draw(st.integers(0, 4))))
    if draw(st.integers(0, 3)) == 0:
        inputs.append(ScalarSpec("s", "float", draw(st.sampled_from([0.5, -1.5, 2.0, 0.0]))))
    if draw(st.integers(0, 4)) == 0:
        inputs.append(BoxSpec("obj", draw(st.integers(1, 3))))
    if draw(st.integers(0, 4)) == 0:
        inputs.append(ListSpec("out"))
    program = Program(inputs)
    g = Gen(program)
    for _ in range(draw(st.integers(1, max_statements))):
        rule = draw(st.sampled_from(_WEIGHTED))
        helpers = list(program.helpers)
        try:
            lines, meta = rule(draw, g)
        except _Discard:
            continue
        if not g.attempt(lines, meta):
            program.helpers[:] = helpers
    values = [n for n, v in g.meta.items() if isinstance(v, (torch.Tensor, int, float)) and not isinstance(v, bool)
              and not n.startswith("_")]
    fresh = [n for n in values if n not in {s.name for s in inputs}] or values
    picked = draw(st.lists(st.sampled_from(fresh), min_size=1, max_size=3, unique=True))
    shape = draw(st.sampled_from(["single", "tuple", "list", "dict"]))
    if shape == "single" or len(picked) == 1 and shape != "list":
        program.returns = picked[0]
    elif shape == "tuple":
        program.returns = "(" + ", ".join(picked) + ",)"
    elif shape == "list":
        program.returns = "[" + ", ".join(picked) + "]"
    else:
        program.returns = "{" + ", ".join(f"{n!r}: {n}" for n in picked) + "}"
    return program


@st.composite
def dims(draw) -> dict:
    """Sizes for d0, d1, d2: mostly 2..5, sometimes the special 0 and 1."""
    special = st.sampled_from([0, 1])
    return {s: draw(special) if draw(st.integers(0, 5)) == 0 else draw(st.integers(2, 5)) for s in SYMS}


__all__ = ["programs", "dims", "Program"]
