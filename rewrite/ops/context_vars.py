"""`contextvars.ContextVar` get / set / reset, traced as side effects replayed in order.

What a ContextVar holds in the current context is read once, guarded on its value (no value:
`NotImplemented`, see ContextVarSource); `cv.set(v)` is a store the trace's later `get()`s see
and the entry replays (`cv.set(v)` after the graph); `cv.reset(token)` of a token set in the
call restores what the token saw -- back to the value before the call, it leaves nothing to
replay. A token that leaves the call, or a reset to "no value" of a var set before the call,
is not traced.
"""
from __future__ import annotations

import contextvars

from ..errors import Unsupported, python_error
from ..guards.source import ContextVarSource, is_literal
from ..values.vars import ConstVar, ObjectVar, TokenVar, Var

METHODS = ("get", "set", "reset")


def is_context_var(value) -> bool:
    return type(value) is contextvars.ContextVar


def _where(cv: ObjectVar) -> tuple:
    return "contextvar", id(cv.value)  # (the var lives as long as the call that reads it)


def _current(frame, cv: ObjectVar):
    """What `cv` holds now in the trace's view: a Var, or None (no value)."""
    target = ContextVarSource(cv.source)
    stored = frame.tracer.side_effects.stored(target, _where(cv))
    if stored is not None:
        return stored
    real = cv.value.get(NotImplemented)
    var = frame.tracer.wrap(real, target)
    return None if real is NotImplemented else var


def method(frame, cv: ObjectVar, name: str, args: list[Var], kwargs) -> Var:
    if cv.source is None or kwargs:
        raise Unsupported(f"ContextVar.{name} on a ContextVar the tracer cannot locate, or with keywords")
    tracer = frame.tracer
    target, where = ContextVarSource(cv.source), _where(cv)
    if name == "get" and len(args) <= 1:
        current = _current(frame, cv)
        if current is not None:
            return current
        if args:
            return args[0]
        try:
            default = cv.value.get()  # the var's own default (fixed when it was made)
        except LookupError:
            raise python_error(LookupError, cv.value) from None
        if not is_literal(default):
            raise Unsupported(f"the default of {cv.value!r} is not a constant")
        return ConstVar(default)
    if name == "set" and len(args) == 1:
        token = TokenVar(cv, _current(frame, cv), first=tracer.side_effects.stored(target, where) is None)
        tracer.side_effects.store(target, args[0], where)
        return token
    if name == "reset" and len(args) == 1:
        token = args[0]
        if not isinstance(token, TokenVar):
            raise Unsupported("ContextVar.reset of a token made before the call")
        if token.used:
            raise python_error(RuntimeError, f"{token!r} has already been used once")
        if token.var is not cv:
            raise python_error(ValueError, f"{token!r} was created by a different ContextVar")
        token.used = True
        if token.first:  # back to what it held before the call: nothing to replay
            tracer.side_effects.forget(target, where)
        elif token.prev is None:
            raise Unsupported("ContextVar.reset to no value of a var set before the call")
        else:
            tracer.side_effects.store(target, token.prev, where)
        return ConstVar(None)
    raise Unsupported(f"ContextVar.{name}({len(args)} arguments)")
