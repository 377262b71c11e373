"""Semantics of torch functions, tensor methods, builtins and operators on the tracer's Vars.

Each family lives in its own module, as tables plus the few functions that apply them, in the
order `rewrite/layers.py` gives: `core` (Python's protocols, constants, keys) at the bottom,
kind-specific rules above it (`sets`, `fills`, `tensors`, `instances`, `objects`, `operators`,
`builtins`, ...), each importing only those below. This module, the top, is the interface the
opcode handlers use -- `getattr_`, `call`, and the re-exports below -- and fills `core.CALLS`,
through which the rules below call back into it (a key function, a defaultdict's factory).
"""
from __future__ import annotations

import collections
import functools
import inspect
import operator
import os
import re
import sys
import types
import weakref

import torch

from ..errors import Unsupported, python_error
from ..guards.source import AttrSource, TypeSource, WeakrefSource
from ..values.side_effects import DELETED
from ..values.vars import (ArrayVar, AttrDictVar, BoundVar, ConstVar, ContextExitVar, DictVar, ExceptionVar,
                           FunctionVar, GradModeVar, InstanceVar, IteratorVar, ListVar, MethodVar, ModeDecoratedVar,
                           ObjectVar, PartialVar, RecordedContextVar, ScalarVar, SetVar, SuperVar, SymIntVar, TensorVar,
                           TupleVar, Var, end_watch, note_mutation, start_watch)
from .builtins import PURE, call_builtin
# (containers, functions, library: their BUILTINS rules register when imported)
from . import (attrdict, bases, containers, context_vars, contexts, exceptions, fills, functions, higher_order,
               instances, library, log_calls, markers, numpy_calls, signatures)
from .core import (BUILTINS, CALLS, const, contains, delitem, describe, fold, foldable, getitem, is_same, iterate,
                   key_of, make_slice, python_type, python_value, setitem, truthy, unpack, unpack_targets)
from .functions import made_function_attr, method_attr, set_made_function_attr
from .instances import _immutable
from .modules import call_module
from .objects import dict_method, getattr_object, list_method, setattr_object, tuple_field, tuple_method
from .operators import OPERATOR_FUNCTIONS, UNARY, binary, unary
from .sets import make, method
from .tensors import call_function, call_method, call_torch, getattr_tensor, is_torch_callable, read_state, trace_rule

__all__ = ["getattr_", "setattr_", "call", "binary", "unary", "const", "contains", "delitem", "describe", "fold", "getitem",
           "is_same", "iterate", "key_of", "make_slice", "python_value", "setitem", "truthy", "unpack", "unpack_targets"]

_UNARY_FUNCTIONS = {fn: sym for sym, fn in UNARY.items()}


def getattr_(frame, obj: Var, name: str) -> Var:
    if type(obj) is ObjectVar:  # a module's attribute read before (`torch.relu`): what it read
        known = frame.tracer.module_attr(obj.value, name)
        if known is not None:
            return known
    if name == "__class__" and not isinstance(obj, (TensorVar, ObjectVar, InstanceVar, SuperVar)):
        return ObjectVar(python_type(obj))
    if name == "default_factory" and isinstance(obj, DictVar) and obj.factory is not None:
        return obj.factory
    if name == "maxlen" and isinstance(obj, ListVar) and obj.py_type is not list:
        return const(obj.maxlen)
    if isinstance(obj, RecordedContextVar) and contexts.field(obj, name) is not None:
        return contexts.field(obj, name)
    if isinstance(obj, TensorVar):
        return getattr_tensor(frame, obj, name)
    if isinstance(obj, ArrayVar):
        return numpy_calls.array_attr(frame, obj, name)
    if isinstance(obj, ObjectVar):
        if log_calls.emitter(obj, name):
            return MethodVar(obj, name)  # (called below: `log_calls.logger_method`)
        method = containers.class_method(obj, name)  # dict.fromkeys, itertools.chain.from_iterable
        if method is not None:
            return method
        return getattr_object(frame, obj, name)
    if isinstance(obj, InstanceVar):
        return instances.getattr_instance(frame, obj, name)
    if isinstance(obj, ExceptionVar):
        return exceptions.getattr_exception(frame, obj, name)
    if isinstance(obj, SuperVar):
        return instances.getattr_super(frame, obj, name)
    if isinstance(obj, FunctionVar):
        return made_function_attr(frame, obj, name)
    if isinstance(obj, ConstVar):
        return const(fold(getattr, obj.value, name))  # immutable builtin values: pure
    if isinstance(obj, TupleVar):
        field = tuple_field(obj, name)
        if field is not None:
            return field
        method = _named_tuple_attr(frame, obj, name)
        if method is not None:
            return method
    if isinstance(obj, (TupleVar, ListVar, DictVar, SetVar)) and not hasattr(python_type(obj), name):
        _no_attribute(python_type(obj), name)
    if isinstance(obj, (TupleVar, ListVar, DictVar, SetVar, AttrDictVar)):
        return MethodVar(obj, name)
    if isinstance(obj, IteratorVar) and obj.generator is not None and name in GENERATOR_METHODS:
        return MethodVar(obj, name)
    if isinstance(obj, (MethodVar, BoundVar)):
        return method_attr(frame, obj, name)
    raise Unsupported(f"attribute {name!r} of {describe(obj)}")


def _no_attribute(cls: type, name: str):
    """The AttributeError of `obj.name` for a builtin container's class that has no such name
    (an empty one's own, where one can be made: its message names the class as CPython does)."""
    try:
        fold(getattr, cls(), name)
    except TypeError:  # (a namedtuple: made only from its fields)
        pass
    raise python_error(AttributeError, f"{cls.__name__!r} object has no attribute {name!r}")


GENERATOR_METHODS = ("send", "throw", "close")


def _generator_method(frame, gen, name: str, args, kwargs) -> Var:
    """`g.send(v)`, `g.throw(...)`, `g.close()` on a generator the trace runs."""
    if not kwargs and name == "send" and len(args) == 1:
        return gen.send(args[0])
    if not kwargs and name == "close" and not args:
        return gen.close()
    if not kwargs and name == "throw" and 1 <= len(args) <= 3:
        return gen.throw(_thrown(frame, *args))
    raise Unsupported(f"generator.{name}() with these arguments")


def _thrown(frame, typ: Var, value: Var | None = None, tb: Var | None = None) -> ExceptionVar:
    """The exception `g.throw(typ[, value[, tb]])` throws, normalized as CPython's `_gen_throw`."""
    none = lambda v: v is None or isinstance(v, ConstVar) and v.value is None  # noqa: E731
    if tb is not None and not none(tb) and not isinstance(tb, exceptions.TracebackVar):
        raise python_error(TypeError, "throw() third argument must be a traceback object")
    if isinstance(typ, ObjectVar) and isinstance(typ.value, type) and issubclass(typ.value, BaseException):
        if isinstance(value, ExceptionVar) and issubclass(value.cls, typ.value):
            exc = value
        else:
            args = [] if none(value) else list(value.items) if isinstance(value, TupleVar) else [value]
            exc = call(frame, typ, args, {})
    elif isinstance(typ, ExceptionVar):
        if not none(value):
            raise python_error(TypeError, "instance exception may not have a separate value")
        exc = typ
    else:
        kind = python_type(typ)
        if isinstance(typ, ObjectVar) and isinstance(typ.value, type) or not issubclass(kind, BaseException):
            raise python_error(TypeError, "exceptions must be classes or instances deriving from BaseException, "
                                          f"not {kind.__name__}")
        raise Unsupported(f"generator.throw() of {describe(typ)}")
    if not isinstance(exc, ExceptionVar):
        raise Unsupported(f"generator.throw() of {describe(exc)}")
    if tb is not None and not none(tb):
        exceptions.setattr_exception(frame, exc, "__traceback__", tb)
    return exc


def _named_tuple_attr(frame, t: TupleVar, name: str):
    """A method or property a namedtuple class (`typing.NamedTuple`), or a plain tuple subclass of
    the user's, defines itself."""
    cls = t.py_type
    if cls is tuple or not (hasattr(cls, "_fields") or _plain_tuple_subclass(cls)) or not instances._heap_type(cls):
        return None
    static = instances.class_attr(cls, name)
    if static is instances._MISSING or any(name in base.__dict__ for base in (tuple, object)):
        return None
    source = AttrSource(TypeSource(t.source), name) if t.source is not None else None
    if isinstance(static, property):
        return instances._property_get(frame, t, static, name, source)
    return instances.bind(frame, t, static, name, source)


def setattr_(frame, obj: Var, name: str, value) -> None:
    if isinstance(obj, TensorVar):
        raise Unsupported(f"assignment to tensor attribute .{name}")
    if isinstance(obj, ArrayVar):
        raise Unsupported(f"assignment to ndarray attribute .{name}")
    if isinstance(obj, InstanceVar):
        return instances.setattr_instance(frame, obj, name, value)
    if isinstance(obj, ExceptionVar):
        return exceptions.setattr_exception(frame, obj, name, value)
    if isinstance(obj, FunctionVar):
        return set_made_function_attr(frame, obj, name, value)
    if isinstance(obj, DictVar) and obj.py_type is collections.defaultdict and name == "default_factory" \
            and obj.source is None:  # (any object, as its member takes; del leaves None)
        note_mutation(obj)
        obj.factory = const(None) if value is DELETED else value
        return None
    setattr_object(frame, obj, name, value)


try:
    from torch._library.custom_ops import CustomOpDef as _CUSTOM_OP
except ImportError:  # pragma: no cover
    _CUSTOM_OP = ()


def call(frame, fn: Var, args: list[Var], kwargs: dict[str, Var]) -> Var:
    if isinstance(fn, ObjectVar):  # (most calls -- a module, a C function of torch's -- first: no kind below is one)
        fast = _fast_route(fn.value, args, kwargs)
        if fast is not None:
            return fast(frame, fn, args, kwargs) if fast is call_module else fast(frame, fn.value, args, kwargs)
        if fn.value is super and not kwargs:  # (no rule below takes it: a class's `__getattribute__` -- a
            return instances.make_super(frame, args)  # transformers config's -- calls it for every read)
    tracer = frame.tracer
    if isinstance(fn, FunctionVar):
        return tracer.inline(fn, args, kwargs, None, frame)
    if isinstance(fn, MethodVar):
        return _call_method(frame, fn, args, kwargs)
    if isinstance(fn, BoundVar):
        return instances.call_bound(frame, fn, args, kwargs)
    if isinstance(fn, PartialVar):
        return library.call_partial(frame, fn, args, kwargs)
    if isinstance(fn, InstanceVar):
        return _call_object(frame, fn, args, kwargs)
    if isinstance(fn, (GradModeVar, RecordedContextVar)):  # `torch.no_grad()(fn)`: a decorator
        return contexts.decorate(frame, fn, args, kwargs)
    if isinstance(fn, ModeDecoratedVar):
        return contexts.call_decorated(frame, fn, args, kwargs)
    if isinstance(fn, ContextExitVar):  # leaving a traced `with` block
        contexts.leave(frame, fn.ctx)
        return const(None)
    if isinstance(fn, ConstVar) and callable(fn.value):  # a bound method of an immutable value
        return _call_python(frame, fn.value, args, kwargs)
    if not isinstance(fn, ObjectVar):
        raise Unsupported(f"call to {describe(fn)}")
    value = fn.value
    caller = frame.globals.get("__name__") if isinstance(frame.globals, dict) else None
    known, folded = markers.query(value, caller)
    if known:  # torch.compiler.is_compiling() and friends: what they return under a compiler
        return const(folded)
    kind = markers.state(value)
    if kind is not None:  # torch.get_autocast_dtype(), torch.distributed.is_initialized(), ...
        return read_state(frame, value, kind, args, kwargs)
    if contexts.is_error_on_graph_break(value):  # a compile-time switch: the trace keeps it
        return contexts.error_on_graph_break(frame, value, args, kwargs)
    higher = higher_order.rule_of(value)
    if higher is not None:  # checkpoint, torch.cond: the function they take traced as a graph of its own
        return higher(frame, args, kwargs)
    if contexts.is_torch_context(value) and (not isinstance(value, type) or value not in contexts.CONSTRUCTORS):
        return contexts.torch_context(frame, value, args, kwargs)  # sdpa_kernel(...), disable_saved_tensors_hooks(...)
    if markers.hint(value, caller):  # torch.optim's graph_break() for AOTAutograd: nothing to do
        return const(None)
    why = markers.breaks(value) or markers.disabled(value)
    if why is not None:
        raise Unsupported(why)
    if log_calls.module_emitter(value):
        return log_calls.log_call(frame, value, args, kwargs)  # logging.warning(...): in the graph, in order
    if log_calls.is_logging(value):
        raise Unsupported(f"call to {getattr(value, '__module__', '')}.{getattr(value, '__qualname__', '?')} "
                          "(printing and logging break the graph)", "move the logging call out of the compiled function")
    if numpy_calls.is_numpy(value):
        return numpy_calls.call_numpy(frame, fn, args, kwargs)
    if any(isinstance(a, ArrayVar) for a in [*args, *kwargs.values()]):
        if is_torch_callable(value):  # torch.from_numpy(a), torch.add(t, a): eager's, with the array's tensor
            return numpy_calls.torch_call(frame, value, args, kwargs)
        if args and isinstance(args[0], ArrayVar) and _hashable(value):  # len(a), abs(a), float(a)
            made = numpy_calls.builtin(frame, value, args, kwargs)
            if made is not None:
                return made
    if markers.allowed(value):
        return call_function(frame, value, tuple(args), kwargs)
    made = containers.call_class_method(frame, value, args, kwargs)  # dict.fromkeys(...)
    if made is not None:
        return made
    if _hashable(value):
        if value in instances.OBJECT_SLOTS:
            return instances.OBJECT_SLOTS[value](frame, args, kwargs)
        if value is repr and len(args) == 1 and not kwargs and isinstance(args[0], ExceptionVar):
            return exceptions.text(frame, args[0], repr)
        if value in BUILTINS:
            signatures.check(value, args, kwargs)
            return BUILTINS[value](frame, args, kwargs)
        if value in OPERATOR_FUNCTIONS:
            return binary(frame, OPERATOR_FUNCTIONS[value], *args)
        if value in _UNARY_FUNCTIONS:
            return unary(frame, _UNARY_FUNCTIONS[value], *args)
        if value is operator.getitem:
            return getitem(frame, *args)
    unbound = _unbound_method(value, args)
    if unbound is not None:  # `set.difference(a, b)`, `list.append(xs, v)`: the method of that Var
        return _call_method(frame, MethodVar(args[0], unbound), args[1:], kwargs)
    if args and isinstance(args[0], ObjectVar) and bases.is_base_method(value) \
            and bases.builtin_of(type(args[0].value)) is not None:  # dict.get(self, key) in a dict subclass
        return bases.call(frame, value, args[0], args[1:], kwargs)
    if isinstance(value, library.GETTERS):
        return library.call_getter(frame, value, args, kwargs)
    if isinstance(value, _CUSTOM_OP):  # torch.library.custom_op: its operator is the graph node
        return call_torch(frame, value._opoverload, args, kwargs)
    if library.is_singledispatch(value):
        made = library.singledispatch_call(frame, fn, args, kwargs)
        if made is not None:
            return made
    kind = trace_rule(value, _holds_objects([*args, *kwargs.values()]))  # (graph op or Python: tensors.trace_rule)
    if kind == "python":
        return tracer.inline(value, args, kwargs, fn.source, frame)
    if kind == "op":
        return call_torch(frame, value, args, kwargs)
    if isinstance(value, types.FunctionType):
        return tracer.inline(value, args, kwargs, fn.source, frame)
    if isinstance(value, weakref.ReferenceType) and not args and not kwargs and fn.source is not None:
        return tracer.wrap(value(), WeakrefSource(fn.source))  # `ref()`: what it refers to now (guarded: its identity)
    if isinstance(value, _LRU_CACHE) and isinstance(getattr(value, "__wrapped__", None), types.FunctionType):
        return _cached_call(frame, fn, args, kwargs)
    if isinstance(value, types.MethodType) and isinstance(value.__func__, types.FunctionType):
        self_source = AttrSource(fn.source, "__self__") if fn.source else None
        func_source = AttrSource(fn.source, "__func__") if fn.source else None
        return tracer.inline(value.__func__, [tracer.wrap(value.__self__, self_source), *args], kwargs,
                             func_source, frame)
    if isinstance(value, type):
        return _construct(frame, fn, args, kwargs)
    if isinstance(value, torch.nn.Module):
        return call_module(frame, fn, args, kwargs)
    if instances.is_user_object(fn):
        return _call_object(frame, fn, args, kwargs)
    if not isinstance(value, (types.BuiltinFunctionType, types.BuiltinMethodType, types.MethodWrapperType)) \
            and callable(value) and type(value).__module__ not in ("builtins", "math", "_operator"):
        raise Unsupported(f"call to an object of type {type(value).__qualname__}")
    return _call_python(frame, value, args, kwargs)


_LRU_CACHE = type(functools.lru_cache(None)(lambda: None))


def _cached_call(frame, fn: ObjectVar, args, kwargs) -> Var:
    """A call through a functools.lru_cache / cache wrapper. With constant arguments: the cache
    is called now, as eager's first call would (filling it), and an immutable result is a
    constant, an object other than a container the cached object itself. Otherwise the wrapped
    function is traced -- if it changes nothing; the lists and dicts it returns are read-only to
    the trace (eager hands out the cached one each call); else the call is a graph break."""
    value = fn.value
    if all(foldable(a) for a in args) and all(foldable(v) for v in kwargs.values()):
        result = fold(value, *(a.python_value() for a in args), **{k: v.python_value() for k, v in kwargs.items()})
        if _constant(result):
            return const(result)
        if not isinstance(result, (list, dict, set, torch.Tensor)):  # the very object the cache holds (einops'
            return ObjectVar(result)  # recipe): what eager's every call gets; a container could change
    source = AttrSource(fn.source, "__wrapped__") if fn.source else None
    effects, watch = frame.tracer.side_effects, start_watch()
    before = (len(effects.stores), len(effects.containers))
    try:
        result = frame.tracer.inline(value.__wrapped__, args, kwargs, source, frame)
    finally:
        changed = end_watch(watch)
    if changed or (len(effects.stores), len(effects.containers)) != before or not _freeze(result):
        raise Unsupported(f"call to lru_cache-wrapped {value.__wrapped__.__qualname__} that changes state or "
                          "returns an object of its own (compiled calls would not share the cached one)")
    return result


def _freeze(v: Var) -> bool:
    """Make the lists and dicts of a cached call's result read-only for the trace (eager hands
    out the one cached object: a change to it is a graph break, where eager changes that one);
    False when it holds an object that cannot be (a set, an instance)."""
    if isinstance(v, (ListVar, DictVar)) and v.source is None:
        v.mutable = False
        return all(_freeze(i) for i in (v.items if isinstance(v, ListVar) else v.items.values()))
    if isinstance(v, TupleVar):
        return all(_freeze(i) for i in v.items)
    return _immutable(v)


def _constant(value) -> bool:
    if type(value) is tuple:
        return all(_constant(v) for v in value)
    return type(value) in (int, float, bool, str, bytes, type(None), complex, torch.dtype, torch.device)
_GRAPH_CONSTANTS = (type, types.FunctionType, types.BuiltinFunctionType, types.ModuleType)


def _holds_objects(values) -> bool:
    """Whether `values` (or what their tuples, lists and dicts hold) hold an object a graph op
    cannot be given: an instance, a generator, a function made while tracing."""
    for v in values:
        if isinstance(v, (TupleVar, ListVar)):
            if _holds_objects(v.items):
                return True
        elif isinstance(v, DictVar):
            if _holds_objects(v.items.values()):
                return True
        elif isinstance(v, ObjectVar):
            if not issubclass(type(v.value), _GRAPH_CONSTANTS):
                return True
        elif not isinstance(v, (ConstVar, TensorVar, ScalarVar, SymIntVar)):
            return True
    return False


_VAR_KINDS = {set: SetVar, frozenset: SetVar, list: ListVar, dict: DictVar, tuple: TupleVar}


def _fast_route(value, args, kwargs):
    """Where `call` sends a call of `value` -- `call_module` or `call_torch` -- for the two kinds
    that make most calls, found without the walk through the rules before them (for functions,
    classes, markers, logging, NumPy: none takes a module or a C function of torch's). None: the
    walk decides. The rules that still apply are asked: a module or function marked disabled or
    allowed in the graph (both can change between traces), a NumPy array among the arguments;
    the rest of a C function's route depends on it alone (cached)."""
    if isinstance(value, torch.nn.Module):
        if markers.disabled(value) is not None or markers.allowed(value) or log_calls.is_logging(value) or \
                _has_array(args, kwargs):
            return None
        return call_module
    if type(value) is types.BuiltinFunctionType:
        op = _C_OPS.get(value)
        if op is None:  # (a classmethod -- `__self__` a class -- goes the long way: call_class_method;
            # the tables below hold rules of their own for some of torch's: rule(...))
            op = _C_OPS[value] = is_torch_callable(value) and not markers.query(value)[0] and \
                markers.state(value) is None and not contexts.is_torch_context(value) and \
                not log_calls.is_logging(value) and not numpy_calls.is_numpy(value) and \
                not isinstance(getattr(value, "__self__", None), type) and trace_rule(value, False) == "op" and \
                value not in BUILTINS and value not in instances.OBJECT_SLOTS and value not in OPERATOR_FUNCTIONS \
                and value not in _UNARY_FUNCTIONS
        if op and not markers.allowed(value) and not _has_array(args, kwargs):
            return call_torch
    return None


_C_OPS: dict = {}  # C function -> whether `call` records it with call_torch (see _fast_route)


def _has_array(args, kwargs) -> bool:
    for a in (*args, *kwargs.values()) if kwargs else args:  # (a loop: asked of most calls)
        if type(a) is ArrayVar:
            return True
    return False


def _unbound_method(fn, args):
    """The name of `fn`, a method of a builtin container called on a Var of that kind, or None."""
    owner = getattr(fn, "__objclass__", None)
    if not args or not isinstance(fn, (types.MethodDescriptorType, types.WrapperDescriptorType)) \
            or owner not in _VAR_KINDS or not isinstance(args[0], _VAR_KINDS[owner]):
        return None
    return fn.__name__ if issubclass(python_type(args[0]), owner) else None


def _call_object(frame, obj: Var, args, kwargs) -> Var:
    """`obj(...)` on an object of a user class: its class's `__call__`."""
    method = instances.dunder(frame, obj, "__call__")
    if method is None:
        raise Unsupported(f"call to {describe(obj)}, which is not callable (the call raises eagerly)")
    return instances.call_bound(frame, method, args, kwargs)


def _hashable(v) -> bool:
    try:
        hash(v)
        return True
    except TypeError:
        return False


def _call_method(frame, m: MethodVar, args, kwargs) -> Var:
    self = m.self_var
    if isinstance(self, TensorVar) and (m.name == "numpy" or any(isinstance(a, ArrayVar) for a in
                                                                 [*args, *kwargs.values()])):
        return numpy_calls.tensor_method(frame, self, m.name, args, kwargs)
    if isinstance(self, TensorVar):
        return call_method(frame, m.name, [self, *args], kwargs)
    if isinstance(self, ArrayVar):
        return numpy_calls.array_method(frame, self, m.name, args, kwargs)
    if isinstance(self, (ListVar, DictVar, TupleVar, SetVar)):  # `d.get()`, `xs.append(1, 2)`: eager's TypeError
        signatures.check_method(python_type(self), m.name, args, kwargs)
    if fills.row(self, m.name) is not None:  # xs.extend(it), s.update(it), d.update(it): as CPython fills them
        if fills.row(self, m.name).sets_only and not (len(args) == 1 and fills.set_like(args[0])):
            return ObjectVar(NotImplemented)  # (`s.__ior__([1])`: only `|=` of two sets is in place)
        result = fills.fill(frame, self, m.name, args, kwargs)
        return self if m.name in INPLACE_DUNDERS else result  # (`s.__ior__(t)` returns s)
    if isinstance(self, (ListVar, DictVar, TupleVar)) and m.name in _CONTAINER_DUNDERS and not kwargs:
        impl = _CONTAINER_DUNDERS[m.name]
        if impl.__code__.co_argcount != 2 + len(args):  # (eager's TypeError: the real method, of an empty one)
            empty = tuple() if isinstance(self, TupleVar) else python_type(self)()
            fold(getattr(empty, m.name), *[None] * len(args))
        return impl(frame, self, *args)  # `d.__setitem__(k, v)`, `xs.__len__()`
    if isinstance(self, ListVar) and self.py_type is not list:
        return containers.deque_method(frame, self, m.name, args, kwargs)
    if isinstance(self, ListVar):
        return list_method(frame, self, m.name, args, kwargs)
    if isinstance(self, DictVar):
        return dict_method(frame, self, m.name, args, kwargs)
    if isinstance(self, TupleVar):
        return tuple_method(frame, self, m.name, args, kwargs)
    if isinstance(self, SetVar):
        return method(frame, self, m.name, args, kwargs)
    if isinstance(self, AttrDictVar):
        return attrdict.method(frame, self, m.name, args, kwargs)
    if isinstance(self, IteratorVar) and self.generator is not None:
        return _generator_method(frame, self.generator, m.name, args, kwargs)
    if isinstance(self, ExceptionVar):
        return exceptions.method(frame, self, m.name, args, kwargs)
    if isinstance(self, ObjectVar):
        if context_vars.is_context_var(self.value):
            return context_vars.method(frame, self, m.name, args, kwargs)
        fn = inspect.getattr_static(self.value, m.name)
        if isinstance(fn, (types.MethodDescriptorType, types.WrapperDescriptorType)):
            raise Unsupported(f"call to {type(self.value).__qualname__}.{m.name} (a method in C)")
        if log_calls.emitter(self, m.name):
            return log_calls.logger_method(frame, self, m.name, args, kwargs)
        if isinstance(self.value, log_calls.LOGGERS):
            raise Unsupported(f"call to {type(self.value).__name__}.{m.name} (printing and logging break the graph)",
                              "move the logging call out of the compiled function")
        return frame.tracer.inline(fn, [self, *args], kwargs, instances._on_class(self, m.name), frame)
    raise Unsupported(f"method {m.name} of {describe(self)}")


INPLACE_DUNDERS = {"__iadd__", "__ior__", "__iand__", "__isub__", "__ixor__"}
_CONTAINER_DUNDERS = {
    "__getitem__": getitem,
    "__setitem__": lambda frame, obj, key, value: (setitem(frame, obj, key, value), const(None))[1],
    "__delitem__": lambda frame, obj, key: (delitem(frame, obj, key), const(None))[1],
    "__contains__": lambda frame, obj, item: const(contains(frame, obj, item)),
    "__len__": lambda frame, obj: const(len(obj.items)),
    "__iter__": lambda frame, obj: iterate(frame, obj),
    "__add__": lambda frame, obj, other: _operator_method(frame, "+", obj, other),
    "__mul__": lambda frame, obj, n: _operator_method(frame, "*", obj, n),
    "__rmul__": lambda frame, obj, n: _operator_method(frame, "*", obj, n),
}


def _operator_method(frame, sym: str, obj: Var, other: Var) -> Var:
    """`xs.__add__(ys)`, `t.__mul__(n)`: what the operator gives, where the method takes the other
    operand (a list's `__add__` of a tuple returns NotImplemented, which `+` turns into TypeError)."""
    if sym == "+" and type(obj) is not type(other):
        raise Unsupported(f"{describe(obj)}.__add__ of {describe(other)} (NotImplemented)")
    return binary(frame, sym, obj, other)


def _call_python(frame, fn, args, kwargs) -> Var:
    """A builtin or a bound method of an immutable value: folded when pure."""
    owner = getattr(fn, "__self__", None)
    if type(owner) in (str, bytes) and getattr(fn, "__name__", None) == "join" and len(args) == 1 and not kwargs:
        args = [ListVar(unpack(frame, args[0]))]  # "".join(generator): its items
    if type(owner) is frozenset and not all(foldable(a) for a in args):  # frozenset({1}).union(gen): as a set
        s = make(frame, [const(v) for v in owner], frozen=True)
        s.real = set(owner)  # (its own table's order)
        return method(frame, s, fn.__name__, args, kwargs)
    immutable = (str, bytes, int, float, complex, bool, tuple, range, frozenset, re.Pattern, re.Match)
    if (owner is not None and (type(owner) in immutable or any(owner is t for t in immutable))  # (int.from_bytes)
            or getattr(fn, "__objclass__", None) in immutable) \
            and all(foldable(a) for a in args) and all(foldable(v) for v in kwargs.values()):  # (`str.isalnum(c)` too)
        return const(fold(fn, *(a.python_value() for a in args), **{k: v.python_value() for k, v in kwargs.items()}))
    return call_builtin(frame, fn, args, kwargs)


def _construct(frame, cls_var: ObjectVar, args, kwargs) -> Var:
    cls = cls_var.value
    if cls is super:
        return instances.make_super(frame, args)
    if cls in contexts.CONSTRUCTORS:
        return contexts.CONSTRUCTORS[cls](frame, args, kwargs)
    if cls is str and len(args) == 1 and not kwargs and isinstance(args[0], ExceptionVar):
        return exceptions.text(frame, args[0], str)
    if cls in BUILTINS:
        signatures.check(cls, args, kwargs)
        return BUILTINS[cls](frame, args, kwargs)
    if cls in PURE or cls in (torch.Size, torch.device) or cls.__module__ == "math":
        if all(foldable(a) for a in args) and all(foldable(v) for v in kwargs.values()):
            return const(fold(cls, *(a.python_value() for a in args), **{k: v.python_value() for k, v in kwargs.items()}))
    if issubclass(cls, BaseException):
        return exceptions.construct(frame, cls_var, args, kwargs)
    if issubclass(cls, tuple) and hasattr(cls, "_fields"):  # a namedtuple made while tracing
        fields = cls._fields
        values = dict(zip(fields, args))
        if any(k in values or k not in fields for k in kwargs):
            raise Unsupported(f"{cls.__name__}() arguments do not match its fields (the call raises eagerly)")
        values.update(kwargs)
        defaults = getattr(cls, "_field_defaults", {})
        missing = [f for f in fields if f not in values and f not in defaults]
        if missing or len(args) > len(fields):
            raise Unsupported(f"{cls.__name__}() arguments do not match its fields (the call raises eagerly)")
        return TupleVar([values[f] if f in values else const(defaults[f]) for f in fields], py_type=cls)
    if issubclass(cls, torch.nn.Module) and (f"{cls.__module__}.".startswith("torch.nn.") or _installed(cls)):
        return _made_module(cls, args, kwargs)
    if _plain_tuple_subclass(cls):  # `class Pair(tuple): ...` made from an iterable: a tuple of its class
        signatures.check(tuple, args, kwargs)
        return TupleVar(list(BUILTINS[tuple](frame, args, kwargs).items), py_type=cls)
    return instances.construct(frame, cls_var, args, kwargs)


def _plain_tuple_subclass(cls: type) -> bool:
    """A class of the user's deriving from tuple and adding only methods and class attributes:
    no __new__ or __init__ of its own, no __slots__ beyond empty ones, no other builtin base."""
    mro = cls.__mro__
    return issubclass(cls, tuple) and cls is not tuple and mro[-2:] == (tuple, object) and \
        all(instances._heap_type(c) and "__new__" not in vars(c) and "__init__" not in vars(c)
            and type(c) is type for c in mro[:-2])


def _installed(cls: type) -> bool:
    """A class of an installed package (transformers' `GELUActivation`, which `ACT2FN["gelu"]`
    makes inside a forward), not of the user's own code."""
    path = getattr(sys.modules.get(cls.__module__), "__file__", None) or ""
    return any(f"{os.sep}{where}{os.sep}" in path for where in ("site-packages", "dist-packages"))


def _made_module(cls, args, kwargs) -> Var:
    """`nn.Softmax(dim=-1)`, `ACT2FN["gelu"]` in the call: a module of torch's or of an installed
    package, made now, for real, from constants (such classes make nothing else); one without
    parameters or buffers is a constant of the trace, as a new one per call is to eager. One with
    weights would draw them anew each call: a graph break. (A module class of the user's own is
    not made while tracing: its `__init__` may do anything.)"""
    what = f"{cls.__name__}()"

    def real(v):  # (modules made in the call too: `nn.Sequential(nn.ReLU(), nn.Dropout())`)
        if isinstance(v, ObjectVar) and v.source is None and isinstance(v.value, torch.nn.Module):
            return v.value
        if isinstance(v, ListVar) and not foldable(v):
            return [real(i) for i in v.items]
        if isinstance(v, TupleVar) and not foldable(v):
            return tuple(real(i) for i in v.items)
        return python_value(v, what)
    args, kwargs = [real(a) for a in args], {k: real(v) for k, v in kwargs.items()}
    with torch.device("meta"), torch.random.fork_rng(devices=[]):  # a first look: draws nothing, allocates nothing
        probe = fold(cls, *args, **kwargs)
    if any(True for _ in probe.parameters()) or any(True for _ in probe.buffers()) or \
            any(isinstance(v, torch.Tensor) for m in probe.modules() for v in vars(m).values()):
        raise Unsupported(f"constructing {cls.__module__}.{cls.__qualname__} while tracing: it holds tensors "
                          "(eager makes new ones each call)", "make the module outside the compiled function")
    return ObjectVar(fold(cls, *args, **kwargs))


CALLS.fill(call=call, getattr=getattr_, setattr=setattr_, call_method=_call_method)
