"""NumPy on the tracer's Vars, dispatched: np.* calls, ndarray attributes and methods, operators,
subscripts, Python's builtins on arrays, torch functions given arrays. Each is NumPy's operation
run by `arrays.run` beside its lowering (ops/numpy_ufuncs.py, ops/numpy_functions.py). The
tables here:

  METADATA     functions whose result is a constant of dtypes and sizes (np.dtype, np.finfo)
  METHODS      ndarray methods -> the function they are (`a.sum(0)` is `np.sum(a, 0)`)
  DUNDERS      operator methods called by name (`a.__iadd__(b)`)

Anything else of NumPy's is a graph break naming it; np.random's functions too (NumPy's own
generator state: a compiled call must not draw other numbers than eager).
"""
from __future__ import annotations

import inspect
import operator

import numpy as np
import torch

from ..errors import Unsupported
from ..values.vars import ArrayVar, ConstVar, ListVar, MethodVar, ObjectVar, TensorVar, TupleVar, Var
from .arrays import (NDARRAY, as_out, cast, from_tensor, is_numpy, op, run, snapshot, specialize, tensor_of,
                     to_tensor, unshared_storages, value_of)
from .core import ARRAYS, const, fold, foldable
from .numpy_functions import FUNCTIONS, _matmul, _reshape, _round, _sort, _transpose
from .numpy_ufuncs import ELEMENTWISE, OPERATORS, REDUCTIONS, UNARY_OPERATORS
from .tensors import call_method, getattr_tensor, global_effect, sym_numel

__all__ = ["is_numpy"]


METADATA = {np.dtype, np.finfo, np.iinfo, np.result_type, np.promote_types, np.can_cast, np.issubdtype,
            np.isscalar, np.shape, np.ndim, np.size, np.iscomplexobj, np.isrealobj}

# ndarray methods that are the function of the same parameters after the array
METHODS = {
    "sum": np.sum, "prod": np.prod, "mean": np.mean, "std": np.std, "var": np.var, "max": np.max, "min": np.min,
    "argmax": np.argmax, "argmin": np.argmin, "cumsum": np.cumsum, "cumprod": np.cumprod, "any": np.any,
    "all": np.all, "clip": np.clip, "round": np.round, "dot": np.dot, "repeat": np.repeat, "swapaxes": np.swapaxes,
    "squeeze": np.squeeze, "trace": np.trace, "diagonal": np.diagonal, "take": np.take, "conj": np.conjugate,
    "conjugate": np.conjugate, "argsort": np.argsort, "searchsorted": np.searchsorted, "nonzero": np.nonzero,
    "ravel": np.ravel, "__abs__": np.absolute, "__neg__": np.negative, "__pos__": np.positive,
}
DATA_METHODS = {"item", "tolist", "tobytes", "__float__", "__int__", "__index__", "__complex__", "__bool__"}
FORBIDDEN_ATTRS = {"flags", "strides", "base", "data", "ctypes", "flat", "view", "resize", "setflags", "byteswap",
                   "getfield", "setfield", "put", "itemset", "__array_interface__", "__array_struct__"}



# --- dispatch: calls, attributes, methods, operators, subscripts ---------------------------------

def _name(fn) -> str:
    module = getattr(fn, "__module__", None) or "numpy"
    module = "np" + module[len("numpy"):] if module.startswith("numpy") else module
    return f"{module}.{getattr(fn, '__name__', type(fn).__name__)}"


def _scalar_type(frame, call, x, *args, **kwargs):
    return as_out(frame, call, x)


def call_numpy(frame, fn: ObjectVar, args: list, kwargs: dict) -> Var:
    """A call of a NumPy function, ufunc or scalar type on Vars."""
    value, name = fn.value, _name(fn.value)
    if name.startswith("np.random"):
        raise Unsupported(f"call to {name}: it draws from NumPy's global generator (a compiled call must draw "
                          "what eager draws)", "draw with torch's generator, or outside the compiled function")
    if value in METADATA:  # (pure: the oracle's constant)
        specialize(frame, [*args, *kwargs.values()])
        return run(frame, name, value, args, kwargs, lambda *a, **k: None)
    _refuse_out(name, value, args, kwargs)
    scalar_type = isinstance(value, type) and issubclass(value, np.generic)
    lower = _scalar_type if scalar_type else ELEMENTWISE.get(value) or REDUCTIONS.get(value) or FUNCTIONS.get(value)
    if lower is None:
        raise Unsupported(f"call to {name} (rewrite has no rule for it: NumPy functions are traced by the tables "
                          "of rewrite/ops/numpy_ufuncs.py and numpy_functions.py)")
    if value not in FUNCTIONS and all(foldable(a) for a in [*args, *kwargs.values()]):
        lower = _folded(lower)  # np.float32(2.5), np.sqrt(2.0): a constant (an array: made per call)
    return run(frame, name, value, args, kwargs, lower)


def _refuse_out(what: str, fn, args: list, kwargs: dict) -> None:
    """`out=` (a ufunc's extra positional too): NumPy would write into an array before the trace
    decides anything -- refused before the oracle runs."""
    given = kwargs.get("out")
    if isinstance(fn, np.ufunc) and len(args) > fn.nin:
        given = args[fn.nin]
    elif given is None and not isinstance(fn, (np.ufunc, type)):
        try:
            given = inspect.signature(fn).bind_partial(*args, **kwargs).arguments.get("out")
        except (TypeError, ValueError):  # (no signature, or the call does not bind: the oracle's error)
            given = None
    if given is not None and not (isinstance(given, ConstVar) and given.value is None):
        raise Unsupported(f"{what} with out= (a write into an array given)")


def _folded(lower):
    """A pure function of constants: NumPy's immutable result is a constant of the trace."""
    def fold_or_lower(frame, call, *args, **kwargs):
        if isinstance(call.out, np.ndarray):
            return lower(frame, call, *args, **kwargs)
        return None
    return fold_or_lower


def array_attr(frame, a: ArrayVar, name: str) -> Var:
    """`a.name` of an array (or NumPy scalar) the trace holds."""
    t = a.tensor
    if name == "__class__":
        return ObjectVar(a.kind)
    if a.kind is NDARRAY and name == "shape":
        shape = getattr_tensor(frame, t, "shape")
        return TupleVar(list(shape.items), py_type=tuple) if isinstance(shape, TupleVar) else const(tuple(shape.value))
    if name in ("ndim", "dtype", "itemsize") or name in ("size", "nbytes") and t.sym is None:
        return ConstVar(getattr(snapshot(a), name))  # (np.dtype and ints: immutable)
    if name == "size":
        return sym_numel(frame, t)
    if name == "T":
        return run(frame, "ndarray.T", lambda x: x.T, [a], {}, lambda fr, call, x: _transpose(fr, call, x))
    if name in ("real", "imag"):
        return run(frame, f"ndarray.{name}", lambda x: getattr(x, name), [a], {}, _real_imag(name))
    if name in FORBIDDEN_ATTRS:
        raise Unsupported(f"ndarray.{name} (memory layout or raw data)")
    if not hasattr(a.kind, name):
        fold(getattr, snapshot(a), name)  # (eager's AttributeError)
    return MethodVar(a, name)


def _real_imag(name: str):
    def lower(frame, call, x):
        t = x.tensor
        if t.value.dtype.is_complex:
            return op(frame, torch.real if name == "real" else torch.imag, (t,), {})
        return t if name == "real" else op(frame, torch.zeros_like, (t,), {})
    return lower


def array_method(frame, a: ArrayVar, name: str, args: list, kwargs: dict) -> Var:
    """`a.name(*args, **kwargs)`: NumPy's method on the snapshot (the oracle), its rule's torch ops."""
    oracle = lambda x, *rest, **named: getattr(x, name)(*rest, **named)  # noqa: E731
    what = f"ndarray.{name}"
    if name in DATA_METHODS:
        fold(oracle, snapshot(a), *[snapshot(v) for v in args], **{k: snapshot(v) for k, v in kwargs.items()})
        raise Unsupported(f"{what}() reads an array's values into Python (data-dependent)",
                          "keep it out of the compiled function, or compute with arrays instead")
    if name in METHODS:
        np_fn = METHODS[name]
        _refuse_out(what, np_fn, [a, *args], kwargs)
        lower = ELEMENTWISE.get(np_fn) or REDUCTIONS.get(np_fn) or FUNCTIONS[np_fn]
        return run(frame, what, oracle, [a, *args], kwargs, lower)
    if name == "reshape":
        shape = args[0] if len(args) == 1 else TupleVar(list(args))
        return run(frame, what, oracle, [a, *args], kwargs, lambda fr, call, x, *r, **k: _reshape(
            fr, call, x, shape, **{n: v for n, v in k.items() if n == "order"}))
    if name == "transpose":
        axes = None if not args else args[0] if len(args) == 1 else TupleVar(list(args))
        if axes is not None and isinstance(axes, ConstVar) and axes.value is None:
            axes = None
        return run(frame, what, oracle, [a, *args], kwargs, lambda fr, call, x, *r, **k: _transpose(fr, call, x, axes))
    if name == "astype":
        def astype(fr, call, x, *rest, **named):
            copy = named.get("copy", rest[3] if len(rest) > 3 else ConstVar(True))
            t = as_out(fr, call, x)
            if t is x.tensor and not value_of(copy):
                return x  # (the array itself)
            return t if t is not x.tensor else call_method(fr, "clone", [t], {})
        return run(frame, what, oracle, [a, *args], kwargs, astype)
    if name in ("copy", "flatten"):
        def copy(fr, call, x, *rest, **named):
            t = call_method(fr, "reshape", [x.tensor, ConstVar(-1)], {}) if name == "flatten" else x.tensor
            return call_method(fr, "clone", [t], {})
        return run(frame, what, oracle, [a, *args], kwargs, copy)
    if name in ("fill", "sort"):
        return _in_place(frame, a, name, oracle, args, kwargs)
    dunder = _dunder(frame, a, name, args, kwargs)
    if dunder is not None:
        return dunder
    raise Unsupported(f"{what}() (rewrite has no rule for it)")


_OPERATOR_NAMES = {"+": "add", "-": "sub", "*": "mul", "/": "truediv", "//": "floordiv", "%": "mod", "**": "pow",
                   "@": "matmul", "<<": "lshift", ">>": "rshift", "&": "and", "|": "or", "^": "xor"}
_COMPARISON_NAMES = {"<": "lt", "<=": "le", "==": "eq", "!=": "ne", ">": "gt", ">=": "ge"}
# `a.__add__(b)`, `a.__iadd__(b)`, `a.__radd__(b)`, `a.__lt__(b)`: the operator (and its function)
DUNDERS = {
    **{f"__{n}__": (sym, getattr(operator, n if n not in ("and", "or") else f"{n}_"), False)
       for sym, n in {**_OPERATOR_NAMES, **_COMPARISON_NAMES}.items()},
    **{f"__r{n}__": (sym, getattr(operator, n if n not in ("and", "or") else f"{n}_"), True)
       for sym, n in _OPERATOR_NAMES.items()},
    **{f"__i{n}__": (sym + "=", getattr(operator, f"i{n}"), False) for sym, n in _OPERATOR_NAMES.items()},
}


def _dunder(frame, a: ArrayVar, name: str, args, kwargs):
    """An operator's method called by name on an array: the operator (its other operand not a
    tensor: there the method answers NotImplemented, which the operator would pass on)."""
    if kwargs:
        return None
    if name in DUNDERS and len(args) == 1 and not isinstance(args[0], TensorVar):
        sym, fn, reflected = DUNDERS[name]
        return binary(frame, sym, fn, args[0], a) if reflected else binary(frame, sym, fn, a, args[0])
    if name == "__getitem__" and len(args) == 1:
        return getitem(frame, a, args[0])
    if name == "__setitem__" and len(args) == 2:
        setitem(frame, a, *args)
        return ConstVar(None)
    if name == "__len__" and not args:
        return ConstVar(length(frame, a))
    return None


def _in_place(frame, a: ArrayVar, name: str, oracle, args, kwargs) -> Var:
    """a.fill(v), a.sort(): NumPy's method on a copy, its values written into the array."""
    def returning(x, *rest, **named):
        oracle(x, *rest, **named)
        return x

    def lower(fr, call, x, *rest, **named):
        if name == "fill":
            value = cast(fr, rest[0] if rest else named["value"], x.tensor.value.dtype)
            if isinstance(value, TensorVar):
                return op(fr, torch.Tensor.copy_, (op(fr, torch.empty_like, (x.tensor,), {}),
                                                               call_method(fr, "expand_as", [value, x.tensor], {})), {})
            return op(fr, torch.full_like, (x.tensor, value), {})
        return _sort(False)(fr, call, x, *rest, **named)
    return write(frame, a, f"ndarray.{name}", returning, args, kwargs, lower)


def write(frame, a: ArrayVar, what: str, oracle, args, kwargs, lower) -> ArrayVar:
    """An operation that writes into array `a`: NumPy's on a copy (it returns the copy it wrote,
    or raises eager's error: a read-only array), `lower` computes the new values, which the graph
    copies into `a`'s tensor -- a write into an input's memory where `a` views one."""
    _writable(frame, a)
    new = tensor_of(run(frame, what, oracle, [a, *args], kwargs, lower, writes=True))
    if new is not a.tensor:  # (a setitem wrote into it itself)
        call_method(frame, "copy_", [a.tensor, new], {})
    return a


def _writable(frame, a: ArrayVar) -> None:
    """`a` is about to be written: not one the trace holds as a copy of NumPy's view, nor one whose
    elements share memory (an expanded tensor's: NumPy writes them one by one, torch refuses);
    the copies of NumPy's views of its memory go stale."""
    if a.unshared:
        raise Unsupported("writing into an array that views another's memory in NumPy (np.flip's, a negative "
                          "step's), which the trace holds as a copy")
    real = frame.tracer.graph.original(a.value)
    if any(st == 0 for st in (*a.value.stride(), *real.stride())):
        raise Unsupported("writing into an array whose elements share memory (an expanded tensor's)")
    for view in unshared_storages(frame).get(_storage(a), ()):
        view.stale = True


def _storage(a: ArrayVar):
    return a.value.untyped_storage().data_ptr()




COMPARISONS = {"<", "<=", "==", "!=", ">", ">="}


def binary(frame, sym: str, fn, a: Var, b: Var) -> Var:
    """`a <sym> b` where a or b is an array: a tensor's operator (an array beside a tensor is
    read as one, as torch's operators read it), else the ufunc NumPy's operator is."""
    inplace = sym.endswith("=") and sym not in COMPARISONS
    what = f"operator {sym}"
    if isinstance(a, TensorVar) or isinstance(b, TensorVar):
        return run(frame, what, fn, [a, b], {}, _torch_lower(fn), writes=inplace)
    base = sym[:-1] if inplace else sym
    lower = _matmul if base == "@" else ELEMENTWISE[OPERATORS[base]]
    if inplace and isinstance(a, ArrayVar) and a.kind is NDARRAY:
        return write(frame, a, what, lambda x, y: fn(x, y), [b], {}, _in_place_lower(lower))
    return run(frame, what, fn, [a, b], {}, lower)


def _in_place_lower(lower):
    """An in-place operator computes in its operands' common dtype (then cast into the array's)."""
    def in_place(frame, call, x, y):
        call.out = np.asarray(np.result_type(*call.real_args[:2]).type(0))
        return lower(frame, call, x, y)
    return in_place


def unary(frame, sym: str, fn, a: ArrayVar) -> Var:
    return run(frame, f"operator {sym}", fn, [a], {}, ELEMENTWISE[UNARY_OPERATORS[sym]])


def _torch_lower(fn, method: str | None = None):
    """A torch function or operator given arrays: eager reads each as a tensor (its memory)."""
    def lower(frame, call, *args, **kwargs):
        args = [tensor_of(v) for v in args]
        kwargs = {k: tensor_of(v) for k, v in kwargs.items()}
        if method is not None:
            return call_method(frame, method, args, kwargs)
        return op(frame, fn, args, kwargs)
    return lower


TO_TENSOR = {torch.from_numpy: False, torch.as_tensor: False, torch.asarray: False, torch.tensor: True}


def torch_call(frame, fn, args: list, kwargs: dict) -> Var:
    """A torch function called with arrays among its arguments."""
    if global_effect(fn) or kwargs.get("out") is not None:
        raise Unsupported(f"call to {_name(fn)} with an array (a global effect, or a write through out=)")
    if fn in TO_TENSOR and args and isinstance(args[0], ArrayVar):
        copy = TO_TENSOR[fn]

        def lower(fr, call, a, *rest, **named):
            t = to_tensor(fr, a, copy)
            if call.out.dtype != t.value.dtype:
                t = call_method(fr, "to", [t, ConstVar(call.out.dtype)], {})
            return t
        return run(frame, f"torch.{fn.__name__}", fn, args, kwargs, lower)
    return run(frame, _name(fn), fn, args, kwargs, _torch_lower(fn))


def tensor_subscript(frame, t: TensorVar, index: Var, value: Var | None = None) -> Var | None:
    """`t[index]` / `t[index] = value` with arrays in the index or the value (eager reads each as
    a tensor): the subscript with the arrays' tensors (None: no array there)."""
    if not _holds_array([index] if value is None else [index, value]):
        return None
    if value is None:
        return run(frame, "Tensor[...]", operator.getitem, [t, index], {}, _torch_lower(operator.getitem))

    def oracle(x, i, v):
        x[i] = v
        return x

    def lower(fr, call, x, i, v):
        op(fr, operator.setitem, (x, tensor_of(i), tensor_of(v)), {})
        return x
    run(frame, "Tensor[...] =", oracle, [t, index, value], {}, lower, writes=True)
    return ConstVar(None)


def _holds_array(values) -> bool:
    return any(isinstance(v, ArrayVar) or isinstance(v, (TupleVar, ListVar)) and _holds_array(v.items)
               for v in values)


def tensor_method(frame, t: TensorVar, name: str, args: list, kwargs: dict) -> Var:
    """`t.name(...)` of a tensor, with arrays among the arguments (or `t.numpy()`)."""
    if name == "numpy":
        force = value_of(kwargs.get("force", args[0] if args else ConstVar(False)))
        return from_tensor(frame, t, bool(force))
    return run(frame, f"Tensor.{name}", lambda x, *r, **k: getattr(x, name)(*r, **k), [t, *args], kwargs,
               _torch_lower(None, name), writes=name.endswith("_"))


def getitem(frame, a: ArrayVar, index: Var) -> Var:
    def lower(fr, call, x, i):
        flipped = _negative_steps(call.real_args[1], x.tensor.value.dim())
        if flipped is not None:  # a[::-1]: NumPy's view, torch's copy (its slices take no negative step)
            dims, positive = flipped
            t = op(fr, torch.flip, (x.tensor, dims), {})
            r = op(fr, operator.getitem, (t, positive(_sizes(fr, x.tensor, dims))), {})
            return r  # (NumPy's is a view: arrays.same_memory)
        return op(fr, operator.getitem, (x.tensor, tensor_of(i)), {})
    return run(frame, "ndarray[...]", operator.getitem, [a, index], {}, lower)


def _sizes(frame, t: TensorVar, dims) -> list:
    """`t`'s sizes as ints, those of `dims` specialized where symbolic (a slice's bounds need them)."""
    shape = list(t.value.shape)
    for d in dims:
        if t.sym is not None and not isinstance(t.sym[d], int):
            frame.tracer.shape_env.specialize(t.sym[d])
    return shape


def _negative_steps(index, ndim: int):
    """For a basic index (ints, slices, None, ...) with a negative step: the dims to flip, and a
    function of the flipped tensor's sizes giving the index with those steps positive. None if
    no step is negative (or the index is not a basic one)."""
    items = index if isinstance(index, tuple) else (index,)
    if not all(isinstance(i, (int, slice, type(None), type(Ellipsis))) and not isinstance(i, bool) for i in items):
        return None
    used = sum(isinstance(i, (int, slice)) for i in items)
    dims, at, spans = [], 0, []
    for i in items:
        if i is Ellipsis:
            spans.append((i, None))
            at += ndim - used
        elif i is None:
            spans.append((i, None))
        else:
            spans.append((i, at))
            if isinstance(i, slice) and i.step is not None and i.step < 0:
                dims.append(at)
            at += 1
    if not dims:
        return None

    def positive(shape):
        out = []
        for i, d in spans:
            if d in dims and i.start is None and i.stop is None:  # (the whole dim: no size needed)
                out.append(slice(None, None, -i.step))
            elif d in dims:  # positions counted from the flipped end
                start, stop, step = i.indices(shape[d])
                count = len(range(start, stop, step))
                first = shape[d] - 1 - start
                out.append(slice(first, first + count * -step, -step))
            else:
                out.append(i)
        return tuple(out)
    return tuple(dims), positive


def setitem(frame, a: ArrayVar, index: Var, value: Var) -> None:
    def oracle(x, i, v):
        x[i] = v
        return x

    def lower(fr, call, x, i, v):
        op(fr, operator.setitem, (x.tensor, tensor_of(i), cast(fr, v, x.tensor.value.dtype)), {})
        return x.tensor
    write(frame, a, "ndarray[...] =", oracle, [index, value], {}, lower)


def length(frame, a: ArrayVar) -> int:
    fold(len, snapshot(a))  # (a 0-d array: eager's TypeError)
    size = a.tensor.shape()[0]
    return size if isinstance(size, int) else frame.tracer.shape_env.specialize(size)


def unpack(frame, a: ArrayVar) -> list:
    if a.kind is not NDARRAY:
        fold(iter, snapshot(a))
    return [getitem(frame, a, ConstVar(i)) for i in range(length(frame, a))]


def truth(frame, a: ArrayVar) -> bool:
    fold(bool, snapshot(a))  # (an array of several items: eager's ValueError)
    raise Unsupported("data-dependent branching: the condition depends on a NumPy array's value",
                      "use np.where, or move the branch out of the compiled function")


def builtin(frame, fn, args: list, kwargs: dict) -> Var | None:
    """Python's builtins given an array: abs, len, round, float, int, ... (None: not one of these)."""
    a = args[0]
    if fn is abs:
        return run(frame, "abs", abs, args, kwargs, ELEMENTWISE[np.absolute])
    if fn is len:
        return ConstVar(length(frame, a))
    if fn is round:
        return run(frame, "round", round, args, kwargs, _round)
    if fn in (float, int, complex, bool, operator.index):
        fold(fn, snapshot(a))
        raise Unsupported(f"{fn.__name__}() of a NumPy array reads its value into Python (data-dependent)")
    return None


ARRAYS.fill(getitem=getitem, setitem=setitem, unpack=unpack, truth=truth, tensor_subscript=tensor_subscript)
