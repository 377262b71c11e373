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
each other (`AliasSpec`: a view of an earlier input, or two views of a hidden base). A passed-in
object may hold others, read at several depths (`obj.a.b.k`, changing between calls: each guard
must read what it checks where guard code reuses its locals).

Python constructs around the tensor ops have their own tables (`PYTHON_RULES`; `--focus python`,
`classes`, `exceptions`, `contexts`): objects of the program's own classes (`PRELUDE`: `Acc` with a
property and its setter, a staticmethod, a classmethod, `__add__`/`__radd__`/`__iadd__`, `__len__`,
`__call__`; its subclass `Scaled` calling `super()`; `Seq` with `__len__`/`__getitem__`/`__iter__`;
`Rows`, iterated through `__getitem__` until IndexError), made in the call, returned, mutated, or
passed in (`ObjSpec`); dataclasses (`Stats`, frozen `Frozen`), namedtuples (`Pair`, `_replace`,
`_asdict`), and `class` statements, dataclasses and `namedtuple(...)` inside the function;
`try`/`except`/`else`/`finally`, `raise` (ValueError, KeyError, the program's `FuzzError`, from the
inlined helper `checked`, `raise ... from e`), `except E as e` reading `e.args`, bare re-raise,
`assert`, KeyError of a dict, StopIteration of `next()` (and inside a generator), and graph ops in a
`try` that raise on some inputs only (integer `//` and `%` by a tensor with zeros, indices out of
range), after side effects on a list or an object; sets of Python values (displays, comprehensions,
`| & - ^`, methods, iteration order) and of tensors (identity); `inference_mode`, `autocast`,
`contextlib.nullcontext`/`suppress`, a user context manager whose `__exit__` may swallow the
exception (`Guard`), `@contextmanager` generators (`scope`, `quiet`), a `@torch.no_grad()` helper;
`sorted`/`min`/`max` with `key=`, `functools.partial` (made in the call, or passed in: `FnSpec`, its
argument changing between calls), `functools.reduce`, `operator.itemgetter`/`attrgetter`,
`itertools.chain`/`product`; lists, deques, sets and dicts filled from iterables that read them as they
grow (`FILLS`, `--focus fills`: extend, `+=`, extendleft, update, `|=`, slice assignment, the container
as its own argument, maxlen); Python's own semantics where a tracer easily diverges (`SEMANTICS`,
`--focus semantics`: iterators reused once exhausted, containers changed while iterated, builtins and
functions called with the wrong arguments, special methods set to None, `raise` of what cannot be
raised, generators abandoned with a `finally` to run, `__missing__`, identity of immutable results).
A prelude helper is put into the program's source when a statement
names it; placeholders such as `{acc}`, `{pair}`, `{set}` name a value of that kind, made on the spot
when the program has none. Programs are run as a module named `fuzz_program` (`Program.load`).

Swarm testing: each program draws which rules it may use at all, so programs dense in a few
constructs (say, nothing but writes into aliased inputs) are common.
"""
from __future__ import annotations

import collections
import contextlib
import functools
import io
import re
import string
import types

from dataclasses import dataclass, field

import numpy as np
import torch
from hypothesis import strategies as st

from .inputs import (ALIAS_VIEWS, ARRAY_DTYPES, ARRAY_LAYOUTS, DTYPES, LAYOUTS, PARTIALS, SHARED_VIEWS, AliasSpec,
                     ArraySpec, BoxSpec, FnSpec, ListSpec, ObjSpec, ScalarSpec, TensorSpec, make_args)
from .oracle import PROGRAM_MODULE, program_object

META_DIMS = {"d0": 2, "d1": 3, "d2": 5}
SYMS = ("d0", "d1", "d2")

# --- rule tables: templates over operands {a}, {b} (tensors), {k} (a Python int), {d}, {e} (dims) -------
UNARY = [
    "F.dropout({a}.float(), 0.3)", "{a}.float() + torch.rand_like({a}.float())",  # (random: the oracle seeds each run)
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
    # precedence in generated code: negative constants, operators of one level, chained comparisons
    "(-2) ** {a}", "(-{k} - 1) ** {a}", "{a} ** -{k}", "-{a} ** 2", "(-{a}) ** 2", "2 ** -{a}",
    "{a} - ({b} - {a})", "({a} ** 2) ** 0.5", "({a} < {b}) < ({b} > 0)", "{a} // ({b} * -1.5) % 2",
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
# what the default dtype makes of integer tensors (a true division, a float op, promotion with a
# Python float), read back by the program: a Python decision on it (the oracle's call with the
# default dtype float64 finds an entry that did not guard it)
DEFAULT_DTYPE = [
    "{a} * (2 if ({a}.long() / 2).dtype == torch.float32 else 3)", "{a} + torch.exp({a}.long()).element_size()",
    "{a} - (1 if torch.sqrt({a}.int()).dtype == torch.float64 else 0)", "{a} * ({a}.long() * 0.5).element_size()",
    "{a} + torch.true_divide({a}.long(), 3).element_size()", "{a} * ({a}.int() == 16777217.5).sum()",
]
# writes into {a} (most often an input or a view of one; see `rule_write`)
INPLACE = [
    "{a}.add_(1)", "{a}.mul_(2)", "{a}.clamp_(min=0)", "{a}.zero_()", "{a}.copy_({b})", "torch.relu_({a})",
    "{a}.add_({b})", "{a}.mul_({b})", "{a}.sub_({b}, alpha=2)", "{a}.div_(2)", "{a}.clamp_(-1, 1)",
    "{a}.fill_({k})", "{a}.neg_()", "{a}.abs_()", "{a}.sigmoid_()", "{a}.masked_fill_({b} > 0, 0)",
    "{a}.addcmul_({b}, {b}, value=0.5)", "{a}.lerp_({b}, 0.5)", "{a}.pow_(2)", "{a}.floor_()", "torch.sin_({a})",
    "{a}.index_fill_({d}, torch.tensor([0]), {k})", "{a}.copy_({b}.flip(0))", "{a}.add_({a})",
    "F.relu({a}, inplace=True)", "{a}.mul_(2).add_({b})",
    # writes a schema does not declare: a batch norm in training updates its running statistics
    "F.batch_norm({b}.reshape(-1, 1).expand(-1, {a}.numel()).float(), {a}.view(-1), torch.ones({a}.numel()), training=True, momentum=0.5)",
    "torch.batch_norm(torch.rand(3, {a}.numel()), {a}.view(-1), {a}.view(-1).abs() + 1, None, None, True, 0.3, 1e-5, False)",
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
        lines = [HEADER]
        for h in self.helpers:
            lines += [h, ""]
        lines.append(f"def f({params}):")
        lines += ["    " + line for line in self.body]
        lines.append(f"    return {self.returns}")
        return "\n".join(lines) + "\n"

    def load(self) -> dict:
        """A fresh module namespace with the program run in it (`ns["f"]`; its classes, which
        inputs that are objects of them are made with: `make_args(inputs, dims, seed, ns)`)."""
        ns = {"__name__": PROGRAM_MODULE}
        exec(_compile(self.source()), ns)
        return ns


HEADER = """\
import collections
import contextlib
import dataclasses
import functools
import itertools
import logging
import operator

import numpy as np
import torch
import torch.nn.functional as F

LOGGER = logging.getLogger("rewrite.fuzz.program")  # (the oracle prints its records: compared as printed)
"""


def _compile(source: str):
    """As the program's own module compiles it (not under this file's `from __future__` flags)."""
    return compile(source, "<fuzz program>", "exec", dont_inherit=True)


class Gen:
    """Builds one program: the body so far and the meta values of its variables."""

    def __init__(self, program: Program):
        self.program = program
        self._ns, self._ns_helpers = None, []
        self.meta: dict[str, object] = dict(zip((s.name for s in program.inputs),
                                                 make_args(program.inputs, META_DIMS, 0, self.ns())))
        self.input_tensors = [self.meta[s.name] for s in program.inputs if isinstance(s, (TensorSpec, AliasSpec))]
        self.count = 0

    def ns(self) -> dict:
        """The program's module namespace (HEADER and helpers), extended as helpers are added:
        the sample values made so far keep their classes."""
        helpers = self.program.helpers
        if self._ns is None or helpers[:len(self._ns_helpers)] != self._ns_helpers:
            self._ns, self._ns_helpers = {"__name__": PROGRAM_MODULE}, []
            exec(_compile(HEADER), self._ns)
        for h in helpers[len(self._ns_helpers):]:
            exec(_compile(h), self._ns)
            self._ns_helpers.append(h)
        return self._ns

    def rollback(self, helpers: list[str]) -> None:
        """Drop the helpers added since `helpers` (their names are rebound when next added)."""
        self.program.helpers[:] = helpers
        del self._ns_helpers[len(helpers):]

    def names(self, kind) -> list[str]:
        return [n for n, v in self.meta.items()
                if isinstance(v, kind) and not isinstance(v, bool) and not n.startswith("_")]

    def names_where(self, test) -> list[str]:
        return [n for n, v in self.meta.items() if not n.startswith("_") and test(v)]

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
        """Keep `lines` if they (or their meta stand-in) run on the meta values (run as module
        code over the program's namespace, so that lambdas and comprehensions see the values)."""
        ns = self.ns()
        env = {**ns, **self.meta}
        try:
            with contextlib.redirect_stdout(io.StringIO()):  # (what it prints or logs: not the fuzzer's output)
                exec(_compile("\n".join(meta_lines if meta_lines is not None else lines)), env)
        except Exception:
            return False
        self.meta = {k: v for k, v in env.items() if k not in ns or k in self.meta}
        self.program.body += lines
        return True


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


def _box_and_tensor(draw, g) -> tuple[str, str]:
    """The passed-in Box and a tensor of the program (_Discard where it has no Box)."""
    boxes = [n for n, v in g.meta.items() if type(v).__name__ == "Box"]
    tensors = g.names(torch.Tensor)
    if not boxes or not tensors:
        raise _Discard
    return boxes[0], draw(st.sampled_from(tensors))


def rule_box(draw, g):
    """Read a passed-in object's attributes, set one (a side effect eager makes), or write into its tensor."""
    box, a = _box_and_tensor(draw, g)
    template = draw(st.sampled_from([
        f"{g.new()} = {a} * {box}.w + {box}.k", f"{g.new()} = {box}.w.sum() * {box}.k",
        f"{box}.seen = {a}.shape", f"{box}.k = {box}.k + 1",
        # writes into a tensor reached through an attribute (like a module's parameter or buffer)
        f"{box}.w.add_({a}.sum())", f"{box}.w[:1] = {box}.k", f"{box}.w.mul_({a})", f"{box}.w += {a}"]))
    return [template], None


def rule_box_nested(draw, g):
    """Read (and set) attributes of Boxes nested in the passed-in one, at several depths: the
    guards bind each object read by more than one check to a local and reuse the local once
    those checks are behind; `a.b.k` changes between calls, so every guard must still read what
    it checks (a local holding another object would let a stale entry run)."""
    box, a = _box_and_tensor(draw, g)
    if not hasattr(g.meta[box], "a"):
        raise _Discard
    return [draw(st.sampled_from([
        f"{g.new()} = {a} * {box}.a.b.k + {box}.c.k", f"{g.new()} = {a} + {box}.a.b.w.sum() * {box}.a.k",
        f"{g.new()} = {a} * ({box}.a.k + {box}.a.b.k * {box}.c.k) - {box}.k",
        f"{box}.a.b.k = {box}.c.k + {box}.a.k", f"{box}.c = {box}.a.b", f"{box}.a.b.w.mul_({box}.c.k)"]))], None


def rule_box_dict(draw, g):
    """A passed-in object's `__dict__` read whole: it may hold a key with no literal form
    (`Box.keyed`), of whose item no source may be made (a graph break, never code with it)."""
    (box, a), new = _box_and_tensor(draw, g), g.new()
    return [draw(st.sampled_from([
        f"{new} = {a} * len([_v for _v in {box}.__dict__.values() if type(_v) is int])",
        f"{new} = {a} + sum(_v for _v in vars({box}).values() if type(_v) is int)"]))], None


# --- Python constructs around the tensor ops ---------------------------------------------------------
# Module-level helpers of the program (classes, an exception, context managers, decorated helpers):
# a rule's text that names one puts its source (and those it needs first) into the program's prelude.
PRELUDE = {
    "Acc": '''\
class Acc:
    scale = 2

    def __init__(self, w, n=1):
        self.w = w
        self.n = n

    @property
    def total(self):
        return self.w * self.n

    @staticmethod
    def twice(t):
        return t * 2

    @classmethod
    def of(cls, t):
        return cls(t, 2)

    def push(self, t):
        self.w = self.w + t
        self.n += 1
        return self

    def __add__(self, other):
        if isinstance(other, Acc):
            return type(self)(self.w + other.w, self.n + other.n)
        return type(self)(self.w + other, self.n)

    def __radd__(self, other):
        return type(self)(other + self.w, self.n)

    def __iadd__(self, other):
        self.w = self.w + other
        self.n += 1
        return self

    def __len__(self):
        return self.n

    def __call__(self, t):
        return t * self.scale + self.w

    @property
    def count(self):
        return self.n

    @count.setter
    def count(self, v):
        self.n = max(v, 0)''',
    "Scaled": '''\
class Scaled(Acc):
    scale = 3

    def push(self, t):
        super().push(t * 2)
        self.last = t
        return self

    @property
    def total(self):
        return super().total * self.scale''',
    "Seq": '''\
class Seq:
    def __init__(self, *items):
        self.items = list(items)

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]

    def __iter__(self):
        return iter(self.items)''',
    "Rows": '''\
class Rows:
    def __init__(self, t):
        self.t = t

    def __getitem__(self, i):
        if i >= 2:
            raise IndexError(i)
        return self.t * (i + 1)''',
    "Stats": '''\
@dataclasses.dataclass
class Stats:
    mean: torch.Tensor
    count: int = 0

    def scaled(self, k=2):
        return self.mean * k''',
    "Frozen": '''\
@dataclasses.dataclass(frozen=True)
class Frozen:
    a: torch.Tensor
    b: int = 1

    def total(self):
        return self.a * self.b''',
    "Pair": 'Pair = collections.namedtuple("Pair", ["x", "y"])',
    "FuzzError": '''\
class FuzzError(Exception):
    pass''',
    "checked": '''\
def checked(t, limit=2):
    if t.dim() > limit:
        raise FuzzError("rank", t.dim())
    if t.numel() == 0:
        raise ValueError("empty", tuple(t.shape))
    return t * 2''',
    "Guard": '''\
class Guard:
    def __init__(self, log, swallow=False):
        self.log = log
        self.swallow = swallow

    def __enter__(self):
        self.log.append("enter")
        return self

    def __exit__(self, typ, val, tb):
        self.log.append("exit" if typ is None else typ.__name__)
        return self.swallow''',
    "scope": '''\
@contextlib.contextmanager
def scope(log, tag):
    log.append(tag)
    try:
        yield len(log)
    finally:
        log.append("/" + tag)''',
    "quiet": '''\
@contextlib.contextmanager
def quiet(log):
    try:
        yield
    except (KeyError, FuzzError) as e:
        log.append(type(e).__name__)''',
    "guarded_div": '''\
def guarded_div(a, b, log):
    try:
        return a // b
    except RuntimeError as e:
        log.append(type(e).__name__)
        return a
    finally:
        log.append("done")''',
    "ng_scale": '''\
@torch.no_grad()
def ng_scale(t, k=2):
    return t * k''',
    "logged_gen": '''\
def logged_gen(log, n):
    try:
        for i in range(n):
            yield i
    finally:
        log.append("closed")''',
    "ChainError": '''\
class ChainError(Exception):
    def __init__(self, what, n):
        super().__init__(what, n)
        self.n = n''',
    "Slotted": '''\
class Slotted:
    __slots__ = ("t", "n")

    def __init__(self, t):
        self.t = t''',
    "OwnNew": '''\
class OwnNew:
    def __new__(cls, t):
        self = super().__new__(cls)
        self.t = t * 2
        return self''',
    "GetSeq": '''\
class GetSeq:
    def __init__(self, t, n):
        self.t, self.n = t, n

    def __getitem__(self, i):
        if i >= self.n:
            raise IndexError(i)
        return self.t * i''',
    "GSET": 'GSET = {1, 2, "a"}',
    "sub_gen": '''\
def sub_gen(t):
    try:
        yield t + 1
    except ValueError as e:
        yield t * e.args[0]''',
    "deleg_gen": '''\
def deleg_gen(t):
    r = yield from sub_gen(t)
    yield t - 1''',
    "gen_of": '''\
def gen_of(t, n):
    for i in range(n):
        yield t * i''',
    "NoBool": "class NoBool:\n    __bool__ = None",
    "NoLen": "class NoLen:\n    __len__ = None",
    "NoIter": "class NoIter:\n    __iter__ = None",
    "NoContains": "class NoContains:\n    __contains__ = None",
    "NoCall": "class NoCall:\n    __call__ = None",
    # calls through torch's own frames into code that breaks the graph (LIBRARY_FRAMES): each
    # notes in CALLED that it ran, and the oracle checks it got graphs of its own
    "CALLED": "CALLED = {}",
    "Step": '''\
class Step(torch.nn.Module):
    def __init__(self, brk):
        super().__init__()
        self.brk = brk

    def forward(self, t):
        t = t * 2 + 1
        if self.brk:
            CALLED["Step"] = True
            print('step', tuple(t.shape))
        return t.sin()''',
    "STEPS": "STEPS = torch.nn.Sequential(Step(False), Step(True), Step(False))",
    # what libraries read of modules and sets (issue 45): a module whose class reads its config
    # in __getattr__ before nn.Module's (diffusers' ModelMixin); frozensets and sets in globals
    "CfgMod": '''\
class CfgMod(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(1, 1)
        self.register_buffer("buf", torch.ones(1))
        self._internal_dict = {"cfg": 2}

    def __getattr__(self, name):
        config = self.__dict__.get("_internal_dict")
        if config is not None and name in config and name not in self.__dict__:
            return config[name]
        return super().__getattr__(name)''',
    "CFGM": "CFGM = CfgMod()",
    # an object whose class answers every attribute read in Python and records it (a transformers
    # config's __getattribute__, with a side effect): the trace may ask it only what the code asks
    "Watched": '''\
SEEN = []


class Watched:
    def __init__(self, k):
        self.k = k

    def __getattribute__(self, name):
        SEEN.append(name)
        return object.__getattribute__(self, name)''',
    "WATCHED": "WATCHED = Watched(2)",
    "GFROZEN": 'GFROZEN = frozenset({"mps", "npu", 3})',
    "GBYKEY": 'GBYKEY = {"a": frozenset({"x"}), "b": frozenset(), "c": {"y", "z"}}',
    "HOOKED": "HOOKED = Step(True)\nHOOKED.register_forward_hook(lambda module, args, out: out - 1)",
    "ckstep": '''\
def ckstep(t):
    t = t * 3
    CALLED["ckstep"] = True
    print('ck', tuple(t.shape))
    return t.cos()''',
    "nograd_step": '''\
@torch.no_grad()
def nograd_step(t):
    t = t - 1
    CALLED["nograd_step"] = True
    print('ng', tuple(t.shape))
    return t.tanh()''',
}
PRELUDE_NEEDS = {"Scaled": ("Acc",), "checked": ("FuzzError",), "quiet": ("FuzzError",), "deleg_gen": ("sub_gen",),
                 "Step": ("CALLED",), "STEPS": ("Step",), "HOOKED": ("Step",), "ckstep": ("CALLED",),
                 "nograd_step": ("CALLED",), "CFGM": ("CfgMod",), "WATCHED": ("Watched",)}
# (GSET: a global set the programs read and change; each module of a program has its own)


def _need(program: Program, text: str) -> None:
    """Put the prelude helpers that `text` names (and what they need) into the program."""
    for name in PRELUDE:
        if re.search(rf"\b{name}\b", text):
            for dep in (*PRELUDE_NEEDS.get(name, ()), name):
                if PRELUDE[dep] not in program.helpers:
                    program.helpers.append(PRELUDE[dep])


# Placeholders of the tables below, besides {a} {b} (tensors), {k} (an int), {d} {e} (dims of {a}):
# {new} {new2}: fresh names bound by a block; {i}: a number unique in the program; {acc} {acc2}: an
# Acc or Scaled (made in the call or passed in); {obj}: any object of the program's classes; {pair},
# {stats}, {frz}: a Pair, Stats, Frozen; {set} {set2}: a set or frozenset of Python values, {mset}: a
# set; {log}: a list to log into (a new one, or one passed in: a side effect); {fn}: a function passed in.
OBJECT_NEW = [  # objects of the program's classes, dataclasses, namedtuples (bound to a new name)
    "Acc({a})", "Acc({a}, {k})", "Acc.of({a})", "Scaled({a}, {k})", "Scaled.of({a})", "{acc} + {a}",
    "{a} + {acc}", "{acc} + {acc2}", "{k} + {acc}", "({acc} == {acc2}, {acc} in [{acc2}], {acc} is not {acc2})", "Seq({a}, {b})", "Seq({a}, {b}, {a} * 2)", "Stats({a})",
    "Stats({a}, {k})", "Frozen({a}, {k})", "dataclasses.replace({frz}, b={k})", "Pair({a}, {b})",
    "Pair._make([{a}, {k}])", "{pair}._replace(y={a})", "dataclasses.replace({stats}, count={k})",
    "sum([{acc}, {acc2}])", "sum([{a}, {b}], {acc})", "{acc}.push({a}) + {acc}",
]
OBJECT_USE = [  # reads, methods, properties and operators of objects (bound to a new name)
    "{acc}.total", "{acc}({a})", "Acc.twice({a})", "{acc}.twice({acc}.w)", "len({acc})", "{acc}.w * {acc}.n",
    "{acc}.push({a}).w", "{acc}.scale * {a}", "{a} * isinstance({acc}, Scaled)", "sum(Seq({a}, {b}))",
    "Seq({a}, {b})[-1]", "[e.sum() for e in Seq({a}, {b})][0]", "len(Seq({a}, {b}, {a}))",
    "list(reversed(Seq({a}, {b})))[0]", "{pair}.x + {pair}[1]", "{pair}._asdict()", "{a} * len({pair})",
    "{stats}.scaled({k})", "{stats}.mean + {stats}.count", "{frz}.total()", "len(dataclasses.fields({stats}))",
    "dataclasses.astuple({frz})[1]", "getattr({obj}, 'tag', {k})", "{a} * hasattr({obj}, 'tag')",
    "operator.attrgetter('w', 'n')({acc})", "[x * 2 for x in Seq({a}, {b}) if x.dim()]",
    "{acc}.count", "{a} if {acc} else {b}", "list(Rows({a}))[-1]", "sum(Rows({a}))", "[r.sum() for r in Rows({a})]",
    "len(list(zip(Rows({a}), Seq({a}, {b}, {a}))))", "{a} * ({a} in Seq({a}, {b}))", "{a} * ({a} in [{b}, {a}])",
    "[{b}, {a}].index({a})", "({a}, {b}).count({a})", "{a} * (Stats({a}) == Stats({a}))",
    "{a} * (Pair({a}, {k}) == Pair({a}, {k}))", "{a} * ({frz} == {frz})", "{a} * ({stats} is {stats})",
    "{a} * (Stats({a}) != Stats({a}))", "{a} * (Stats({a}, {k}) != Stats({a} + 1, {k}))", "{a} * ({frz} != {frz})",
    "{a} * (Pair({a}, {k}) != Pair({b}, {k}))",
]
OBJECT_SET = [  # attribute stores and mutating methods and operators (objects passed in too)
    "{acc}.push({a})", "{acc} += {a}", "{acc}.tag = {a}.shape[0]", "{acc}.w = {acc}.w * 2", "{acc}.n += {k}",
    "{acc}.w.add_(1)", "{stats}.count += 1", "{stats}.mean = {a}", "{acc}.tag = {acc}.total",
    "{acc}.n, {acc}.w = {acc}.n + 1, {acc}.w - 1", "{acc}.count = {k}", "{acc}.count += 1",
    "type({acc}).scale = type({acc}).scale + 1", "{acc}.scale = {k}", "if hasattr({obj}, 'tag'):\n    del {obj}.tag",
    "setattr({obj}, 'tag', {a})", "delattr({acc}, 'n')\n{acc}.n = {k}",
]
LOCAL_TYPES = [  # a class statement, a dataclass and namedtuple(...) inside the function
    ("class L{i}:\n    unit = 2\n\n    def __init__(self, t):\n        self.t = t\n\n    def get(self):\n"
     "        return self.t * self.unit\n{new} = L{i}({a})\n{new2} = {new}.get()"),
    ("class L{i}:\n    def __init__(self, t, k=1):\n        self.t, self.k = t, k\n\n    def __add__(self, o):\n"
     "        return L{i}(self.t + o, self.k + 1)\n{new} = L{i}({a}, {k}) + {b}"),
    "P{i} = collections.namedtuple('P{i}', ['a', 'b'])\n{new} = P{i}({a}, {k})\n{new2} = {new}._replace(b={new}.b + 1)",
    "P{i} = collections.namedtuple('P{i}', 'a b')\n{new} = P{i}(*[{a}, {b}])\n{new2} = {new}.a * len({new}._asdict())",
    "@dataclasses.dataclass\nclass D{i}:\n    t: object\n    k: int = 1\n{new} = D{i}({a}, {k})\n{new}.k += 1",
]
EXCEPTIONS = [  # blocks: try/except/else/finally, raise, `except E as e`, re-raise, assert, KeyError, StopIteration
    # random draws before an op that raises on some inputs: the call runs again from the generator's state
    ("try:\n    {new} = F.dropout({a}.float(), 0.5) + {a}.float()[{b}.long().abs() % ({a}.shape[0] + 1)]\n"
     "except IndexError:\n    {new} = torch.rand_like({a}.float())"),
    # a log record before ops that may raise under a try: it waits for the graph's end, or the eager run makes it
    ("LOGGER.warning('%s of %d', 'shape', {a}.shape[0])\ntry:\n"
     "    {new} = {a}[{b}.long().abs() % ({a}.shape[0] + 1)] * 2\nexcept IndexError:\n    {new} = {a} + 1"),
    # graph ops that raise on some inputs: an integer division by zero, an index out of range
    "try:\n    {new} = {a} // {b}\nexcept RuntimeError:\n    {new} = torch.zeros_like({a} + {b})",
    ("try:\n    {new} = {a}[{b}.long().abs() % ({a}.shape[0] + 1)]\nexcept IndexError:\n"
     "    {new} = {a}.new_zeros({b}.shape + {a}.shape[1:])"),
    ("try:\n    {new} = {a}.index_select(0, {b}.flatten().long().abs())\nexcept (IndexError, RuntimeError) as e:\n"
     "    {new} = {a}.sum() * len(e.args)"),
    "try:\n    {new} = torch.gather({a}, {d}, {b}.long().abs())\nexcept RuntimeError:\n    {new} = {a}",
    ("{new} = {a}\n{new2} = {k}\ntry:\n    {new} = {a} % {b}\n    {new2} = {new2} + 1\nexcept RuntimeError:\n"
     "    {new} = {new} - 1"),
    # raise on Python values (sizes), the handler reads e.args
    ("try:\n    if {a}.shape[0] > {k}:\n        raise ValueError('big', {a}.shape[0])\n    {new} = {a} + 1\n"
     "except ValueError as e:\n    {new} = {a} * e.args[1]"),
    ("try:\n    {new} = {a} * 2\nexcept KeyError:\n    {new} = {a}\nelse:\n    {new} = {new} + 1\nfinally:\n"
     "    {new2} = {k} + 1"),
    "try:\n    {new} = [{a}, {b}][{k}]\nexcept IndexError as e:\n    {new} = {b}\nfinally:\n    {new2} = {a}.dim()",
    # from an inlined helper, a custom exception, a bare re-raise
    "try:\n    {new} = checked({a}, {k})\nexcept FuzzError as e:\n    {new} = {a} + e.args[1]",
    ("try:\n    try:\n        {new} = checked({a}, 1)\n    except FuzzError:\n        {new2} = {k} * 2\n        raise\n"
     "except FuzzError as e:\n    {new} = {a} - len(e.args)"),
    "try:\n    {new} = checked({a})\nexcept (FuzzError, ValueError) as e:\n    {new} = {a}\n    {new2} = e.args[0]",
    "try:\n    raise FuzzError('at', {k})\nexcept Exception as e:\n    {new} = {a} * e.args[1]",
    # assert on Python values
    "assert {a}.dim() <= 3, 'rank'",
    ("try:\n    assert {a}.shape[-1] > 2, ('small', {a}.shape[-1])\n    {new} = {a}[..., :2]\n"
     "except AssertionError as e:\n    {new} = {a} * len(e.args[0])"),
    # a dict's KeyError, next()'s StopIteration
    ("{new2} = {{'a': {a}, 'b': {b}}}\ntry:\n    {new} = {new2}['b' if {k} > 2 else 'c']\nexcept KeyError as e:\n"
     "    {new} = {new2}['a'] * len(e.args)"),
    "_it{i} = iter([{a}, {b}][{k} % 3:])\ntry:\n    {new} = next(_it{i})\nexcept StopIteration:\n    {new} = {a}",
    "{new} = next((t for t in ({a}, {b}) if t.dim() > 2), {a})",
    "try:\n    {frz}.b = {k}\nexcept dataclasses.FrozenInstanceError:\n    {new} = {frz}.a * 2",
    ("try:\n    if {k} not in {{1, 2}}:\n        raise KeyError({k})\n    {new} = {a}\nexcept KeyError as e:\n"
     "    {new} = {a} + e.args[0]"),
    # side effects (a list passed in or made here, an object's attribute) before a graph op that may raise
    ("try:\n    {log}.append('before')\n    {new} = {a} // {b}\n    {log}.append('after')\nexcept RuntimeError as e:\n"
     "    {log}.append(type(e).__name__)\n    {new} = {a}"),
    "try:\n    {acc}.n += 1\n    {new} = {a}[{b}.long()]\nexcept IndexError:\n    {acc}.tag = 'oob'\n    {new} = {a}",
    "{log}.append({a}.shape)\n{new} = {a} // {b}",
    "{new} = guarded_div({a}, {b}, {log})",
    # raise ... from e, str(e), StopIteration inside a generator (a RuntimeError), Python errors caught
    ("try:\n    try:\n        {new} = checked({a}, 1)\n    except FuzzError as e:\n"
     "        raise KeyError('wrapped') from e\n"
     "except KeyError as e:\n    {new} = {a} * e.__cause__.args[1]\n    {new2} = str(e)"),
    ("try:\n    {new} = list(next(iter([])) for _ in range(1))\nexcept RuntimeError as e:\n    {new} = {a}\n"
     "    {new2} = str(e)"),
    "try:\n    {new} = [next(iter([])) for _ in range(1)]\nexcept StopIteration:\n    {new} = {a}",
    "try:\n    {new} = {{'a': {a}}}.pop('b' if {k} > 1 else 'a')\nexcept KeyError as e:\n    {new} = {a} - 1",
    ("try:\n    {new} = [{a}, {b}].index({a} * 1)\nexcept (ValueError, RuntimeError) as e:\n"
     "    {new} = type(e).__name__"),
    "try:\n    {new} = {obj}.missing\nexcept AttributeError:\n    {new} = {a}",
    "try:\n    {new} = int(str({k}) + 'x')\nexcept ValueError as e:\n    {new} = len(e.args)",
    "try:\n    {new} = [{a}][{k}]\nexcept IndexError:\n    {new} = {b}\nelse:\n    {new} = {new} * 2",
    # not caught: raised in the calls whose sizes are small (eager raises it too)
    "if {a}.shape[0] < 2:\n    raise FuzzError('small', {a}.shape[0])",
    "{new} = checked({a}, 3)",
]
SETS_NEW = [  # sets of Python values (bound to a new name)
    "{{{k}, 3, len({a})}}", "set({a}.shape)", "{{1, 1.0, True, {k}}}", "{{0, False, -0.0, {a}.dim()}}",
    "{{d % 3 for d in {a}.shape}}", "set(range({k} % 5))",
    "frozenset({a}.shape) | {{1}}", "{{'x', 'y', str({k})}}", "{set} | {set2}", "{set} & {set2}",
    "{set} - {set2}", "{set} ^ {set2}", "{set}.union({a}.shape)", "set({set})", "{{v * 2 for v in {set} if v != 1}}",
    "{set}.intersection(range(4))", "frozenset({set})",
]
SETS_USE = [  # reads of sets (bound to a new name); sets of tensors by identity
    "len({set})", "sorted({set})", "list({set})", "{a} * len({set} & {set2})", "{a} * ({k} in {set})",
    "max({set}, default=0)", "sum(v for v in {set} if isinstance(v, int))", "[v for v in {set}]",
    "{a} + len({{{a}, {b}, {a}}})", "{a} if {b} in {{{a}, {a} * 2}} else {b}", "len({{{a}, {b}}} | {{{a}}})",
    "sum(t.sum() for t in {{{a}, {b}}})", "int({set} <= {set2})", "{a} * len({set}.difference({set2}))",
]
SETS_SET = [  # set methods that mutate
    "{mset}.add({k})", "{mset}.discard(2)", "{mset}.update({a}.shape)", "{mset} |= {{{k}}}", "{mset} -= {{0}}",
    "try:\n    {mset}.remove({k})\nexcept KeyError:\n    {mset}.add(-1)", "{mset}.pop() if {mset} else None",
]
FILLS = [  # containers filled from iterables that read them as they grow (CPython: item by item or whole first)
    "{new} = [{k}, {a}.dim()]\n{new}.extend(len({new}) + i for i in range({k} % 3 + 1))",
    "{new} = [{a}]\n{new}.extend({new}[-1] * 2 for _ in range(2))",
    "{new} = [{a}, {b}]\n{new} += ({new}[-1] + t for t in {new}[:1])",
    "{new} = [{k}, 1]\n{new}.extend({new})",
    "{new} = [{k}, 1]\n{new}[1:] = (len({new}) + i for i in range(2))",
    "{log}.extend(len({log}) + i for i in range(2))",
    "{log} += ({a}.shape[0] * len({log}) for _ in range(2))",
    "{new} = collections.deque([{k}, 1], maxlen=3)\n{new}.extend(len({new}) + i for i in range(3))",
    "{new} = collections.deque([{a}])\n{new}.extendleft({new}[0] * i for i in range(2))",
    "{new} = collections.deque([{k}])\n{new}.extendleft({new})\n{new2} = list({new})",
    "{new} = collections.deque([{a}], maxlen=2)\n{new} += ({new}[-1] + 1 for _ in range(3))\n{new2} = list({new})",
    "{new} = collections.deque([{k}, 2], maxlen={k} % 3 + 1)\n{new}.extend({new})",
    "{new} = {{{k}, 1}}\n{new}.update(len({new}) + i for i in range(3))",
    "{new} = {{{k}, 1}}\n{new}.update([len({new})], (len({new}) * i for i in range(3)))",
    "{new} = {{{k}, 1, 2}}\n{new}.difference_update(len({new}) - i for i in range(3))",
    "{new} = {{{k}, 1, 2}}\n{new}.intersection_update(i for i in range(len({new}) + {k} % 3))",
    "{new} = {{{k}, 1}}\n{new}.symmetric_difference_update(len({new}) + i for i in range(2))",
    "{new} = {{{k}, 2}}\n{new2} = {new}\n{new} |= {{len({new}), {a}.dim()}}",
    "{new} = {{{k}, 2}}\n{new2} = {new}\n{new} |= dict.fromkeys([len({new})]).keys()",
    "{new} = {{{k}, 2}}\n{new} ^= {new}",
    "{new} = {{'a': {a}}}\n{new}.update((f'k{{len({new})}}', {a} * len({new})) for _ in range(2))",
    "{new} = {{'a': {k}}}\n{new2} = {new}\n{new} |= ((str(len({new})), len({new})) for _ in range(2))",
    "{new} = {{'a': {k}}}\n{new2} = {new}\n{new} |= {{'b': {a}}}",
    "{new} = collections.OrderedDict(a={a})\n{new}.update((str(len({new})), {b}) for _ in range(2))",
    "{new} = collections.defaultdict(int, a={k})\n{new}.update(zip('bc', (len({new}) for _ in range(2))))",
    "{new} = {{'a': {k}}}\n{new}.update({new}, b=len({new}))",
    "{new} = dict((str(i), {a} * i) for i in range({k} % 3 + 1))",
    "{new} = {{'a': {k}}}\ntry:\n    {new}.update([('b', 1), (1, 2, 3)])\nexcept ValueError as e:\n    {new2} = str(e)",
    "{new} = [{k}]\ntry:\n    {new}.extend(len({new}) // ({k} % 2) for _ in range(2))\nexcept ZeroDivisionError:\n    {new2} = len({new})",
]
CONTEXTS = ["torch.inference_mode()", 'torch.autocast("cpu", dtype=torch.bfloat16)', 'torch.autocast("cpu")',
            "contextlib.nullcontext()", "contextlib.suppress(KeyError)", "torch.inference_mode(False)",
            'torch.autocast("cpu", enabled=False)', "torch.no_grad(), torch.inference_mode()"]
AUTOCAST = [  # ops that autocast changes
    "{a} @ {b}", "torch.mm({a}, {b})", "F.linear({a}, {b})", "{a}.float() @ {a}.float().mT",
    "F.linear({a}.float(), {a}.float())", "torch.matmul({a}.float(), {b}.float())", "torch.bmm({a}, {b})",
    "torch.addmm({b}, {a}, {a}.mT)",
]
CONTEXT_BLOCKS = [  # user context managers (exits that swallow), contextlib helpers, a no_grad helper
    "{new} = {a}\nwith Guard({log}, True) as _g:\n    {new} = {a} // {b}",
    "{new} = {a}\nwith Guard({log}) as _g:\n    {new} = {new} * len({log})",
    "{new} = {a}\nwith Guard({log}, {k} > 2):\n    {new} = checked({a}, 1)",
    "{new} = {a}\nwith contextlib.suppress(KeyError, IndexError):\n    {new} = [{a}, {b}][{k}]",
    "{new} = {a}\nwith contextlib.suppress(KeyError):\n    {new} = {{'a': {b}}}['a' if {k} > 1 else 'b']",
    "{new} = {a}\nwith quiet({log}):\n    {new} = checked({a}, 1)",
    "with scope({log}, 's{i}') as _depth:\n    {new} = {a} * _depth",
    "with contextlib.nullcontext({a}) as _c:\n    {new} = _c + 1",
    "with Guard({log}) as _g:\n    with scope({log}, 'in') as _depth:\n        {new} = {a} + _depth",
    "{new} = {a}\nwith scope({log}, 's{i}'):\n    with contextlib.suppress(RuntimeError):\n        {new} = {a} // {b}",
    "{new} = ng_scale({a})", "{new} = ng_scale({a}, {k})",
]
# Python's own semantics where a tracer easily diverges (issue 38): iterators reused once exhausted,
# containers changed while iterated, builtins and functions called with the wrong arguments,
# special methods set to None, `raise` of what cannot be raised, generators abandoned with a
# `finally` to run, dict subclasses with __missing__ made in the call, identity of immutable results
SEMANTICS = [
    # a set display of strings (SET_UPDATE of a frozenset constant: CPython merges its table; where
    # hashes collide the order differs from adding one by one -- fuzz/FINDINGS.md, session 19)
    "_s{i} = {{'w{k}', 'x{k}{i}', 'ab', 'cd{i}', 'y', 'zz'}}\n{new} = list(_s{i}) + list({{*_s{i}}})",
    # a log record between ops: a node of the graph, its logger method an object (the eager backend
    # runs fx's code, which wrote it with repr once: fuzz/FINDINGS.md, session 19)
    "{new} = {a} * 2\nLOGGER.warning('%s of %d', 'rows', {a}.shape[0])\n{new2} = {new} + 1",
    # exhausted iterators, then their container grows
    "_xs{i} = [{k}, 1]\n_it{i} = iter(_xs{i})\n{new} = list(_it{i})\n_xs{i}.append({a}.dim())\n{new2} = list(_it{i})",
    "_d{i} = {{'a': {k}}}\n_it{i} = iter(_d{i}.items())\nlist(_it{i})\n_d{i}['b'] = 1\n{new} = list(_it{i})",
    "_xs{i} = [{a}]\n_it{i} = reversed(_xs{i})\nlist(_it{i})\n_xs{i}.append({b})\n{new} = len(list(_it{i}))",
    "_s{i} = {{{k}}}\n_it{i} = iter(_s{i})\nlist(_it{i})\n_s{i}.add(-1)\n{new} = list(_it{i})",
    "_xs{i} = [{a}]\n_it{i} = enumerate(_xs{i})\nlist(_it{i})\n_xs{i}.append({b})\n{new} = len(list(_it{i}))",
    "_xs{i} = [{k}]\n_it{i} = map(str, _xs{i})\nlist(_it{i})\n_xs{i}.append(2)\n{new} = list(_it{i})",
    ("_q{i} = collections.deque([{k}])\n_it{i} = iter(_q{i})\nlist(_it{i})\n_q{i}.append(2)\ntry:\n"
     "    {new} = list(_it{i})\nexcept RuntimeError as e:\n    {new} = str(e)"),
    # containers changed while they are iterated
    ("_d{i} = {{1: {a}, 2: {b}}}\n{new} = []\ntry:\n    for _k in _d{i}:\n        {new}.append(_k)\n"
     "        del _d{i}[_k]\n        _d{i}[_k + 10] = {a}\nexcept RuntimeError as e:\n    {new2} = str(e)"),
    ("_d{i} = {{0: {k}}}\n{new} = []\ntry:\n    for _k in _d{i}:\n        {new}.append(_k)\n        del _d{i}[0]\n"
     "        _d{i}[0] = 1\nexcept RuntimeError as e:\n    {new2} = str(e)"),
    ("_d{i} = {{'a': {a}}}\n{new} = {a}\ntry:\n    for _k in _d{i}:\n        _d{i}[_k + 'x'] = {b}\n"
     "except RuntimeError as e:\n    {new} = {a} * len(str(e))"),
    ("_d{i} = {{1: {k}, 2: 2}}\n{new} = []\nfor _k, _v in _d{i}.items():\n    {new}.append(_v)\n"
     "    _d{i}[2] = _v + 1"),
    ("_d{i} = collections.OrderedDict(a={k}, b=2)\n{new} = []\ntry:\n    for _k in _d{i}:\n        {new}.append(_k)\n"
     "        _d{i}.move_to_end('a')\nexcept RuntimeError as e:\n    {new2} = str(e)"),
    ("_s{i} = {{{k}, 7}}\n{new} = 0\ntry:\n    for _v in _s{i}:\n        _s{i}.add(_v + 100)\n"
     "except RuntimeError as e:\n    {new} = len(str(e))"),
    ("_q{i} = collections.deque([{a}, {b}])\n{new} = []\ntry:\n    for _v in _q{i}:\n        {new}.append(_v)\n"
     "        _q{i}.rotate(1)\nexcept RuntimeError as e:\n    {new2} = str(e)"),
    ("_xs{i} = [{k}, 2]\n{new} = []\nfor _v in _xs{i}:\n    {new}.append(_v)\n    if len(_xs{i}) < 4:\n"
     "        _xs{i}.append(_v)"),
    # builtins and functions called with the wrong arguments
    "try:\n    {new} = bool({k}, {k})\nexcept TypeError as e:\n    {new} = str(e)",
    "try:\n    {new} = len([{a}], [{b}])\nexcept TypeError as e:\n    {new} = str(e)",
    "try:\n    {new} = isinstance({a})\nexcept TypeError as e:\n    {new} = str(e)",
    "try:\n    {new} = getattr({a})\nexcept TypeError as e:\n    {new} = len(e.args)",
    "try:\n    {new} = range({k}, 1, 1, 1)\nexcept TypeError as e:\n    {new} = str(e)",
    "try:\n    {new} = {{}}.get()\nexcept TypeError as e:\n    {new} = str(e)",
    "{new} = [{a}]\ntry:\n    {new}.append({a}, {b})\nexcept TypeError as e:\n    {new2} = str(e)",
    "try:\n    {new} = sorted([{k}, 1], foo=1)\nexcept TypeError as e:\n    {new} = str(e)",
    "try:\n    {new} = checked()\nexcept TypeError as e:\n    {new} = str(e)",
    "try:\n    {new} = checked({a}, 1, 2)\nexcept TypeError as e:\n    {new} = str(e)",
    "try:\n    {new} = checked({a}, lim=1)\nexcept TypeError as e:\n    {new} = str(e)",
    "try:\n    {new} = collections.defaultdict({k})\nexcept TypeError as e:\n    {new} = str(e)",
    # Python's own errors, with their messages: unpacking, sums of strings, names, attributes, slices
    "try:\n    {new}, {new2} = [{a}, {b}, {a}][:{k} % 4]\nexcept ValueError as e:\n    {new}, {new2} = str(e), {a}",
    "try:\n    {new}, *{new2} = [{a}][{k} % 2:]\nexcept ValueError as e:\n    {new}, {new2} = str(e), {a}",
    "try:\n    {new} = sum(['a'], '')\nexcept TypeError as e:\n    {new} = str(e)",
    "try:\n    {new} = getattr({a}, {k})\nexcept TypeError as e:\n    {new} = str(e)",
    "try:\n    {new} = [{a}].missing\nexcept AttributeError as e:\n    {new} = str(e)",
    "try:\n    {new} = [{a}, {b}][::{k} % 2]\nexcept ValueError as e:\n    {new} = str(e)",
    "try:\n    {new} = ({a},)[{k} + 5]\nexcept IndexError as e:\n    {new} = str(e)",
    ("class B{i}:\n    def __bool__(self):\n        return {k}\ntry:\n    {new} = {a} if B{i}() else {b}\n"
     "except TypeError as e:\n    {new} = str(e)"),
    ("class L{i}:\n    def __len__(self):\n        return {k} - 3\ntry:\n    {new} = len(L{i}())\n"
     "except ValueError as e:\n    {new} = str(e)"),
    # special methods set to None block their protocol
    "try:\n    {new} = {a} * bool(NoBool())\nexcept TypeError as e:\n    {new} = str(e)",
    "try:\n    {new} = len(NoLen())\nexcept TypeError as e:\n    {new} = str(e)",
    "try:\n    {new} = list(NoIter())\nexcept TypeError as e:\n    {new} = str(e)",
    "try:\n    {new} = {k} in NoContains()\nexcept TypeError as e:\n    {new} = str(e)",
    "try:\n    {new} = NoCall()({a})\nexcept TypeError as e:\n    {new} = str(e)",
    # raise of what cannot be raised
    "try:\n    raise KeyError({k}) from {k}\nexcept TypeError as e:\n    {new} = str(e)",
    "try:\n    raise {k}\nexcept TypeError as e:\n    {new} = str(e)",
    "try:\n    raise ValueError({k}) from None\nexcept ValueError as e:\n    {new} = {a} * e.args[0]",
    # generators abandoned with a `finally` to run
    "_g{i} = logged_gen({log}, 2)\n{new} = {a} * next(_g{i})",
    "{new} = {a} + next(logged_gen({log}, 3))\n{log}.append('after')",
    "{new} = {a}\nfor _v in logged_gen({log}, 3):\n    {new} = {new} + _v\n    break\n{log}.append('after')",
    ("_g{i} = logged_gen({log}, 3)\nnext(_g{i})\ntry:\n    _g{i}.throw(KeyError({k}))\nexcept KeyError:\n"
     "    {log}.append('caught')\n{new} = {a}"),
    "{new} = list(zip([{a}], logged_gen({log}, 2)))[0][0]",
    # dict subclasses with __missing__, made in the call
    ("class M{i}(dict):\n    def __missing__(self, key):\n        return len(key)\n_m{i} = M{i}(a={k})\n"
     "{new} = _m{i}['a'] + _m{i}['bcd']"),
    # identity of what immutable builtins return
    ("_t{i} = ({k}, {a}.dim())\n{new} = (_t{i} * 1 is _t{i}, _t{i}[:] is _t{i}, tuple(_t{i}) is _t{i}, "
     "_t{i} + () is _t{i}, _t{i}[1:1] is ())"),
    "_f{i} = frozenset({a}.shape)\n{new} = (frozenset(_f{i}) is _f{i}, str(_f{i}) is str(_f{i}))",
]

WRITTEN = [
    # what methods and builtins say of themselves
    "{new} = [{{}}.get.__name__, {{}}.get.__qualname__, len.__name__, next.__module__, [].append.__self__]",
    "{new} = ({a}.add.__name__, type([].__len__).__name__, dict.fromkeys.__name__, str.upper.__qualname__)",
    # attributes set on functions made in the call (functools.wraps, counters)
    ("@functools.wraps(checked)\ndef _w{i}(t):\n    _w{i}.calls += 1\n    return checked(t)\n_w{i}.calls = 0\n"
     "try:\n    {new} = _w{i}({a})\nexcept (FuzzError, ValueError) as e:\n    {new} = str(e)\n"
     "{new2} = (_w{i}.__name__, _w{i}.__doc__, _w{i}.__wrapped__ is checked, _w{i}.calls, sorted(_w{i}.__dict__))"),
    ("def _g{i}(t: torch.Tensor, k: int = {k}) -> torch.Tensor:\n    return t * k\n_g{i}.__defaults__ = ({k} + 1,)\n"
     "_g{i}.__qualname__ = 'renamed'\n{new} = _g{i}({a})\n{new2} = (_g{i}.__qualname__, len(_g{i}.__annotations__))"),
    # exception chains: causes, contexts, tracebacks, notes, classes with their own __init__
    ("try:\n    try:\n        {new} = checked({a})\n    except (FuzzError, ValueError) as _e:\n"
     "        raise KeyError({k}) from _e\nexcept KeyError as _k:\n    {new} = {a} * len(type(_k.__cause__).__name__)\n"
     "    {new2} = (_k.__suppress_context__, type(_k.__context__).__name__, _k.args)"),
    ("try:\n    try:\n        {new} = {a} + ({a}.dim() // ({k} - {k}))\n    except ZeroDivisionError:\n"
     "        {new} = [][{k}]\nexcept IndexError as _e:\n    {new} = {a} * 2\n"
     "    {new2} = (type(_e.__context__).__name__, _e.__cause__, _e.__traceback__ is not None)"),
    ("_x{i} = ValueError({k}, 'v')\n_x{i}.extra = {k} + 1\n{new} = (_x{i}.with_traceback(None) is _x{i}, "
     "_x{i}.__traceback__, _x{i}.extra, str(_x{i}), repr(_x{i}))"),
    ("try:\n    raise ChainError('n', {k})\nexcept ChainError as _e:\n    {new} = {a} * _e.n\n"
     "    {new2} = (str(_e), repr(_e), _e.args)"),
    ("try:\n    raise RuntimeError({k}) from None\nexcept RuntimeError as _e:\n"
     "    {new} = (_e.__cause__, _e.__suppress_context__, _e.__context__)"),
    # objects of slotted classes and of classes with their own __new__
    ("_o{i} = Slotted({a})\n_o{i}.n = {k}\n{new} = _o{i}.t * _o{i}.n\ntry:\n    _o{i}.other = 1\n"
     "except AttributeError as e:\n    {new2} = str(e)"),
    "_o{i} = Slotted({a})\n{new} = (hasattr(_o{i}, 'n'), hasattr(_o{i}, '__dict__'))",
    "{new} = OwnNew({a}).t + {b}",
    # `in` on a set that came in (a global the program changes) and on iterators
    "{new} = {a} * ({k} in GSET)",
    "GSET.add({k} + 1)\n{new} = ({k} + 1 in GSET, 'a' in GSET)",
    "_it{i} = iter([{k}, 1, 2])\n{new} = (1 in _it{i}, list(_it{i}))",
    "_gen{i} = (_v * {a} for _v in range(3))\n{new} = len([_t for _t in _gen{i}]) + (5 in iter(range({k})))",
    # generators returned (never run: made again by the entry; run in part: a break), consumed in part
    "{new} = gen_of({a}, {k} % 3 + 1)",
    "_g{i} = gen_of({a}, 3)\n{new} = next(_g{i}) + {b}",
    "{new} = gen_of({a} + 1, 2)\n_t{i} = {a} * 2",
    # generators run in part, then returned: made again standing where the trace left them
    "{new} = gen_of({a}, 3)\nnext({new})",
    "{new} = gen_of({a}, {k} % 3 + 1)\nnext({new}, None)\nnext({new}, None)",
    "{new} = deleg_gen({a})\nnext({new})",
    "{new} = deleg_gen({a})\nnext({new})\n{new2} = {new}.throw(ValueError({k}))",
    # throw and close into a generator stopped in `yield from`: the sub-generator first
    "_g{i} = deleg_gen({a})\nnext(_g{i})\n{new} = _g{i}.throw(ValueError({k}))\n{new2} = next(_g{i})",
    "_g{i} = deleg_gen({a})\nnext(_g{i})\n_g{i}.close()\n{new} = {a} + 1",
    # the old sequence protocol: __getitem__ until IndexError
    "{new} = sum(GetSeq({a}, {k} % 4 + 1))",
    "_h{i}, *_r{i} = GetSeq({a}, 3)\n{new} = _h{i} + len(_r{i})",
    "{new} = ({a}.sum() in GetSeq({a}, 0), list(iter(GetSeq(1, 2))))",
]
FUNCTIONAL = [  # sorted/min/max with key=, functools, operator, itertools (bound to a new name)
    "sorted([{a}, {b}, {a} * 2], key=lambda t: t.dim())[0]", "sorted([{a}, {b}], key=lambda t: tuple(t.shape))[-1]",
    "max([{a}, {b}], key=lambda t: t.numel())", "min({a}, {b}, key=lambda t: t.dim())",
    "sorted([{k}, 3, -1, len({a})], key=lambda v: (v % 2, -v))", "max({a}.shape, key=lambda d: -d, default=0)",
    "min(range({k} % 4 + 1), key=lambda v: abs(v - 1))", "sorted({a}.shape, reverse=True)",
    "functools.partial(torch.add, alpha={k})({a}, {b})", "functools.partial(checked, limit=3)({a})",
    "functools.reduce(operator.add, [{a}, {b}, {a}])", "functools.reduce(lambda acc, d: acc * d, {a}.shape, 1)",
    "functools.reduce(torch.maximum, [{a}, {b}], {a})", "operator.itemgetter(0, -1)([{a}, {b}])[1]",
    "operator.itemgetter(-1)({a}.shape) if {a}.dim() else 1", "operator.attrgetter('shape')({a})",
    "sum(itertools.chain([{a}], [{b}, {a}]))", "torch.cat(list(itertools.chain([{a}], [{a} * 2])))",
    "len(list(itertools.product(range({k} % 4), repeat=2)))",
    "[i * j for i, j in itertools.product(range(2), {a}.shape)]",
    "sum({a} * i for i, _ in itertools.product(range(2), range(2)))", "operator.mul({a}, {k})",
    "list(map(operator.itemgetter(0), [{a}.shape, ({k},)]))",
]
FUNCTIONAL_BLOCKS = [
    "_pf{i} = functools.partial(torch.mul, other={k})\n{new} = _pf{i}({a})",
    "_pf{i} = functools.partial(Acc, n={k})\n{new} = _pf{i}({a})",
    "_key{i} = lambda t: (t.dim(), t.shape[0] if t.dim() else 0)\n{new} = sorted([{a}, {b}], key=_key{i})[0]",
    "{new} = {fn}({a})", "{new} = list(map({fn}, [{a}, {b}]))[-1]", "{new} = functools.partial({fn})({a})",
]


def _fields(template: str) -> list[str]:
    seen = []
    for _, name, _, _ in string.Formatter().parse(template):
        if name is not None and name not in seen:
            seen.append(name)
    return seen


def _python_set(v) -> bool:
    return isinstance(v, (set, frozenset)) and not any(isinstance(e, torch.Tensor) for e in v)


PLACES = {  # placeholder -> the values it may name
    "acc": lambda v: type(v).__name__ in ("Acc", "Scaled") and program_object(v),
    "obj": lambda v: program_object(v) and hasattr(v, "__dict__"),
    "pair": lambda v: type(v).__name__ == "Pair" and program_object(v),
    "stats": lambda v: type(v).__name__ == "Stats" and program_object(v),
    "frz": lambda v: type(v).__name__ == "Frozen" and program_object(v),
    "set": _python_set, "mset": lambda v: _python_set(v) and isinstance(v, set),
    "fn": lambda v: isinstance(v, functools.partial) or isinstance(v, types.FunctionType) and v.__name__ == "<lambda>",
    "arr": lambda v: isinstance(v, np.ndarray),
}
MAKE_PLACES = {  # how such a value is made on the spot (first), when the program has none, or sometimes
    "acc": ["Acc({a}, {k})", "Scaled({a}, {k})", "Scaled.of({a})"], "obj": ["Acc({a})", "Stats({a})"],
    "pair": ["Pair({a}, {b})"], "stats": ["Stats({a}, {k})"], "frz": ["Frozen({a}, {k})"],
    "set": ["set({a}.shape)", "{{{k}, 1, {a}.dim()}}", "frozenset(range({k} % 4))"], "mset": ["{{{k}, 1, {a}.dim()}}"],
    "arr": ["{a}.detach().numpy()", "np.asarray({a}.detach())", "{a}.detach().numpy()[..., ::-1]",
            "{a}.detach().numpy().astype(np.float32)", "np.arange({k} + 2)", "np.linspace(0, 1, {k} + 1)"],
}


def _fill_block(draw, g: Gen, template: str) -> list[str]:
    """The lines of `template` with its placeholders filled in (see above); _Discard if a
    placeholder has nothing to name."""
    fields, values, pre = _fields(template), {}, []
    tensors, ints = g.names(torch.Tensor), g.names(int)
    for name in (["a"] if {"d", "e"} & set(fields) else []) + fields:
        if name in values:
            continue
        base = name.rstrip("2")
        if name in ("a", "b"):
            if not tensors:
                raise _Discard
            values[name] = draw(st.sampled_from(tensors))
        elif name == "k":
            values[name] = draw(st.sampled_from(ints)) if ints else "2"
        elif name in ("d", "e"):
            rank = g.meta[values["a"]].dim()
            values[name] = draw(st.integers(-rank, rank - 1)) if rank else 0
        elif base == "new":
            values[name] = g.new()
        elif name == "i":
            g.count += 1
            values[name] = g.count
        elif name == "log":
            logs = g.names(list)
            if logs and draw(st.booleans()):
                values[name] = draw(st.sampled_from(logs))
            else:
                values[name] = g.new("log")
                pre.append(f"{values[name]} = []")
        else:
            options = g.names_where(PLACES[base])
            if base in MAKE_PLACES and (not options or draw(st.integers(0, 3)) == 0):
                if not tensors:
                    raise _Discard
                values[name] = g.new("s" if "set" in base else "o")
                make = draw(st.sampled_from(MAKE_PLACES[base]))
                pre.append(f"{values[name]} = " + make.format(a=draw(st.sampled_from(tensors)),
                                                              b=draw(st.sampled_from(tensors)),
                                                              k=draw(st.sampled_from(ints)) if ints else "2"))
            elif not options:
                raise _Discard
            else:
                values[name] = draw(st.sampled_from(options))
    text = "\n".join(pre + [template.format(**values)])
    _need(g.program, text)
    return text.split("\n")


def rule_bind(table, prefix="t"):
    """An expression from `table`, bound to a new name."""
    def rule(draw, g):
        lines = _fill_block(draw, g, draw(st.sampled_from(table)))
        name = g.new(prefix)
        return lines[:-1] + [f"{name} = {lines[-1]}"], None
    return rule


# NumPy code over arrays from tensors (`.numpy()`: their memory) and arrays passed in (issue 41)
NUMPY = [
    "{new} = np.sum({arr}, axis=0)", "{new} = {arr}.sum() * {a}", "{new} = np.mean({arr}), np.std({arr})",
    "{new} = {arr} * {k} + 1.5", "{new} = {arr} / 2, {arr} // 2, {arr} % 3", "{new} = -{arr}, abs({arr}), {arr} ** 2",
    "{new} = np.where({arr} > 0, {arr}, 0)", "{new} = {arr}.T @ {arr}", "{new} = np.dot({arr}, {arr2}.T)",
    "{new} = np.float32({k}) * {arr}", "{new} = {arr}.astype(np.float32) / 3", "{new} = {arr}.astype(np.int64)",
    "{new} = np.clip({arr}, -1, 1)", "{new} = np.concatenate([{arr}, {arr2}])", "{new} = np.stack([{arr}, {arr}], -1)",
    "{new} = np.exp(np.minimum({arr}, 3)).max(axis=-1)", "{new} = {arr}.reshape(-1)[:3]", "{new} = np.argmax({arr})",
    "{new} = np.cumsum({arr})", "{new} = np.linalg.norm({arr})", "{new} = np.einsum('...i,...i->...', {arr}, {arr})",
    "{new} = np.zeros({arr}.shape) + {arr}", "{new} = np.maximum({arr}, {arr2})", "{new} = ({arr} > 0) & ({arr} < 2)",
    "{new} = np.flip({arr})", "{new} = np.broadcast_to({arr}, (2, *{arr}.shape))", "{new} = np.sort({arr}, axis=None)",
    "{new} = np.isclose({arr}, {arr} + 1e-9), np.allclose({arr}, {arr2})", "{new} = {arr}[0], {arr}[..., :1]",
    "{new} = {a} + torch.from_numpy(np.ascontiguousarray({arr}))", "{new} = torch.as_tensor({arr}) * 2",
    "{new} = torch.tensor({arr}).sum()", "{new} = {arr}.shape, {arr}.ndim, {arr}.dtype, {arr}.size",
    "{new} = np.var({arr}, axis=-1, keepdims=True)", "{new} = np.tanh({arr}), np.sqrt(np.abs({arr}))",
    "{new} = {arr}.mean(axis=0) - {arr}", "{new} = np.expand_dims({arr}, 0)", "{new} = np.transpose({arr})",
    "{new} = np.round({arr}, 1), np.floor({arr})", "{new} = {arr}.copy()\n{new}[...] = {k}", "{new} = len({arr})",
    "{new} = np.prod({arr}, axis=-1)", "{new} = np.any({arr} > 1), np.all({arr} >= -4)",
    # writes: into an array passed in, or into a tensor's memory through its array
    "{arr} += 1", "{arr} *= {k}", "{arr}[0] = {k}", "{arr}[...] = np.flip({arr}).copy()", "{arr}.fill({k})",
    "{arr} /= 2", "{new} = {a}.detach().numpy()\n{new}[0] = {k}",
]


def rule_block(table):
    """A statement or block from `table`."""
    def rule(draw, g):
        return _fill_block(draw, g, draw(st.sampled_from(table))), None
    return rule


def rule_context(draw, g):
    """A statement (maybe a graph break, maybe a write) inside inference_mode, autocast or a
    contextlib block."""
    inner = draw(st.sampled_from([rule_assign(UNARY), rule_assign(BINARY), rule_assign(REDUCE),
                                  rule_assign(AUTOCAST), rule_assign(AUTOCAST), rule_write(INPLACE),
                                  rule_unsupported, rule_bind(OBJECT_USE), rule_bind(FUNCTIONAL)]))
    lines, meta = inner(draw, g)
    ctx = draw(st.sampled_from(CONTEXTS))
    def wrap(body):
        return [f"with {ctx}:", *("    " + line for line in body)]
    return wrap(lines), wrap(meta if meta is not None else lines)


CLASS_RULES = [(3, rule_bind(OBJECT_NEW, "o")), (3, rule_bind(OBJECT_USE)), (2, rule_block(OBJECT_SET)),
               (1, rule_block(LOCAL_TYPES))]
EXCEPTION_RULES = [(4, rule_block(EXCEPTIONS))]
SET_RULES = [(2, rule_bind(SETS_NEW, "s")), (2, rule_bind(SETS_USE)), (1, rule_block(SETS_SET))]
CONTEXT_RULES = [(2, rule_context), (2, rule_block(CONTEXT_BLOCKS))]
FUNCTIONAL_RULES = [(3, rule_bind(FUNCTIONAL)), (1, rule_block(FUNCTIONAL_BLOCKS))]
FILL_RULES = [(2, rule_block(FILLS))]
# calls that pass through torch's own frames (nn.Sequential.forward, Module._call_impl with a hook,
# torch.utils.checkpoint, a @torch.no_grad() wrapper) into code with a graph break (issue 44):
# eager's results, and the code past torch's frames compiled (oracle.check_library_frames)
LIBRARY_FRAMES = [
    "{new} = STEPS({a})",
    "{new} = HOOKED({a})",
    "{new} = torch.utils.checkpoint.checkpoint(ckstep, {a}, use_reentrant=False)",
    "{new} = nograd_step({a})",
]
# what libraries read of modules and of sets that came in (issue 45): hasattr / getattr with a
# default through a module class's own __getattr__ and nn.Module's; truth, len, `in`, iteration
# of frozensets and sets read from globals and dict values (GSET: changed by other rules)
LIBRARY_READS = [
    "{new} = {a} * (2 if hasattr(CFGM, 'cfg') else 3) + getattr(CFGM, 'missing', 1) + hasattr(CFGM, 'buf')",
    "{new} = {a} + sum(hasattr(m, name) for m in CFGM.modules() for name in ('lin', 'weight', '_hook', 'cfg'))",
    "{new} = {a} * getattr(CFGM.lin, 'cfg', 4) + (5 if hasattr(CFGM, 'training') else 6)",
    "{new} = {a} * (len(GFROZEN) if GFROZEN else 0.5) + ('mps' in GFROZEN) - (3 in GFROZEN)",
    "{new} = {a} + (2 if GBYKEY.get('b') or GBYKEY.get('q') else 3) * len(GBYKEY['c'])",
    "{new} = {a} * len([m for m in sorted(GFROZEN, key=str)]) + ('y' in GBYKEY['c'])",
    "{new} = {a} * (len(GSET) if GSET else -1)",
    "{new} = {a} + (1 if (u := GBYKEY.get('a')) and 'x' in u else 0)",
    # reads of an object whose class records every lookup (Watched): eager's count of them, no more
    "{new} = {a} * WATCHED.k + len(SEEN)",
    "{new} = {a} + (2 if isinstance(WATCHED, Watched) else 3) * len(SEEN)",
    "{new} = {a} * (getattr(WATCHED, 'k', 1) + hasattr(WATCHED, 'nope')) - len(SEEN)",
    "{new} = {a} + len([w.k for w in (WATCHED, Watched({k}))]) + len(SEEN)",
    "try:\n    {new} = {a} * WATCHED.k + len(SEEN)\nexcept AttributeError:\n    {new} = {a}",
    "with torch.no_grad():\n    {new} = {a} + WATCHED.k * len(SEEN)",
    "{new} = {a} * len(SEEN) + (WATCHED is not None) + (type(WATCHED) is Watched)",
]
SEMANTIC_RULES = [(1, rule_block(SEMANTICS))]  # (among the other Python rules; `--focus semantics`: mostly these)
WRITTEN_RULES = [(1, rule_block(WRITTEN))]  # (`--focus written`: mostly these)
NUMPY_RULES = [(6, rule_block(NUMPY))]  # (`--focus numpy`)
PYTHON_RULES = (CLASS_RULES + EXCEPTION_RULES + SET_RULES + CONTEXT_RULES + FUNCTIONAL_RULES + FILL_RULES
                + SEMANTIC_RULES + WRITTEN_RULES)


WRITE_RULES = [
    (5, rule_write(INPLACE)), (3, rule_write(AUGMENTED)), (3, rule_write(SETITEM)), (1, rule_write(OUT)),
    (3, rule_write(VIEW_WRITES)), (1, rule_write(META_INPLACE)), (1, rule_write(OTHER_WRITES)),
    (2, rule_view_of_input),
]
RULES = [
    (8, rule_assign(UNARY)), (8, rule_assign(BINARY)), (5, rule_assign(REDUCE)), (5, rule_assign(VIEW)),
    (4, rule_assign(INDEX)), (4, rule_assign(COMBINE)), (3, rule_assign(SIZES, "k")), (2, rule_assign(CREATE)),
    (2, rule_if_python), (2, rule_for), (2, rule_helper), (1, rule_unsupported), (2, rule_box),
    (2, rule_box_nested), (1, rule_box_dict), (1, rule_grad_block), (1, rule_assign(DEFAULT_DTYPE)), *WRITE_RULES,
    *PYTHON_RULES,
]
# `python -m rewrite.fuzz --focus NAME`: a subset of the rules, for a long run at one feature
FOCUS = {
    "writes": WRITE_RULES + [(3, rule_assign(BINARY)), (2, rule_assign(VIEW)), (2, rule_for), (2, rule_helper),
                             (1, rule_unsupported), (1, rule_grad_block), (2, rule_box)],
    # the Python constructs around tensor ops: classes, exceptions, sets, contexts, functools/itertools
    "python": PYTHON_RULES + [(3, rule_assign(UNARY)), (3, rule_assign(BINARY)), (1, rule_assign(REDUCE)),
                              (1, rule_write(INPLACE)), (1, rule_unsupported), (1, rule_helper), (1, rule_box)],
    "classes": CLASS_RULES + [(2, rule_assign(BINARY)), (1, rule_write(INPLACE)), (1, rule_box), (2, rule_box_dict),
                              (2, rule_box_nested)],
    "exceptions": EXCEPTION_RULES + [(2, rule_assign(BINARY)), (1, rule_write(INPLACE)), (1, rule_unsupported)],
    "contexts": CONTEXT_RULES + [(2, rule_assign(BINARY)), (1, rule_write(INPLACE)), (1, rule_unsupported)],
    "fills": FILL_RULES + SET_RULES + [(2, rule_assign(BINARY)), (1, rule_assign(SIZES, "k")), (1, rule_for),
                                      (1, rule_unsupported)],
    # Python's exact semantics (issue 38): exhausted iterators, changes while iterating, wrong arguments, ...
    "semantics": [(6, rule_block(SEMANTICS)), (2, rule_assign(BINARY)), (1, rule_assign(SIZES, "k")), (1, rule_for),
                  (1, rule_write(INPLACE)), (1, rule_unsupported), (1, rule_assign(DEFAULT_DTYPE))],
    # the Python tests and libraries are written in (issue 40): method and function attributes, exception
    # chains, slotted classes and their own __new__, `in` on sets and iterators, the __getitem__ protocol
    "written": [(6, rule_block(WRITTEN)), (2, rule_assign(BINARY)), (1, rule_assign(SIZES, "k")), (1, rule_for),
                (1, rule_write(INPLACE)), (1, rule_unsupported)],
    # NumPy over arrays from tensors and arrays passed in (issue 41), compared with NumPy's tolerance (oracle.py)
    # calls through torch's own frames into code that breaks (issue 44); what libraries read of
    # modules and sets (issue 45)
    "library": [(4, rule_block(LIBRARY_FRAMES)), (4, rule_block(LIBRARY_READS)), (1, rule_block(WRITTEN)),
                (2, rule_assign(BINARY)), (1, rule_assign(UNARY)), (1, rule_for),
                (1, rule_write(INPLACE)), (1, rule_unsupported), (1, rule_helper)],
    "numpy": NUMPY_RULES + [(2, rule_assign(BINARY)), (1, rule_assign(REDUCE)), (1, rule_write(INPLACE)),
                            (1, rule_unsupported)],
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
        inputs.append(BoxSpec("obj", draw(st.integers(1, 3)), draw(st.booleans()), draw(st.booleans())))
    if draw(st.integers(0, 4)) == 0:
        inputs.append(ListSpec("out"))
    python = any(r in {r for _, r in PYTHON_RULES} for _, r in rules)  # (only where those rules are drawn)
    if any(r in {r for _, r in CLASS_RULES} for _, r in rules) and draw(st.integers(0, 5)) == 0:
        # an object of the program's own class
        inputs.append(ObjSpec("acc", draw(st.sampled_from(["Acc", "Scaled"])), draw(st.integers(1, 3))))
        if draw(st.booleans()):  # a second one: one call passes the first twice (`alias_variant`)
            inputs.append(ObjSpec("acc2", inputs[-1].cls, draw(st.integers(1, 3))))
    if python and draw(st.integers(0, 5)) == 0:
        inputs.append(FnSpec("fn", draw(st.sampled_from(PARTIALS))))
    if any(r in {r for _, r in NUMPY_RULES} for _, r in rules):  # NumPy arrays passed in
        for i in range(draw(st.integers(0, 2))):
            rank = draw(st.integers(0, 3))
            inputs.append(ArraySpec(f"arr{i}", SYMS[3 - rank:], draw(st.sampled_from(ARRAY_DTYPES)),
                                    draw(st.sampled_from(ARRAY_LAYOUTS))))
    program = Program(inputs)
    for spec in inputs:
        if isinstance(spec, ObjSpec):
            _need(program, spec.cls)
    g = Gen(program)
    enabled = [(w, rule) for w, rule in rules if not draw(st.booleans())]  # swarm: this program's rules
    weighted = [rule for w, rule in enabled or rules for _ in range(w)]
    for _ in range(draw(st.integers(1, max_statements))):
        rule = draw(st.sampled_from(weighted))
        helpers = list(program.helpers)
        try:
            lines, meta = rule(draw, g)
        except _Discard:
            g.rollback(helpers)
            continue
        if not g.attempt(lines, meta):
            g.rollback(helpers)
    values = [n for n, v in g.meta.items() if _returnable(v) and not n.startswith("_")]
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


def _returnable(v, depth=0) -> bool:
    """Tensors and Python numbers; objects of the program's classes, sets of Python values,
    strs, generators, and lists, tuples and dicts of those (not bools, other iterators,
    functions or classes)."""
    if isinstance(v, bool):
        return depth > 0
    if isinstance(v, (torch.Tensor, int, float, str, types.GeneratorType, np.ndarray, np.generic)) or _python_set(v) \
            or v is None:
        return True  # (a generator: the oracle compares what it yields)
    if depth > 3:
        return False
    if isinstance(v, (list, tuple, collections.deque)):
        return all(_returnable(e, depth + 1) for e in v)
    if isinstance(v, dict):
        return all(_returnable(e, depth + 1) for e in v.values())
    return program_object(v) and all(_returnable(e, depth + 1) for e in vars(v).values()) \
        if hasattr(v, "__dict__") else program_object(v)


@st.composite
def dims(draw) -> dict:
    """Sizes for d0, d1, d2: mostly 2..5, sometimes the special 0 and 1."""
    special = st.sampled_from([0, 1])
    return {s: draw(special) if draw(st.integers(0, 5)) == 0 else draw(st.integers(2, 5)) for s in SYMS}


__all__ = ["programs", "dims", "Program", "RULES", "FOCUS", "PYTHON_RULES", "PRELUDE"]
