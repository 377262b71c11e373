"""Semantics of torch functions, tensor methods, builtins and operators on the tracer's Vars.

Each family lives in its own module, as tables plus the few functions that apply them:
`core` (Python protocols), `operators`, `tensors`, `builtins`, `objects`. This module
is the interface the opcode handlers use: `getattr_`, `call`, and the re-exports below.
"""
from __future__ import annotations

import logging
import operator
import types

import torch

from ..errors import Unsupported
from ..guards.source import AttrSource
from ..trace.values import (AttrDictVar, BoundVar, ConstVar, ContextExitVar, DictVar, ExceptionVar, FunctionVar, GradModeVar, InstanceVar,
                            ListVar, MethodVar, ObjectVar, PartialVar, SetVar, SuperVar, TensorVar, TupleVar, Var)
from .builtins import BUILTINS, PURE, call_builtin
from . import bases, context_vars, contexts, functions, instances, library, markers  # (functions, library: BUILTINS rules)
from .core import (const, contains, delitem, describe, fold, foldable, getitem, is_same, iterate, key_of, make_slice,
                   python_value, setitem, truthy, unpack)
from .objects import dict_method, getattr_object, list_method, setattr_object, tuple_field, tuple_method
from .operators import OPERATOR_FUNCTIONS, UNARY, binary, unary
from .tensors import call_method, call_torch, getattr_tensor, is_torch_callable

__all__ = ["getattr_", "setattr_", "call", "binary", "unary", "const", "contains", "delitem", "describe", "fold", "getitem",
           "is_same", "iterate", "key_of", "make_slice", "python_value", "setitem", "truthy", "unpack"]

_UNARY_FUNCTIONS = {fn: sym for sym, fn in UNARY.items()}


def getattr_(frame, obj: Var, name: str) -> Var:
    if name == "__class__" and isinstance(obj, (GradModeVar, SetVar, ExceptionVar)):
        from .builtins import python_type
        return ObjectVar(python_type(obj))
    if isinstance(obj, TensorVar):
        return getattr_tensor(frame, obj, name)
    if isinstance(obj, ObjectVar):
        return getattr_object(frame, obj, name)
    if isinstance(obj, InstanceVar):
        return instances.getattr_instance(frame, obj, name)
    if isinstance(obj, ExceptionVar):
        if name == "args":
            return TupleVar(obj.args)
        if name == "__class__":
            return ObjectVar(obj.cls)
        if name in ("__traceback__", "__cause__", "__context__", "__notes__") or not foldable(obj):
            raise Unsupported(f"attribute {name!r} of a traced {obj.cls.__name__}")
        return const(fold(getattr, obj.python_value(), name))
    if isinstance(obj, SuperVar):
        return instances.getattr_super(frame, obj, name)
    if isinstance(obj, FunctionVar):
        from .functions import made_function_attr
        return made_function_attr(frame, obj, name)
    if isinstance(obj, ConstVar):
        return const(fold(getattr, obj.value, name))  # immutable builtin values: pure
    if isinstance(obj, TupleVar):
        field = tuple_field(obj, name)
        if field is not None:
            return field
    if isinstance(obj, (TupleVar, ListVar, DictVar, SetVar, AttrDictVar)):
        return MethodVar(obj, name)
    raise Unsupported(f"attribute {name!r} of {describe(obj)}")


def setattr_(frame, obj: Var, name: str, value) -> None:
    if isinstance(obj, TensorVar):
        raise Unsupported(f"assignment to tensor attribute .{name}")
    if isinstance(obj, InstanceVar):
        return instances.setattr_instance(frame, obj, name, value)
    setattr_object(frame, obj, name, value)


try:
    from torch._library.custom_ops import CustomOpDef as _CUSTOM_OP
except ImportError:  # pragma: no cover
    _CUSTOM_OP = ()


def call(frame, fn: Var, args: list[Var], kwargs: dict[str, Var]) -> Var:
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
    if isinstance(fn, ContextExitVar):  # leaving a traced `with` block
        contexts.leave(frame, fn.ctx)
        return const(None)
    if isinstance(fn, ConstVar) and callable(fn.value):  # a bound method of an immutable value
        return _call_python(frame, fn.value, args, kwargs)
    if not isinstance(fn, ObjectVar):
        raise Unsupported(f"call to {describe(fn)}")
    value = fn.value
    known, folded = markers.query(value)
    if known:  # torch.compiler.is_compiling() and friends: what they return under a compiler
        return const(folded)
    kind = markers.state(value)
    if kind is not None:  # torch.get_autocast_dtype(), torch.distributed.is_initialized(), ...
        from .tensors import read_state
        return read_state(frame, value, kind, args, kwargs)
    if markers.python_helper(value):  # torch.nn.init._calculate_correct_fan: Python on sizes
        return tracer.inline(value, args, kwargs, fn.source, frame)
    why = markers.breaks(value) or markers.disabled(value)
    if why is not None:
        raise Unsupported(why)
    if _is_logging(value):
        raise Unsupported(f"call to {getattr(value, '__module__', '')}.{getattr(value, '__qualname__', '?')} "
                          "(printing and logging break the graph)", "move the logging call out of the compiled function")
    if markers.allowed(value):
        from .tensors import call_function
        return call_function(frame, value, tuple(args), kwargs)
    if _hashable(value):
        if value in instances.OBJECT_SLOTS:
            return instances.OBJECT_SLOTS[value](frame, args, kwargs)
        if value in BUILTINS:
            return BUILTINS[value](frame, args, kwargs)
        if value in OPERATOR_FUNCTIONS:
            return binary(frame, OPERATOR_FUNCTIONS[value], *args)
        if value in _UNARY_FUNCTIONS:
            return unary(frame, _UNARY_FUNCTIONS[value], *args)
        if value is operator.getitem:
            return getitem(frame, *args)
    if args and isinstance(args[0], ObjectVar) and bases.is_base_method(value) \
            and bases.builtin_of(type(args[0].value)) is not None:  # dict.get(self, key) in a dict subclass
        return bases.call(frame, value, args[0], args[1:], kwargs)
    if isinstance(value, library.GETTERS):
        return library.call_getter(frame, value, args, kwargs)
    if isinstance(value, _CUSTOM_OP):  # torch.library.custom_op: its operator is the graph node
        return call_torch(frame, value._opoverload, args, kwargs)
    if is_torch_callable(value):
        return call_torch(frame, value, args, kwargs)
    if isinstance(value, types.FunctionType):
        return tracer.inline(value, args, kwargs, fn.source, frame)
    if isinstance(value, types.MethodType) and isinstance(value.__func__, types.FunctionType):
        self_source = AttrSource(fn.source, "__self__") if fn.source else None
        func_source = AttrSource(fn.source, "__func__") if fn.source else None
        return tracer.inline(value.__func__, [tracer.wrap(value.__self__, self_source), *args], kwargs,
                             func_source, frame)
    if isinstance(value, type):
        return _construct(frame, fn, args, kwargs)
    if isinstance(value, torch.nn.Module):
        from .modules import call_module
        return call_module(frame, fn, args, kwargs)
    if instances.is_user_object(fn):
        return _call_object(frame, fn, args, kwargs)
    if not isinstance(value, (types.BuiltinFunctionType, types.BuiltinMethodType, types.MethodWrapperType)) \
            and callable(value) and type(value).__module__ not in ("builtins", "math", "_operator"):
        raise Unsupported(f"call to an object of type {type(value).__qualname__}")
    return _call_python(frame, value, args, kwargs)


def _call_object(frame, obj: Var, args, kwargs) -> Var:
    """`obj(...)` on an object of a user class: its class's `__call__`."""
    method = instances.dunder(frame, obj, "__call__")
    if method is None:
        raise Unsupported(f"call to {describe(obj)}, which is not callable (the call raises eagerly)")
    return instances.call_bound(frame, method, args, kwargs)


LOGGING_MODULES = ("logging", "warnings")


def _is_logging(fn) -> bool:
    """logging.info, a Logger's methods, warnings.warn: run where Python runs them."""
    owner = getattr(fn, "__self__", None)
    if isinstance(fn, types.MethodType) and isinstance(owner, (logging.Logger, logging.LoggerAdapter)):
        return True
    module = getattr(fn, "__module__", None)
    return module in LOGGING_MODULES and callable(fn) and not isinstance(fn, type)


def _hashable(v) -> bool:
    try:
        hash(v)
        return True
    except TypeError:
        return False


def _call_method(frame, m: MethodVar, args, kwargs) -> Var:
    self = m.self_var
    if isinstance(self, TensorVar):
        return call_method(frame, m.name, [self, *args], kwargs)
    if isinstance(self, ListVar):
        return list_method(frame, self, m.name, args, kwargs)
    if isinstance(self, DictVar):
        return dict_method(frame, self, m.name, args, kwargs)
    if isinstance(self, TupleVar):
        return tuple_method(frame, self, m.name, args, kwargs)
    if isinstance(self, SetVar):
        from .sets import method
        return method(frame, self, m.name, args, kwargs)
    if isinstance(self, AttrDictVar):
        from . import attrdict
        return attrdict.method(frame, self, m.name, args, kwargs)
    if isinstance(self, ObjectVar):
        if context_vars.is_context_var(self.value):
            return context_vars.method(frame, self, m.name, args, kwargs)
        import inspect
        fn = inspect.getattr_static(self.value, m.name)
        if isinstance(self.value, (logging.Logger, logging.LoggerAdapter)):
            raise Unsupported(f"call to {type(self.value).__name__}.{m.name} (printing and logging break the graph)",
                              "move the logging call out of the compiled function")
        return frame.tracer.inline(fn, [self, *args], kwargs, instances._on_class(self, m.name), frame)
    raise Unsupported(f"method {m.name} of {describe(self)}")


def _call_python(frame, fn, args, kwargs) -> Var:
    """A builtin or a bound method of an immutable value: folded when pure."""
    owner = getattr(fn, "__self__", None)
    if type(owner) in (str, bytes) and getattr(fn, "__name__", None) == "join" and len(args) == 1 and not kwargs:
        args = [ListVar(unpack(frame, args[0]))]  # "".join(generator): its items
    if owner is not None and type(owner) in (str, bytes, int, float, complex, bool, tuple, range, frozenset) \
            and all(foldable(a) for a in args) and all(foldable(v) for v in kwargs.values()):
        return const(fold(fn, *(a.python_value() for a in args), **{k: v.python_value() for k, v in kwargs.items()}))
    return call_builtin(frame, fn, args, kwargs)


def _construct(frame, cls_var: ObjectVar, args, kwargs) -> Var:
    cls = cls_var.value
    if cls is super:
        return instances.make_super(frame, args)
    if cls in contexts.CONSTRUCTORS:
        return contexts.CONSTRUCTORS[cls](frame, args, kwargs)
    if cls in BUILTINS:
        return BUILTINS[cls](frame, args, kwargs)
    if cls in PURE or cls in (torch.Size, torch.device) or cls.__module__ == "math":
        if all(foldable(a) for a in args) and all(foldable(v) for v in kwargs.values()):
            return const(fold(cls, *(a.python_value() for a in args), **{k: v.python_value() for k, v in kwargs.items()}))
    if issubclass(cls, BaseException):
        if kwargs or isinstance(instances.class_attr(cls, "__init__"), types.FunctionType) \
                or isinstance(instances.class_attr(cls, "__new__"), types.FunctionType):
            raise Unsupported(f"constructing {cls.__name__} (its __init__ is Python code)")
        return ExceptionVar(cls, args)
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
    return instances.construct(frame, cls_var, args, kwargs)
