"""Wrap a real Python value read from a source into a Var, installing its guards.

The rules, by the value's type:

  tensor (strided)                -> graph input + TensorMatch (type, dtype, device, shape, stride, requires_grad)
  numpy.ndarray                   -> ArrayVar over a graph input (`torch.from_numpy`: its memory) + ArrayMatch
  int/float/bool/str/None/...,    -> ConstVar + EqualsMatch (exact type and value)
  numpy scalars, number subclasses
  dtype, memory_format, layout,   -> ConstVar + IdMatch
  enum members
  torch.device                    -> ConstVar + EqualsMatch
  range, slice                    -> ConstVar + TypeMatch + EqualsMatch on start, stop and step
  tuple/list (incl. namedtuple,   -> TupleVar/ListVar + TypeMatch + LenMatch, items wrapped one by one
  torch.Size)
  collections.deque               -> ListVar (a deque) + TypeMatch + LenMatch + its maxlen, items one by one
  dict, OrderedDict, defaultdict  -> DictVar + TypeMatch + KeysMatch (literal keys) or LenMatch and each key
                                     wrapped from `list(d)[i]` (tensors, modules, objects); values one by one
  torch.no_grad(), enable_grad()  -> GradModeVar + TypeMatch (the context a resume function re-enters)
  autocast, inference_mode,       -> RecordedContextVar + TypeMatch, its settings guarded (not entered yet)
  record_function
  bound method of a Python function -> BoundVar + TypeMatch (its __self__ and __func__ wrapped)
  functools.partial               -> PartialVar + TypeMatch (func, args, keywords wrapped)
  function/module/class/builtin   -> ObjectVar + IdMatch
  mappingproxy without a source   -> DictVar, read-only (its items now: the view of a constant)
  anything else                   -> ObjectVar + TypeMatch (its attributes are guarded when read)

The same list, dict, tuple, tensor or instance reached through two sources is one Var, with
an AliasMatch guard. Real lists and dicts are never mutable Vars: mutating them is a side
effect (not replayed yet), so it is unsupported rather than done on a copy.

Values without a source (constants the tracer computed itself) get no guard.
"""
from __future__ import annotations

import collections
import enum
import functools
import numbers
import types

import torch

from .. import config, logs
from ..errors import EagerOnce, Unsupported
from ..guards.guard import (LITERAL_ITEMS, AliasMatch, ArrayMatch, EqualsMatch, IdMatch, KeysMatch, LenMatch,
                            LiteralTupleMatch, TensorMatch, TypeMatch)
from ..guards.shapes import DYNAMIC_DIMS, STATIC_DIMS
from ..guards.source import (ArrayTensorSource, AttrSource, CellContentsSource, DictItemSource, DictKeysSource,
                             ItemSource, LocalSource, ModuleAttrSource, SizeSource, is_literal)
from ..ops.contexts import is_wrapped_context, wrap_context
from ..ops.markers import allowed, disabled
from ..ops.arrays import NDARRAY, array_input, wrap_array
from ..ops.core import key_of
from ..values.vars import (BoundVar, CodeFunctionVar, ConstVar, DictVar, GradModeVar, ListVar, ObjectVar, PartialVar,
                           TupleVar)

SCALARS = (int, float, bool, str, bytes, complex, type(None))
EQUAL_CONSTS = (torch.device, range, slice)
SINGLETONS = (torch.dtype, torch.memory_format, torch.layout, enum.Enum)
IDENTITY = (types.FunctionType, types.BuiltinFunctionType, types.ModuleType, type, types.MethodType,
            types.BuiltinMethodType, types.MethodWrapperType, types.WrapperDescriptorType,
            types.MethodDescriptorType, types.ClassMethodDescriptorType, type(Ellipsis), type(NotImplemented))


IDENTITY_BEARING = (list, dict, tuple)  # and tensors, and instances: `is` between them is observable


class DynamicPolicy:
    """Which sizes of an input are symbols, as Dynamo decides it:

    * `jit(dynamic=False)`: none; `jit(dynamic=True)`: all;
    * by default ("automatic dynamic"): the first compile is static; a size that differs from
      what the first compile saw (in `frame_state`, kept per function) is dynamic from then on;
    * `rewrite.mark_dynamic(t, d)` makes size d of that tensor dynamic, `mark_static` static;
    * sizes 0 and 1 are never dynamic, nor the sizes of a non-contiguous tensor; nor those of
      an nn.Parameter, or of a module's parameter or buffer, unless marked.

    With `dynamic=None` the config decides, read once per compile (`config.get`: rewrite's, or
    torch._dynamo.config's where the program set it): `assume_static_by_default=False` is
    `dynamic=True`; `automatic_dynamic_shapes=False` keeps a changed size a constant (each
    new size compiles again); `force_parameter_static_shapes=False` lets parameters' sizes be
    symbols too, `force_nn_module_property_static_shapes=False` modules' parameters' and buffers'. (As torch.compile: dynamic=True/False set the first two for that compile.)
    """

    def __init__(self, option: bool | None, frame_state: dict):
        self.option = option
        self.frame_state = frame_state
        if option is None:
            self.automatic, self.all = config.get("automatic_dynamic_shapes"), not config.get("assume_static_by_default")
        else:
            self.automatic = self.all = option
        self.parameters = not config.get("force_parameter_static_shapes")
        self.module_tensors = not config.get("force_nn_module_property_static_shapes")

    def dims(self, source, value) -> frozenset:
        shape = tuple(value.shape)
        key = (source.expr(), "sizes")  # apart from ints: one argument can be an int in one call, a tensor in the next
        seen = self.frame_state.get(key)
        if seen is None or len(seen) != len(shape):
            self.frame_state[key] = seen = shape
        changed = {i for i, (was, now) in enumerate(zip(seen, shape)) if was is None or was != now}
        if changed:  # remembered as dynamic for every later compile
            self.frame_state[key] = tuple(None if i in changed else s for i, s in enumerate(seen))
            if logs.enabled("dynamic") and self.automatic:
                for i in sorted(changed):
                    if seen[i] is not None:
                        logs.get("dynamic").debug("%s.size(%d) is dynamic from now on: %d in the first compile, "
                                                  "%d now", source.name(), i, seen[i], shape[i])
        if self.option is False:
            return frozenset()
        dims = set(range(len(shape))) if self.all else changed if self.automatic else set()
        if isinstance(value, torch.nn.Parameter) and not self.parameters or \
                isinstance(source, ModuleAttrSource) and not self.module_tensors:
            dims = set()
        for attr in DYNAMIC_DIMS:  # rewrite.mark_dynamic, torch._dynamo.mark_dynamic, ...
            dims |= set(getattr(value, attr, ()))
        for attr in STATIC_DIMS:
            dims -= set(getattr(value, attr, ()))
        dims = {d for d in dims if shape[d] >= 2}
        if dims and not value.is_contiguous():
            return frozenset()
        return frozenset(dims)

    def int_dynamic(self, source, value: int) -> bool:
        """An int argument of the function is a symbol when it changed since the first compile
        (or with dynamic=True); 0, 1 and negative values stay constants."""
        key = (source.expr(), "int")
        seen = self.frame_state.get(key, value)
        if seen is not None and seen != value:
            if logs.enabled("dynamic") and self.automatic:
                logs.get("dynamic").debug("int %s is dynamic from now on: %d in the first compile, %d now",
                                          source.name(), seen, value)
            seen = None  # dynamic from now on
        self.frame_state[key] = seen
        if self.option is False or value < 2:
            return False
        return self.all or self.automatic and seen is None


def _number_by_value(t: type) -> bool:
    """A number guarded by its value (and folded as a constant): one whose class compares in C.
    A class whose `==` is Python code (fractions.Fraction, a user's Number) is an object like
    any other: a value guard would run that code on every call -- the jitted `__eq__` itself,
    when it is jitted, without end."""
    return issubclass(t, numbers.Number) and not issubclass(t, torch.Tensor) and not any(
        isinstance(k.__dict__.get("__eq__"), types.FunctionType) for k in t.__mro__)


def wrap(tracer, value, source):
    t = type(value)
    if t is types.BuiltinFunctionType and source is None:  # a C function of a trusted module (torch.relu):
        return ObjectVar(value)  # what _wrap makes of it, without its walk through every other kind
    add = tracer.guards.add if source is not None else (lambda g: None)
    if source is not None and (t in IDENTITY_BEARING or not issubclass(t, SCALARS + IDENTITY + EQUAL_CONSTS +
                                                                       SINGLETONS) and not _number_by_value(t)):
        seen = tracer.by_identity.get(id(value))
        if seen is not None:  # the same object reached through another source: the same Var
            add(AliasMatch(source, seen.source))
            return seen
        var = _wrap(tracer, value, source, t, add)
        tracer.by_identity[id(value)] = var
        return var
    return _wrap(tracer, value, source, t, add)


DICTS = (dict, collections.OrderedDict, collections.defaultdict)


def _argument_int(source) -> bool:
    """Whether an int is an argument's, which automatic dynamic may make a symbol: the argument
    itself, an item of a tuple, list or dict passed in, a cell of a function passed in (a closure
    made per call, `h(x, make(i))`) -- not an attribute (of a module: its configuration, as
    Dynamo keeps those static)."""
    while isinstance(source, (ItemSource, CellContentsSource)) or \
            isinstance(source, AttrSource) and source.attr == "__closure__":
        source = source.base
    return isinstance(source, LocalSource)


def _by_code(fn: types.FunctionType, source) -> bool:
    """Whether a function is guarded by its code, globals and empty `__dict__` instead of its
    identity: one reached from the call's arguments (`h(x, lambda y: y * k)`, a closure made
    per call) -- as Dynamo guards them -- with nothing of its own set on it. What the trace
    reads of it (defaults, cells, names) is guarded through its source as it is read; `is`
    between values that came in is guarded on the answer (`ops.core.is_same`)."""
    return source is not None and isinstance(source.root(), LocalSource) and not fn.__dict__ \
        and disabled(fn) is None and not allowed(fn)  # (registries by identity: those stay by identity)


def _pybind_enum_member(value) -> bool:
    """A member of a C++ enum torch exposes (`SDPBackend.MATH`): one object per member."""
    members = getattr(type(value), "__members__", None)
    if not isinstance(members, dict) or isinstance(value, type):
        return False
    return any(value is m for m in members.values())


def _wrap_dict(tracer, value, source, t, add) -> DictVar:
    """A dict, OrderedDict or defaultdict: its keys guarded in order (literal keys compared as
    one tuple; others -- tensors, modules, objects -- each wrapped from `list(d)[i]`), its
    values wrapped one by one."""
    add(TypeMatch(source, t))
    factory = None
    if t is collections.defaultdict:
        factory = tracer.wrap(value.default_factory, AttrSource(source, "default_factory") if source else None)
    keys = tuple(value)
    if all(is_literal(k) for k in keys):
        add(KeysMatch(source, keys))
        items = {k: tracer.wrap(v, ItemSource(source, k) if source else None) for k, v in value.items()}
        return DictVar(items, source, mutable=False, py_type=t, factory=factory)
    if source is None:  # (a trusted module's global, taken as a constant: its keys constants, classes, functions)
        if not all(is_literal(k) or isinstance(k, (type, types.FunctionType, types.BuiltinFunctionType) + SINGLETONS)
                   for k in keys):  # (torch.testing's precisions by dtype, pytree's nodes by class)
            raise Unsupported("a dict with keys other than constants, which the tracer cannot locate (no source)")
        items = {key_of(tracer.wrap(k, None)): tracer.wrap(v, None) for k, v in value.items()}
        return DictVar(items, None, mutable=False, py_type=t, factory=factory)
    add(LenMatch(source, len(keys)))
    listed = DictKeysSource(source)
    items = {}
    for i, k in enumerate(keys):
        key_source = ItemSource(listed, i)
        key = key_of(tracer.wrap(k, key_source))
        items[key] = tracer.wrap(value[k], ItemSource(source, k) if is_literal(k) else DictItemSource(source, key_source))
    return DictVar(items, source, mutable=False, py_type=t, factory=factory)


def _wrap_array(tracer, value, source):
    """A NumPy array that came in: the graph reads it as `torch.from_numpy(value)` (its memory:
    a write is the caller's), guarded by type, dtype, sizes (symbols as a tensor's are), strides."""
    if source is None:
        raise Unsupported("an ndarray the tracer cannot locate as an input (no source)")
    tensor = array_input(value)  # (eager's dtype and layout, or a break saying why not)
    dims = tracer.dynamic.dims(source, tensor)
    shape = tuple(None if i in dims else n for i, n in enumerate(value.shape))
    tracer.guards.add(ArrayMatch(source, NDARRAY, value.dtype, shape, None if dims else value.strides))
    var = tracer.graph.placeholder(ArrayTensorSource(source), tensor)
    if dims and var.sym is None:
        tracer.graph.symbolic_sizes(var, tuple(tracer.shape_env.size(n, SizeSource(source, i)) if i in dims else n
                                               for i, n in enumerate(value.shape)), tracer.shape_env)
    return wrap_array(var, source)


def _wrap(tracer, value, source, t, add):
    """(`t`: type(value). The kinds below are asked of it, not of the object: isinstance would
    ask the object its `__class__`, running the Python `__getattribute__` of a class that has one
    -- a transformers config's -- once per kind.)"""
    if issubclass(t, torch.Tensor):
        if source is None:
            raise Unsupported("a tensor the tracer cannot locate as an input (no source)")
        if isinstance(value, torch.nn.parameter.UninitializedTensorMixin):
            add(TypeMatch(source, t))  # (its first call makes it a Parameter: this guard then misses)
            raise EagerOnce(f"an uninitialized parameter or buffer ({source.name()}): a lazy module's first call "
                            "makes its parameters, as eager; the next call compiles")
        if value.layout is not torch.strided:
            raise Unsupported(f"a {value.layout} tensor input (only strided tensors are traced)")
        dims = tracer.dynamic.dims(source, value)
        tracer.guards.add(TensorMatch.of(source, value, dims), example=value)
        var = tracer.graph.placeholder(source, value)
        if dims and var.sym is None:
            tracer.graph.symbolic_sizes(var, tuple(tracer.shape_env.size(n, SizeSource(source, i)) if i in dims else n
                                                   for i, n in enumerate(value.shape)), tracer.shape_env)
        return var
    if t is NDARRAY:
        return _wrap_array(tracer, value, source)
    if t is int and _argument_int(source) and tracer.dynamic.int_dynamic(source, value):
        add(TypeMatch(source, int))  # its value: shape guards on the symbol
        return tracer.graph.int_input(source, value, tracer.shape_env)
    if t in SCALARS:
        add(EqualsMatch(source, value))
        return ConstVar(value, source)
    if issubclass(t, SINGLETONS) or _pybind_enum_member(value):  # dtypes, memory formats, layouts, enum members
        add(IdMatch(source, value))
        return ConstVar(value, source)
    if _number_by_value(t):
        add(EqualsMatch(source, value))  # numpy scalars, int and float subclasses: exact type and value
        return ConstVar(value, source)
    if t is torch.device:
        add(EqualsMatch(source, value))
        return ConstVar(value, source)
    if t in (range, slice):  # equal ranges can differ (range(0, 3, 2) == range(0, 4, 2)): guard each part
        add(TypeMatch(source, t))
        if source is not None:
            for part in ("start", "stop", "step"):
                tracer.wrap(getattr(value, part), AttrSource(source, part))
        return ConstVar(value, source)
    if t is tuple and source is not None and value and all(type(v) in LITERAL_ITEMS for v in value) and \
            not _argument_int(ItemSource(source, 0)):  # (a module's stride, padding: one guard; not an argument's,
        add(LiteralTupleMatch(source, value))  # whose ints automatic dynamic may make symbols)
        return TupleVar([ConstVar(v, ItemSource(source, i)) for i, v in enumerate(value)], source, py_type=t)
    if t is tuple or t is list or t is torch.Size or (issubclass(t, tuple) and hasattr(t, "_fields")) \
            or t.__module__ == "torch.return_types":
        add(TypeMatch(source, t))
        add(LenMatch(source, len(value)))
        items = [tracer.wrap(v, ItemSource(source, i) if source else None) for i, v in enumerate(value)]
        if t is list:  # a real list: mutating it is a side effect, never done on a copy
            return ListVar(items, source, mutable=False)
        return TupleVar(items, source, py_type=t)
    if t in DICTS:
        return _wrap_dict(tracer, value, source, t, add)
    if t is collections.deque:
        add(TypeMatch(source, t))
        add(LenMatch(source, len(value)))
        if source is not None:
            tracer.wrap(value.maxlen, AttrSource(source, "maxlen"))
        items = [tracer.wrap(v, ItemSource(source, i) if source else None) for i, v in enumerate(value)]
        return ListVar(items, source, mutable=False, py_type=t, maxlen=value.maxlen)
    if t is torch.no_grad or t is torch.enable_grad:  # no state until entered
        add(TypeMatch(source, t))
        return GradModeVar(t is torch.enable_grad)
    if t in (torch.autocast, torch.inference_mode, torch.autograd.profiler.record_function) or is_wrapped_context(value):
        add(TypeMatch(source, t))
        return wrap_context(tracer, value, source)
    if t is types.MethodType and isinstance(value.__func__, types.FunctionType) and source is not None:
        add(TypeMatch(source, t))  # `obj.method` is a new object per access: guard what it binds
        self_var = tracer.wrap(value.__self__, AttrSource(source, "__self__"))
        return BoundVar(value.__func__, self_var, AttrSource(source, "__func__"))
    if t is functools.partial and source is not None:
        add(TypeMatch(source, t))
        return PartialVar(tracer.wrap(value.func, AttrSource(source, "func")),
                          tracer.wrap(value.args, AttrSource(source, "args")).items,
                          tracer.wrap(value.keywords, AttrSource(source, "keywords")).items, source)
    if t is types.MappingProxyType and source is None:  # a constant's read-only view (Signature.parameters)
        return DictVar({k: tracer.wrap(v, None) for k, v in value.items()}, None, mutable=False)
    if t is types.FunctionType and _by_code(value, source):
        add(TypeMatch(source, t))  # a function passed in, made anew per call (a lambda, a closure): its
        add(IdMatch(AttrSource(source, "__code__"), value.__code__))  # code and globals, not its identity
        add(IdMatch(AttrSource(source, "__globals__"), value.__globals__))
        add(LenMatch(AttrSource(source, "__dict__"), 0))  # (no attribute of its own: no marker, no __wrapped__)
        return CodeFunctionVar(value, source, lambda: add(IdMatch(source, value)))
    if issubclass(t, IDENTITY):
        add(IdMatch(source, value))
        return ObjectVar(value, source)
    if issubclass(t, torch.Generator):
        raise Unsupported("a torch.Generator (its state is not tracked yet)")
    add(TypeMatch(source, t))
    return ObjectVar(value, source)
