"""NumPy's ufuncs and reductions: the torch functions computing them (`arrays.run` runs NumPy
beside each, the oracle of dtypes, shapes and errors; a lowering computes in the dtype NumPy's
result has). The tables:

  ELEMENTWISE  ufuncs -> the torch function computing them (operands cast to the dtype NumPy
               computes in: its result's, or for a comparison the operands' common one)
  OPERATORS    the operators of arrays -> the ufuncs they are
  REDUCTIONS   np.sum, np.mean, ... -> (torch reduction, how its dtype and axes are passed)
"""
from __future__ import annotations

import operator

import numpy as np
import torch

from ..errors import Unsupported
from ..values.vars import ConstVar, TensorVar
from .arrays import (cast, compute_dtype, dims_of, op, out_dtype, params, refuse, tensor_of, ufunc_kwargs,
                     value_of)
from .tensors import call_method


def elementwise(fn, ints=None):
    """An elementwise ufunc computed by torch `fn` on operands cast to NumPy's compute dtype;
    `ints` replaces it where that dtype is an integer one (division by zero gives 0 in NumPy)."""
    def lower(frame, call, *args, **kwargs):
        ufunc_kwargs(call, kwargs)
        dtype = compute_dtype(call, len(args))
        ops = [cast(frame, a, dtype) for a in args]
        if dtype == torch.bool and fn in BOOL_IDENTITY:  # (|b|, +b of bools: themselves)
            return op(frame, torch.clone, (ops[0],), {})
        if fn in TENSOR_OPERANDS:  # (torch.maximum(t, 0) takes no number: a 0-d tensor of the dtype)
            ops = [o if isinstance(o, TensorVar) else op(frame, torch.scalar_tensor, (o,), {"dtype": dtype})
                   for o in ops]
        integer = not dtype.is_floating_point and not dtype.is_complex and dtype != torch.bool
        if ints is not None and integer:
            return ints(frame, *ops)
        return op(frame, fn, ops, {})
    return lower


BOOL_IDENTITY = {torch.abs, torch.positive, torch.floor, torch.ceil, torch.trunc}
# torch functions whose operands must all be tensors
TENSOR_OPERANDS = {torch.maximum, torch.minimum, torch.fmax, torch.fmin, torch.atan2, torch.hypot, torch.logaddexp,
                   torch.logaddexp2, torch.heaviside, torch.nextafter, torch.gcd, torch.lcm, torch.logical_and,
                   torch.logical_or, torch.logical_xor, torch.copysign, torch.bitwise_left_shift,
                   torch.bitwise_right_shift}


def _nonzero_divisor(frame, b):
    if isinstance(b, ConstVar):
        return b, b.value == 0
    zero = op(frame, operator.eq, (b, 0), {})
    return op(frame, torch.where, (zero, 1, b), {}), zero


def _int_division(fn):
    """x // 0 and x % 0 of integers: 0, as NumPy gives (torch raises)."""
    def lower(frame, a, b):
        safe, zero = _nonzero_divisor(frame, b)
        if zero is True:  # (`a // 0`: a is an array, else NumPy would not be asked)
            return op(frame, torch.zeros_like, (a,), {})
        result = op(frame, fn, (a, safe), {})
        if zero is False:
            return result
        return op(frame, torch.where, (zero, 0, result), {})
    return lower


def _int_power(frame, a, b):
    if not isinstance(b, ConstVar):  # (NumPy raises on a negative exponent, which data may hold)
        raise Unsupported("np.power of integers with an exponent from data")
    return op(frame, torch.pow, (a, b), {})


def _sign(frame, t):
    if t.value.dtype.is_complex:
        return op(frame, torch.sgn, (t,), {})
    s = op(frame, torch.sign, (t,), {})
    if not t.value.dtype.is_floating_point:
        return s
    return op(frame, torch.where, (op(frame, torch.isnan, (t,), {}), t, s), {})  # (NaN's sign: NaN)


def _sign_lower(frame, call, x, **kwargs):
    ufunc_kwargs(call, kwargs)
    return _sign(frame, cast(frame, x, compute_dtype(call, 1)))


ELEMENTWISE = {
    np.add: elementwise(torch.add), np.subtract: elementwise(torch.sub), np.multiply: elementwise(torch.mul),
    np.true_divide: elementwise(torch.true_divide),
    np.floor_divide: elementwise(torch.floor_divide, _int_division(torch.floor_divide)),
    np.remainder: elementwise(torch.remainder, _int_division(torch.remainder)),
    np.fmod: elementwise(torch.fmod, _int_division(torch.fmod)),
    np.power: elementwise(torch.pow, _int_power), np.float_power: elementwise(torch.pow),
    np.maximum: elementwise(torch.maximum), np.minimum: elementwise(torch.minimum),
    np.fmax: elementwise(torch.fmax), np.fmin: elementwise(torch.fmin),
    np.arctan2: elementwise(torch.atan2), np.hypot: elementwise(torch.hypot), np.copysign: elementwise(torch.copysign),
    np.logaddexp: elementwise(torch.logaddexp), np.logaddexp2: elementwise(torch.logaddexp2),
    np.heaviside: elementwise(torch.heaviside), np.nextafter: elementwise(torch.nextafter),
    np.gcd: elementwise(torch.gcd), np.lcm: elementwise(torch.lcm),
    np.equal: elementwise(torch.eq), np.not_equal: elementwise(torch.ne), np.less: elementwise(torch.lt),
    np.less_equal: elementwise(torch.le), np.greater: elementwise(torch.gt), np.greater_equal: elementwise(torch.ge),
    np.logical_and: elementwise(torch.logical_and), np.logical_or: elementwise(torch.logical_or),
    np.logical_xor: elementwise(torch.logical_xor), np.logical_not: elementwise(torch.logical_not),
    np.bitwise_and: elementwise(torch.bitwise_and), np.bitwise_or: elementwise(torch.bitwise_or),
    np.bitwise_xor: elementwise(torch.bitwise_xor), np.invert: elementwise(torch.bitwise_not),
    np.left_shift: elementwise(torch.bitwise_left_shift), np.right_shift: elementwise(torch.bitwise_right_shift),
    np.negative: elementwise(torch.neg), np.positive: elementwise(torch.positive),
    np.absolute: elementwise(torch.abs), np.fabs: elementwise(torch.abs), np.sign: _sign_lower,
    np.sqrt: elementwise(torch.sqrt), np.square: elementwise(torch.square),
    np.reciprocal: elementwise(torch.reciprocal),
    np.exp: elementwise(torch.exp), np.exp2: elementwise(torch.exp2), np.expm1: elementwise(torch.expm1),
    np.log: elementwise(torch.log), np.log2: elementwise(torch.log2), np.log10: elementwise(torch.log10),
    np.log1p: elementwise(torch.log1p),
    np.sin: elementwise(torch.sin), np.cos: elementwise(torch.cos), np.tan: elementwise(torch.tan),
    np.arcsin: elementwise(torch.asin), np.arccos: elementwise(torch.acos), np.arctan: elementwise(torch.atan),
    np.sinh: elementwise(torch.sinh), np.cosh: elementwise(torch.cosh), np.tanh: elementwise(torch.tanh),
    np.arcsinh: elementwise(torch.asinh), np.arccosh: elementwise(torch.acosh), np.arctanh: elementwise(torch.atanh),
    np.floor: elementwise(torch.floor), np.ceil: elementwise(torch.ceil), np.trunc: elementwise(torch.trunc),
    np.rint: elementwise(torch.round), np.isnan: elementwise(torch.isnan), np.isinf: elementwise(torch.isinf),
    np.isfinite: elementwise(torch.isfinite), np.signbit: elementwise(torch.signbit),
    np.deg2rad: elementwise(torch.deg2rad), np.rad2deg: elementwise(torch.rad2deg),
    np.degrees: elementwise(torch.rad2deg), np.radians: elementwise(torch.deg2rad),
    np.conjugate: elementwise(torch.conj_physical),
}

# the operators of arrays: the ufuncs they are
OPERATORS = {
    "+": np.add, "-": np.subtract, "*": np.multiply, "/": np.true_divide, "//": np.floor_divide, "%": np.remainder,
    "**": np.power, "<<": np.left_shift, ">>": np.right_shift, "&": np.bitwise_and, "|": np.bitwise_or,
    "^": np.bitwise_xor, "<": np.less, "<=": np.less_equal, "==": np.equal, "!=": np.not_equal, ">": np.greater,
    ">=": np.greater_equal,
}
UNARY_OPERATORS = {"-": np.negative, "+": np.positive, "~": np.invert}



# --- reductions ------------------------------------------------------------------------------

def reduction(np_fn, fn, cast_to: str = "out", kind: str = "dims"):
    """np.sum (`np_fn`) and its kin -> torch `fn`: the input cast to NumPy's result dtype first
    (`cast_to`="out": an int32 sum is int64, an int mean float64; "none": max, any), the axes
    as `dim` (`kind`: "dims" a tuple; "one" one dim or none, argmax; "scan" one dim or the
    flattened array, cumsum; "ddof" with `correction`: std, var)."""
    def lower(frame, call, *args, **kwargs):
        p = params(np_fn, args, kwargs)
        refuse(call, p, "out", "initial", "where")
        a = tensor_of(p.get("a", p.get("x")))
        if not isinstance(a, TensorVar):
            a = cast(frame, a, out_dtype(call))
        if a.value.dtype == torch.bool and fn in (torch.argmax, torch.argmin, torch.amax, torch.amin):
            a = cast(frame, a, torch.uint8)  # (torch orders no bools; conform casts max's back)
        if cast_to == "out" and not (a.value.dtype.is_complex and not out_dtype(call).is_complex):
            a = cast(frame, a, out_dtype(call))
        axis, keep = value_of(p.get("axis")), bool(value_of(p.get("keepdims", False)) or False)
        ndim = a.value.dim()
        if kind == "scan":
            flat = a if axis is not None else call_method(frame, "reshape", [a, ConstVar(-1)], {})
            return op(frame, fn, (flat, 0 if axis is None else axis), {})
        if kind == "one" and axis is None:
            r = op(frame, fn, (a,), {})
            return call_method(frame, "reshape", [r, ConstVar((1,) * ndim)], {}) if keep else r
        if kind == "one":
            return op(frame, fn, (a,), {"dim": axis, "keepdim": keep})
        named = {"dim": dims_of(axis, ndim), "keepdim": keep}
        if kind == "ddof":
            named["correction"] = value_of(p.get("ddof", 0)) or 0
        if ndim == 0:
            return op(frame, fn, (a,), {k: v for k, v in named.items() if k == "correction"})
        if fn is torch.prod:  # (one dim at a time: torch's prod takes one)
            for d in sorted(named["dim"], reverse=True):
                a = op(frame, fn, (a, d), {"keepdim": keep})
            return a
        return op(frame, fn, (a,), named)
    return lower


def _median(frame, call, *args, **kwargs):
    p = params(np.median, args, kwargs)
    refuse(call, p, "out")
    a = cast(frame, p["a"], out_dtype(call))
    axis, keep = value_of(p.get("axis")), bool(value_of(p.get("keepdims", False)))
    if isinstance(axis, tuple):
        raise Unsupported("np.median over several axes")
    r = op(frame, torch.quantile, (a, 0.5), {"dim": axis, "keepdim": keep})
    if axis is None and keep:
        r = call_method(frame, "reshape", [r, ConstVar((1,) * a.value.dim())], {})
    return r


def _quantile(scale):
    def lower(frame, call, *args, **kwargs):
        fn = np.percentile if scale == 100 else np.quantile
        p = params(fn, args, kwargs)
        refuse(call, p, "out", "weights")
        if p.get("method", "linear") != "linear" or p.get("interpolation") is not None:
            raise Unsupported(f"{call.what} with a method other than 'linear'")
        a = cast(frame, p["a"], out_dtype(call))
        q = value_of(p["q"], "q")
        q = [v / scale for v in q] if isinstance(q, (list, tuple)) else q / scale
        qt = op(frame, torch.tensor, (q,), {"dtype": a.value.dtype}) if isinstance(q, list) else q
        axis, keep = value_of(p.get("axis")), bool(value_of(p.get("keepdims", False)))
        if isinstance(axis, tuple):
            raise Unsupported(f"{call.what} over several axes")
        return op(frame, torch.quantile, (a, qt), {"dim": axis, "keepdim": keep})
    return lower


def _ptp(frame, call, *args, **kwargs):
    hi = reduction(np.ptp, torch.amax, "none")(frame, call, *args, **kwargs)
    lo = reduction(np.ptp, torch.amin, "none")(frame, call, *args, **kwargs)
    return op(frame, torch.sub, (hi, lo), {})


def _count_nonzero(frame, call, *args, **kwargs):
    p = params(np.count_nonzero, args, kwargs)
    a, axis = tensor_of(p["a"]), value_of(p.get("axis"))
    if p.get("keepdims") is not None and value_of(p.get("keepdims")):
        raise Unsupported("np.count_nonzero with keepdims=True")
    return op(frame, torch.count_nonzero, (a,), {"dim": dims_of(axis, a.value.dim()) if axis is not None else None})


REDUCTIONS = {
    np.sum: reduction(np.sum, torch.sum), np.prod: reduction(np.prod, torch.prod),
    np.mean: reduction(np.mean, torch.mean),
    np.nansum: reduction(np.nansum, torch.nansum), np.nanmean: reduction(np.nanmean, torch.nanmean),
    np.max: reduction(np.max, torch.amax, "none"), np.min: reduction(np.min, torch.amin, "none"),
    np.any: reduction(np.any, torch.any, "none"), np.all: reduction(np.all, torch.all, "none"),
    np.std: reduction(np.std, torch.std, "out", "ddof"), np.var: reduction(np.var, torch.var, "out", "ddof"),
    np.argmax: reduction(np.argmax, torch.argmax, "none", "one"),
    np.argmin: reduction(np.argmin, torch.argmin, "none", "one"),
    np.cumsum: reduction(np.cumsum, torch.cumsum, "out", "scan"),
    np.cumprod: reduction(np.cumprod, torch.cumprod, "out", "scan"),
    np.median: _median, np.quantile: _quantile(1), np.percentile: _quantile(100), np.ptp: _ptp,
    np.count_nonzero: _count_nonzero,
}
for _alias, _of in ((getattr(np, "amax", None), np.max), (getattr(np, "amin", None), np.min)):
    if _alias is not None and _alias is not _of:
        REDUCTIONS[_alias] = REDUCTIONS[_of]
