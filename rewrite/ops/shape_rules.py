"""Output sizes of torch ops over symbolic sizes: one rule per family, in tables.

A rule gets the op's arguments (Vars) and returns the sizes of each tensor it outputs, as
ints and sympy expressions. The trace still runs every op for real, so each rule's answer
is checked against the real result at the hints; an op with no rule, or whose rule does not
match, *specializes*: every symbol among its inputs gets a guard `s == <size now>`, and the
entry only serves those sizes (correct, just not dynamic).
"""
from __future__ import annotations

import sympy
import torch

from ..symbolic import FloorDiv, PyMod
from ..values.vars import ConstVar, ListVar, SymIntVar, TensorVar, TupleVar, Var


class NoRule(Exception):
    pass


def size_of(v) -> object:
    """An int argument as a size: an int or a sympy expression."""
    if isinstance(v, SymIntVar):
        return v.expr
    if isinstance(v, ConstVar) and type(v.value) is int:
        return v.value
    if type(v) is int:
        return v
    raise NoRule(f"size argument {v!r}")


def sizes_arg(args) -> list:
    """`view(2, n)` or `view((2, n))` / `view([2, n])` / `view(torch.Size)`."""
    if len(args) == 1 and isinstance(args[0], (TupleVar, ListVar)):
        return [size_of(a) for a in args[0].items]
    return [size_of(a) for a in args]


def _dim(d, n: int) -> int:
    d = d.value if isinstance(d, ConstVar) else d
    if type(d) is not int:
        raise NoRule("dim")
    return d % n if n else 0


def _arg(args, kwargs, i, name, default=None):
    if len(args) > i:
        return args[i]
    return kwargs.get(name, default)


def _const(v, default=None):
    if v is None:
        return default
    if isinstance(v, ConstVar):
        return v.value
    if isinstance(v, (TupleVar, ListVar)) and all(isinstance(i, ConstVar) for i in v.items):
        return tuple(i.value for i in v.items)
    raise NoRule("a non-constant argument")


# --- families ------------------------------------------------------------------------------------------
def broadcast(env, *shapes) -> tuple:
    rank = max(len(s) for s in shapes)
    out = []
    for i in range(rank):
        dims = [s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0]
        real = [d for d in dims if not (isinstance(d, int) and d == 1)]
        if not real:
            out.append(1)
            continue
        first = real[0]
        for d in real[1:]:
            if not env.equal(first, d):
                raise NoRule("broadcast of unequal sizes")
        out.append(first)
    return tuple(out)


def pointwise(env, args, kwargs):
    shapes = [a.shape() for a in list(args) + list(kwargs.values()) if isinstance(a, TensorVar)]
    return [broadcast(env, *shapes)]


def same_as_first(env, args, kwargs):
    return [args[0].shape()]


def reduction(env, args, kwargs):
    shape = args[0].shape()
    dim = _const(_arg(args, kwargs, 1, "dim"))
    keepdim = bool(_const(_arg(args, kwargs, 2, "keepdim"), False))
    if isinstance(dim, (torch.dtype, bool)):
        raise NoRule("reduction with a dtype argument")
    if dim is None:
        return [(1,) * len(shape) if keepdim else ()]
    dims = {_dim(d, len(shape)) for d in (dim if isinstance(dim, tuple) else (dim,))}
    out = tuple(1 if i in dims else s for i, s in enumerate(shape)) if keepdim else \
        tuple(s for i, s in enumerate(shape) if i not in dims)
    return [out]


def reduction_pair(env, args, kwargs):
    """max/min/median/mode/sort-like ops returning (values, indices) when given a dim."""
    if len(args) > 1 and isinstance(args[1], TensorVar):
        return pointwise(env, args, kwargs)
    if _arg(args, kwargs, 1, "dim") is None:
        return [()]
    out = reduction(env, args, kwargs)[0]
    return [out, out]


def view(env, args, kwargs):
    shape = args[0].shape()
    sizes = sizes_arg(args[1:] if len(args) > 1 else [kwargs.get("shape") or kwargs.get("size")])
    total = sympy.Mul(*shape) if shape else 1
    known = [s for s in sizes if not (isinstance(s, int) and s == -1)]
    if len(known) < len(sizes) - 1:
        raise NoRule("two -1s")
    if len(known) == len(sizes) - 1:
        part = sympy.Mul(*known) if known else 1
        rest = sympy.simplify(total / part)
        if not (isinstance(rest, int) or rest.is_integer):  # (x.view(n // 2, -1)): exact now, a guard that it stays so
            if not env.equal(PyMod(total, part), 0):
                raise NoRule("inferred size is not a whole product")
            rest = FloorDiv(total, part)
        sizes = [rest if isinstance(s, int) and s == -1 else s for s in sizes]
    if not env.equal(sympy.expand(sympy.Mul(*sizes)), sympy.expand(total)):
        raise NoRule("view of another numel")
    return [tuple(_simple(s) for s in sizes)]


def _simple(s):
    if isinstance(s, int):
        return s
    s = sympy.expand(s)
    return int(s) if s.is_Integer else s


def flatten(env, args, kwargs):
    shape = args[0].shape()
    n = len(shape)
    if n == 0:
        return [(1,)]
    start = _dim(_const(_arg(args, kwargs, 1, "start_dim"), 0), n)
    end = _dim(_const(_arg(args, kwargs, 2, "end_dim"), -1), n)
    return [tuple(shape[:start]) + (_simple(sympy.Mul(*shape[start:end + 1])),) + tuple(shape[end + 1:])]


def repeat_interleave(env, args, kwargs):
    """`x.repeat_interleave(k, dim)` with `k` an int or a size (a tensor's repeats are data):
    that dim `k` times as long; without a dim, the input flattened, `k` times as long."""
    shape = args[0].shape()
    k = size_of(_arg(args, kwargs, 1, "repeats"))
    d = _const(_arg(args, kwargs, 2, "dim"))
    if d is None:
        return [(_simple(sympy.Mul(k, *shape)),)]
    d = _dim(d, len(shape))
    return [tuple(shape[:d]) + (_simple(sympy.Mul(k, shape[d])),) + tuple(shape[d + 1:])]


def permute(env, args, kwargs):
    shape = args[0].shape()
    dims = _const(args[1]) if len(args) == 2 and isinstance(args[1], (TupleVar, ListVar)) else \
        tuple(_const(a) for a in args[1:]) or _const(kwargs.get("dims"))
    return [tuple(shape[_dim(d, len(shape))] for d in dims)]


def transpose(env, args, kwargs):
    shape = list(args[0].shape())
    if len(shape) < 2:
        return [tuple(shape)]
    a = _dim(_const(_arg(args, kwargs, 1, "dim0"), 0), len(shape))
    b = _dim(_const(_arg(args, kwargs, 2, "dim1"), 1), len(shape))
    shape[a], shape[b] = shape[b], shape[a]
    return [tuple(shape)]


def unsqueeze(env, args, kwargs):
    shape = list(args[0].shape())
    d = _dim(_const(_arg(args, kwargs, 1, "dim")), len(shape) + 1)
    return [tuple(shape[:d]) + (1,) + tuple(shape[d:])]


def squeeze(env, args, kwargs):
    shape = args[0].shape()
    dim = _const(_arg(args, kwargs, 1, "dim"))
    dims = set(range(len(shape))) if dim is None else \
        {_dim(d, len(shape)) for d in (dim if isinstance(dim, tuple) else (dim,))}
    return [tuple(s for i, s in enumerate(shape) if not (i in dims and isinstance(s, int) and s == 1))]


def expand(env, args, kwargs):
    shape = args[0].shape()
    sizes = sizes_arg(args[1:])
    lead = len(sizes) - len(shape)
    return [tuple(shape[i - lead] if isinstance(s, int) and s == -1 else s for i, s in enumerate(sizes))]


def like_other(env, args, kwargs):
    return [args[1].shape()]


def cat(env, args, kwargs):
    tensors = [t for t in _arg(args, kwargs, 0, "tensors").items if not (t.value.dim() == 1 and t.value.numel() == 0)]
    d = _dim(_const(_arg(args, kwargs, 1, "dim"), 0), len(tensors[0].shape()))
    first = list(tensors[0].shape())
    first[d] = _simple(sum(t.shape()[d] for t in tensors))
    return [tuple(first)]


def stack(env, args, kwargs):
    tensors = _arg(args, kwargs, 0, "tensors").items
    shape = tensors[0].shape()
    d = _dim(_const(_arg(args, kwargs, 1, "dim"), 0), len(shape) + 1)
    return [tuple(shape[:d]) + (len(tensors),) + tuple(shape[d:])]


def matmul(env, args, kwargs):
    a, b = args[0].shape(), args[1].shape()
    if len(a) == 1 and len(b) == 1:
        env.equal(a[0], b[0])
        return [()]
    if len(b) == 1:
        env.equal(a[-1], b[0])
        return [tuple(a[:-1])]
    if len(a) == 1:
        env.equal(a[0], b[-2])
        return [tuple(b[:-2]) + (b[-1],)]
    env.equal(a[-1], b[-2])
    batch = broadcast(env, tuple(a[:-2]), tuple(b[:-2]))
    return [batch + (a[-2], b[-1])]


def add_product(env, args, kwargs):
    """addmm / baddbmm / addmv (input + mat1 @ mat2, scaled): the product's shape, which the input
    broadcasts to (addbmm sums the batch away)."""
    (product,) = matmul(env, [args[1], args[2]], {})  # (positional, as transformers' Conv1D calls it)
    return [broadcast(env, tuple(args[0].shape()), product)]


def linear(env, args, kwargs):
    x, w = args[0].shape(), _arg(args, kwargs, 1, "weight").shape()
    return [tuple(x[:-1]) + ((w[0],) if len(w) == 2 else ())]


def embedding(env, args, kwargs):
    idx, w = args[0].shape(), args[1].shape()
    return [tuple(idx) + (w[1],)]


def attention(env, args, kwargs):
    q, v = args[0].shape(), args[2].shape()
    return [tuple(q[:-1]) + (v[-1],)]


def batch_first(env, args, kwargs):
    """conv/pool: the batch size passes through; the others are the real result's when static."""
    shape = args[0].shape()
    if any(not isinstance(s, int) for s in shape[1:]):
        raise NoRule("a symbolic spatial size")
    return None  # filled in by `propagate` from the real result, batch size first


def split(env, args, kwargs):
    """split/chunk along a static size: each piece keeps the other (symbolic) sizes."""
    shape = args[0].shape()
    d = _dim(_const(_arg(args, kwargs, 2, "dim"), 0), len(shape))
    if not isinstance(shape[d], int):
        raise NoRule("splitting a symbolic size")
    return lambda outputs: [tuple(o.value.shape[d] if i == d else s for i, s in enumerate(shape)) for o in outputs]


def unbind(env, args, kwargs):
    shape = args[0].shape()
    d = _dim(_const(_arg(args, kwargs, 1, "dim"), 0), len(shape))
    if not isinstance(shape[d], int):
        raise NoRule("unbinding a symbolic size")
    return [tuple(s for i, s in enumerate(shape) if i != d)] * shape[d]


def topk(env, args, kwargs):
    shape = list(args[0].shape())
    k = size_of(_arg(args, kwargs, 1, "k"))
    d = _dim(_const(_arg(args, kwargs, 2, "dim"), -1), len(shape))
    shape[d] = k
    return [tuple(shape), tuple(shape)]


def kthvalue(env, args, kwargs):
    shape = args[0].shape()
    d = _dim(_const(_arg(args, kwargs, 2, "dim"), -1), len(shape))
    keep = bool(_const(_arg(args, kwargs, 3, "keepdim"), False))
    out = tuple(1 if i == d else s for i, s in enumerate(shape)) if keep else \
        tuple(s for i, s in enumerate(shape) if i != d)
    return [out, out]


def like_index(env, args, kwargs):
    """gather: the output has the index's sizes."""
    return [_arg(args, kwargs, 2, "index").shape()]


def index_select(env, args, kwargs):
    shape = list(args[0].shape())
    d = _dim(_const(_arg(args, kwargs, 1, "dim")), len(shape))
    index = _arg(args, kwargs, 2, "index").shape()
    shape[d] = index[0] if index else 1
    return [tuple(shape)]


def tensor_attr(env, args, kwargs):
    """x.T (all sizes reversed), x.mT (the last two swapped), x.real/imag."""
    shape = tuple(args[0].shape())
    attr = _const(args[1])
    if attr == "T":
        return [shape[::-1]]
    if attr == "mT" and len(shape) >= 2:
        return [shape[:-2] + (shape[-1], shape[-2])]
    if attr in ("real", "imag"):
        return [shape]
    raise NoRule(f"tensor attribute {attr}")


def creation(env, args, kwargs):
    sizes = sizes_arg([a for a in args if not isinstance(a, TensorVar)] or [kwargs.get("size")])
    return [tuple(_simple(s) for s in sizes)]


def full(env, args, kwargs):
    return [tuple(sizes_arg([_arg(args, kwargs, 0, "size")]))]


def arange(env, args, kwargs):
    nums = [a for a in args if not isinstance(a, ConstVar) or not isinstance(a.value, torch.dtype)]
    if len(nums) == 1:
        return [(size_of(nums[0]),)]
    if len(nums) == 2 or (len(nums) == 3 and size_of(nums[2]) == 1):
        return [(_simple(size_of(nums[1]) - size_of(nums[0])),)]
    raise NoRule("arange with a step")


def getitem(env, args, kwargs):
    shape = list(args[0].shape())
    index = args[1]
    parts = index.items if isinstance(index, TupleVar) else [index]
    if parts and len(parts) <= len(shape) and all(
            isinstance(p, TensorVar) and not p.value.dtype.is_floating_point and p.value.dtype is not torch.bool
            for p in parts):  # `mask[batch_idx, kv_idx]`: integer index tensors on the leading dims
        return [tuple(broadcast(env, *(p.shape() for p in parts))) + tuple(shape[len(parts):])]
    out, i = [], 0
    ellipsis = [p for p in parts if isinstance(p, ConstVar) and p.value is Ellipsis]
    consumed = sum(1 for p in parts if not (isinstance(p, ConstVar) and (p.value is None or p.value is Ellipsis)))
    for p in parts:
        v = p.value if isinstance(p, ConstVar) else p
        if v is None:
            out.append(1)
        elif v is Ellipsis:
            n = len(shape) - consumed
            out += shape[i:i + n]
            i += n
        elif isinstance(v, slice):
            out.append(_slice_size(env, shape[i], v))
            i += 1
        elif type(v) is int or isinstance(v, SymIntVar):
            i += 1
        else:
            raise NoRule("indexing with a tensor")
    if ellipsis and len(ellipsis) > 1:
        raise NoRule("two ellipses")
    return [tuple(out + shape[i:])]


def _slice_size(env, n, s: slice):
    start, stop, step = (None if x is None else size_of(x) for x in (s.start, s.stop, s.step))
    if isinstance(n, int) and all(isinstance(x, int) or x is None for x in (start, stop, step)):
        return len(range(n)[s])
    if step not in (None, 1):
        raise NoRule("a step over a symbolic size")
    start = 0 if start is None else start
    stop = n if stop is None else stop
    for bound in (start, stop):  # a negative int bound counts from the end
        if isinstance(bound, int) and bound < 0:
            raise NoRule("a negative bound over a symbolic size")
    stop = sympy.Min(stop, n) if not (isinstance(stop, int) and isinstance(n, int)) else min(stop, n)
    size = _simple(stop - start)
    if env.decide(sympy.Ge(size, 0)) is False:
        return 0
    return size


RULES = {}
for _names, _rule in [
    (("add", "sub", "mul", "div", "true_divide", "floor_divide", "remainder", "fmod", "pow", "maximum", "minimum",
      "where", "masked_fill", "lerp", "addcmul", "addcdiv", "eq", "ne", "lt", "le", "gt", "ge", "logical_and",
      "logical_or", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor", "atan2", "hypot", "copysign",
      "rsub", "xlogy", "fmax", "fmin", "clamp", "clip", "and_", "or_", "xor", "truediv", "floordiv", "mod",
      "iadd", "isub", "imul", "itruediv", "ifloordiv", "imod", "ipow", "iand", "ior", "ixor", "lshift", "rshift",
      "add_", "sub_", "mul_", "div_", "pow_", "clamp_", "masked_fill_", "lerp_", "addcmul_", "addcdiv_",
      "maximum_", "minimum_", "copy_", "eq_", "ne_"), pointwise),
    (("relu", "gelu", "silu", "sigmoid", "tanh", "exp", "log", "neg", "abs", "sqrt", "rsqrt", "sin", "cos", "erf",
      "dropout", "softmax", "log_softmax", "layer_norm", "float", "half", "double", "bfloat16", "int", "long",
      "bool", "to", "type", "contiguous", "clone", "detach", "nan_to_num", "sign", "floor", "ceil", "round",
      "exp2", "expm1", "log1p", "log2", "log10", "mish", "hardtanh", "leaky_relu", "elu", "softplus", "tril",
      "triu", "cumsum", "cumprod", "batch_norm", "group_norm", "instance_norm", "rms_norm", "normalize",
      "logical_not", "bitwise_not", "neg_", "relu_", "zero_", "fill_", "normal_", "uniform_", "exponential_",
      "sigmoid_", "tanh_", "reciprocal", "square", "invert", "pos", "zeros_like", "ones_like", "empty_like",
      "rand_like", "randn_like", "full_like", "randint_like", "softmin", "relu6", "hardswish", "hardsigmoid",
      "selu", "celu", "glu", "logsigmoid", "tanhshrink", "softsign", "threshold", "isnan", "isinf", "isfinite",
      "signbit", "real", "imag", "conj", "flip", "roll", "gelu_", "silu_", "trunc", "frac", "requires_grad_",
      "cpu", "cuda", "argsort", "dropout_", "alpha_dropout", "feature_alpha_dropout",
      "dropout1d", "dropout2d", "dropout3d"), same_as_first),
    (("sum", "mean", "amax", "amin", "prod", "std", "var", "norm", "logsumexp", "argmax", "argmin", "all", "any",
      "count_nonzero", "nansum", "nanmean"), reduction),
    (("max", "min", "median", "mode", "nanmedian"), reduction_pair),
    (("view", "reshape"), view),
    (("flatten",), flatten),
    (("repeat_interleave",), repeat_interleave),
    (("permute",), permute),
    (("transpose", "swapaxes", "swapdims", "t", "transpose_", "swapaxes_", "swapdims_", "t_"), transpose),
    (("unsqueeze", "unsqueeze_"), unsqueeze),
    (("squeeze", "squeeze_"), squeeze),
    (("expand",), expand),
    (("expand_as", "view_as", "reshape_as", "type_as"), like_other),
    (("cat", "concat", "concatenate"), cat),
    (("stack",), stack),
    (("matmul", "mm", "bmm"), matmul),
    (("addmm", "baddbmm", "addmv", "addmm_", "baddbmm_"), add_product),
    (("linear",), linear),
    (("embedding",), embedding),
    (("scaled_dot_product_attention",), attention),
    (("conv1d", "conv2d", "conv3d", "max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d",
      "avg_pool3d", "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_max_pool2d"), batch_first),
    (("zeros", "ones", "empty", "rand", "randn", "new_zeros", "new_ones", "new_empty"), creation),
    (("full", "new_full"), full),
    (("arange",), arange),
    (("getitem",), getitem),
    (("split", "chunk", "tensor_split"), split),
    (("unbind",), unbind),
    (("getattr",), tensor_attr),
    (("topk",), topk),
    (("kthvalue",), kthvalue),
    (("gather", "take_along_dim"), like_index),
    (("index_select",), index_select),
    (("scatter", "scatter_add", "scatter_reduce", "scatter_", "scatter_add_", "index_add", "index_copy",
      "index_fill", "index_put", "masked_scatter", "index_add_", "index_copy_", "index_fill_",
      "masked_scatter_"), same_as_first),
]:
    for _name in _names:
        RULES[_name] = _rule


def _sort(env, args, kwargs):
    shape = args[0].shape()
    return [shape, shape]


RULES["sort"] = _sort  # (values, indices), each of the input's shape


def symbolic_inputs(args, kwargs) -> list:
    """The symbols the op's inputs carry (sizes of tensors, symbolic ints)."""
    out = []
    stack = list(args) + list(kwargs.values())
    while stack:
        a = stack.pop()
        if isinstance(a, TensorVar) and a.sym is not None:
            out += [s for s in a.sym if not isinstance(s, int)]
        elif isinstance(a, SymIntVar):
            out.append(a.expr)
        elif isinstance(a, (TupleVar, ListVar)):
            stack += a.items
        elif isinstance(a, ConstVar) and isinstance(a.value, slice):  # x[:n]: bounds may be sizes
            stack += [p for p in (a.value.start, a.value.stop, a.value.step) if isinstance(p, Var)]
    return out


def propagate(env, name: str, args, kwargs, result: Var) -> None:
    """Give the op's tensor outputs their symbolic sizes, or specialize its inputs' symbols."""
    symbols = symbolic_inputs(args, kwargs)
    if not symbols:
        return
    _propagate(env, name, args, kwargs, result, symbols)
    for written in (args[0] if args else None, kwargs.get("out")):
        if isinstance(written, TensorVar) and isinstance(result, TensorVar) and result.value is written.value:
            written.sym = result.sym  # an in-place op (x.t_(), out=) changed the input's own sizes


def _propagate(env, name: str, args, kwargs, result: Var, symbols) -> None:
    outputs = [result] if isinstance(result, TensorVar) else \
        [v for v in getattr(result, "items", []) if isinstance(v, TensorVar)]
    if not outputs:
        return  # run for its effect (x[:n] = v): nothing's size to know
    rule = RULES.get(name if isinstance(name, str) else getattr(name, "__name__", ""))
    shapes = None
    if rule is not None and outputs:
        try:
            shapes = rule(env, list(args), dict(kwargs))
            if shapes is None:  # batch size first, the rest static
                shapes = [(args[0].shape()[0],) + tuple(o.value.shape[1:]) for o in outputs]
            elif callable(shapes):  # sizes that only the real outputs tell (split along a static size)
                shapes = shapes(outputs)
        except (NoRule, IndexError, TypeError, AttributeError, ValueError):
            shapes = None
    if shapes is not None and len(shapes) == len(outputs) and all(
            len(s) == o.value.dim() and all(env.hint(d) == n for d, n in zip(s, o.value.shape))
            for s, o in zip(shapes, outputs)):
        for s, o in zip(shapes, outputs):
            if any(not isinstance(d, int) for d in s):
                o.sym = tuple(s)
                o.node.meta["sym_shape"] = o.sym
        return
    if env.log:
        env.log.debug("specialize %s: %s", ", ".join(map(str, symbols)),
                      f"no symbolic rule for {name}" if rule is None else f"the rule for {name} does not apply")
    for s in symbols:  # no rule (or it disagrees with the real result): these sizes are fixed
        env.specialize(s)
