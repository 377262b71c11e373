"""Torch functions, tensor methods and tensor attributes: which become graph nodes, which are
constants known from metadata (guarded by the tensor's guard), and which cannot be traced.

The tables are the rules; the functions below only apply them.
"""
from __future__ import annotations

import operator
import types

import torch

from .. import config
from ..errors import Unsupported, WritesInputs
from ..guards.guard import DefaultDtypeMatch, EqualsMatch, HasAttrMatch, StateMatch
from ..guards.source import AttrSource
from ..values.vars import (ConstVar, DictVar, ListVar, MethodVar, ObjectVar, ScalarVar, SymIntVar, TensorVar,
                           TupleVar, Var)
from . import markers
from .core import TENSORS, const, describe, fold, foldable

# --- tensor attributes --------------------------------------------------------------------
# known from metadata: (needs a static shape?)
META_ATTRS = {
    "shape": True, "ndim": False, "dtype": False, "device": False, "requires_grad": False,
    "is_cuda": False, "is_cpu": False, "is_meta": False, "layout": False, "is_sparse": False,
    "is_quantized": False, "is_mkldnn": False, "is_nested": False, "itemsize": False, "nbytes": True,
}
# computed in the graph: getattr(x, name)
TENSOR_ATTRS = {"T", "mT", "H", "mH", "real", "imag"}
# never traced: autograd internals, storage access
FORBIDDEN_ATTRS = {
    "data": "reading .data (an untracked alias)", "_base": "reading ._base", "grad_fn": "reading .grad_fn",
}
# autograd state of an input, read from the real tensor and guarded: (what an intermediate gives)
AUTOGRAD_ATTRS = {"grad", "is_leaf"}

# --- tensor methods -------------------------------------------------------------------------
# known from metadata: (needs a static shape?)
META_METHODS = {
    "size": True, "dim": False, "ndimension": False, "numel": True, "nelement": True, "stride": True,
    "is_contiguous": True, "is_floating_point": False, "is_complex": False, "element_size": False,
    "get_device": False, "is_signed": False, "__len__": True, "is_inference": False,
}
DATA_METHODS = {  # read a tensor's values into Python
    "item", "tolist", "numpy", "storage_offset", "__bool__", "__int__", "__float__", "__index__", "__complex__", "data_ptr",
    "equal", "allclose", "is_nonzero", "__iter__", "__contains__", "__array__", "__format__",
}
FORBIDDEN_METHODS = {  # autograd and storage side effects
    "backward", "register_hook", "retain_grad", "share_memory_", "record_stream",
    "set_", "untyped_storage", "storage", "_typed_storage", "detach_", "register_post_accumulate_grad_hook",
}
# ops whose output shape depends on the input's values, not only its shape
DATA_DEPENDENT_SHAPE = {
    "nonzero", "masked_select", "unique", "unique_consecutive", "argwhere", "bincount", "repeat_interleave",
}


def _repeats_are_data(args, kwargs) -> bool:
    """repeat_interleave's `repeats` (the one argument of `torch.repeat_interleave(repeats)`): a
    tensor's values decide the size (and may be negative); an int or a size does not."""
    repeats = kwargs.get("repeats", args[1] if len(args) > 1 else args[0] if args else None)
    return isinstance(repeats, TensorVar)


# of those, ops whose shape (and value errors) follow data only where an argument is a tensor
DATA_ONLY_FROM_TENSORS = {"repeat_interleave": _repeats_are_data}
# factory functions: every argument may be a size
CREATION = {"arange", "range", "linspace", "logspace", "zeros", "ones", "full", "empty", "rand", "randn",
            "randint", "randperm", "eye", "tensor", "tril_indices", "triu_indices"}
# ops that take sizes: given a tensor where a size goes, the output shape follows its value
SIZE_TAKING = {
    "arange", "range", "linspace", "logspace", "zeros", "ones", "full", "empty", "rand", "randn", "randint",
    "randperm", "eye", "tensor", "new_zeros", "new_ones", "new_full", "new_empty", "new_tensor", "expand",
    "view", "reshape", "repeat", "tile", "narrow", "one_hot", "zeros_like", "ones_like", "full_like",
    "empty_like", "rand_like", "randn_like", "randint_like", "histc", "topk", "kthvalue", "split", "chunk",
    "tensor_split", "unflatten", "resize_", "roll", "diag_embed", "tril_indices", "triu_indices",
}
# the names _shape_from_data may find a shape from data for (subscripts aside): other ops skip it
SHAPE_FROM_DATA = frozenset(DATA_DEPENDENT_SHAPE | SIZE_TAKING | {"where", "one_hot"})

# --- torch functions ----------------------------------------------------------------------------
FORBIDDEN_FUNCTIONS = {
    "manual_seed", "seed", "set_rng_state", "set_grad_enabled", "set_default_dtype", "set_default_device",
    "set_default_tensor_type", "set_printoptions", "save", "load", "use_deterministic_algorithms",
    "set_num_threads", "set_num_interop_threads", "compile", "set_float32_matmul_precision", "backward",
    "grad", "synchronize",
}
# torch functions that return Python values computed from metadata only
META_FUNCTIONS = {"is_tensor", "numel", "is_floating_point", "is_complex", "is_storage", "typename"}
# torch functions that read global state the guards already cover
GLOBAL_STATE = {torch.is_grad_enabled, torch._C.is_grad_enabled}


def _switch_grad(frame, args, kwargs) -> Var:
    """`torch._C._set_grad_enabled(b)` (what grad-mode context managers call): the trace's
    grad mode switches, so `torch.is_grad_enabled()` and the ops after it see it."""
    mode = (args or list(kwargs.values()) or [None])[0]
    if len(args) + len(kwargs) != 1 or not isinstance(mode, ConstVar) or not isinstance(mode.value, bool):
        raise Unsupported("torch._C._set_grad_enabled of a value that is not a bool constant")
    frame.tracer.set_grad(mode.value)
    return ConstVar(None)


# torch functions that switch a global mode the trace follows (others named set_* break the graph)
MODE_SWITCHES = {torch._C._set_grad_enabled: _switch_grad}
# torch functions that read a mode a traced `with` block may switch: (the recorded context kind)
MODE_STATE = {torch.is_autocast_enabled: "autocast", torch.is_inference_mode_enabled: "inference_mode",
              **{getattr(torch, f"is_autocast_{device}_enabled"): "autocast" for device in ("cpu", "xla", "ipu")
                 if hasattr(torch, f"is_autocast_{device}_enabled")}}


def is_torch_callable(fn) -> bool:
    if isinstance(fn, (type, torch.nn.Module)):
        return False
    if getattr(fn, "__objclass__", None) in (torch._C.TensorBase, torch.Tensor):
        return True
    mod = getattr(fn, "__module__", None) or ""
    return mod == "torch" or mod.startswith("torch.")


def trace_rule(fn, holds_objects: bool) -> str | None:
    """Which of torch's callables are graph ops and which are traced as Python -- the one rule,
    in this order (Dynamo's trace rules, with torch's Python functions over tensors kept as ops):

    1. "python": the helpers markers.PYTHON_HELPERS lists, and the functions of torch's Python
       libraries (markers.PYTHON_MODULES: torch.optim, the grad scaler, torch.utils._pytree,
       torch.testing, ...): their code runs over Python objects, and is traced as the user's is;
    2. "python": any other Python function of torch given objects a graph op cannot hold (an
       optimizer, a generator, a module) and with no global effect;
    3. "op": anything else torch defines -- C functions, `torch.ops`, Tensor methods, and Python
       functions over tensors (`torch.nn.functional.*`): one node of the graph, computed on the
       traced values (a result the graph cannot hold is a graph break naming the function);
    None: not torch's (a bound method of a torch class in Python is traced, as the user's).
    """
    if markers.python_helper(fn) or markers.python_library(fn):
        return "python"
    if not is_torch_callable(fn):
        return None
    if isinstance(fn, types.FunctionType) and _wraps_user_code(fn):
        return "python"  # (torch's wrapper around the user's function: a decorator's `inner`)
    if isinstance(fn, types.FunctionType) and holds_objects and not global_effect(fn):
        return "python"
    if isinstance(fn, types.MethodType) and isinstance(fn.__func__, types.FunctionType):
        return None
    return "op"


def _wraps_user_code(fn: types.FunctionType) -> bool:
    """A closure of torch's that holds a function of the user's (what a torch decorator returns,
    `error_on_graph_break(False)(fn)`): the user's code runs in it, so it is traced, not an op."""
    for cell in fn.__closure__ or ():
        try:
            held = cell.cell_contents
        except ValueError:  # (an empty cell)
            continue
        if isinstance(held, types.MethodType):
            held = held.__func__
        if isinstance(held, types.FunctionType) and not is_torch_callable(held):
            return True
    return False


def _shape_known(frame, var: TensorVar, what: str) -> None:
    if var.node.meta.get("data_dependent_shape"):
        raise Unsupported(f"{what} of a tensor whose shape depends on data (from {var.node.meta['data_dependent_shape']})")


def tensor_len(frame, var: TensorVar) -> int:
    """len(x) as an int (a symbolic first size is specialized: the caller needs a number)."""
    if var.node.meta.get("data_dependent_shape"):
        raise Unsupported("len() of a tensor whose shape depends on data")
    if var.value.dim() == 0:
        raise Unsupported("len() of a 0-d tensor (the call raises eagerly)")
    return frame.tracer.shape_env.specialize(var.shape()[0])


def sym_size(frame, var: TensorVar, d: int) -> Var:
    """Size `d` of a tensor: an int, or (a dynamic size) a SymIntVar computed by `x.size(d)`."""
    size = var.shape()[d]
    if isinstance(size, int):
        return ConstVar(size)
    env = frame.tracer.shape_env
    value = int(var.value.shape[d])
    node = frame.tracer.graph.int_node("call_method", "size", (var, d), value)
    return SymIntVar(node, size, value, env)


def sym_numel(frame, var: TensorVar) -> Var:
    import sympy  # (deferred: sympy, imported with the first symbolic size)
    shape = var.shape()
    if all(isinstance(s, int) for s in shape):
        return ConstVar(int(var.value.numel()))
    node = frame.tracer.graph.int_node("call_method", "numel", (var,), int(var.value.numel()))
    return SymIntVar(node, sympy.Mul(*shape), int(var.value.numel()), frame.tracer.shape_env)


def _symbolic_meta(frame, var: TensorVar, name: str, args) -> Var | None:
    """shape, size(), size(d), numel(), len() of a tensor with symbolic sizes."""
    if var.sym is None:
        return None
    n = len(var.sym)
    if name == "shape" or (name == "size" and not args):
        return TupleVar([sym_size(frame, var, d) for d in range(n)], py_type=torch.Size)
    if name == "size":
        d = args[0].value if isinstance(args[0], ConstVar) else None
        if type(d) is not int or not -n <= d < n:
            return None
        return sym_size(frame, var, d % n)
    if name in ("numel", "nelement"):
        return sym_numel(frame, var)
    if name == "__len__" and n:
        return sym_size(frame, var, 0)
    if name in ("stride", "is_contiguous", "nbytes"):
        for s in var.sym:  # strides follow the sizes: known for these sizes only
            if not isinstance(s, int):
                frame.tracer.shape_env.specialize(s)
    return None


def getattr_tensor(frame, var: TensorVar, name: str) -> Var:
    if name in META_ATTRS and var.sym is not None:
        sym = _symbolic_meta(frame, var, name, ())
        if sym is not None:
            return sym
    if name in META_ATTRS:
        if META_ATTRS[name]:
            _shape_known(frame, var, f".{name}")
        if name == "requires_grad" and var.source is None:
            frame.tracer.read_grad_mode()  # an intermediate's requires_grad follows grad mode
        if name in DTYPE_ATTRS and var.source is None:
            read_autocast(frame, var)
        return const(getattr(var.value, name))
    if name in TENSOR_ATTRS:
        return call_function(frame, getattr, (var, ConstVar(name)), {})
    if name == "__class__":  # (an input's type is guarded; an op's result is what the op made)
        return ObjectVar(type(var.value))
    if name in AUTOGRAD_ATTRS:
        return _autograd_attr(frame, var, name)
    if name in FORBIDDEN_ATTRS:
        raise Unsupported(f"{FORBIDDEN_ATTRS[name]} of a tensor")
    if callable(getattr(torch.Tensor, name, None)):
        return MethodVar(var, name)
    missing_attribute(frame, var, name)
    raise Unsupported(f"tensor attribute .{name}")


def missing_attribute(frame, var: Var, name: str) -> None:
    """`obj.name` when the object has no such attribute: eager's AttributeError, raised in the
    trace (so the user's `except` meets it, and fullgraph=True reports the user's error),
    guarded on the attribute staying absent. Returns when the attribute is there after all."""
    if hasattr(var.value, name):
        return
    if var.source is not None:
        frame.tracer.guards.add(HasAttrMatch(var.source, name, False))
    fold(getattr, var.value, name)


def _autograd_attr(frame, var: TensorVar, name: str) -> Var:
    """`x.grad`, `x.is_leaf` of an input: the real tensor's, guarded (a backward between two
    calls gives a new entry). Of a tensor the graph makes: a leaf iff it does not require grad."""
    if var.source is not None:
        real = frame.tracer.graph.original(var.value)
        if name == "grad":
            return frame.tracer.wrap(real.grad, AttrSource(var.source, "grad"))
        frame.tracer.guards.add(EqualsMatch(AttrSource(var.source, name), real.is_leaf))
        return ConstVar(real.is_leaf)
    if name == "grad":
        raise Unsupported("reading .grad of a tensor the graph computes (not a leaf: None, with a warning)")
    frame.tracer.read_grad_mode()
    return ConstVar(var.value.is_leaf)


def call_method(frame, name: str, args: list[Var], kwargs: dict[str, Var]) -> Var:
    """`args[0].name(*args[1:], **kwargs)` where args[0] is a TensorVar."""
    self = args[0]
    if name in META_METHODS and self.sym is not None:
        sym = _symbolic_meta(frame, self, name, args[1:])
        if sym is not None:
            return sym
    if name in META_METHODS:
        if META_METHODS[name]:
            _shape_known(frame, self, f".{name}()")
        if name in DTYPE_METHODS and self.source is None:
            read_autocast(frame, self)
        real_args = [_fold(a) for a in args[1:]]
        real_kwargs = {k: _fold(v) for k, v in kwargs.items()}
        return const(fold(getattr(self.value, name), *real_args, **real_kwargs))
    if name == "item" and len(args) == 1 and not kwargs and (config.get("capture_scalar_outputs") or markers.eager_path(
            frame.globals.get("__name__") if isinstance(frame.globals, dict) else None)):
        _shape_known(frame, self, "Tensor.item()")
        node, result = frame.tracer.graph.call("call_method", "item", (self,), {})
        return ScalarVar(node, result)
    if name in DATA_METHODS:
        raise Unsupported(f"Tensor.{name}() reads a tensor's value into Python (data-dependent)",
                          "keep it out of the compiled function, or compute with tensors instead")
    if name == "requires_grad_":  # an autograd flag the graph switches where eager does (inputs too)
        graph = frame.tracer.graph
        if (not graph.clone_inputs or graph.copied_lazily) and \
                (id(self.value) in graph.input_ids or graph.is_input_memory(self.value)):
            raise WritesInputs()  # (traced again on copies: the trace must not change the caller's tensor)
        var = _record(frame, "call_method", name, args, kwargs, name)
        var.node.meta["writes"] = True  # (not a write into memory, but the ops after it depend on it)
        return var
    if name in FORBIDDEN_METHODS:
        raise Unsupported(f"Tensor.{name}() (autograd or storage side effect)")
    if name == "type" and not args[1:] and not kwargs:
        return const(self.value.type())
    return _record(frame, "call_method", name, args, kwargs, name)


def global_effect(fn) -> bool:
    """A torch function that changes global state (a seed, a setting, a file)."""
    name = getattr(fn, "__name__", "")
    return name in FORBIDDEN_FUNCTIONS or name.startswith(("set_", "_set_"))


def call_torch(frame, fn, args: list[Var], kwargs: dict[str, Var]) -> Var:
    """A call of a torch function (or an unbound Tensor method)."""
    try:
        name = _OPS.get(fn)
    except TypeError:  # (an unhashable callable)
        name = None
    if name is not None:  # (an op, as found below before: what decides it never changes)
        return _record(frame, "call_function", fn, args, kwargs, name)
    name = getattr(fn, "__name__", None)
    if name is None:
        name = str(fn)
    if getattr(fn, "__objclass__", None) in (torch._C.TensorBase, torch.Tensor):
        if not args or not isinstance(args[0], TensorVar):
            raise Unsupported(f"Tensor.{name} called on {describe(args[0]) if args else 'nothing'}")
        return call_method(frame, name, list(args), kwargs)
    if fn in GLOBAL_STATE:
        return ConstVar(frame.tracer.read_grad_mode())
    if fn in MODE_STATE:
        return _read_mode(frame, fn, MODE_STATE[fn], args, kwargs)
    if fn in MODE_SWITCHES:
        return MODE_SWITCHES[fn](frame, args, kwargs)
    if global_effect(fn):
        raise Unsupported(f"call to torch.{name} (global side effect)")
    if name in META_FUNCTIONS:
        return const(fold(fn, *[_fold(a) for a in args], **{k: _fold(v) for k, v in kwargs.items()}))
    try:
        _OPS[fn] = name
    except TypeError:
        pass
    return _record(frame, "call_function", fn, args, kwargs, name)


_OPS: dict = {}  # torch function -> its name, for those call_torch records as they are


# what an op's output dtype decides (autocast changes it)
DTYPE_ATTRS = {"dtype", "itemsize", "nbytes"}
DTYPE_METHODS = {"is_floating_point", "is_complex", "element_size", "is_signed"}


def read_autocast(frame, var: TensorVar) -> None:
    """The dtype of a tensor the graph computes was read: it depends on autocast being on."""
    if not any(ctx.kind == "autocast" for ctx in frame.tracer.open_contexts):
        device = var.value.device.type
        frame.tracer.guards.add(StateMatch(torch.is_autocast_enabled, (device,), torch.is_autocast_enabled(device)))


def _read_mode(frame, fn, kind: str, args, kwargs) -> Var:
    """The mode now: set by a traced block, or as the caller had it (then guarded)."""
    if kwargs:
        raise Unsupported(f"torch.{fn.__name__} with keyword arguments")
    real_args = tuple(_fold(a) for a in args)
    value = fold(fn, *real_args)
    if not any(ctx.kind == kind for ctx in frame.tracer.open_contexts):
        frame.tracer.guards.add(StateMatch(fn, real_args, value))
    return ConstVar(value)


def read_state(frame, fn, kind, args, kwargs) -> Var:
    """A torch state query or fact (markers.STATE): what it returns now, as a constant; guarded
    on that value where it can change between calls, unless a traced context sets it."""
    how, context = kind
    real_args = tuple(_fold(a) for a in args)
    real_kwargs = {k: _fold(v) for k, v in kwargs.items()}
    value = fold(fn, *real_args, **real_kwargs)
    frame.tracer.state_reads += 1
    if fn is torch.get_default_dtype:
        frame.tracer.guards.add(DefaultDtypeMatch(value))
    elif how == "guarded" and not (context and any(ctx.kind == context for ctx in frame.tracer.open_contexts)):
        if real_kwargs:
            raise Unsupported(f"{getattr(fn, '__name__', fn)} with keyword arguments")
        frame.tracer.guards.add(StateMatch(fn, real_args, value))
    return const(value)


def call_function(frame, fn, args, kwargs) -> Var:
    """Record a call of `fn` (an operator or torch function) on tensors."""
    name = getattr(fn, "__name__", None)
    return _record(frame, "call_function", fn, tuple(args), kwargs, str(fn) if name is None else name)


def call_operator(frame, fn, a: Var, b: Var) -> Var:
    """Record `fn(a, b)`, a binary operator of the operator module, on tensors (call_function's,
    its name known)."""
    return _record(frame, "call_function", fn, (a, b), _NO_KEYWORDS, fn.__name__)


_NO_KEYWORDS: dict = {}  # (an op's keywords when it has none: read, never written)


# ops whose values (not sizes or dtypes, which guards pin) can make them raise: an index out
# of range, an integer division by zero, a class id out of range
INTEGER_ONLY = {"floor_divide", "remainder", "fmod", "div", "__floordiv__", "__rfloordiv__", "__mod__", "__rmod__",
                "__ifloordiv__", "__imod__", "floordiv", "mod", "ifloordiv", "imod"}  # floats give inf/nan
INDEXING = {"getitem", "setitem", "__getitem__", "__setitem__"}  # only with a tensor among the indices
VALUE_ERRORS = INTEGER_ONLY | INDEXING | {
    "index_select", "gather", "take", "take_along_dim", "embedding", "scatter", "scatter_", "scatter_add",
    "scatter_add_", "scatter_reduce", "scatter_reduce_", "index_add", "index_add_", "index_copy", "index_copy_",
    "index_put", "index_put_", "index_fill", "index_fill_", "one_hot", "nll_loss", "cross_entropy",
    "multinomial", "bincount", "repeat_interleave",
}


def _may_raise_on_values(node, target, name, args, kwargs) -> bool:
    """Whether the op could raise on other values of the same sizes and dtypes."""
    name = name if isinstance(name, str) else getattr(target, "__name__", "")
    if name not in VALUE_ERRORS or name in DATA_ONLY_FROM_TENSORS and not DATA_ONLY_FROM_TENSORS[name](args, kwargs):
        return False
    if name in INTEGER_ONLY:
        return any(not t.value.dtype.is_floating_point and not t.value.dtype.is_complex
                   for t in _tensors(args, kwargs))
    if name in INDEXING:
        return any(isinstance(t, TensorVar) for t in _tensors(args[1:2], {}))
    return True


def _record(frame, kind, target, args, kwargs, name) -> Var:
    tracer = frame.tracer
    graph = tracer.graph
    in_try = frame.may_catch and frame.in_try()
    if in_try and graph.clone_inputs:
        raise Unsupported(f"{name} inside try/except in a function that writes into its inputs")
    if in_try and tracer.open_contexts:
        raise Unsupported(f"{name} inside try/except and inside {tracer.open_contexts[-1].kind}")
    dd = None
    if graph.data_dependent:  # (a shape from data was recorded: does this op read one?)
        for t in _tensor_args(args, kwargs):
            dd = t.node.meta.get("data_dependent_shape")
            if dd:
                break
    if dd is None and (name in SHAPE_FROM_DATA or target is _GETITEM or target is _SETITEM):
        dd = _shape_from_data(kind, target, name, args, kwargs)
        if dd is not None and not config.get("capture_dynamic_output_shape_ops"):
            raise Unsupported(f"{dd}: the output's shape depends on data, and config.capture_dynamic_output_shape_ops "
                              "is off", "set rewrite.config.capture_dynamic_output_shape_ops = True to record it")
    if in_try:
        graph.ops_in_try = True  # (no switch to copies midway: see GraphBuilder._copy_written)
    node, result = graph.call(kind, target, tuple(args), dict(kwargs) if kwargs else _NO_KEYWORDS)
    if frame is tracer.root:
        tracer.root_ops += 1  # (what runs outside any graph if this frame runs eagerly: Entry.eager_ops)
    if (name in VALUE_ERRORS or type(name) is not str) and _may_raise_on_values(node, target, name, args, kwargs):
        node.meta["may_raise"] = True
        graph.marked.append(node)  # (what the entry's checks ask about: GraphBuilder.marked)
    if in_try:
        # an op may fail on later data where eager's `except` would see it: the entry runs the
        # whole call eagerly if the graph raises -- so nothing before may have changed anything
        # (random draws aside: the entry puts the generators back first, compile.RngState)
        tracer.ops_in_try = True
    if not tracer.default_dtype_read and (name in CREATION or _reads_default_dtype(name, args, kwargs, result)):
        tracer.read_default_dtype()
    if dd is not None and isinstance(result, (tuple, list)):
        raise Unsupported(f"{name} of a tensor whose shape depends on data: the number of results does too")
    var = graph.wrap_result(node, result)
    if tracer.shape_env.hints:  # some sizes are symbols: the outputs' sizes follow
        from .shape_rules import propagate  # (deferred: sympy, imported with the first symbolic size)
        propagate(frame.tracer.shape_env, name if isinstance(name, str) else getattr(name, "__name__", ""),
                  args, kwargs, var)
    if dd is not None:
        graph.data_dependent = True
        for t in _tensors([var], {}):
            t.node.meta["data_dependent_shape"] = dd
    return var


_GETITEM, _SETITEM = operator.getitem, operator.setitem


def _reads_default_dtype(name, args, kwargs, result) -> bool:
    """Whether the default dtype shaped the op's result: a Python float or complex met an integer
    tensor (its promotion goes through the default dtype, a comparison's too), or the result is
    floating or complex while no tensor argument is and no dtype is given (`x / 2`, `x.sqrt()`
    of an integer `x`, `torch.tensor([1.5])`)."""
    if len(args) == 2 and not kwargs:  # (a tensor and a number: a binary operator's, most ops')
        a, b = args
        if type(a) is ConstVar:
            a, b = b, a
        if type(a) is TensorVar and type(b) is ConstVar and type(b.value) in _NUMBERS:
            return a.value.dtype not in _INEXACT and (type(b.value) in _FLOATS or _inexact(result))
    number = exact = given = False  # a float or complex; an integer tensor; a floating tensor or a dtype
    for v in (*args, *kwargs.values()) if kwargs else args:
        t = type(v)
        if t is TensorVar:
            if v.value.dtype in _INEXACT:
                given = True
            else:
                exact = True
        elif t is ConstVar:
            if type(v.value) in _FLOATS:
                number = True
            elif isinstance(v.value, torch.dtype):
                given = True
        elif t is ScalarVar:
            number = number or isinstance(v.value, _FLOATS)
        elif isinstance(v, (TupleVar, ListVar, DictVar)):
            for x in _tensors((v,), {}):
                if x.value.dtype in _INEXACT:
                    given = True
                else:
                    exact = True
    if number and exact:
        return True
    return not given and name not in CASTS and _inexact(result)


def _inexact(result) -> bool:
    """A floating or complex tensor among an op's results."""
    if isinstance(result, torch.Tensor):
        return result.dtype in _INEXACT
    return isinstance(result, (tuple, list)) and any(isinstance(r, torch.Tensor) and r.dtype in _INEXACT for r in result)


# methods whose result dtype they name themselves (`x.float()`): the default dtype shapes none of them
CASTS = {"float", "double", "half", "bfloat16", "cfloat", "cdouble", "chalf"}
_NUMBERS = (int, float, bool, complex)
_FLOATS = (float, complex)
_INEXACT = frozenset(d for d in vars(torch).values()
                     if isinstance(d, torch.dtype) and (d.is_floating_point or d.is_complex))  # (a dtype not
# here counts as an integer one: a guard more, never one less)


def _shape_from_data(kind, target, name, args, kwargs) -> str | None:
    """What makes this op's output shape depend on its inputs' values, if anything does (asked
    of ops named in SHAPE_FROM_DATA and of subscripts)."""
    if name in DATA_DEPENDENT_SHAPE and (name not in DATA_ONLY_FROM_TENSORS or DATA_ONLY_FROM_TENSORS[name](args, kwargs)) \
            or _bool_mask_index(target, args):
        return name if isinstance(name, str) else "indexing"
    if target is torch.where and len(args) == 1 and not kwargs:
        return "where"
    if name == "one_hot" and _one_hot_infers_classes(args, kwargs):
        return "one_hot without num_classes"
    if name in SIZE_TAKING and _tensor_as_size(kind, name, args, kwargs):
        return f"{name} with a tensor where a size goes"
    return None


def _one_hot_infers_classes(args, kwargs) -> bool:
    n = kwargs.get("num_classes", args[1] if len(args) > 1 else None)
    return n is None or isinstance(n, TensorVar) or (isinstance(n, ConstVar) and n.value == -1)


def _tensor_as_size(kind, name, args, kwargs) -> bool:
    """A tensor among the arguments of a size-taking op, other than the tensor it works on."""
    creates = kind == "call_function" and name in CREATION
    rest = list(args) if creates else list(args[1:])
    return next(_tensors(rest, kwargs), None) is not None


def _bool_mask_index(target, args) -> bool:
    if target not in (operator.getitem, operator.setitem) or len(args) < 2:
        return False
    index = args[1]
    items = index.items if isinstance(index, (TupleVar, ListVar)) else [index]
    return any(isinstance(i, TensorVar) and i.value.dtype in (torch.bool, torch.uint8) for i in items)


def _tensor_args(args, kwargs):
    """The TensorVars among an op's arguments, inside its containers too (as `_tensors`
    yields them): where every argument is a tensor or a constant, without the walk."""
    if kwargs:
        return _tensors(args, kwargs)
    found = []
    for a in reversed(args):
        if type(a) is TensorVar:
            found.append(a)
        elif type(a) is not ConstVar:
            return _tensors(args, kwargs)
    return found


def _tensors(args, kwargs):
    stack = list(args) + list(kwargs.values())
    while stack:
        a = stack.pop()
        if isinstance(a, TensorVar):
            yield a
        elif isinstance(a, (TupleVar, ListVar)):
            stack.extend(a.items)
        elif isinstance(a, DictVar):
            stack.extend(a.items.values())
        elif isinstance(a, (list, tuple)):
            stack.extend(a)


def _fold(v: Var):
    if isinstance(v, TensorVar):
        return v.value
    if foldable(v):
        return v.python_value()
    raise Unsupported(f"argument {describe(v)}")


def is_tensor_method_descriptor(fn) -> bool:
    return isinstance(fn, (types.MethodDescriptorType, types.WrapperDescriptorType)) and \
        getattr(fn, "__objclass__", None) in (torch._C.TensorBase, torch.Tensor)


TENSORS.fill(call_function=call_function, tensor_len=tensor_len)
