"""Attributes of functions and code objects (`fn.__name__`, `fn.__code__.co_varnames`, ...) and
`inspect.signature(fn)`: constants to the trace, guarded where they can change.

A function's attributes are all writable (`f.__name__ = ...`, `f.__defaults__ = ...`; rewrite
itself reassigns `__code__`): each read is guarded on the value read, through its source
(`tracer.wrap`: a str or None by equality, a tuple by type, length and items, a code object
by identity). A code object is immutable: with its identity guarded, its attributes are
constants. What a function made in the call (a FunctionVar) says about itself is known from
MAKE_FUNCTION, and no attribute can be set on it while tracing (setattr on one is unsupported),
so its `__dict__` is empty: anything else it is asked for is eager's AttributeError.

`inspect.signature(fn)` is folded on the real function, guarded on all it reads: along the
`__wrapped__` chain, each function's `__wrapped__` and `__signature__` (present or not, and
what they hold), then the last one's `__code__`, `__defaults__`, `__kwdefaults__` and
`__annotations__`. The Signature is an immutable value; its `parameters` (a mappingproxy)
reads as a read-only dict of the Parameter objects (see `builder.py`).
"""
from __future__ import annotations

import inspect
import types

import torch

from ..bytecode import compat
from ..errors import Unsupported, python_error
from ..guards.guard import EqualsMatch, HasAttrMatch, IdMatch, KeysMatch, LenMatch, TypeMatch
from ..guards.source import AttrSource, ItemSource, is_literal
from ..values.side_effects import DELETED, location
from ..values.vars import (IMMUTABLE, BoundVar, ConstVar, DictVar, FunctionVar, MethodVar, ObjectVar, TupleVar, Var,
                           note_mutation)
from .core import const, describe, fold, python_type, python_value, rule
from .instances import class_source

# attributes of a function that are its state, read as the value they hold now (guarded on it)
FUNCTION_VALUES = {"__name__", "__qualname__", "__module__", "__doc__", "__defaults__", "__kwdefaults__",
                   "__annotations__"} | ({"__type_params__"} if compat.FUNCTION_TYPE_PARAMS else set())
# attributes of a code object: constants (code objects are immutable; its identity is guarded)
CODE_CONSTANTS = {"co_argcount", "co_posonlyargcount", "co_kwonlyargcount", "co_nlocals", "co_flags",
                  "co_stacksize", "co_firstlineno", "co_name", "co_qualname", "co_filename", "co_varnames",
                  "co_freevars", "co_cellvars", "co_names", "co_consts", "co_code", "co_linetable",
                  "co_exceptiontable"}


def function_attr(frame, var, name: str) -> Var | None:
    """`name` of a function or code object that came in (an ObjectVar), or None: not handled here
    (`__wrapped__` and other entries of a function's `__dict__`, `__globals__`, `__closure__`:
    the generic path reads them with their source, or raises eager's AttributeError)."""
    value, source = var.value, var.source
    if isinstance(value, types.CodeType):
        return _code_attr(frame, var, name)
    attr_source = AttrSource(source, name) if source is not None else None
    if name in FUNCTION_VALUES:
        attr = getattr(value, name)
        return frame.tracer.wrap(attr, attr_source) if source is not None else const(attr)
    if name == "__code__":
        if source is None:
            return ObjectVar(value.__code__)
        code = frame.tracer.wrap(value.__code__, attr_source)
        frame.tracer.guards.add(IdMatch(attr_source, value.__code__))  # (wrap guards only its type)
        return code
    return None


def _code_attr(frame, var: ObjectVar, name: str) -> Var | None:
    code = var.value
    if name not in CODE_CONSTANTS:
        return None
    if var.source is not None:  # (a code object passed in is wrapped with its type guarded, not its identity)
        frame.tracer.guards.add(IdMatch(var.source, code))
    value = getattr(code, name)
    if name == "co_consts" and not all(_immutable(c) for c in value):
        raise Unsupported(f"co_consts of {code.co_qualname}, which holds objects that are not constants")
    return const(value)


def _immutable(value) -> bool:
    if type(value) is tuple:
        return all(_immutable(v) for v in value)
    return type(value) in IMMUTABLE


# --- methods and builtin functions ------------------------------------------------------------------
# builtin callables: immutable (no attribute can be set on them), so what they say of themselves is constant
BUILTIN_CALLABLES = (types.BuiltinFunctionType, types.MethodDescriptorType, types.WrapperDescriptorType,
                     types.MethodWrapperType, types.ClassMethodDescriptorType, types.GetSetDescriptorType,
                     types.MemberDescriptorType)
# what a method says of itself that its function (or builtin) says, not its object
OWN_NAMES = ("__name__", "__qualname__", "__doc__", "__module__", "__text_signature__")


def builtin_attr(frame, var: ObjectVar, name: str) -> Var | None:
    """`len.__name__`, `next.__self__`, `dict.get.__qualname__`: attributes of a builtin callable
    (None: not one). `__self__` of a bound builtin keeps its source (its object may change)."""
    value = var.value
    if not issubclass(type(value), BUILTIN_CALLABLES):  # (its type: isinstance would ask the object its __class__)
        return None
    if name == "__self__" and isinstance(value, (types.BuiltinFunctionType, types.MethodWrapperType)):
        return frame.tracer.wrap(value.__self__, AttrSource(var.source, name) if var.source is not None else None)
    attr = fold(getattr, value, name)
    return const(attr) if type(attr) in IMMUTABLE else ObjectVar(attr)


def _standin(cls: type):
    """An object of the builtin class `cls` derives from (a bound builtin method's own names do
    not depend on its object), or None."""
    if cls.__module__ in ("builtins", "collections"):  # (a builtin class: one of its own, where one is made bare)
        try:
            return cls()
        except TypeError:
            pass
    for base in cls.__mro__:
        if base is torch.Tensor:
            return torch.empty(0)
        if base in (list, dict, set, frozenset, tuple, str, bytes, bytearray, int, float, complex, object):
            return base()
    return None


def bound_standin(m: MethodVar):
    """The real bound method `m` stands for, bound to a stand-in object of its class's builtin
    base (what its type and own names are), or None where the method is no builtin's."""
    cls = python_type(m.self_var)
    static = inspect.getattr_static(cls, m.name, None)
    if isinstance(static, (types.FunctionType, staticmethod, classmethod, property)) or static is None:
        return None
    standin = _standin(cls)
    return getattr(standin, m.name, None) if standin is not None else None


def method_attr(frame, m: Var, name: str) -> Var:
    """`name` of a bound method: `__self__` is its object; `__func__` (of a Python function's)
    the function; its own names (`__name__`, `__qualname__`, ...) its function's or builtin's."""
    self_var = m.self_var
    if name == "__self__":
        return self_var
    if isinstance(m, BoundVar):
        func = frame.tracer.wrap(m.func, m.func_source) if m.func_source is not None else ObjectVar(m.func)
        if name == "__func__" and isinstance(m.func, types.FunctionType):
            return func
        if name in OWN_NAMES:
            found = function_attr(frame, func, name) if isinstance(m.func, types.FunctionType) else \
                builtin_attr(frame, func, name)
            if found is not None:
                return found
    else:
        cls = python_type(self_var)
        static = inspect.getattr_static(cls, m.name, None)
        if isinstance(static, types.FunctionType):  # a Python class's method (found and guarded on the class)
            func = frame.tracer.wrap(static, AttrSource(class_source(self_var.source, cls), m.name)) \
                if self_var.source is not None else ObjectVar(static)
            if name == "__func__":
                return func
            if name in OWN_NAMES:
                return function_attr(frame, func, name)
        bound = bound_standin(m)
        if bound is not None and name in OWN_NAMES:
            return const(fold(getattr, bound, name))
        if isinstance(static, (types.MethodDescriptorType, types.WrapperDescriptorType)) and name in OWN_NAMES \
                and name != "__module__":  # (no stand-in object: a generator's `throw`) what the descriptor says
            return const(fold(getattr, static, name))
    raise Unsupported(f"attribute {name!r} of {describe(m)}")


# --- functions made while tracing ---------------------------------------------------------------------
def made_function_attr(frame, fn: FunctionVar, name: str) -> Var:
    """`name` of a function made while tracing (a FunctionVar): what the code set on it, else
    what MAKE_FUNCTION gave it."""
    code = fn.code
    if name in fn.fields:
        return fn.fields[name]
    if name == "__dict__":
        return function_dict(fn)
    if fn.attrs is not None and name in fn.attrs.items:
        return fn.attrs.items[name]
    if name == "__annotations__":  # (made on first read, and kept, as CPython's)
        note_mutation(fn)
        fn.fields[name] = DictVar({})
        return fn.fields[name]
    if name == "__type_params__" and compat.FUNCTION_TYPE_PARAMS:
        return TupleVar([])
    if name == "__name__":
        return ConstVar(code.co_name)
    if name == "__qualname__":
        return ConstVar(code.co_qualname)
    if name == "__module__":  # the globals' __name__ when the function was made
        if "__name__" not in fn.globals:
            raise Unsupported(f"__module__ of {code.co_qualname}, whose globals have no __name__")
        where = fn.globals_source("__name__") if fn.globals_source is not None else None
        return frame.tracer.wrap(fn.globals["__name__"], where)
    if name == "__doc__":  # CPython 3.11: the first constant when it is a str (a lambda's too)
        first = code.co_consts[0] if code.co_consts else None
        return ConstVar(first if isinstance(first, str) else None)
    if name == "__code__":
        return ConstVar(code)
    if name == "__defaults__":
        return TupleVar(fn.defaults) if fn.defaults else ConstVar(None)
    if name == "__kwdefaults__":  # the function's own dict eagerly: read-only here, so no copy can diverge
        return DictVar(fn.kwdefaults, mutable=False) if fn.kwdefaults else ConstVar(None)
    if name == "__class__":
        return ObjectVar(types.FunctionType)
    if hasattr(types.FunctionType, name):  # __globals__, __closure__, __dict__, __annotations__, methods
        raise Unsupported(f"attribute {name!r} of a function made in the call ({code.co_qualname})")
    raise python_error(AttributeError, f"'function' object has no attribute {name!r}")


def function_dict(fn: FunctionVar) -> DictVar:
    """The `__dict__` of a function made in the call: empty until something is set in it."""
    if fn.attrs is None:
        note_mutation(fn)
        fn.attrs = DictVar({})
    return fn.attrs


def set_made_function_attr(frame, fn: FunctionVar, name: str, value) -> None:
    """`fn.name = value` (DELETED: `del`) on a function made in the call, checked as CPython's
    setters check it (functools.wraps, @contextmanager, `fn.calls = 0`)."""
    note_mutation(fn)
    if name in ("__name__", "__qualname__"):
        if value is DELETED or not (isinstance(value, ConstVar) and isinstance(value.value, str)):
            raise python_error(TypeError, f"{name} must be set to a string object")
        fn.fields[name] = value
    elif name in ("__doc__", "__module__"):
        fn.fields[name] = ConstVar(None) if value is DELETED else value
    elif name == "__annotations__":
        if value is DELETED or isinstance(value, ConstVar) and value.value is None:
            fn.fields.pop(name, None)
        elif isinstance(value, DictVar) and value.py_type is dict:
            fn.fields[name] = value
        else:
            raise python_error(TypeError, "__annotations__ must be set to a dict object")
    elif name == "__defaults__":
        if value is DELETED or isinstance(value, ConstVar) and value.value is None:
            fn.defaults = ()
        elif isinstance(value, TupleVar) and value.py_type is tuple:
            fn.defaults = tuple(value.items)
        else:
            raise python_error(TypeError, "__defaults__ must be set to a tuple object")
    elif name == "__kwdefaults__":
        if value is DELETED or isinstance(value, ConstVar) and value.value is None:
            fn.kwdefaults = {}
        elif isinstance(value, DictVar) and value.py_type is dict and all(type(k) is str for k in value.items):
            fn.kwdefaults = dict(value.items)
        else:
            raise python_error(TypeError, "__kwdefaults__ must be set to a dict object")
    elif name == "__type_params__" and compat.FUNCTION_TYPE_PARAMS:
        if value is DELETED or not (isinstance(value, TupleVar) and value.py_type is tuple):
            raise python_error(TypeError, "__type_params__ must be set to a tuple")
        fn.fields[name] = value
    elif name in ("__code__", "__globals__", "__closure__", "__dict__", "__builtins__", "__class__"):
        raise Unsupported(f"assignment to {name} of a function made in the call ({fn.code.co_qualname})")
    elif value is DELETED:
        attrs = function_dict(fn)
        if name not in attrs.items:
            raise python_error(AttributeError, f"'function' object has no attribute {name!r}")
        note_mutation(attrs)
        del attrs.items[name]
    else:
        attrs = function_dict(fn)
        note_mutation(attrs)
        attrs.items[name] = value


# --- inspect.signature --------------------------------------------------------------------------------
class _Self:
    """The object a bound method's signature is computed with (inspect never reads it)."""


@rule(inspect.signature)
def _signature(frame, args, kwargs):
    if len(args) != 1 or set(kwargs) - {"follow_wrapped"}:
        raise Unsupported("inspect.signature() with arguments other than the callable and follow_wrapped")
    follow = python_value(kwargs.get("follow_wrapped", ConstVar(True)), "inspect.signature(follow_wrapped=)")
    (target,) = args
    if isinstance(target, BoundVar) and isinstance(target.func, types.FunctionType):
        func, source = target.func, target.func_source
    elif isinstance(target, ObjectVar) and isinstance(target.value, types.MethodType) \
            and isinstance(target.value.__func__, types.FunctionType):
        func, source = target.value.__func__, AttrSource(target.source, "__func__") if target.source else None
    elif isinstance(target, ObjectVar) and isinstance(target.value, types.FunctionType):
        func, source = target.value, target.source
    elif isinstance(target, MethodVar) and isinstance(target.self_var, ObjectVar) \
            and isinstance(inspect.getattr_static(target.self_var.value, target.name, None), types.FunctionType):
        # `module.forward`: the function found on the class (getattr_object guarded it there)
        self = target.self_var
        func = inspect.getattr_static(self.value, target.name)
        source = AttrSource(class_source(self.source, type(self.value)), target.name) if self.source else None
    else:
        raise Unsupported(f"inspect.signature of {describe(target)}")
    _guard_signature(frame.tracer, func, source, bool(follow))
    real = target.value if isinstance(target, ObjectVar) else types.MethodType(func, _Self())  # (self unread)
    return ObjectVar(fold(inspect.signature, real, follow_wrapped=bool(follow)))


def _guard_signature(tracer, fn, source, follow: bool) -> None:
    """Guard what `inspect.signature(fn)` reads (inspect._signature_from_callable, for a chain
    of plain functions); what it does not know is unsupported."""
    seen = {id(fn)}
    while follow and _has(tracer, fn, source, "__wrapped__") and not _has(tracer, fn, source, "__signature__"):
        fn, source = fn.__wrapped__, AttrSource(source, "__wrapped__") if source is not None else None
        if not isinstance(fn, types.FunctionType):
            raise Unsupported(f"inspect.signature through a __wrapped__ of type {type(fn).__qualname__}")
        if id(fn) in seen:
            raise Unsupported("inspect.signature of a __wrapped__ cycle (the call raises eagerly)")
        seen.add(id(fn))
        if source is not None:
            tracer.guards.add(IdMatch(source, fn))
    if _has(tracer, fn, source, "__signature__"):
        _pin(tracer, fn.__signature__, source, "__signature__", identity=True)
        if fn.__signature__ is not None:
            return
    for name in ("_partialmethod", "__text_signature__"):
        if _has(tracer, fn, source, name):
            raise Unsupported(f"inspect.signature of a function with {name}")
    _pin(tracer, fn.__code__, source, "__code__", identity=True)
    for name in ("__defaults__", "__kwdefaults__", "__annotations__"):
        _pin(tracer, getattr(fn, name), source, name)


def _has(tracer, fn, source, name: str) -> bool:
    """hasattr(fn, name), guarded; an attribute written earlier in this trace is not followed."""
    if source is None:
        return hasattr(fn, name)
    if tracer.side_effects.stored(AttrSource(source, name), location(fn, name)) is not None:
        raise Unsupported(f"inspect.signature of a function whose {name} was set in the call")
    present = hasattr(fn, name)
    tracer.guards.add(HasAttrMatch(source, name, present))
    return present


def _pin(tracer, value, base, name, identity=False) -> None:
    """Guard that `base.name` still holds `value`, taken into a constant: literals by value,
    tuples and dicts item by item, anything else by identity."""
    if base is not None:
        _pin_value(tracer, value, AttrSource(base, name), identity)


def _pin_value(tracer, value, source, identity=False) -> None:
    add = tracer.guards.add
    if is_literal(value) and not identity or value is None:
        add(EqualsMatch(source, value))
    elif type(value) is tuple:
        add(TypeMatch(source, tuple))
        add(LenMatch(source, len(value)))
        for i, item in enumerate(value):
            _pin_value(tracer, item, ItemSource(source, i))
    elif type(value) is dict and all(type(k) is str for k in value):
        add(TypeMatch(source, dict))
        add(KeysMatch(source, tuple(value)))
        for k, item in value.items():
            _pin_value(tracer, item, ItemSource(source, k))
    else:
        add(IdMatch(source, value))
