"""Hypothesis strategies for random PyTorch programs, written as Python source.

A program is a function `f(<inputs>)` whose body is drawn statement by statement from the
rule tables below. Each drawn statement is first run on small sample inputs (sizes d0=2,
d1=3, d2=5): if it raises there it is dropped, so most programs are valid (kernels that do
not exist for a dtype included), and the tables stay simple templates instead of
hand-written shape and dtype rules. A few statements are
deliberately outside what the tracer supports (data-dependent `if`, `.item()`, `print`,
appending to a passed-in list): those must still give eager's result.

Writes into tensors are traced, inputs included, and have their own rules: in-place methods
(`x.add_(t)`), augmented assignment (`x += t`), item and slice assignment (`x[:, :1] = t`),
`out=` arguments, writes through views of inputs (`x[0].mul_(2)`, `x.view(-1).add_(1)`),
in-place view ops and autograd state (`x.unsqueeze_(0)`, `x.set_(y)`, `x.detach_()`), other
spellings (`x.__iadd__(y)`, `torch.nn.init.zeros_(x)`, `torch.ops.aten.add_`, `x[x > 0] += 1`),
writes into a tensor reached through an attribute (`obj.w.add_(1)`), an inlined helper that
writes into its argument, writes in loops, and writes under `torch.no_grad()` into inputs
that require grad (in grad mode those raise eagerly, so the sample run drops them).
The targets are mostly inputs and views of inputs, and some programs get inputs that alias
each other (`AliasSpec`: a view of an earlier input, or two views of a hidden base).

Swarm testing: each program draws which rules it may use at all, so programs dense in a few
constructs (say, nothing but writes into aliased inputs) are common.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from hypothesis import strategies as st

from .inputs import (ALIAS_VIEWS, DTYPES, LAYOUTS, SHARED_VIEWS, AliasSpec, BoxSpec, ListSpec, ScalarSpec,
                     TensorSpec, make_args)

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
# writes into {a} (most often an input or a view of one; see `rule_write`)
INPLACE = [
    "{a}.add_(1)", "{a}.mul_(2)", "{a}.clamp_(min=0)", "{a}.zero_()", "{a}.copy_({b})", "torch.relu_({a})",
    "{a}.add_({b})", "{a}.mul_({b})", "{a}.sub_({b}, alpha=2)", "{a}.div_(2)", "{a}.clamp_(-1, 1)",
    "{a}.fill_({k})", "{a}.neg_()", "{a}.abs_()", "{a}.sigmoid_()", "{a}.masked_fill_({b} > 0, 0)",
    "{a}.addcmul_({b}, {b}, value=0.5)", "{a}.lerp_({b}, 0.5)", "{a}.pow_(2)", "{a}.floor_()", "torch.sin_({a})",
    "{a}.index_fill_({d}, torch.tensor([0]), {k})", "{a}.copy_({b}.flip(0))", "{a}.add_({a})",
    "F.relu({a}, inplace=True)", "{a}.mul_(2).add_({b})",
]
AUGMENTED = [
    "{a} += {b}", "{a} -= {b}", "{a} *= {k}", "{a} /= 2", "{a} += 1", "{a} *= {b}", "{a} //= 2", "{a} |= {b}",
    "{a} **= 2", "{a} -= {a}.mean()", "{a} += {a}",
]
SETITEM = [
    "{a}[0] = 0", "{a}[:1] = {k}", "{a}[..., -1:] = {b}[..., :1]", "{a}[:, :1] = 1.5", "{a}[...] = {b}",
    "{a}[{a} > 0] = 0", "{a}[[0, -1]] = {k}", "{a}[1:] = {a}[:-1].clone()", "{a}[1:] = {a}[:-1]",
    "{a}[:] = {a}.flip(0)", "{a}[0] = {b}[0]", "{a}[:, 1] = {b}[:, 0]", "{a}[..., ::2] = {b}[..., ::2]",
    "{a}[None] = {b}.sum()",
]
OUT = [
    "torch.add({a}, {b}, out={a})", "torch.mul({b}, {k}, out={a})", "torch.sin({b}, out={a})",
    "torch.maximum({a}, {b}, out={a})", "torch.clamp({b}, min=0, out={a})", "torch.sum({b}, {d}, out={a})",
    "torch.neg({a}, out={b})", "torch.where({b} > 0, {a}, {b}, out={a})", "torch.add({a}, 1, out={b})",
]
VIEW_WRITES = [  # through a view of {a}
    "{a}[0].mul_(2)", "{a}.view(-1).add_(1)", "{a}[:, 1:].zero_()", "{a}.t().add_({b})",
    "{a}.transpose(0, -1)[0].fill_(1)", "{a}.diagonal().add_(1)", "{a}.unsqueeze(0).mul_(0.5)",
    "{a}[..., ::2].neg_()", "{a}.narrow({d}, 0, 1).add_(1)", "{a}.unbind(0)[-1].copy_({b})",
    "{a}.split(1, {d})[-1].mul_(3)", "{a}.chunk(2)[0].clamp_(max=0)", "{a}.flatten()[:2].zero_()",
    "{a}.reshape(-1)[::2].fill_({k})", "{a}.mT[0] = 1", "{a}.detach().mul_(2)", "{a}.view({a}.shape)[...] = {b}",
    "{a}[1:][0].sub_(1)", "{a}.expand_as({a}).add_(1)",
]
META_INPLACE = [  # in-place view ops and autograd state: the input's shape, strides, memory or grad change
    # (resize_ only shrinks: growing reads uninitialized memory)
    "{a}.unsqueeze_(0)", "{a}.t_()", "{a}.squeeze_()", "{a}.transpose_(0, -1)", "{a}.resize_(0)",
    "{a}.swapdims_(0, -1)", "{a}.set_({b})", "{a}.data = {b}", "{a}.requires_grad_()", "{a}.detach_()",
    "{a}.grad = {b}",
]
OTHER_WRITES = [  # spelled otherwise: dunder, functional and init helpers, aten, advanced indexing, raw storage
    "{a}.__iadd__({b})", "torch.nn.init.zeros_({a})", "torch.nn.init.constant_({a}, {k})", "F.hardtanh_({a})",
    "F.leaky_relu({a}, 0.5, True)", "{a}.index_add_(0, torch.tensor([0]), {b}[:1])", "{a}.data.add_(1)",
    "{a}.masked_scatter_({b} > 0, {b})", "torch.ops.aten.add_({a}, 1)", "{a}.untyped_storage().fill_(0)",
    "{a}[{a} > 0] += 1", "torch.Tensor.add_({a}, 1)", "{a}.index_put_((torch.tensor([0]),), {b}[:1])",
    "{a}.scatter_(0, torch.zeros_like({a}, dtype=torch.long), {b})",
]
# views of {a} bound to a name, for later writes through them (and reads after the writes)
VIEW_OF_INPUT = [
    "{a}[0]", "{a}[1:]", "{a}.view(-1)", "{a}.t()", "{a}[:, :1]", "{a}.diagonal()", "{a}.unsqueeze(0)",
    "{a}.transpose(0, -1)", "{a}.detach()", "{a}[..., ::2]", "{a}.expand(2, *{a}.shape)", "{a}",
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
        self.meta: dict[str, object] = dict(zip((s.name for s in program.inputs),
                                                 make_args(program.inputs, META_DIMS, 0)))
        self.input_tensors = [self.meta[s.name] for s in program.inputs if isinstance(s, (TensorSpec, AliasSpec))]
        self.count = 0

    def names(self, kind) -> list[str]:
        return [n for n, v in self.meta.items()
                if isinstance(v, kind) and not isinstance(v, bool) and not n.startswith("_")]

    def input_aliases(self) -> list[str]:
        """The tensors that are inputs or share memory with one (views of inputs)."""
        ptrs = {t.untyped_storage().data_ptr() for t in self.input_tensors if t.untyped_storage().nbytes()}
        return [n for n in self.names(torch.Tensor)
                if any(self.meta[n] is t for t in self.input_tensors) or
                self.meta[n].untyped_storage().nbytes() and self.meta[n].untyped_storage().data_ptr() in ptrs]

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


def _fill(draw, g: Gen, template: str, a: str | None = None) -> str:
    tensors, ints = g.names(torch.Tensor), g.names(int)
    if not tensors:
        raise _Discard
    a = a or draw(st.sampled_from(tensors))
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


def _write_target(draw, g) -> str | None:
    """Mostly an input or a view of one; sometimes any tensor (None)."""
    aliases = g.input_aliases()
    return draw(st.sampled_from(aliases)) if aliases and draw(st.integers(0, 4)) else None


def _is_expression(line: str) -> bool:
    try:
        compile(line, "<rule>", "eval")
    except SyntaxError:
        return False
    return True


def rule_write(table):
    """A write into a tensor; a call's result (the tensor written) is sometimes bound to a name."""
    def rule(draw, g):
        line = _fill(draw, g, draw(st.sampled_from(table)), _write_target(draw, g))
        if _is_expression(line) and draw(st.integers(0, 3)) == 0:
            line = f"{g.new()} = {line}"
        return [line], None
    return rule


def rule_view_of_input(draw, g):
    """Name a view of an input (or of a view of one), for later writes through it."""
    aliases = g.input_aliases()
    if not aliases:
        raise _Discard
    a = draw(st.sampled_from(aliases))
    return [f"{g.new('v')} = {draw(st.sampled_from(VIEW_OF_INPUT)).format(a=a)}"], None


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
    body = draw(st.sampled_from(["{a} = {a} + _i", "{a} = {a} * 0.5", "{a} = {a}.relu() - _i", "{a}.add_(_i)",
                                 "{a}.mul_(0.5)", "{a}[_i % len({a}):] += 1"])).format(a=a)
    lines = [f"for _i in range({n}):", f"    {body}"]
    # run at least once on the samples, and keep the loop only if it does not change the dtype
    meta = [f"_d = {a}.dtype", f"for _i in range({max(n, 1)}):", f"    {body}", f"assert {a}.dtype == _d",
            "del _d, _i"]
    return lines, meta


GRAD_CONTEXTS = ["torch.no_grad()", "torch.enable_grad()", "torch.set_grad_enabled(False)",
                 "torch.set_grad_enabled(True)"]


def rule_grad_block(draw, g):
    """A statement (possibly one that breaks the graph) inside a grad-mode `with` block."""
    inner = draw(st.sampled_from([rule_assign(UNARY), rule_assign(BINARY), rule_assign(REDUCE), rule_unsupported,
                                  rule_write(INPLACE), rule_write(SETITEM), rule_write(VIEW_WRITES)]))
    lines, meta = inner(draw, g)
    ctx = draw(st.sampled_from(GRAD_CONTEXTS))
    wrap = lambda body: [f"with {ctx}:", *("    " + line for line in body)]  # noqa: E731
    return wrap(lines), wrap(meta if meta is not None else lines)


HELPERS = [
    "def h{i}(a, b=2, *, scale=1.0):\n    return a * b + scale",
    "def h{i}(*ts, **kw):\n    out = ts[0]\n    for t in ts[1:]:\n        out = out + t\n    return out * kw.get('w', 1)",
    "def h{i}(a):\n    def inner(b):\n        return b.relu() + a.shape[-1] if a.dim() else b\n    return inner(a)",
    "def h{i}(a, n=3):\n    return [a * j for j in range(n)][-1]",
    "def h{i}(a, v=1):\n    a.mul_(2).add_(v)\n    return a.sum()",
]
CALLS = {0: ["h{i}({a})", "h{i}({a}, 3)", "h{i}({a}, b=0.5, scale=2.0)"], 1: ["h{i}({a}, {a})", "h{i}({a}, {a}, w=3)"],
         2: ["h{i}({a})"], 3: ["h{i}({a})", "h{i}({a}, n=2)"], 4: ["h{i}({a})", "h{i}({a}, v={k})"]}


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
    """Read a passed-in object's attributes, set one (a side effect eager makes), or write into its tensor."""
    boxes = [n for n, v in g.meta.items() if type(v).__name__ == "Box"]
    tensors = g.names(torch.Tensor)
    if not boxes or not tensors:
        raise _Discard
    box, a = boxes[0], draw(st.sampled_from(tensors))
    template = draw(st.sampled_from([
        f"{g.new()} = {a} * {box}.w + {box}.k", f"{g.new()} = {box}.w.sum() * {box}.k",
        f"{box}.seen = {a}.shape", f"{box}.k = {box}.k + 1",
        # writes into a tensor reached through an attribute (like a module's parameter or buffer)
        f"{box}.w.add_({a}.sum())", f"{box}.w[:1] = {box}.k", f"{box}.w.mul_({a})", f"{box}.w += {a}"]))
    return [template], None


WRITE_RULES = [
    (5, rule_write(INPLACE)), (3, rule_write(AUGMENTED)), (3, rule_write(SETITEM)), (1, rule_write(OUT)),
    (3, rule_write(VIEW_WRITES)), (1, rule_write(META_INPLACE)), (1, rule_write(OTHER_WRITES)),
    (2, rule_view_of_input),
]
RULES = [
    (8, rule_assign(UNARY)), (8, rule_assign(BINARY)), (5, rule_assign(REDUCE)), (5, rule_assign(VIEW)),
    (4, rule_assign(INDEX)), (4, rule_assign(COMBINE)), (3, rule_assign(SIZES, "k")), (2, rule_assign(CREATE)),
    (2, rule_if_python), (2, rule_for), (2, rule_helper), (1, rule_unsupported), (2, rule_box),
    (1, rule_grad_block), *WRITE_RULES,
]
# `python -m fuzz --focus NAME`: a subset of the rules, for a long run at one feature
FOCUS = {
    "writes": WRITE_RULES + [(3, rule_assign(BINARY)), (2, rule_assign(VIEW)), (2, rule_for), (2, rule_helper),
                             (1, rule_unsupported), (1, rule_grad_block), (2, rule_box)],
}


@st.composite
def tensor_specs(draw, name: str) -> TensorSpec:
    rank = draw(st.integers(0, 3))
    return TensorSpec(name, SYMS[3 - rank:], draw(st.sampled_from(DTYPES)), draw(st.sampled_from(LAYOUTS)))


@st.composite
def aliased_inputs(draw, inputs: list) -> list:
    """One more input that is a view of an earlier one, or two that are views of a hidden base."""
    n = len(inputs)
    sources = [(s, view) for s in inputs for view, rank in ALIAS_VIEWS if len(s.syms) >= rank]
    if sources and not draw(st.booleans()):
        spec, view = draw(st.sampled_from(sources))
        return [AliasSpec(f"x{n}", spec.name, view)]
    rank = draw(st.integers(2, 3))
    base = TensorSpec("_b", SYMS[3 - rank:], draw(st.sampled_from(("float32", "float64", "int64"))), "contiguous")
    first, second = draw(st.sampled_from(SHARED_VIEWS))
    return [AliasSpec(f"x{n}", "_b", first, base), AliasSpec(f"x{n + 1}", "_b", second, base)]


@st.composite
def programs(draw, max_statements: int = 8, rules: list | None = None) -> Program:
    """A program drawn from `rules` (weighted rule functions; default RULES, see also FOCUS)."""
    rules = rules or RULES
    n_tensors = draw(st.integers(1, 3))
    inputs = [draw(tensor_specs(f"x{i}")) for i in range(n_tensors)]
    if draw(st.integers(0, 2)) == 2:  # (shrinks to no aliasing)
        inputs += draw(aliased_inputs(inputs))
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
    enabled = [(w, rule) for w, rule in rules if not draw(st.booleans())]  # swarm: this program's rules
    weighted = [rule for w, rule in enabled or rules for _ in range(w)]
    for _ in range(draw(st.integers(1, max_statements))):
        rule = draw(st.sampled_from(weighted))
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
    if draw(st.integers(0, 3)) == 3:  # inputs too: a written input returned must be the input itself
        fresh = values
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


__all__ = ["programs", "dims", "Program", "RULES", "FOCUS"]
