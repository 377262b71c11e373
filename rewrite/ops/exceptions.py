"""Exceptions made or raised while tracing (ExceptionVar): their fields as CPython keeps them.

- `__context__` is set where an exception is raised while another is handled (`chain`, as
  `_PyErr_SetObject`: never to itself, and a cycle through the handled one's chain is cut);
  `raise X from Y` sets `__cause__` and `__suppress_context__` (`set_cause`, as `do_raise`).
- `__traceback__` is None until the exception is raised, then a TracebackVar: a traceback of
  the trace's frames, which nothing may read (`tb.tb_frame`: a graph break); `with_traceback(tb)`
  sets it, as do assignments; `traceback.clear_frames` of one does nothing (what it clears are
  the trace's frames, which eager's do not see).
- What the exception's class or the code sets on it (`e.foo = 1`, `add_note`) is its `__dict__`;
  anything else is read from a real exception made from the args (a constant: `e.errno`, `str(e)`).
"""
from __future__ import annotations

import builtins
import sys
import traceback
import types

from ..errors import Unsupported, python_error
from ..guards.guard import NoHandledMatch
from ..guards.source import AttrSource
from ..values.side_effects import DELETED
from ..values.vars import (IMMUTABLE, ConstVar, ExceptionVar, ListVar, MethodVar, ObjectVar, TracebackVar, TupleVar, Var,
                           note_mutation, real_exception)
from .core import _MISSING, BUILTINS, class_attr, const, describe, fold, foldable, python_type, rule, unpack
from .instances import bind

METHODS = ("with_traceback", "add_note")  # (of BaseException's, traced: `method`)


# the __context__ of an exception raised where no handler of the trace's runs: what the caller handles,
# read (and guarded: `handled`) only where the code reads it
CALLERS = Var()


def handled(frame) -> Var:
    """The exception being handled now (`sys.exception()`): the trace's, or where no handler of
    the trace's runs, the caller's (`callers`)."""
    tracer = frame.tracer
    return callers(frame) if tracer.exc_info is tracer.outer_exc_info else tracer.exc_info


def callers(frame) -> Var:
    """What the caller handles: none, guarded (eager's `raise` would re-raise the caller's); where
    it handles one, a graph break."""
    tracer = frame.tracer
    if tracer.caller_handles:  # (the trace runs in the call: what its caller handled as it began)
        raise Unsupported("reading the exception the caller handles (sys.exc_info(), a bare raise, a "
                          "__context__) while it handles one")
    if not tracer.outer_exc_guarded:
        tracer.guards.add(NoHandledMatch())
        tracer.outer_exc_guarded = True
    return tracer.outer_exc_info


def chain(frame, exc: ExceptionVar) -> None:
    """`exc` is raised now: its `__context__` is the exception being handled (CPython's rule)."""
    tracer = frame.tracer
    handled_now = CALLERS if tracer.exc_info is tracer.outer_exc_info else tracer.exc_info
    if handled_now is CALLERS:
        note_mutation(exc)
        exc.context = CALLERS
        return
    if not isinstance(handled_now, ExceptionVar) or handled_now is exc:
        return
    o, seen = handled_now, set()
    while isinstance(o, ExceptionVar) and id(o) not in seen:  # a cycle would form through handled's chain:
        seen.add(id(o))                                         # cut it there (a cycle already in the chain
        if o.context is exc:                                    # ends the walk, as CPython's tortoise and hare)
            note_mutation(o)
            o.context = None
            break
        o = o.context
    note_mutation(exc)
    exc.context = handled_now


def raised(exc: ExceptionVar) -> None:
    """`exc` is raised: it has a traceback from now on."""
    if exc.traceback is None:
        note_mutation(exc)
        exc.traceback = TracebackVar()


def set_cause(exc: ExceptionVar, cause: Var) -> None:
    """`raise exc from cause` (cause an exception or None: checked by the caller)."""
    note_mutation(exc)
    exc.cause = None if isinstance(cause, ConstVar) and cause.value is None else cause
    exc.suppress = True


def new_exception(cls, args: tuple, attrs: dict, cause, context, suppress: bool):
    """What the entry calls to rebuild an exception the trace made (never raised: one raised
    in the trace has a traceback of the trace's frames, which cannot leave it)."""
    exc = real_exception(cls, args, attrs)
    exc.__cause__, exc.__context__, exc.__suppress_context__ = cause, context, suppress
    return exc


# builtin exception classes whose __init__ is not BaseException's (they set fields of their own)
OWN_INIT = (OSError, ImportError, SyntaxError, StopIteration, SystemExit, AttributeError, NameError, UnicodeError,
            BaseExceptionGroup)


def construct(frame, cls_var: ObjectVar, args, kwargs) -> ExceptionVar:
    """`cls(*args, **kwargs)` of an exception class: BaseException.__new__ keeps the args, then
    the class's `__init__` runs (a Python one is traced)."""
    cls = cls_var.value
    if isinstance(class_attr(cls, "__new__"), (types.FunctionType, staticmethod)):
        raise Unsupported(f"constructing {cls.__name__} (its __new__ is Python code)")
    exc = ExceptionVar(cls, args)
    init = class_attr(cls, "__init__")
    if isinstance(init, types.FunctionType):
        source = AttrSource(cls_var.source, "__init__") if cls_var.source is not None else None
        result = frame.tracer.inline(init, [exc, *args], kwargs, source, frame)
        if not (isinstance(result, ConstVar) and result.value is None):
            raise python_error(TypeError, f"__init__() should return None, not '{python_type(result).__name__}'")
    elif kwargs:
        if issubclass(cls, OWN_INIT):
            raise Unsupported(f"constructing {cls.__name__} with keyword arguments")
        raise python_error(TypeError, f"{cls.__name__}() takes no keyword arguments")
    return exc


def _base_init(frame, args, kwargs):
    """`BaseException.__init__(self, *args)` (`super().__init__(...)` in an exception class's own):
    the args, again."""
    exc, *rest = args
    if not isinstance(exc, ExceptionVar):
        raise Unsupported(f"BaseException.__init__ of {describe(exc)}")
    if kwargs:
        raise python_error(TypeError, f"{exc.cls.__name__}() takes no keyword arguments")
    note_mutation(exc)
    exc.args = list(rest)
    return ConstVar(None)


for _cls in {c for c in vars(builtins).values() if isinstance(c, type) and issubclass(c, BaseException)}:
    if not issubclass(_cls, OWN_INIT) and "__init__" in _cls.__dict__:
        BUILTINS[_cls.__dict__["__init__"]] = _base_init


def getattr_exception(frame, exc: ExceptionVar, name: str) -> Var:
    if name == "args":
        return TupleVar(exc.args)
    if name == "__class__":
        return ObjectVar(exc.cls)
    if name in ("__cause__", "__context__", "__traceback__"):
        v = {"__cause__": exc.cause, "__context__": exc.context, "__traceback__": exc.traceback}[name]
        if v is CALLERS:
            v = callers(frame)
        return ConstVar(None) if v is None else v
    if name == "__suppress_context__":
        return ConstVar(exc.suppress)
    if name in exc.attrs:
        return exc.attrs[name]
    static = class_attr(exc.cls, name)
    if isinstance(static, (types.FunctionType, property, staticmethod, classmethod)):  # the class's own
        if isinstance(static, property):
            if static.fget is None:
                raise Unsupported(f"property {name!r} has no getter")
            return frame.tracer.inline(static.fget, [exc], {}, None, frame)
        return bind(frame, exc, static, name, None)
    if name in METHODS and hasattr(exc.cls, name):
        return MethodVar(exc, name)
    if name == "__dict__":
        raise Unsupported(f"the __dict__ of a traced {exc.cls.__name__}")
    if static is not _MISSING and type(static) in IMMUTABLE and name not in type(exc.cls).__dict__:
        return ConstVar(static)  # a constant of the class (`code = 7`)
    if not foldable(exc):
        raise Unsupported(f"attribute {name!r} of a traced {exc.cls.__name__} (its arguments are not constants, "
                          "or its class has code of its own)")
    value = fold(getattr, exc.python_value(), name)
    if isinstance(value, (types.BuiltinMethodType, types.MethodType)):
        raise Unsupported(f"method {name!r} of a traced {exc.cls.__name__}")
    return const(value)


def setattr_exception(frame, exc: ExceptionVar, name: str, value) -> None:
    """`exc.name = value` (DELETED: `del`) as BaseException's setters check it."""
    note_mutation(exc)
    if name == "__traceback__":
        if value is DELETED:
            raise python_error(TypeError, "__traceback__ may not be deleted")
        exc.traceback = _traceback(value)
    elif name in ("__cause__", "__context__"):
        if value is DELETED:
            raise python_error(TypeError, f"{name} may not be deleted")
        if not (isinstance(value, (ExceptionVar, ConstVar)) and (isinstance(value, ExceptionVar) or value.value is None)):
            raise python_error(TypeError, f"exception {name[2:-2]} must be None or derive from BaseException")
        held = None if isinstance(value, ConstVar) else value
        if name == "__cause__":
            exc.cause, exc.suppress = held, True
        else:
            exc.context = held
    elif name == "__suppress_context__":
        if value is DELETED:
            raise python_error(TypeError, "__suppress_context__ may not be deleted")
        if not isinstance(value, ConstVar):
            raise Unsupported(f"__suppress_context__ set to {describe(value)}")
        exc.suppress = bool(value.value)
    elif name == "args":
        if value is DELETED:
            raise python_error(TypeError, "args may not be deleted")
        exc.args = list(unpack(frame, value))  # (tuple(value), as BaseException's setter does)
    elif value is DELETED:
        if name not in exc.attrs:
            raise python_error(AttributeError, name)
        del exc.attrs[name]
    elif hasattr(exc.cls, name) and name not in ("__notes__",):
        raise Unsupported(f"assignment to attribute {name!r} of a traced {exc.cls.__name__}, which its class defines")
    else:
        exc.attrs[name] = value


def text(frame, exc: ExceptionVar, fn) -> Var:
    """`str(exc)` / `repr(exc)` (`fn`): the class's own `__str__` / `__repr__` traced; a builtin's
    computed on an exception of the nearest builtin class with the same args (its name put back)."""
    name = "__str__" if fn is str else "__repr__"
    static = class_attr(exc.cls, name)
    if isinstance(static, types.FunctionType):
        result = frame.tracer.inline(static, [exc], {}, None, frame)
        if not (isinstance(result, ConstVar) and isinstance(result.value, str)):
            raise python_error(TypeError, f"{name} returned non-string (type {python_type(result).__name__})")
        return result
    if not all(foldable(a) for a in exc.args):  # (BaseException's, found before any __repr__ of the class's)
        raise Unsupported(f"{fn.__name__}() of a traced {exc.cls.__name__} whose arguments are not constants")
    builtin = next(c for c in exc.cls.__mro__ if c.__module__ == "builtins")
    args = tuple(a.python_value() for a in exc.args)
    standin = builtin.__new__(builtin, *args)
    builtin.__init__(standin, *args)
    standin.args = args
    result = fold(fn, standin)
    if fn is repr and result.startswith(builtin.__name__ + "("):
        result = exc.cls.__name__ + result[len(builtin.__name__):]
    return ConstVar(result)


def _traceback(value: Var) -> TracebackVar | None:
    if isinstance(value, TracebackVar):
        return value
    if isinstance(value, ConstVar) and value.value is None:
        return None
    raise python_error(TypeError, "__traceback__ must be a traceback or None")


def method(frame, exc: ExceptionVar, name: str, args, kwargs) -> Var:
    if kwargs:
        raise python_error(TypeError, f"BaseException.{name}() takes no keyword arguments")
    if len(args) != 1:
        raise python_error(TypeError, f"BaseException.{name}() takes exactly one argument ({len(args)} given)")
    (arg,) = args
    if name == "with_traceback":
        note_mutation(exc)
        exc.traceback = _traceback(arg)
        return exc
    if name == "add_note":
        if not (isinstance(arg, ConstVar) and isinstance(arg.value, str)):
            if isinstance(arg, ConstVar):
                raise python_error(TypeError, f"note must be a str, not '{type(arg.value).__name__}'")
            raise Unsupported(f"add_note of {describe(arg)}")
        notes = exc.attrs.get("__notes__")
        if notes is None:
            note_mutation(exc)
            notes = exc.attrs["__notes__"] = ListVar([])
        if not isinstance(notes, ListVar) or notes.py_type is not list:
            raise Unsupported("add_note where __notes__ was replaced")
        note_mutation(notes)
        notes.items.append(arg)
        return ConstVar(None)
    raise Unsupported(f"method {name} of a traced {exc.cls.__name__}")


@rule(sys.exc_info)
def _exc_info(frame, args, kwargs):
    exc = handled(frame)
    if isinstance(exc, ExceptionVar):
        return TupleVar([ObjectVar(exc.cls), exc, exc.traceback or ConstVar(None)])
    if isinstance(exc, ConstVar) and exc.value is None:
        return TupleVar([ConstVar(None)] * 3)
    raise Unsupported(f"sys.exc_info() while {describe(exc)} is handled")


@rule(sys.exception)
def _exception(frame, args, kwargs):
    return handled(frame)


@rule(traceback.clear_frames)
def _clear_frames(frame, args, kwargs):
    """Of a traceback the trace made (its frames are the trace's): nothing eager's frames see."""
    if len(args) == 1 and not kwargs and (isinstance(args[0], TracebackVar) or
                                          isinstance(args[0], ConstVar) and args[0].value is None):
        return ConstVar(None)
    raise Unsupported("traceback.clear_frames of a traceback that came in")
