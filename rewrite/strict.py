"""Strict mode (`rewrite.config.strict`, `REWRITE_STRICT=1`): no divergence hidden by an eager run.

Two paths turn a call into an eager run of the function's own code, and either could hide a
trace that went wrong behind eager's result:

* the trace raised an exception that no handler of the call catches (`RaisesEagerly`, or a
  torch op that raised while tracing where no `except` of the call's covers it): the call runs
  eagerly, where it raises the same -- or should;
* a compiled graph raised at run time and its entry runs the call again eagerly (a
  rerunnable graph: `compile.GraphFailure`).

In strict mode that eager run is made here, on an un-rewritten copy of the function (its
original code, globals and cells: callees run as they are, not jitted), and its outcome is
compared with the trace's: eager must raise the exception class the trace (or the graph)
raised. It then raises that, from the user's line; anything else is an `InternalError`
naming the function, the line and both outcomes. Only the second path's entries whose graph
ops no `try` covers are checked: under a `try`, eager's `except` catching the error is the
legitimate reason to run again.
"""
from __future__ import annotations

import types

from . import config
from .bytecode.splice import argument_names
from .errors import InternalError, PythonError, RaisesEagerly, Unsupported, UserError

CO_VARARGS, CO_VARKEYWORDS = 0x04, 0x08


def enabled() -> bool:
    return bool(config.strict)


def raised_by(error: BaseException) -> type | None:
    """The exception class a trace that ended in `error` says the call raises (None: it says
    none -- a refusal, not a raise)."""
    if isinstance(error, RaisesEagerly):
        return error.raised
    if isinstance(error, PythonError):
        return type(error.error)
    if isinstance(error, UserError):  # a torch op that raised while tracing, or fullgraph's RaisesEagerly
        if error.covered:
            return None  # (an `except` of the call's may catch it: eager's run is the way to find out)
        inner = error.error
        if isinstance(inner, (Unsupported, UserError)):  # (EagerOnce: a lazy module's first call, no raise)
            return raised_by(inner)
        return type(inner)
    return None


def eager_call(code: types.CodeType, globals_: dict, args: tuple):
    """A call of an un-rewritten copy of the function, given what its prologue passes (every
    argument as bound, then every free cell): () -> what eager returns."""
    n = len(argument_names(code))
    fn = types.FunctionType(code, globals_, code.co_name, None, tuple(args[n:]) or None)
    pos, kwonly = code.co_argcount, code.co_kwonlyargcount
    positional = list(args[:pos])
    keywords = dict(zip(code.co_varnames[pos:pos + kwonly], args[pos:pos + kwonly]))
    i = pos + kwonly
    if code.co_flags & CO_VARARGS:
        positional += args[i]
        i += 1
    if code.co_flags & CO_VARKEYWORDS:
        keywords.update(args[i])
    return lambda: fn(*positional, **keywords)


def checked_run(dispatcher, args: tuple, expected: type, what: str, where=()):
    """Run the call eagerly (a copy of its code) where the trace says it raises `expected`:
    eager's exception when it is of that class, else InternalError."""
    try:
        result = eager_call(dispatcher.code, dispatcher.globals, args)()
    except BaseException as e:
        if type(e) is expected:
            raise
        outcome, cause = f"raises {type(e).__name__}: {e}", e
    else:
        outcome, cause = f"returns {_short(result)}", None
    at = "".join(f" at {f}:{line}" for f, line, _fn in list(where)[-1:])
    raise InternalError(f"strict mode: {dispatcher.qualname}{at}: {what} {expected.__name__}, but eager "
                        f"{outcome}") from cause


def checker(dispatcher, error: BaseException, where=()):
    """What runs the call that traced to `error` in strict mode (None: not strict, or the trace
    did not end in a raise)."""
    expected = raised_by(error) if enabled() else None
    if expected is None:
        return None
    while not where and isinstance(error, UserError):  # (fullgraph's RaisesEagerly: where it raised)
        error = error.error
        where = getattr(error, "where", ())
    return lambda *args: checked_run(dispatcher, args, expected, "the trace raised", where)


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."
