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

from ..errors import Unsupported, python_error
from ..guards.guard import EqualsMatch, HasAttrMatch, IdMatch, KeysMatch, LenMatch, TypeMatch
from ..guards.source import AttrSource, ItemSource, is_literal
from ..values.side_effects import location
from ..values.vars import IMMUTABLE, BoundVar, ConstVar, DictVar, FunctionVar, MethodVar, ObjectVar, TupleVar, Var
from .core import const, describe, fold, python_value, rule
from .instances import class_source

# attributes of a function that are its state, read as the value they hold now (guarded on it)
FUNCTION_VALUES = {"__name__", "__qualname__", "__module__", "__doc__", "__defaults__", "__kwdefaults__",
                   "__annotations__"}
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


# --- functions made while tracing ---------------------------------------------------------------------
def made_function_attr(frame, fn: FunctionVar, name: str) -> Var:
    """`name` of a function made while tracing (a FunctionVar): what MAKE_FUNCTION gave it."""
    code = fn.code
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
