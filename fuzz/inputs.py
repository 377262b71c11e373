"""Inputs of generated programs: specs that render as Python expressions.

A tensor input has symbolic dims (a suffix of d0, d1, d2), a dtype and a layout. Each call
binds the symbols to sizes and a seed; `expr` writes the input as source text, so a
failure's reproducer shows exactly how to build it, and `make` builds it by evaluating that.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

import torch

DTYPES = ("float32", "float64", "int64", "bool")
LAYOUTS = ("contiguous", "transposed", "sliced", "expanded", "grad")  # grad: a float leaf that requires grad


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


def _same(a, b):
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and \
            bool(torch.equal(a, b) or torch.allclose(a.double(), b.double(), equal_nan=True))
    return a == b


@dataclass(frozen=True)
class BoxSpec:
    """A Box with a float tensor `w` (shape d2) and an int `k`."""
    name: str
    k: int

    def expr(self, dims: dict, seed: int) -> str:
        w = TensorSpec("w", ("d2",), "float32", "contiguous").expr(dims, seed)
        return f"Box(w={w}, k={self.k})"


@dataclass(frozen=True)
class ValueSpec:
    """Any other argument of a user's function (fuzz.check): passed as a fresh deep copy."""
    name: str
    value: object

    def expr(self, dims: dict, seed: int) -> str:
        return repr(self.value)


def make(spec, dims: dict, seed: int):
    if isinstance(spec, ValueSpec):
        return copy.deepcopy(spec.value)
    return eval(spec.expr(dims, seed), {"torch": torch, "Box": Box})
