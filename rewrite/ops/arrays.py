"""NumPy values on the tracer's Vars: ndarrays that come from tensors (`x.numpy()`), that come
in, or that np.* makes, each held as a tensor of the graph (ArrayVar) with NumPy's semantics.

Every NumPy operation runs twice while tracing (`run`):

1. for real, on NumPy arrays of the trace's values (the oracle): eager's result -- its class,
   dtype, shape -- and eager's errors, which are the user's;
2. as torch ops into the graph (its lowering: the tables of `ops/numpy_ufuncs.py` and
   `ops/numpy_functions.py`, dispatched by `ops/numpy_calls.py`), whose
   result is cast to the oracle's dtype and compared with the oracle's (shape and values, with
   the tolerance of the dtype): a difference is a graph break naming the function -- a rule of
   rewrite's that is wrong, found on the first call, never a different result.

NumPy wins where torch differs (an int64 array divided by 2 is float64), as eager has it. A
result views an input's memory exactly where NumPy's does (`same_memory`). Below `run`, the
helpers the rules build their lowerings with.
"""
from __future__ import annotations

import inspect
import types

import numpy as np
import torch

from .. import logs
from ..errors import Unsupported, UserError
from ..values.vars import (ArrayVar, ConstVar, DictVar, ListVar, ObjectVar, ScalarVar, SymIntVar, TensorVar, TupleVar,
                           Var)
from .core import const, describe, fold, foldable
from .tensors import call_function, call_method

NDARRAY = np.ndarray
NUMPY_SCALAR = np.generic
# NumPy's dtypes the graph holds, and their torch dtypes (one to one)
DTYPES = {np.dtype(k): v for k, v in (
    (np.bool_, torch.bool), (np.uint8, torch.uint8), (np.int8, torch.int8), (np.int16, torch.int16),
    (np.int32, torch.int32), (np.int64, torch.int64), (np.uint16, torch.uint16), (np.uint32, torch.uint32),
    (np.uint64, torch.uint64), (np.float16, torch.float16), (np.float32, torch.float32),
    (np.float64, torch.float64), (np.complex64, torch.complex64), (np.complex128, torch.complex128))}
# objects of the trace NumPy's oracle may be given: classes (np.float32), functions, modules
PLAIN_OBJECTS = (type, types.FunctionType, types.BuiltinFunctionType, types.ModuleType, np.ufunc, np.dtype)
# NumPy's values that are constants of the trace (immutable: their attributes are folded)
CONSTANTS = (np.dtype, np.generic, np.finfo, np.iinfo)
# torch's unsigned dtypes past uint8 hold values but compute little: work in int64 (the values
# fit: wider unsigned ones made from these too), cast to NumPy's dtype at the end
WIDE_UNSIGNED = {torch.uint16, torch.uint32, torch.uint64}


def is_numpy(value) -> bool:
    """A callable or class of NumPy's (np.sum, np.add, np.float32, np.finfo, np.linalg.norm)."""
    if isinstance(value, np.ufunc):
        return True
    module = getattr(value, "__module__", None) or ""
    return module == "numpy" or module.startswith("numpy.")


def torch_dtype(dtype: np.dtype) -> torch.dtype:
    if dtype not in DTYPES:
        raise Unsupported(f"a NumPy array of dtype {dtype} (the graph holds {', '.join(map(str, DTYPES))})")
    return DTYPES[dtype]


def array_input(value: np.ndarray) -> torch.Tensor:
    """The tensor a NumPy array that came in is read as: `torch.from_numpy(value)`, its memory."""
    torch_dtype(value.dtype)
    if any(s < 0 for s in value.strides) or not value.flags.writeable:
        raise Unsupported("a NumPy array input that is read-only or has negative strides")
    return torch.from_numpy(value)


def wrap_array(tensor: TensorVar, source=None, kind: type = NDARRAY, readonly: bool = False) -> ArrayVar:
    return ArrayVar(tensor, kind, source, readonly=readonly)


def tensor_of(v):
    """What a torch op takes for `v`: an array's tensor; a NumPy scalar constant as a Python
    number (NumPy's scalar types are classes torch reads as numbers anyway); containers item by item."""
    if isinstance(v, ArrayVar):
        return fresh(v).tensor
    if isinstance(v, ConstVar) and isinstance(v.value, np.generic):
        return ConstVar(v.value.item())
    if isinstance(v, TupleVar):
        return TupleVar([tensor_of(i) for i in v.items], py_type=tuple)
    if isinstance(v, ListVar):
        return ListVar([tensor_of(i) for i in v.items])
    return v


def fresh(a: ArrayVar) -> ArrayVar:
    if a.stale:
        raise Unsupported("an array that views another's memory in NumPy (np.flip's, a negative step's), read "
                          "after a write to that memory: the trace holds it as a copy")
    return a


def numpy_of(t: torch.Tensor, kind: type):
    """The NumPy value of kind `kind` a tensor of the trace stands for."""
    a = t.detach().numpy()
    if kind is NDARRAY:
        return a
    if issubclass(kind, np.generic):
        return a[()]
    return kind(a.item())


def snapshot(v: Var, copy: bool = False):
    """The real value the oracle computes with: an array's own values (a copy when the operation
    writes: the trace's tensors change only through the graph; read-only as NumPy's is), a
    tensor (a copy), a constant, a container of them."""
    if isinstance(v, ArrayVar) and isinstance(fresh(v).unshared, tuple) and not copy:
        fn, args, kwargs = v.unshared  # (NumPy's view itself: its strides are eager's)
        return fn(*[snapshot(a) for a in args], **{k: snapshot(i) for k, i in kwargs.items()})
    if isinstance(v, ArrayVar):
        a = numpy_of(fresh(v).value, v.kind)
        if isinstance(a, np.ndarray) and (copy or v.readonly):
            a = a.copy()
            a.flags.writeable = not v.readonly
        return a
    if isinstance(v, TensorVar):
        return v.value.detach().clone().requires_grad_(v.value.requires_grad) if copy else v.value
    if isinstance(v, ConstVar) or isinstance(v, ObjectVar) and isinstance(v.value, PLAIN_OBJECTS):
        return v.value
    if isinstance(v, SymIntVar):
        return v.value
    if isinstance(v, ScalarVar):
        raise Unsupported(f"a NumPy operation on {describe(v)}")
    if isinstance(v, TupleVar):
        return tuple(snapshot(i, copy) for i in v.items) if v.py_type is tuple else \
            v.py_type(*(snapshot(i, copy) for i in v.items)) if hasattr(v.py_type, "_fields") else \
            v.py_type([snapshot(i, copy) for i in v.items])
    if isinstance(v, ListVar) and v.py_type is list:
        return [snapshot(i, copy) for i in v.items]
    if isinstance(v, DictVar) and v.py_type is dict and all(isinstance(k, (str, int)) for k in v.items):
        return {k: snapshot(i, copy) for k, i in v.items.items()}
    raise Unsupported(f"a NumPy operation on {describe(v)}")


class Call:
    """One NumPy operation being traced: what it is called (`what`, for messages), the oracle's
    inputs (`real_args`, `real_kwargs`) and its result (`out`); `undefined`: the result's values
    are not defined (np.empty), only its shape and dtype are compared."""
    __slots__ = ("what", "real_args", "real_kwargs", "out", "undefined")

    def __init__(self, what, real_args, real_kwargs, out):
        self.what, self.real_args, self.real_kwargs, self.out = what, real_args, real_kwargs, out
        self.undefined = False


def run(frame, what: str, fn, args: list, kwargs: dict, lower, writes: bool = False) -> Var:
    """`fn(*args, **kwargs)` -- a NumPy operation on Vars -- traced: NumPy runs it on the trace's
    values (eager's result, or eager's error, raised as the user's), `lower(frame, call, *args,
    **kwargs)` records torch ops for it, and what they give is made to match the oracle's result
    (`conform`). `writes`: the operation changes its first argument in place."""
    real_args = [snapshot(a, writes) for a in args]
    real_kwargs = {k: snapshot(v, writes) for k, v in kwargs.items()}
    with np.errstate(all="ignore"):  # (NumPy's warnings are eager's: the compiled call warns of nothing, as torch)
        out = fold(fn, *real_args, **real_kwargs)  # (nothing NumPy writes is given it: out= is refused before)
    call = Call(what, real_args, real_kwargs, out)
    try:
        result = lower(frame, call, *args, **kwargs)
    except UserError as e:  # torch refused what NumPy took: the rule's failure, not the user's error
        raise Unsupported(f"{what}: its torch form raised {type(e.__cause__).__name__} where NumPy did not "
                          f"({str(e.__cause__)[:80]})") from None
    result = conform(frame, call, out, result)
    if writes:  # (the array written: itself)
        return result
    inputs = list(zip([*args, *kwargs.values()], [*real_args, *real_kwargs.values()]))
    return same_memory(frame, (fn, args, kwargs), inputs, out, result, whole=True)


def conform(frame, call: Call, out, result) -> Var:
    """The Var for the oracle's result `out`, from what the lowering gave (`result`): a tensor
    cast to NumPy's dtype and checked against `out`; a container item by item; a constant the
    oracle's value itself (the lowering returns None for those: metadata, dtypes)."""
    if isinstance(out, (tuple, list)) and isinstance(result, (TupleVar, ListVar)) and len(out) == len(result.items):
        items = [conform(frame, call, o, r) for o, r in zip(out, result.items)]
        return ListVar(items) if type(out) is list else TupleVar(items, py_type=type(out))
    if result is None and not isinstance(out, NDARRAY):  # (a constant: the oracle's value)
        return ConstVar(out) if isinstance(out, CONSTANTS) else const(out)
    if isinstance(out, (NDARRAY, np.generic)) or isinstance(out, (bool, int, float)) and isinstance(
            result, (TensorVar, ArrayVar)):
        if not isinstance(result, (TensorVar, ArrayVar)):
            raise Unsupported(f"{call.what}: rewrite's rule gives {describe(result)} where NumPy gives "
                              f"{type(out).__name__}")
        t = tensor_of(result)
        want = torch_dtype(np.asarray(out).dtype)
        if t.value.dtype != want:
            t = call_method(frame, "to", [t, ConstVar(want)], {})
        _check(call, out, t.value)
        kind = NDARRAY if isinstance(out, NDARRAY) else type(out)
        readonly = isinstance(out, NDARRAY) and not out.flags.writeable
        if isinstance(result, ArrayVar) and result.tensor is t and result.kind is kind:
            return result
        return wrap_array(t, None, kind, readonly)
    if isinstance(out, torch.Tensor):
        if isinstance(result, TensorVar) and result.value.dtype != out.dtype:
            result = call_method(frame, "to", [result, ConstVar(out.dtype)], {})
        if not isinstance(result, TensorVar) or result.value.shape != out.shape:
            raise Unsupported(f"{call.what}: rewrite's rule disagrees with eager on the tensor it makes")
        return result
    if result is None or isinstance(result, ConstVar):
        if result is not None and not _same(result.value, out):
            raise Unsupported(f"{call.what}: rewrite's rule gives {result.value!r} where NumPy gives {out!r}")
        return ConstVar(out) if isinstance(out, CONSTANTS) else const(out)
    raise Unsupported(f"{call.what} returns {type(out).__name__}, which the trace does not hold")


def _same(a, b) -> bool:
    try:
        return bool(a == b) and type(a) is type(b)
    except Exception:
        return False


# how close a torch op's values must be to NumPy's, by dtype: (rtol, atol relative to the largest value)
TOLERANCE = {torch.float16: (2e-3, 2e-3), torch.float32: (2e-5, 1e-6), torch.float64: (1e-9, 1e-12),
             torch.complex64: (2e-5, 1e-6), torch.complex128: (1e-9, 1e-12)}


def _check(call: Call, out, got: torch.Tensor) -> None:
    """The lowering's values are the oracle's: same shape, and equal (exactly for integers and
    bools; within TOLERANCE for floats: NumPy's and torch's sums round differently)."""
    expected = np.asarray(out)
    have = got.detach().numpy()
    if have.shape != expected.shape:
        raise Unsupported(f"{call.what}: rewrite's rule gives shape {have.shape} where NumPy gives {expected.shape}")
    if call.undefined or have.size == 0:
        return
    dtypes = [got.dtype, *(DTYPES.get(np.asarray(a).dtype) for a in call.real_args
                           if isinstance(a, (np.ndarray, np.generic)))]
    tols = [TOLERANCE[d] for d in dtypes if d in TOLERANCE]  # (NumPy may compute in its inputs' precision)
    tol = max(tols) if got.dtype in TOLERANCE else None
    if tol is None:
        same = np.array_equal(have, expected)
    else:
        scale = float(np.nanmax(np.abs(expected), initial=0.0)) if np.isfinite(expected).any() else 0.0
        same = np.allclose(have, expected, rtol=tol[0], atol=tol[1] * max(scale, 1.0), equal_nan=True)
    if not same:
        if logs.enabled("graph_breaks"):
            logs.get("graph_breaks").debug("%s: torch %s vs NumPy %s", call.what, have.ravel()[:8],
                                           expected.ravel()[:8])
        raise Unsupported(f"{call.what}: rewrite's torch form of it computes other values than NumPy here "
                          "(a rule of rewrite's is wrong: please report it)")


def skip_values(call: Call) -> None:
    """The result's values are not defined (np.empty): only its shape and dtype are compared."""
    call.undefined = True


def from_tensor(frame, t: TensorVar, force: bool = False) -> ArrayVar:
    """`t.numpy()`: an array sharing `t`'s memory -- eager's errors where it has some (a tensor
    that requires grad, on another device, of a dtype NumPy lacks); `force=True` detaches and
    copies to the CPU first, as eager."""
    if force:
        real = fold(lambda: t.value.numpy(force=True))
        t = call_method(frame, "detach", [t], {})
        if t.value.device.type != "cpu":
            t = call_method(frame, "cpu", [t], {})
        for fix in ("resolve_conj", "resolve_neg"):
            t = call_method(frame, fix, [t], {})
    else:
        real = fold(t.value.numpy)  # (a view: nothing is written)
    torch_dtype(real.dtype)
    return wrap_array(t)


def to_tensor(frame, a: ArrayVar, copy: bool) -> TensorVar:
    """`torch.from_numpy(a)` / `torch.as_tensor(a)` (the array's memory), `torch.tensor(a)` (a copy)."""
    if a.kind is not NDARRAY and not copy:
        raise Unsupported(f"torch.from_numpy of {describe(a)}")
    return call_method(frame, "clone", [a.tensor], {}) if copy else a.tensor


def read_only(a: np.ndarray) -> np.ndarray:
    """An array made read-only (a `broadcast_to` view leaving the call: eager's cannot be written)."""
    a.flags.writeable = False
    return a


# --- what the rules (ops/numpy_*.py) build lowerings with ----------------------------------------

NO = np._NoValue


def as_var(v):
    """A lowering's argument as the graph takes it: Vars as they are, Python values as constants
    (tuples and lists item by item: the shape rules read them)."""
    if isinstance(v, Var):
        return v
    if isinstance(v, tuple):
        return TupleVar([as_var(i) for i in v], py_type=tuple)
    if isinstance(v, list):
        return ListVar([as_var(i) for i in v])
    return ConstVar(v)


def op(frame, fn, args, kwargs) -> Var:
    """`fn(*args, **kwargs)` into the graph (torch's functions; operators)."""
    return call_function(frame, fn, tuple(as_var(a) for a in args), {k: as_var(v) for k, v in kwargs.items()})


def value_of(v, what="this argument"):
    """The Python value of a constant argument (a size may be symbolic: kept as a Var)."""
    if not isinstance(v, Var):  # (a default)
        return v
    if isinstance(v, SymIntVar):
        return v
    if isinstance(v, (TupleVar, ListVar)):
        return type(v.items)(value_of(i, what) for i in v.items) if isinstance(v, ListVar) else \
            tuple(value_of(i, what) for i in v.items)
    if foldable(v):
        return v.python_value()
    raise Unsupported(f"NumPy {what} given {describe(v)}")


def cast(frame, v, dtype: torch.dtype):
    """An operand in `dtype`: an array or tensor cast; a number as it is (torch takes it weakly,
    as NumPy does a Python number); a list of numbers a constant tensor of the graph."""
    v = tensor_of(v)
    if isinstance(v, TensorVar) and dtype in WIDE_UNSIGNED:
        dtype = wide_unsigned(v.value.dtype, dtype)
    if isinstance(v, TensorVar):
        return v if v.value.dtype == dtype else call_method(frame, "to", [v, ConstVar(dtype)], {})
    if isinstance(v, ConstVar) and type(v.value) in (int, float, bool, complex):
        return v
    if isinstance(v, SymIntVar):
        return v
    if isinstance(v, (TupleVar, ListVar)):
        return op(frame, torch.tensor, (v,), {"dtype": dtype})
    raise Unsupported(f"a NumPy operand {describe(v)}")


def wide_unsigned(have: torch.dtype, want: torch.dtype) -> torch.dtype:
    """The dtype to compute an unsigned result past uint8 in: int64, where the values fit it (from
    bools, smaller unsigned ints, or uint16/uint32 themselves); else torch's own (which may refuse)."""
    fits = have in (torch.bool, torch.uint8, torch.uint16, torch.uint32, torch.int64) and want != torch.uint64 or \
        have in (torch.bool, torch.uint8, torch.uint16, torch.uint32)
    return torch.int64 if fits else want


def out_dtype(call) -> torch.dtype:
    return torch_dtype(np.asarray(call.out).dtype)


def compute_dtype(call, n: int | None = None) -> torch.dtype:
    """The dtype an elementwise op computes in: its result's, or (a bool result: comparisons,
    isnan) the operands' common dtype."""
    out = out_dtype(call)
    if out != torch.bool:
        return out
    ins = [a for a in call.real_args[:n] if isinstance(a, (np.ndarray, np.generic, int, float, bool, complex))]
    return torch_dtype(np.result_type(*ins)) if ins else out


def ufunc_kwargs(call, kwargs):
    extra = {k for k, v in kwargs.items() if not (k == "dtype" or k in ("out", "where", "casting") and v is None)}
    if extra:
        raise Unsupported(f"{call.what} with {', '.join(sorted(extra))}=")



def params(fn, args, kwargs) -> dict:
    """`fn`'s parameters bound to the call's Vars (the oracle has checked the call binds)."""
    bound = inspect.signature(fn).bind(*args, **kwargs)
    return dict(bound.arguments)


def dims_of(axis, ndim: int) -> tuple:
    if axis is None or axis is NO:
        return tuple(range(ndim))
    axes = axis if isinstance(axis, tuple) else (axis,)
    return tuple(a % ndim if ndim else a for a in axes)


def refuse(call, p: dict, *names) -> None:
    for name in names:
        if p.get(name, NO) not in (None, NO):
            raise Unsupported(f"{call.what} with {name}=")



def as_tensor(frame, v):
    """An array argument as a tensor (a list of numbers: a constant tensor in NumPy's dtype)."""
    v = tensor_of(v)
    if isinstance(v, TensorVar):
        return v
    real = snapshot(v)
    return op(frame, torch.tensor, (v,), {"dtype": torch_dtype(np.asarray(real).dtype)})


def as_out(frame, call, v):
    """An array argument cast to the dtype of NumPy's result."""
    return cast(frame, as_tensor(frame, v), out_dtype(call))



def same_memory(frame, made, inputs: list, out, result: Var, whole: bool = False) -> Var:
    """NumPy's result views an input's memory exactly where the trace's does (a write to one
    shows in the other as in eager): where torch's op made a view and NumPy a copy (`+a` of an
    array, `a[0]`: a NumPy scalar is a value), the result is copied; where NumPy made a view and
    torch a copy (np.flip, `a[::-1]`, or anything viewing such a copy), the result is unshared:
    NumPy's view is `made` again, from what it viewed (see `unshared`). `inputs`: (Var, what the
    oracle was given for it)."""
    if isinstance(out, (tuple, list)) and isinstance(result, (TupleVar, ListVar)):
        items = [same_memory(frame, made, inputs, o, r) for o, r in zip(out, result.items)]
        return ListVar(items) if isinstance(result, ListVar) else TupleVar(items, py_type=result.py_type)
    if not isinstance(result, ArrayVar) or not isinstance(out, (NDARRAY, np.generic, bool, int, float)):
        return result
    numpy_views = [v for v, real in inputs if _numpy_views(out, real)]
    torch_views = [v for v, _ in inputs if _torch_views(result.tensor, v)]
    if torch_views and not numpy_views or not isinstance(out, NDARRAY) and torch_views:
        copy = call_method(frame, "clone", [result.tensor], {})
        return ArrayVar(copy, result.kind, readonly=result.readonly)
    if numpy_views and not torch_views and not result.unshared:
        if not whole:
            raise Unsupported("a NumPy result that views its input where the trace's is a copy (an item of a "
                              "tuple or list NumPy returns)")
        fn, args, kwargs = made
        view = ArrayVar(result.tensor, NDARRAY, readonly=result.readonly, unshared=(fn, list(args), dict(kwargs)))
        held = unshared_storages(frame)
        for v in numpy_views:
            for key in [k for k, views in held.items() if v in views] or [_storage_of(v)]:
                held.setdefault(key, []).append(view)
        return view
    return result


def _numpy_views(out, real) -> bool:
    if isinstance(real, torch.Tensor):
        try:
            real = real.detach().numpy()
        except Exception:  # (a tensor NumPy cannot view: nothing NumPy made views it)
            return False
    return isinstance(out, NDARRAY) and isinstance(real, NDARRAY) and np.may_share_memory(out, real)


def _storage_of(v: Var):
    t = v.tensor if isinstance(v, ArrayVar) else v
    return t.value.untyped_storage().data_ptr() if isinstance(t, TensorVar) else None


def _torch_views(t: TensorVar, v: Var) -> bool:
    """Whether `t` views the memory eager's `v` has (an unshared array's tensor is a copy: not it)."""
    if isinstance(v, ArrayVar) and v.unshared:
        return False
    other = v.tensor if isinstance(v, ArrayVar) else v
    if not isinstance(other, TensorVar) or other.value.device != t.value.device:
        return False
    a, b = t.value.untyped_storage(), other.value.untyped_storage()
    return a.nbytes() > 0 and a.data_ptr() == b.data_ptr()


def unshared_storages(frame) -> dict:
    """Memory (a storage's address) -> the arrays that view it in NumPy and are copies here."""
    return frame.tracer.numpy_unshared


def specialize(frame, values) -> None:
    """The symbolic sizes of these arrays' (or tensors') pinned: what the trace decides from
    them holds for these sizes only (np.shape's constant, array_equal's False)."""
    for v in values:
        t = tensor_of(v)
        if isinstance(t, TensorVar) and t.sym is not None:
            for s in t.sym:
                if not isinstance(s, int):
                    frame.tracer.shape_env.specialize(s)
