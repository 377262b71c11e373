"""Errors a user can see, and the internal signal that tracing cannot go on."""
from __future__ import annotations


class RewriteError(RuntimeError):
    """Base class of the errors `rewrite` raises itself."""


class Unsupported(RewriteError):
    """The tracer met code it cannot put in a graph.

    Without `fullgraph=True` this never reaches the user: the call runs the original
    bytecode instead. With `fullgraph=True` it is raised, naming the construct, the file
    and the line, and a hint when one exists.
    """

    def __init__(self, reason: str, hint: str | None = None):
        super().__init__(reason)
        self.reason = reason
        self.hint = hint
        self.where: list[tuple[str, int, str]] = []  # (filename, lineno, function), innermost last

    def locate(self, filename: str, lineno: int | None, function: str) -> None:
        if not self.where or self.where[0][:2] != (filename, lineno):
            self.where.insert(0, (filename, lineno or 0, function))

    def __str__(self) -> str:
        text = self.reason
        if self.where:
            fn, line, func = self.where[-1]
            text += f"\n  at {fn}:{line} in {func}"
            for fn, line, func in reversed(self.where[:-1]):
                text += f"\n  called from {fn}:{line} in {func}"
        if self.hint:
            text += f"\n  hint: {self.hint}"
        return text


def settle(error: BaseException) -> None:
    """Drop what a compile's exception (and those it chains) holds of the trace -- its
    traceback's frames, the tracer -- once the entry is built: an entry keeps the exception
    for its message, and those would keep the call's arguments alive (a cycle through the
    compiling frame, freed only by the garbage collector)."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        error.__traceback__ = None
        for attr in ("tracer", "guards"):
            if attr in vars(error):
                setattr(error, attr, None)
        error = error.__cause__ or error.__context__


class WholeCallEager(Unsupported):
    """The call must run eagerly as a whole: no graph break can help (the graph could not
    be run again if it raised where an `except` or `__exit__` of the user's would see it)."""


class RaisesEagerly(WholeCallEager):
    """The traced call raises an exception no handler of its own catches: it runs eagerly
    and raises there, from the user's line (even under `fullgraph=True`: that is the user's
    error, not a break). `raised`: the exception's class (strict mode checks eager's)."""

    def __init__(self, reason: str, raised: type | None = None):
        super().__init__(reason)
        self.raised = raised


class EagerOnce(WholeCallEager):
    """This call must run eagerly, and its guards make the next one trace again: a lazy
    module's first call makes its parameters (and changes its class), which only eager can
    do as eager does it (the same random draws). Not a warning, not an error under
    `fullgraph=True`: the next call compiles."""


class EagerWarning(RuntimeWarning):
    """A call of a `@jit` function ran wholly eagerly: none of its own code was compiled (the
    functions it calls compile on their own). Said once per function, with the reason and
    where; `warnings.simplefilter("ignore", EagerWarning)` silences it."""


class BreaksWarning(RuntimeWarning):
    """A `@jit` function's calls compiled more than `config.graph_break_warning` graph breaks
    (its own, its resume functions' and its callees'): each break returns to Python between
    graphs, so the calls may run slower than eager. Said once per function, with the reasons
    `rewrite.explain(fn)(...)` lists."""


class BackendCompilerFailed(RewriteError):
    """A backend raised while compiling a graph."""

    def __init__(self, backend: str, error: BaseException):
        super().__init__(f"backend={backend!r} raised:\n{type(error).__name__}: {error}")
        self.backend = backend
        self.inner = error


class RecompileLimitExceeded(RewriteError):
    """Raised instead of falling back to eager when `fullgraph=True` hits the recompile limit."""


class UserError(Exception):
    """Internal signal: running the user's own operation raised (a shape mismatch, 1 / 0, ...).

    The call then runs the original bytecode, which raises the same error from the user's
    own line. `error` is the original exception.
    """

    def __init__(self, error: BaseException):
        super().__init__(f"{type(error).__name__}: {error}")
        self.error = error
        self.covered = None  # whether an `except` of the call's may catch it where it was raised


class PythonError(UserError):
    """Internal signal: a Python operation of the user's code raised while tracing, with a
    value every later call (under the same guards) raises too (`1 / 0`, `d["missing"]`,
    `next(exhausted)`): the tracer hands it to the user's `except` when one covers it."""


def python_error(exc_type: type, *args) -> PythonError:
    return PythonError(exc_type(*args))


class WritesInputs(Exception):
    """Internal signal: the traced code writes into an input tensor: trace it again on copies
    of the inputs (`clone_inputs`)."""


class Raised(Exception):
    """Internal signal: a traced exception (`exc`, a Var) leaving a frame that has no handler
    for it: the caller's turn."""

    def __init__(self, exc):
        self.exc = exc


def traced_error_type(e: Exception) -> type | None:
    """The exception class a PythonError or Raised stands for (None: not one of them)."""
    if isinstance(e, PythonError):
        return type(e.error)
    if isinstance(e, Raised):
        return getattr(e.exc, "cls", None)
    return None


class InternalError(RewriteError):
    """A bug in rewrite itself while compiling. With `config.suppress_errors` the call runs eagerly instead."""
