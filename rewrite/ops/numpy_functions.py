"""NumPy's other functions: shapes, joins, creation, linear algebra, sorting -- each a lowering
`lower(frame, call, *args, **kwargs)` over the call's Vars with NumPy's own parameter names,
run by `arrays.run` beside NumPy itself (`call.out`: NumPy's result, whose dtype the lowering
computes in). FUNCTIONS is the table; a function it lacks is a graph break naming it.
"""
from __future__ import annotations

import operator

import numpy as np
import torch

from ..errors import Unsupported
from ..values.vars import ArrayVar, ConstVar, ListVar, SymIntVar, TensorVar, TupleVar, Var
from .arrays import (NDARRAY, NO, as_out, as_tensor, as_var, cast, op, out_dtype, params, refuse, skip_values,
                     specialize, tensor_of, torch_dtype, ufunc_kwargs, value_of)
from .core import describe, foldable
from .numpy_ufuncs import REDUCTIONS
from .tensors import call_method


def _order_c(call, p):
    if p.get("order", "C") not in ("C", "K", "A", None):
        raise Unsupported(f"{call.what} with order={p['order']!r}")


def _reshape(frame, call, *args, **kwargs):
    p = params(np.reshape, args, kwargs)
    _order_c(call, p)
    shape = p.get("shape", p.get("newshape"))
    shape = shape if isinstance(shape, Var) else ConstVar(shape)
    return call_method(frame, "reshape", [as_tensor(frame, p["a"]), shape], {})


def _transpose(frame, call, a, axes=None):
    t = as_tensor(frame, a)
    axes = value_of(axes) if axes is not None else None
    order = tuple(reversed(range(t.value.dim()))) if axes is None else tuple(axes)
    return call_method(frame, "permute", [t, ConstVar(order)], {})


def _expand_dims(frame, call, a, axis):
    t, axes = as_tensor(frame, a), value_of(axis)
    n = t.value.dim() + (len(axes) if isinstance(axes, tuple) else 1)
    for d in sorted(x % n for x in (axes if isinstance(axes, tuple) else (axes,))):
        t = call_method(frame, "unsqueeze", [t, ConstVar(d)], {})
    return t


def _squeeze(frame, call, a, axis=None):
    t, axes = as_tensor(frame, a), value_of(axis)
    if axes is None:
        return call_method(frame, "squeeze", [t], {})
    return call_method(frame, "squeeze", [t, ConstVar(axes)], {})


def _ravel(frame, call, a, order="C"):
    _order_c(call, {"order": value_of(order)})
    return call_method(frame, "reshape", [as_tensor(frame, a), ConstVar(-1)], {})


def _joined(frame, call, arrays):
    items = arrays.items if isinstance(arrays, (TupleVar, ListVar)) else None
    if items is None:
        raise Unsupported(f"{call.what} of {describe(arrays)}")
    return [as_out(frame, call, i) for i in items]


def _concatenate(frame, call, *args, **kwargs):
    p = params(np.concatenate, args, kwargs)
    refuse(call, p, "out")
    parts, axis = _joined(frame, call, p["arrays"]), value_of(p.get("axis", 0))
    if axis is None:
        parts, axis = [call_method(frame, "reshape", [t, ConstVar(-1)], {}) for t in parts], 0
    return op(frame, torch.cat, (parts,), {"dim": axis})


def _stack(frame, call, *args, **kwargs):
    p = params(np.stack, args, kwargs)
    refuse(call, p, "out")
    return op(frame, torch.stack, (_joined(frame, call, p["arrays"]),), {"dim": value_of(p.get("axis", 0))})


def _at_least_shape(frame, t, n: int):
    """`t` with at least n dims, as NumPy's atleast_nd shapes it ((N,) -> (1, N) -> (1, N, 1))."""
    s = list(t.value.shape)
    if len(s) >= n:
        return t
    new = {0: [1] * n, 1: [1, *s, 1][:n] if n > 1 else s, 2: [*s, 1]}[len(s)]
    return call_method(frame, "reshape", [t, ConstVar(tuple(new))], {})


def _at_least(n: int):
    def lower(frame, call, *arys):
        made = [_at_least_shape(frame, as_tensor(frame, a), n) for a in arys]
        return made[0] if len(made) == 1 else ListVar(made) if isinstance(call.out, list) else TupleVar(made)
    return lower


def _vstack(frame, call, tup, **kwargs):
    parts = [_at_least_shape(frame, t, 2) for t in _joined(frame, call, tup)]
    return op(frame, torch.cat, (parts,), {"dim": 0})


def _hstack(frame, call, tup, **kwargs):
    parts = _joined(frame, call, tup)
    return op(frame, torch.cat, (parts,), {"dim": 0 if all(t.value.dim() == 1 for t in parts) else 1})


def _column_stack(frame, call, tup):
    parts = [t if t.value.dim() >= 2 else call_method(frame, "reshape", [t, ConstVar((-1, 1))], {})
             for t in _joined(frame, call, tup)]
    return op(frame, torch.cat, (parts,), {"dim": 1})


def _split(np_fn):
    def lower(frame, call, *args, **kwargs):
        p = params(np_fn, args, kwargs)
        parts = op(frame, torch.tensor_split, (as_tensor(frame, p["ary"]), value_of(p["indices_or_sections"])),
                              {"dim": value_of(p.get("axis", 0))})
        return ListVar(list(parts.items)) if isinstance(call.out, list) else parts
    return lower


def _flip(axis_default):
    def lower(frame, call, m, axis=NO):
        t = as_tensor(frame, m)
        axis = value_of(axis) if axis is not NO else axis_default
        dims = tuple(range(t.value.dim())) if axis is None else axis if isinstance(axis, tuple) else (axis,)
        return op(frame, torch.flip, (t, dims), {})  # (NumPy's is a view: arrays.same_memory)
    return lower




def _where(frame, call, condition, x=NO, y=NO):
    if x is NO and y is NO:
        raise Unsupported("np.where(condition) (its result's size depends on data)")
    dtype = out_dtype(call)
    cond = cast(frame, as_tensor(frame, condition), torch.bool)
    return op(frame, torch.where, (cond, cast(frame, x, dtype), cast(frame, y, dtype)), {})


def _clip(frame, call, *args, **kwargs):
    p = params(np.clip, args, kwargs)
    refuse(call, p, "out")
    dtype = out_dtype(call)
    lo, hi = (p.get(k, NO) for k in ("a_min", "a_max"))
    lo, hi = (p.get("min", NO) if lo is NO else lo), (p.get("max", NO) if hi is NO else hi)
    bounds = [None if b is NO or isinstance(b, ConstVar) and b.value is None else cast(frame, b, dtype)
              for b in (lo, hi)]
    if all(isinstance(b, (ConstVar, type(None))) for b in bounds):
        return op(frame, torch.clamp, (as_out(frame, call, p["a"]), *bounds), {})
    bounds = [b if not isinstance(b, ConstVar) else op(frame, torch.tensor, (b,), {"dtype": dtype}) for b in bounds]
    return op(frame, torch.clamp, (as_out(frame, call, p["a"]), *bounds), {})


def _isclose(frame, call, *args, **kwargs):
    p = params(np.isclose, args, kwargs)
    dtype = torch_dtype(np.result_type(*call.real_args[:2], 1.0))
    a, b = (cast(frame, as_tensor(frame, p[k]), dtype) for k in ("a", "b"))
    named = {k: value_of(p[k]) for k in ("rtol", "atol", "equal_nan") if k in p}
    return op(frame, torch.isclose, (a, b), named)


def _allclose(frame, call, *args, **kwargs):
    return op(frame, torch.all, (_isclose(frame, call, *args, **kwargs),), {})


def _array_equal(frame, call, a1, a2, equal_nan=None):
    if equal_nan is not None and value_of(equal_nan):
        raise Unsupported("np.array_equal with equal_nan=True")
    x, y = as_tensor(frame, a1), as_tensor(frame, a2)
    if x.value.shape != y.value.shape:
        specialize(frame, [x, y])  # (the answer, False, holds for these sizes)
        return None
    return op(frame, torch.all, (op(frame, torch.eq, (x, y), {}),), {})


def _products(frame, call, *operands):
    """Operands of a sum of products in NumPy's result dtype (bools: as int64, whose nonzero
    sums are NumPy's `or` of `and`s: torch multiplies no bool matrices)."""
    dtype = torch.int64 if out_dtype(call) == torch.bool else out_dtype(call)
    return [cast(frame, as_tensor(frame, v), dtype) for v in operands]


def _matmul(frame, call, x1, x2, **kwargs):
    ufunc_kwargs(call, kwargs)
    return op(frame, torch.matmul, tuple(_products(frame, call, x1, x2)), {})


def _dot(frame, call, a, b, out=None):
    x, y = _products(frame, call, a, b)
    if x.value.dim() == 0 or y.value.dim() == 0:
        return op(frame, torch.mul, (x, y), {})
    if x.value.dim() == 1 and y.value.dim() == 1:
        return op(frame, torch.dot, (x, y), {})
    if y.value.dim() == 1:
        return op(frame, torch.matmul, (x, y), {})
    return op(frame, torch.tensordot, (x, y), {"dims": ([-1], [-2])})


def _outer(frame, call, a, b, out=None):
    x, y = (call_method(frame, "reshape", [v, ConstVar(-1)], {}) for v in _products(frame, call, a, b))
    return op(frame, torch.outer, (x, y), {})


def _inner(frame, call, a, b):
    return op(frame, torch.inner, tuple(_products(frame, call, a, b)), {})


def _einsum(frame, call, subscripts, *operands, **kwargs):
    if set(kwargs) - {"optimize", "dtype"}:
        raise Unsupported(f"np.einsum with {', '.join(sorted(set(kwargs) - {'optimize', 'dtype'}))}=")
    return op(frame, torch.einsum, (value_of(subscripts), *_products(frame, call, *operands)), {})


def _tensordot(frame, call, a, b, axes=ConstVar(2)):
    dims = value_of(axes)
    dims = [list(d) if isinstance(d, (list, tuple)) else [d] for d in dims] if isinstance(dims, (list, tuple)) else dims
    return op(frame, torch.tensordot, tuple(_products(frame, call, a, b)), {"dims": dims})


def _norm(frame, call, x, ord=None, axis=None, keepdims=False):
    t = as_out(frame, call, x)
    ord_, axis = value_of(ord) if ord is not None else None, value_of(axis) if axis is not None else None
    return op(frame, torch.linalg.norm, (t, ord_), {"dim": axis, "keepdim": bool(value_of(keepdims))})


def _det(frame, call, a):
    return op(frame, torch.linalg.det, (as_out(frame, call, a),), {})


def _trace(frame, call, a, offset=ConstVar(0), axis1=ConstVar(0), axis2=ConstVar(1), dtype=None, out=None):
    d = op(frame, torch.diagonal, (as_out(frame, call, a),),
                      {"offset": value_of(offset), "dim1": value_of(axis1), "dim2": value_of(axis2)})
    return op(frame, torch.sum, (d,), {"dim": -1})


def _diag(frame, call, v, k=ConstVar(0)):
    return op(frame, torch.diag, (as_tensor(frame, v), value_of(k)), {})


def _diagonal(frame, call, a, offset=ConstVar(0), axis1=ConstVar(0), axis2=ConstVar(1)):
    return op(frame, torch.diagonal, (as_tensor(frame, a),),
                         {"offset": value_of(offset), "dim1": value_of(axis1), "dim2": value_of(axis2)})


def _tri(fn):
    def lower(frame, call, m, k=ConstVar(0)):
        return op(frame, fn, (as_tensor(frame, m), value_of(k)), {})
    return lower


def _tile(frame, call, A, reps):
    reps = value_of(reps)
    return op(frame, torch.tile, (as_tensor(frame, A), reps if isinstance(reps, tuple) else (reps,)), {})


def _repeat(frame, call, a, repeats, axis=None):
    t, axis = as_tensor(frame, a), value_of(axis) if axis is not None else None
    r = tensor_of(repeats)
    if axis is None:
        t, axis = call_method(frame, "reshape", [t, ConstVar(-1)], {}), 0
    return op(frame, torch.repeat_interleave, (t, r), {"dim": axis})


def _roll(frame, call, a, shift, axis=None):
    axis = value_of(axis) if axis is not None else None
    named = {} if axis is None else {"dims": axis}
    return op(frame, torch.roll, (as_tensor(frame, a), value_of(shift)), named)


def _moveaxis(frame, call, a, source, destination):
    return op(frame, torch.movedim, (as_tensor(frame, a), value_of(source), value_of(destination)), {})


def _swapaxes(frame, call, a, axis1, axis2):
    axes = [ConstVar(value_of(axis1)), ConstVar(value_of(axis2))]
    return call_method(frame, "transpose", [as_tensor(frame, a), *axes], {})


def _broadcast_to(frame, call, array, shape, subok=None):
    shape = value_of(shape)  # (sizes may be symbols: kept as Vars)
    sizes = as_var(shape if isinstance(shape, tuple) else (shape,))
    return call_method(frame, "expand", [as_tensor(frame, array), sizes], {})


def _round(frame, call, a, decimals=ConstVar(0), out=None):
    t, d = as_out(frame, call, a), value_of(decimals)
    if not t.value.dtype.is_floating_point:
        if t.value.dtype.is_complex or d < 0:
            raise Unsupported(f"{call.what} of a {t.value.dtype} array with decimals={d}")
        return call_method(frame, "clone", [t], {})
    return op(frame, torch.round, (t,), {"decimals": d})


def _nan_to_num(frame, call, x, copy=True, nan=ConstVar(0.0), posinf=None, neginf=None):
    t = as_out(frame, call, x)
    if not t.value.dtype.is_floating_point:
        return call_method(frame, "clone", [t], {})
    named = {"nan": value_of(nan), "posinf": value_of(posinf) if posinf is not None else None,
             "neginf": value_of(neginf) if neginf is not None else None}
    return op(frame, torch.nan_to_num, (t,), named)


def _diff(frame, call, a, n=ConstVar(1), axis=ConstVar(-1), prepend=NO, append=NO):
    if prepend is not NO or append is not NO:
        raise Unsupported("np.diff with prepend= or append=")
    return op(frame, torch.diff, (as_out(frame, call, a),), {"n": value_of(n), "dim": value_of(axis)})


def _sort(indices: bool):
    def lower(frame, call, a, axis=ConstVar(-1), kind=None, order=None, stable=None):
        kind = value_of(kind) if kind is not None else None
        if indices and kind not in ("stable", "mergesort") and not (stable is not None and value_of(stable)):
            raise Unsupported("np.argsort without kind='stable' (NumPy's order of equal items is its sort's)")
        t, axis = as_tensor(frame, a), value_of(axis)
        if axis is None:
            t, axis = call_method(frame, "reshape", [t, ConstVar(-1)], {}), 0
        result = op(frame, torch.sort, (t,), {"dim": axis, "stable": True})
        return result.items[1 if indices else 0]
    return lower


def _average(frame, call, a, axis=None, weights=None, returned=ConstVar(False), keepdims=NO):
    if weights is not None and not (isinstance(weights, ConstVar) and weights.value is None) or value_of(returned):
        raise Unsupported("np.average with weights= or returned=True")
    kwargs = {} if axis is None else {"axis": axis}
    if keepdims is not NO:
        kwargs["keepdims"] = keepdims
    return REDUCTIONS[np.mean](frame, call, a, **kwargs)


def _searchsorted(frame, call, a, v, side=ConstVar("left"), sorter=None):
    if sorter is not None:
        raise Unsupported("np.searchsorted with sorter=")
    dtype = torch_dtype(np.result_type(*call.real_args[:2]))
    sorted_, values = (cast(frame, as_tensor(frame, x), dtype) for x in (a, v))
    return op(frame, torch.searchsorted, (sorted_, values),
                         {"side": value_of(side)})


def _take(frame, call, a, indices, axis=None, out=None, mode=ConstVar("raise")):
    t, idx = as_tensor(frame, a), as_tensor(frame, indices)
    if value_of(mode) != "raise":
        raise Unsupported(f"np.take with mode={value_of(mode)!r}")
    if axis is None or isinstance(axis, ConstVar) and axis.value is None:
        return op(frame, torch.take, (t, idx), {})
    return op(frame, operator.getitem, (t, (slice(None),) * (value_of(axis) % t.value.dim()) + (idx,)), {})


def _shape(v: Var) -> Var:
    """A shape argument as torch's factories take it: a tuple (NumPy takes an int too)."""
    return TupleVar([v], py_type=tuple) if isinstance(v, SymIntVar) or isinstance(v, ConstVar) and \
        isinstance(v.value, int) else v


def _creation(fn, undefined: bool = False):
    """np.zeros(shape, dtype) and kin -> torch `fn`(shape, dtype=NumPy's dtype)."""
    def lower(frame, call, shape, *args, **kwargs):
        if undefined:
            skip_values(call)
        rest = [tensor_of(a) for a in args[:1]] if fn is torch.full else []
        return op(frame, fn, (_shape(shape), *rest), {"dtype": out_dtype(call)})
    return lower


def _like(fn, undefined: bool = False):
    def lower(frame, call, a, *args, **kwargs):
        if "shape" in kwargs:
            raise Unsupported(f"{call.what} with shape=")
        if undefined:
            skip_values(call)
        rest = [tensor_of(args[0] if args else kwargs["fill_value"])] if fn is torch.full_like else []
        return op(frame, fn, (as_tensor(frame, a), *rest), {"dtype": out_dtype(call)})
    return lower


def _arange(frame, call, *args, **kwargs):
    bounds = [a for a in args if not (isinstance(a, ConstVar) and a.value is None)]
    bounds += [kwargs[k] for k in ("stop", "step") if k in kwargs and kwargs[k].python_value() is not None]
    return op(frame, torch.arange, tuple(tensor_of(b) for b in bounds), {"dtype": out_dtype(call)})


def _linspace(frame, call, start, stop, num=ConstVar(50), endpoint=ConstVar(True), retstep=ConstVar(False),
              dtype=None, axis=ConstVar(0)):
    if value_of(retstep) or value_of(axis) != 0 or not all(type(value_of(v)) in (int, float) for v in (start, stop)):
        raise Unsupported("np.linspace of arrays, or with retstep= or axis=")
    n, dtype = value_of(num), out_dtype(call)
    work = dtype if dtype.is_floating_point else torch.float64
    points = op(frame, torch.linspace, (value_of(start), value_of(stop), n if value_of(endpoint) else n + 1),
                           {"dtype": work})
    if not value_of(endpoint):
        points = op(frame, operator.getitem, (points, slice(None, n)), {})
    if not dtype.is_floating_point:  # (NumPy floors its points into an integer dtype)
        points = op(frame, torch.floor, (points,), {})
    return points


def _eye(frame, call, N, M=None, k=ConstVar(0), dtype=None, **kwargs):
    n, m, k = value_of(N), value_of(M) if M is not None else None, value_of(k)
    m = n if m is None else m
    if k == 0:
        return op(frame, torch.eye, (n, m), {"dtype": out_dtype(call)})
    ones = op(frame, torch.ones, ((n, m),), {"dtype": out_dtype(call)})
    return op(frame, torch.tril, (op(frame, torch.triu, (ones, k), {}), k), {})


def _identity(frame, call, n, dtype=None, **kwargs):
    return op(frame, torch.eye, (value_of(n),), {"dtype": out_dtype(call)})


def _data(frame, obj, dtype: torch.dtype):
    """What np.array(obj) holds, as a tensor in `dtype`: an array's or tensor's values, a nested
    list of numbers (a constant) or of arrays and scalars (stacked)."""
    obj = tensor_of(obj)
    if isinstance(obj, TensorVar):
        return cast(frame, obj, dtype)
    if foldable(obj):
        return op(frame, torch.tensor, (value_of(obj),), {"dtype": dtype})
    if isinstance(obj, (TupleVar, ListVar)) and obj.items:
        return op(frame, torch.stack, ([_data(frame, i, dtype) for i in obj.items],), {})
    raise Unsupported(f"np.array of {describe(obj)}")


def _array(copy_default: bool):
    def lower(frame, call, obj, dtype=None, *args, **kwargs):
        want = out_dtype(call)
        before = tensor_of(obj)
        t = _data(frame, obj, want)
        copy = kwargs.get("copy", ConstVar(copy_default))
        ndmin = value_of(kwargs.get("ndmin", ConstVar(0)))
        if t is before and (value_of(copy) if isinstance(copy, Var) else copy):
            t = call_method(frame, "clone", [t], {})
        if ndmin and t.value.dim() < ndmin:
            t = call_method(frame, "reshape", [t, ConstVar((1,) * (ndmin - t.value.dim()) + tuple(t.value.shape))], {})
        if t is before and isinstance(obj, ArrayVar) and obj.kind is NDARRAY and not ndmin:
            return obj  # (np.asarray(a): the very array)
        return t
    return lower


def _contiguous(frame, call, a, *args, **kwargs):
    t = call_method(frame, "contiguous", [as_out(frame, call, a)], {})
    return t if t.value.dim() else call_method(frame, "reshape", [t, ConstVar((1,))], {})  # (at least 1-d)


def _copy(frame, call, a, *args, **kwargs):
    return call_method(frame, "clone", [as_out(frame, call, a)], {})


def _meshgrid(frame, call, *xi, indexing=ConstVar("xy"), sparse=ConstVar(False), copy=ConstVar(True)):
    if value_of(sparse):
        raise Unsupported("np.meshgrid with sparse=True")
    grids = op(frame, torch.meshgrid, tuple(as_tensor(frame, x) for x in xi), {"indexing": value_of(indexing)})
    items = [call_method(frame, "clone", [g], {}) for g in grids.items]
    return ListVar(items) if isinstance(call.out, list) else TupleVar(items)


def _unique(frame, call, ar, *args, **kwargs):
    """np.unique of one array, flattened and sorted: torch.unique (its size depends on data: a graph
    break unless config.capture_dynamic_output_shape_ops, as torch.unique's)."""
    if args or any(value_of(v) for v in kwargs.values()):
        raise Unsupported("np.unique with return_index=, return_inverse=, return_counts= or axis=")
    return op(frame, torch.unique, (as_tensor(frame, ar),), {"sorted": True})


def _no_data(name: str, why: str):
    def lower(frame, call, *args, **kwargs):
        raise Unsupported(f"np.{name} ({why})")
    return lower


DATA_SIZED = "its result's size depends on data"
FUNCTIONS = {
    np.reshape: _reshape, np.transpose: _transpose, np.expand_dims: _expand_dims, np.squeeze: _squeeze,
    np.ravel: _ravel, np.concatenate: _concatenate, np.stack: _stack, np.vstack: _vstack, np.hstack: _hstack,
    np.column_stack: _column_stack, np.atleast_1d: _at_least(1), np.atleast_2d: _at_least(2),
    np.atleast_3d: _at_least(3), np.split: _split(np.split), np.array_split: _split(np.array_split),
    np.flip: _flip(None), np.fliplr: _flip(1), np.flipud: _flip(0), np.where: _where, np.clip: _clip,
    np.isclose: _isclose, np.allclose: _allclose, np.array_equal: _array_equal, np.matmul: _matmul, np.dot: _dot,
    np.outer: _outer, np.inner: _inner, np.einsum: _einsum, np.tensordot: _tensordot, np.linalg.norm: _norm,
    np.linalg.det: _det, np.trace: _trace, np.diag: _diag, np.diagonal: _diagonal, np.triu: _tri(torch.triu),
    np.tril: _tri(torch.tril), np.tile: _tile, np.repeat: _repeat, np.roll: _roll, np.moveaxis: _moveaxis,
    np.swapaxes: _swapaxes, np.broadcast_to: _broadcast_to, np.round: _round, np.around: _round,
    np.nan_to_num: _nan_to_num, np.diff: _diff, np.sort: _sort(False), np.argsort: _sort(True),
    np.average: _average, np.searchsorted: _searchsorted, np.take: _take,
    np.zeros: _creation(torch.zeros), np.ones: _creation(torch.ones), np.empty: _creation(torch.empty, True),
    np.full: _creation(torch.full), np.zeros_like: _like(torch.zeros_like), np.ones_like: _like(torch.ones_like),
    np.empty_like: _like(torch.empty_like, True), np.full_like: _like(torch.full_like), np.arange: _arange,
    np.linspace: _linspace, np.eye: _eye, np.identity: _identity, np.array: _array(True), np.asarray: _array(False),
    np.asanyarray: _array(False), np.ascontiguousarray: _contiguous, np.copy: _copy, np.meshgrid: _meshgrid,
    np.nonzero: _no_data("nonzero", DATA_SIZED), np.argwhere: _no_data("argwhere", DATA_SIZED),
    np.flatnonzero: _no_data("flatnonzero", DATA_SIZED), np.unique: _unique,
}
# functions whose result is a constant of dtypes, shapes and types (the oracle's)
