"""Log records from traced code: a Logger's emitting methods (and the logging module's
functions) become nodes of the graph that make the call where eager makes it, with eager's
arguments, at the user's line (`at_user_line`: the record's file, line and function are
eager's); they are not run while tracing. Other logging, `print` and `warnings.warn` break
the graph.

A graph whose call may have to run again eagerly (it raised part-way where an `except` may
catch it, or where side effects replayed after it would be lost) makes its records once it has
run to its end: where it raises, the eager run makes eager's records, once (`Deferred`).
"""
from __future__ import annotations

import logging
import threading
import types

import torch

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


class Deferred:
    """Log records of graphs that may have to run their call again: kept while the graph runs
    (`begin` before it), made in order once it has run to its end (`end(pending, True)`),
    dropped where it raised (`end(pending, False)`: the eager run makes them). A stack per
    thread; a record made with no graph begun (the blame re-run of a failing backend's graph
    begins its own) is dropped."""

    def __init__(self):
        self._local = threading.local()

    def _stack(self) -> list:
        stack = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        return stack

    def begin(self) -> list:
        pending: list = []
        self._stack().append(pending)
        return pending

    def add(self, thunk, fn, args, kwargs) -> None:
        stack = self._stack()
        if stack:
            stack[-1].append((thunk, fn, args, kwargs))

    def end(self, pending: list, make: bool) -> None:
        stack = self._stack()
        for i in range(len(stack) - 1, -1, -1):  # (by identity: lists of no records are equal)
            if stack[i] is pending:
                del stack[i:]  # (and any a graph inside it began and did not end)
                break
        if make:
            for thunk, fn, args, kwargs in pending:
                thunk(fn, args, kwargs)


DEFERRED = Deferred()


def deferred_log(thunk, fn, args, kwargs) -> None:
    """A log node of a graph whose records wait for its end (see `Deferred`)."""
    DEFERRED.add(thunk, fn, args, kwargs)


def defer(graph) -> bool:
    """Make the log nodes of `graph` (a trace's: rewrite.nodes.Graph) wait for its end, where
    none logs a tensor (its values may change before the end); whether they do."""
    nodes = [n for n in graph.nodes if n.meta.get("outward")]
    if any("facts" in i.meta or isinstance(i.meta.get("example_value"), torch.Tensor)  # (a tensor: trace.graph._describe)
           for n in nodes for i in n.all_input_nodes):
        return False
    for n in nodes:
        n.set_arguments(deferred_log, (n.target, *n.args))
        n.meta["deferred"] = True
    return True
