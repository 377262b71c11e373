"""Log records from traced code: a Logger's emitting methods (and the logging module's
functions) become nodes of the graph that make the call where eager makes it, with eager's
arguments, at the user's line (`at_user_line`: the record's file, line and function are
eager's); they are not run while tracing. Other logging, `print` and `warnings.warn` break
the graph.
"""
from __future__ import annotations

import logging
import types

from ..bytecode.resume import at_user_line
from ..guards.guard import IdMatch
from ..values.vars import ObjectVar, Var
from .core import const

LOGGING_MODULES = ("logging", "warnings")
# what a Logger (or the logging module) emits records with, as transformers adds to it: called
# by the graph where eager calls them, with eager's arguments; they return None
LOG_EMITTERS = {"debug", "info", "warning", "warn", "error", "exception", "critical", "fatal", "log",
                "warning_once", "info_once", "warning_advice"}
LOGGERS = (logging.Logger, logging.LoggerAdapter)


def emitter(obj: Var, name: str) -> bool:
    """`logger.<name>` is one of the emitting methods of a Logger."""
    return name in LOG_EMITTERS and isinstance(obj, ObjectVar) and isinstance(obj.value, LOGGERS)


def module_emitter(fn) -> bool:
    """`logging.warning` and friends (they log to the root logger)."""
    return is_logging(fn) and getattr(fn, "__module__", None) == "logging" and getattr(fn, "__name__", None) in LOG_EMITTERS


def is_logging(fn) -> bool:
    """logging.info, a Logger's methods, warnings.warn: run where Python runs them."""
    owner = getattr(fn, "__self__", None)
    if isinstance(fn, types.MethodType) and isinstance(owner, LOGGERS):
        return True
    module = getattr(fn, "__module__", None)
    return module in LOGGING_MODULES and callable(fn) and not isinstance(fn, type)


def log_call(frame, fn, args, kwargs) -> Var:
    """`logger.warning_once(msg)`: a node of the graph that makes the call (at the user's line,
    so the record names it as eager's does), in program order; not run while tracing."""
    inst = frame.instructions[frame.ip - 1]
    thunk = at_user_line(frame.code, inst.offset, "call", globals_=frame.globals)
    frame.tracer.graph.outward_call(thunk, fn, args, kwargs)
    return const(None)


def logger_method(frame, logger: ObjectVar, name: str, args, kwargs) -> Var:
    if logger.source is not None:  # (the bound method is a constant of the graph: that very logger)
        frame.tracer.guards.add(IdMatch(logger.source, logger.value))
    return log_call(frame, getattr(logger.value, name), args, kwargs)
