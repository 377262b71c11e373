"""Lowering table: pointwise torch ops -> Triton expressions.

Each entry maps an op's name (an fx node's `call_function` target's `__name__`, or its
`call_method` name) to a function of the operands' Triton expressions (tensors as value
names, Python numbers as literals) returning the result's expression. Ops not in the table,
or called with arguments the entry does not handle, raise NoLowering: the graph runs
through torch instead. No `libdevice` calls (the CPU interpreter has none): tanh and GELU
are written with `tl.sigmoid`/`tl.erf`.
"""
from __future__ import annotations

import math


class NoLowering(Exception):
    pass


def _binary(op):
    return lambda a, b, **kw: _no_kwargs(kw) or f"({a} {op} {b})"


def _call(fn):
    return lambda *a, **kw: _no_kwargs(kw) or f"{fn}({', '.join(a)})"


def _no_kwargs(kw) -> None:
    if kw:
        raise NoLowering(f"keyword arguments {sorted(kw)}")


def _gelu(x, approximate="'none'"):
    if approximate == "'none'":
        return f"({x} * 0.5 * (1.0 + tl.erf({x} * {1 / math.sqrt(2)!r})))"
    if approximate == "'tanh'":
        inner = f"({math.sqrt(2 / math.pi)!r} * ({x} + 0.044715 * {x} * {x} * {x}))"
        return f"({x} * 0.5 * (1.0 + (2.0 * tl.sigmoid(2.0 * {inner}) - 1.0)))"
    raise NoLowering(f"gelu approximate={approximate}")


def _relu(x, inplace="False"):
    if inplace != "False":
        raise NoLowering("in-place relu")
    return f"tl.maximum({x}, 0.0)"


def _clamp(x, min="None", max="None"):
    out = x
    if min != "None":
        out = f"tl.maximum({out}, {min})"
    if max != "None":
        out = f"tl.minimum({out}, {max})"
    return out


def _pow(x, y):
    if y in ("2", "2.0"):
        return f"({x} * {x})"
    if y in ("3", "3.0"):
        return f"({x} * {x} * {x})"
    if y == "0.5":
        return f"tl.sqrt({x})"
    raise NoLowering(f"pow with exponent {y}")


def _add(a, b, alpha="1"):
    if alpha not in ("1", "1.0"):
        raise NoLowering("add with alpha")
    return f"({a} + {b})"


def _sub(a, b, alpha="1"):
    if alpha not in ("1", "1.0"):
        raise NoLowering("sub with alpha")
    return f"({a} - {b})"


POINTWISE = {
    "add": _add, "sub": _sub, "mul": _binary("*"), "truediv": _binary("/"), "div": _binary("/"),
    "neg": lambda x: f"(-{x})", "abs": _call("tl.abs"), "exp": _call("tl.exp"), "log": _call("tl.log"),
    "sqrt": _call("tl.sqrt"), "rsqrt": _call("tl.rsqrt"), "sigmoid": _call("tl.sigmoid"),
    "tanh": lambda x: f"(2.0 * tl.sigmoid(2.0 * {x}) - 1.0)", "relu": _relu, "gelu": _gelu,
    "silu": lambda x, inplace="False": f"({x} * tl.sigmoid({x}))",
    "where": _call("tl.where"), "maximum": _call("tl.maximum"), "minimum": _call("tl.minimum"),
    "clamp": _clamp, "clip": _clamp, "pow": _pow,
    "lt": _binary("<"), "le": _binary("<="), "gt": _binary(">"), "ge": _binary(">="), "eq": _binary("=="),
    "ne": _binary("!="), "and_": _binary("&"), "or_": _binary("|"), "logical_and": _binary("&"),
    "logical_or": _binary("|"), "logical_not": lambda x: f"({x} == 0)",
}


def lower(name: str, args: list[str], kwargs: dict[str, str]) -> str:
    rule = POINTWISE.get(name)
    if rule is None:
        raise NoLowering(f"no lowering for {name}")
    try:
        return rule(*args, **kwargs)
    except TypeError as e:
        raise NoLowering(f"{name}: {e}") from None
