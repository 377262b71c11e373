"""Inputs of generated programs: specs that render as Python expressions.

A tensor input has symbolic dims (a suffix of d0, d1, d2), a dtype and a layout. Each call
binds the symbols to sizes and a seed; `expr` writes the input as source text, so a
failure's reproducer shows exactly how to build it, and `make` builds it by evaluating that.

Inputs may alias each other: an `AliasSpec` is a view of an earlier input (`x1 = x0[1:]`,
`x1 = x0` itself), or of a hidden base tensor that is not an argument (`_b = torch.randn(...)`,
`x1 = _b[:-1]`, `x2 = _b[1:]`). `input_lines` writes all of one call's inputs as assignments
(what a reproducer shows), `make_args` builds them.
"""
from __future__ import annotations

import copy
import functools
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

DTYPES = ("float32", "float64", "int64", "bool")
# grad: a float leaf that requires grad; grad view: a view of one (no leaf: autograd refuses writes into it)
LAYOUTS = ("contiguous", "transposed", "sliced", "expanded", "grad", "grad view")


@dataclass(frozen=True)
class TensorSpec:
    name: str
    syms: tuple  # e.g. ("d1", "d2")
    dtype: str
    layout: str

    def shape(self, dims: dict) -> list[int]:
        return [dims[s] for s in self.syms]

    def expr(self, dims: dict, seed: int) -> str:
        shape = self.shape(dims)
        layout = self.layout if len(shape) >= (2 if self.layout == "transposed" else 1) else "contiguous"
        if layout == "grad":
            make = _maker(self.dtype, shape, seed)
            return f"{make}.requires_grad_()" if self.dtype.startswith("float") else make
        if layout == "grad view" and self.dtype.startswith("float"):
            return f"{_maker(self.dtype, [*shape[:-1], 2 * shape[-1]], seed)}.requires_grad_()[..., ::2]"
        base = list(shape)
        if layout == "transposed":
            base[-1], base[-2] = base[-2], base[-1]
        elif layout == "sliced":
            base[-1] = 2 * base[-1]
        elif layout == "expanded":
            base[0] = 1
        make = _maker(self.dtype, base, seed)
        if layout == "transposed":
            return f"{make}.transpose(-1, -2)"
        if layout == "sliced":
            return f"{make}[..., ::2]"
        if layout == "expanded":
            return f"{make}.expand({', '.join(map(str, shape))})"
        return make


def _maker(dtype: str, shape: list[int], seed: int) -> str:
    size = "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"
    gen = f"generator=torch.Generator().manual_seed({seed})"
    if dtype in ("float32", "float64"):
        return f"torch.randn({size}, dtype=torch.{dtype}, {gen})"
    if dtype == "int64":
        return f"torch.randint(-4, 5, {size}, {gen})"
    return f"torch.randint(0, 2, {size}, {gen}).bool()"


# NumPy arrays passed in (`--focus numpy`): dtypes, and layouts (reversed: negative strides)
ARRAY_DTYPES = ("float64", "float32", "int64", "int32", "bool")
ARRAY_LAYOUTS = ("contiguous", "contiguous", "transposed", "sliced", "reversed")


@dataclass(frozen=True)
class ArraySpec:
    """A NumPy array input: symbolic dims, a dtype, a layout (as a tensor's, or reversed)."""
    name: str
    syms: tuple
    dtype: str
    layout: str

    def expr(self, dims: dict, seed: int) -> str:
        shape = [dims[s] for s in self.syms]
        layout = self.layout if len(shape) >= (2 if self.layout == "transposed" else 1) else "contiguous"
        base = list(shape)
        if layout == "transposed":
            base[-1], base[-2] = base[-2], base[-1]
        elif layout == "sliced":
            base[-1] = 2 * base[-1]
        size = "(" + ", ".join(map(str, base)) + ("," if len(base) == 1 else "") + ")"
        rng = f"np.random.default_rng({seed})"
        make = {"float64": f"{rng}.standard_normal({size})", "float32": f"{rng}.standard_normal({size}, np.float32)",
                "int64": f"{rng}.integers(-4, 5, {size})", "int32": f"{rng}.integers(-4, 5, {size}, np.int32)",
                "bool": f"{rng}.integers(0, 2, {size}).astype(bool)"}[self.dtype]
        return make + {"contiguous": "", "transposed": ".swapaxes(-1, -2)", "sliced": "[..., ::2]",
                       "reversed": "[::-1]"}[layout]


@dataclass(frozen=True)
class ScalarSpec:
    name: str
    kind: str  # "int" | "float"
    value: object

    def expr(self, dims: dict, seed: int) -> str:
        return repr(self.value)


@dataclass(frozen=True)
class ListSpec:
    """A list passed in for the program to append to (a side effect to replay)."""
    name: str

    def expr(self, dims: dict, seed: int) -> str:
        return "[]"


class Box:
    """A plain object passed in: programs read its attributes and may set new ones."""

    def __init__(self, **attrs):
        self.__dict__.update(attrs)

    def __eq__(self, other):
        return type(other) is Box and vars(self).keys() == vars(other).keys() and all(
            _same(a, b) for a, b in zip(vars(self).values(), vars(other).values()))

    def __repr__(self):
        return "Box(" + ", ".join(f"{k}={v!r}" for k, v in vars(self).items()) + ")"

    def keyed(self) -> "Box":
        """This box with a `CodeKey` in its `__dict__` too (`vars(box)` read whole meets it)."""
        self.__dict__[CodeKey()] = 0
        return self


class CodeKey:
    """A dict key that is no identifier and has no literal form, whose repr is not code: what
    generated code must never paste (a source of an item under it is refused while tracing)."""

    def __eq__(self, other):
        return type(other) is CodeKey

    def __hash__(self):
        return 7

    def __repr__(self):
        return "<a key with no literal form>"


def _same(a, b):
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and \
            bool(torch.equal(a, b) or torch.allclose(a.double(), b.double(), equal_nan=True))
    return a == b


@dataclass(frozen=True)
class BoxSpec:
    """A Box with a float tensor `w` (shape d2) and an int `k` (and, `code_key`, a CodeKey). With
    `nested`, Boxes within it too, read at several depths by the guards: `a.k`, `a.b.k` (1 or 2,
    alternating between calls: guarded), `a.b.w` (a tensor), `c.k`."""
    name: str
    k: int
    code_key: bool = False
    nested: bool = False

    def expr(self, dims: dict, seed: int) -> str:
        w = TensorSpec("w", ("d2",), "float32", "contiguous").expr(dims, seed)
        inner = ""
        if self.nested:
            w2 = TensorSpec("w", ("d2",), "float32", "contiguous").expr(dims, seed + 7)
            inner = f", a=Box(k={self.k + 1}, b=Box(k={1 + _parity(seed)}, w={w2})), c=Box(k=3)"
        return f"Box(w={w}, k={self.k}{inner})" + (".keyed()" if self.code_key else "")


@dataclass(frozen=True)
class ObjSpec:
    """An object of one of the program's own classes (`cls`, `Acc` or its subclass `Scaled`, defined
    in the program's source), built in the program's module: a float tensor `w` (shape d2) and an
    int `n` (n or n + 1, alternating between calls). Programs call its methods and operators and set
    its attributes (side effects)."""
    name: str
    cls: str
    n: int

    def expr(self, dims: dict, seed: int) -> str:
        w = TensorSpec("w", ("d2",), "float32", "contiguous").expr(dims, seed)
        return f"{self.cls}({w}, {self.n + _parity(seed)})"  # n changes between calls: guarded


def _parity(seed: int) -> int:
    """0 or 1, alternating over the oracle's calls (their seeds are 100 apart)."""
    return seed // 100 % 2


# functions passed in: partials of torch functions and lambdas, a fresh one on every call ({v}: 0.5 or 2,
# alternating between calls, so the partial's arguments change: guarded)
PARTIALS = [
    "functools.partial(torch.clamp, min=-{v}, max={v})", "functools.partial(torch.mul, other={v})",
    "functools.partial(F.leaky_relu, negative_slope={v})", "functools.partial(torch.sum, dim=-1)",
    "functools.partial(torch.add, other=1, alpha={v})",
    # a lambda made anew for each call: the same code (guarded by it, not by identity), its default changing
    "(lambda t, k={v}: torch.clamp(t, -k, k))", "(lambda t: t * 2)",
]


@dataclass(frozen=True)
class FnSpec:
    """A function passed in: `text` is its expression (one of PARTIALS)."""
    name: str
    text: str

    def expr(self, dims: dict, seed: int) -> str:
        return self.text.format(v=(0.5, 2)[_parity(seed)])


@dataclass(frozen=True)
class ValueSpec:
    """Any other argument of a user's function (fuzz.check): passed as a fresh deep copy."""
    name: str
    value: object

    def expr(self, dims: dict, seed: int) -> str:
        return repr(self.value)


@dataclass(frozen=True)
class AliasSpec:
    """A view of another tensor: an earlier input `of`, or a hidden `base` (built once per call
    under the name `of`, shared by every AliasSpec naming it). `view` is a template over {x}."""
    name: str
    of: str
    view: str
    base: TensorSpec | None = None

    def expr(self, dims: dict, seed: int) -> str:
        return self.view.format(x=self.of)


# views an input may be of an earlier one: (template over {x}, least rank of x)
ALIAS_VIEWS = [
    ("{x}", 0), ("{x}[:1]", 1), ("{x}[1:]", 1), ("{x}[..., ::2]", 1), ("{x}.transpose(-1, -2)", 2),
    ("{x}.unsqueeze(0)", 0), ("{x}.detach()", 0), ("{x}.diagonal()", 2), ("{x}.view({x}.shape)", 0),
]
# two inputs that are views of one hidden base: disjoint, overlapping, interleaved, the same memory
SHARED_VIEWS = [
    ("{x}[:1]", "{x}[1:]"), ("{x}[:-1]", "{x}[1:]"), ("{x}[..., ::2]", "{x}[..., 1::2]"), ("{x}", "{x}.mT"),
    ("{x}[:1]", "{x}[-1:]"), ("{x}", "{x}[..., :1]"),
]  # (the base has rank 2 or 3)
BASE_SEED = 1000  # a hidden base's seed, past any input's


def alias_variant(specs):
    """The same inputs with the aliasing changed (a call the cached graph's guards must tell
    apart): aliases become views of copies, sharing memory with nothing; without aliases, one
    object passed for two of the program's objects of one class (`a == b`, `a in [b]` are then
    identity), else a tensor passed twice where two inputs have one shape and dtype. None if
    none applies."""
    objects = [s for s in specs if isinstance(s, ObjSpec)]
    for i, second in enumerate(objects):
        for first in objects[:i]:
            if first.cls == second.cls:
                return [AliasSpec(s.name, first.name, "{x}") if s is second else s for s in specs]
    if any(isinstance(s, AliasSpec) for s in specs):
        return [AliasSpec(s.name, s.of, s.view.replace("{x}", "{x}.clone()"), s.base) if isinstance(s, AliasSpec)
                else s for s in specs]
    tensors = [s for s in specs if isinstance(s, TensorSpec)]
    for i, second in enumerate(tensors):
        for first in tensors[:i]:
            if (first.syms, first.dtype) == (second.syms, second.dtype):
                return [AliasSpec(s.name, first.name, "{x}") if s is second else s for s in specs]
    return None


def input_lines(specs, dims: dict, seed: int) -> list[str]:
    """One call's inputs as Python assignments (hidden bases first where they are needed)."""
    lines, made = [], set()
    for i, spec in enumerate(specs):
        if isinstance(spec, AliasSpec) and spec.base is not None and spec.of not in made:
            made.add(spec.of)
            lines.append(f"{spec.of} = {spec.base.expr(dims, seed + BASE_SEED)}")
        lines.append(f"{spec.name} = {spec.expr(dims, seed + i)}")
    return lines


def _env(ns: dict | None) -> dict:
    return {"torch": torch, "F": F, "np": np, "functools": functools, "Box": Box, **(ns or {})}


def make_args(specs, dims: dict, seed: int, ns: dict | None = None) -> list:
    """Fresh inputs for one call; aliases share memory as `input_lines` says. `ns` is the
    program's module namespace, where the classes of `ObjSpec` inputs live."""
    if not any(isinstance(s, AliasSpec) for s in specs):
        return [make(s, dims, seed + i, ns) for i, s in enumerate(specs)]
    env = _env(ns)
    exec("\n".join(input_lines(specs, dims, seed)), env)
    return [env[s.name] for s in specs]


def make(spec, dims: dict, seed: int, ns: dict | None = None):
    if isinstance(spec, ValueSpec):
        return copy.deepcopy(spec.value)
    return eval(spec.expr(dims, seed), _env(ns))
