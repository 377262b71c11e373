"""Lowering tables: torch ops -> Triton expressions, with torch's type promotion.

`POINTWISE` maps an op's name (an fx node's `call_function` target's `__name__`, or its
`call_method` name) to `(kind, rule)`. The kind says how operands are cast before the rule
sees them (torch computes in the result's dtype, comparisons in the operands' promoted dtype,
logical ops on truth values); the rule builds the result's expression from the operands'
expressions. `REDUCTIONS` parses reduction calls (dims, keepdim, correction) and
`COMPOSITES` names the ops built from reductions (softmax, layer_norm, var, ...).

Values live in registers as `register(dtype)`: half and bfloat16 compute in float32 (torch's
"opmath") and are rounded back to their dtype after every op, as eager rounds each result.
No `libdevice` calls (the CPU interpreter has none): tanh and GELU are written with
`tl.sigmoid`/`tl.erf`; maximum/minimum propagate NaN as torch does.
"""
from __future__ import annotations

import math

import torch


class NoLowering(Exception):
    pass


TL = {torch.float32: "tl.float32", torch.float16: "tl.float16", torch.bfloat16: "tl.bfloat16",
      torch.float64: "tl.float64", torch.int64: "tl.int64", torch.int32: "tl.int32", torch.int16: "tl.int16",
      torch.int8: "tl.int8", torch.uint8: "tl.uint8", torch.bool: "tl.int1"}
HALF = (torch.float16, torch.bfloat16)
NAN = "tl.PropagateNan.ALL"


def register(dtype: torch.dtype) -> torch.dtype:
    """The dtype a value of `dtype` is computed and held in."""
    return torch.float32 if dtype in HALF else dtype


def cast(expr: str, frm: torch.dtype, to: torch.dtype) -> str:
    """`expr` (held as register(frm)) as a value of dtype `to` (held as register(to))."""
    if to not in TL:
        raise NoLowering(f"dtype {to}")
    if frm == to or (register(frm) == to and frm not in HALF):
        return expr
    if to is torch.bool:
        return f"({expr} != 0)"
    if to is torch.bfloat16:  # round to nearest even (Triton's interpreter truncates), hold as float32
        return f"_round_bf16({expr})" if frm in (torch.float32, torch.bfloat16) else \
            f"_round_bf16({expr}.to(tl.float32))"
    if to in HALF:  # round to the half type, hold as float32
        return f"{expr}.to({TL[to]}).to(tl.float32)"
    if register(frm) == register(to) and frm in HALF:
        return expr
    return f"{expr}.to({TL[to]})"


def literal(value, dtype: torch.dtype) -> str:
    """A Python number as a Triton operand of compute dtype `dtype`."""
    if isinstance(value, bool) or dtype is torch.bool:
        if dtype.is_floating_point:
            return "1.0" if value else "0.0"
        return str(int(bool(value))) if dtype is not torch.bool else ("True" if value else "False")
    if not isinstance(value, (int, float)):
        raise NoLowering(f"operand {value!r}")
    if dtype.is_floating_point:
        value = float(value)
        text = repr(value) if math.isfinite(value) else f'float("{value}")'
        return f"tl.full([], {text}, tl.float64)" if dtype is torch.float64 else text
    if isinstance(value, float):
        raise NoLowering("a float operand of an integer op")
    return repr(value)


# -- pointwise rules: operands' expressions (already cast) -> the result's expression ----------

def _binary(op):
    return lambda a, b: f"({a} {op} {b})"


def _call(fn):
    return lambda *a: f"{fn}({', '.join(a)})"


def _maximum(a, b):
    return f"tl.maximum({a}, {b}, propagate_nan={NAN})"


def _minimum(a, b):
    return f"tl.minimum({a}, {b}, propagate_nan={NAN})"


def _gelu(x, approximate="none"):
    if approximate == "none":
        return f"({x} * 0.5 * (1.0 + tl.erf({x} * {1 / math.sqrt(2)!r})))"
    if approximate == "tanh":
        inner = f"({math.sqrt(2 / math.pi)!r} * ({x} + 0.044715 * {x} * {x} * {x}))"
        return f"({x} * 0.5 * (1.0 + (2.0 * tl.sigmoid(2.0 * {inner}) - 1.0)))"
    raise NoLowering(f"gelu approximate={approximate!r}")


def _pow(x, y):
    if y in ("2", "2.0"):
        return f"({x} * {x})"
    if y in ("3", "3.0"):
        return f"({x} * {x} * {x})"
    if y == "0.5":
        return f"tl.sqrt({x})"
    if y in ("1", "1.0"):
        return x
    raise NoLowering(f"pow with exponent {y}")


POINTWISE = {
    # arithmetic: operands cast to the result's compute dtype
    "add": ("math", _binary("+")), "sub": ("math", _binary("-")), "mul": ("math", _binary("*")),
    "truediv": ("math", _binary("/")), "div": ("math", _binary("/")), "true_divide": ("math", _binary("/")),
    "neg": ("math", lambda x: f"(-{x})"), "negative": ("math", lambda x: f"(-{x})"),
    "abs": ("math", _call("tl.abs")), "exp": ("math", _call("tl.exp")), "log": ("math", _call("tl.log")),
    "sqrt": ("math", _call("tl.sqrt")), "rsqrt": ("math", _call("tl.rsqrt")),
    "sigmoid": ("math", _call("tl.sigmoid")), "erf": ("math", _call("tl.erf")),
    "tanh": ("math", lambda x: f"(2.0 * tl.sigmoid(2.0 * {x}) - 1.0)"),
    "relu": ("math", lambda x: f"tl.where({x} < 0, 0, {x})"), "gelu": ("math", _gelu),
    "silu": ("math", lambda x: f"({x} * tl.sigmoid({x}))"),
    "maximum": ("math", _maximum), "minimum": ("math", _minimum), "pow": ("math", _pow),
    "square": ("math", lambda x: f"({x} * {x})"), "reciprocal": ("math", lambda x: f"(1.0 / {x})"),
    # the result from one operand's truth value and two values
    "where": ("where", lambda c, a, b: f"tl.where({c}, {a}, {b})"),
    # comparisons: operands cast to their promoted dtype, the result is bool
    "lt": ("compare", _binary("<")), "le": ("compare", _binary("<=")), "gt": ("compare", _binary(">")),
    "ge": ("compare", _binary(">=")), "eq": ("compare", _binary("==")), "ne": ("compare", _binary("!=")),
    # logical ops: operands as truth values
    "logical_and": ("logical", _binary("&")), "logical_or": ("logical", _binary("|")),
    "logical_xor": ("logical", _binary("^")), "logical_not": ("logical", lambda x: f"({x} == 0)"),
    # bitwise ops: bool or integer operands, cast to the result's dtype
    "and_": ("bitwise", _binary("&")), "or_": ("bitwise", _binary("|")), "xor": ("bitwise", _binary("^")),
    "bitwise_and": ("bitwise", _binary("&")), "bitwise_or": ("bitwise", _binary("|")),
    "bitwise_xor": ("bitwise", _binary("^")),
}
# ops whose result keeps an integer operand's dtype but whose rule assumes floats
FLOAT_ONLY = {"exp", "log", "sqrt", "rsqrt", "sigmoid", "erf", "tanh", "gelu", "silu", "reciprocal", "truediv",
              "div", "true_divide"}
# names whose Python semantics the table does not give for integers (floor division, modulo)
FLOOR = {"floordiv", "floor_divide", "mod", "remainder"}
CASTS = {"float": torch.float32, "double": torch.float64, "half": torch.float16, "bfloat16": torch.bfloat16,
         "int": torch.int32, "long": torch.int64, "bool": torch.bool, "short": torch.int16, "char": torch.int8,
         "byte": torch.uint8}


def floor_ops(name: str, a: str, b: str, dtype: torch.dtype) -> str:
    """Python's floor division and modulo (torch's for tensors) from Triton's truncating ones."""
    if dtype.is_floating_point:  # torch's div_floor: fmod, then correct the rounding
        mod = f"({a} % {b})"
        if name in ("mod", "remainder"):
            return f"tl.where(({mod} != 0) & (({mod} < 0) != ({b} < 0)), {mod} + {b}, {mod})"
        div = f"(({a} - {mod}) / {b})"
        div = f"tl.where(({mod} != 0) & (({b} < 0) != ({mod} < 0)), {div} - 1.0, {div})"
        return f"tl.where({b} == 0, {a} / {b}, {div})"
    q, r = f"({a} // {b})", f"({a} % {b})"
    fix = f"(({r} != 0) & (({r} < 0) != ({b} < 0)))"
    if name in ("mod", "remainder"):
        return f"tl.where({fix}, {r} + {b}, {r})"
    return f"tl.where({fix}, {q} - 1, {q})"


# -- reductions ---------------------------------------------------------------------------

REDUCTIONS = frozenset({"sum", "mean", "amax", "amin", "max", "min", "var", "std", "softmax", "log_softmax",
                        "layer_norm"})


def _dims(dim, rank: int) -> tuple[int, ...]:
    if dim is None or dim == () or dim == []:
        return tuple(range(rank))
    dims = dim if isinstance(dim, (tuple, list)) else (dim,)
    if not all(isinstance(d, int) and not isinstance(d, bool) for d in dims):
        raise NoLowering(f"reduction dims {dim!r}")
    return tuple(sorted({d % rank if rank else 0 for d in dims}))


def parse_reduction(name: str, args: tuple, kwargs: dict, rank: int) -> dict:
    """{"op", "dims", "keepdim", ...} for a reduction call (the tensor operand excluded from
    `args`), or NoLowering for the forms not handled (dtype=, indices, out=)."""
    kwargs = dict(kwargs)
    if "out" in kwargs or kwargs.pop("dtype", None) is not None:
        raise NoLowering(f"{name} with out= or dtype=")
    if name in ("softmax", "log_softmax"):
        dim = args[0] if args else kwargs.pop("dim", None)
        kwargs.pop("_stacklevel", None)
        if dim is None or len(args) > 2 or kwargs:
            raise NoLowering(f"{name} arguments")
        return {"op": name, "dims": _dims(dim, rank), "keepdim": True}
    if name == "layer_norm":
        shape = args[0] if args else kwargs.pop("normalized_shape")
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        rest = list(args[1:]) + [None] * 3
        weight = kwargs.pop("weight", rest[0])
        bias = kwargs.pop("bias", rest[1])
        eps = kwargs.pop("eps", rest[2] if rest[2] is not None else 1e-5)
        kwargs.pop("cudnn_enable", None)
        if kwargs or not isinstance(eps, float) or len(args) > 5 or not 0 < len(shape) <= rank:
            raise NoLowering("layer_norm arguments")
        return {"op": "layer_norm", "dims": tuple(range(rank - len(shape), rank)), "keepdim": True,
                "weight": weight, "bias": bias, "eps": eps}
    if name in ("var", "std"):
        rest, dim, correction, keepdim = list(args), None, 1, False
        if rest and not isinstance(rest[0], bool):
            dim = rest.pop(0)
        if rest:
            correction = int(rest.pop(0))
        if rest:
            keepdim = rest.pop(0)
        dim = kwargs.pop("dim", dim)
        if "unbiased" in kwargs:
            correction = int(kwargs.pop("unbiased"))
        correction = kwargs.pop("correction", correction)
        keepdim = kwargs.pop("keepdim", keepdim)
        if kwargs or rest or not isinstance(correction, (int, float)):
            raise NoLowering(f"{name} arguments")
        return {"op": name, "dims": _dims(dim, rank), "keepdim": bool(keepdim), "correction": correction}
    if name in ("max", "min") and (args or kwargs):
        raise NoLowering(f"{name} with a dim (values and indices) or a second tensor")
    dim = args[0] if args else kwargs.pop("dim", None)
    keepdim = args[1] if len(args) > 1 else kwargs.pop("keepdim", False)
    if kwargs or len(args) > 2 or not isinstance(keepdim, bool):
        raise NoLowering(f"{name} arguments")
    return {"op": name, "dims": _dims(dim, rank), "keepdim": keepdim}


# -- one pointwise node -------------------------------------------------------------------

class Operand:
    """An operand as the kernel sees it: a value held in registers (`expr`, `dtype`) or a
    Python number (`expr` None); `example` is what torch's type promotion looks at."""

    __slots__ = ("expr", "dtype", "example")

    def __init__(self, expr, dtype, example):
        self.expr, self.dtype, self.example = expr, dtype, example

    def as_(self, dtype: torch.dtype) -> str:
        if self.expr is None:
            return literal(self.example, register(dtype))
        return cast(self.expr, self.dtype, dtype)


def lower_pointwise(name: str, ops: list, options: dict, out: torch.dtype) -> str:
    """The expression of a pointwise node whose result has dtype `out` (held as register(out))."""
    if name == "cast":
        return ops[0].as_(out)
    if name in FLOOR:
        if len(ops) != 2:
            raise NoLowering(f"{name} arguments")
        if not out.is_floating_point and not (ops[1].expr is None and ops[1].example != 0):
            raise NoLowering(f"integer {name} by a tensor (division by zero raises in eager)")
        if out is torch.bool:
            raise NoLowering(f"{name} of bools")
        return cast(floor_ops(name, ops[0].as_(out), ops[1].as_(out), register(out)), register(out), out)
    if name == "clamp":
        x, lo, hi = ops
        if x.expr is None:
            raise NoLowering("clamp of a number")
        expr = x.as_(out)
        if lo is not None:
            expr = _maximum(expr, lo.as_(out))
        if hi is not None:
            expr = _minimum(expr, hi.as_(out))
        return cast(expr, register(out), out)
    kind, rule = POINTWISE[name]
    if kind == "compare":
        if not any(isinstance(o.example, torch.Tensor) for o in ops):
            raise NoLowering("a comparison of two numbers")
        promoted = torch.result_type(*(o.example for o in ops))
        return rule(*(o.as_(promoted) for o in ops))
    if kind == "logical":
        return rule(*(o.as_(torch.bool) for o in ops))
    if kind == "bitwise":
        if out.is_floating_point:
            raise NoLowering(f"{name} of floats")
        return rule(*(o.as_(out) for o in ops))
    if kind == "where":
        cond, a, b = ops
        return cast(rule(cond.as_(torch.bool), a.as_(out), b.as_(out)), register(out), out)
    if out is torch.bool or (name in FLOAT_ONLY and not out.is_floating_point):
        raise NoLowering(f"{name} with a {out} result")
    args = [o.as_(out) for o in ops]
    if name in ("add", "sub") and options.get("alpha", 1) != 1:
        alpha = options["alpha"]
        args[1] = f"({args[1]} * {literal(alpha, register(out))})"
    extra = {"approximate": options["approximate"]} if "approximate" in options else {}
    try:
        expr = rule(*args, **extra)
    except TypeError as e:
        raise NoLowering(f"{name}: {e}") from None
    return cast(expr, register(out), out)
