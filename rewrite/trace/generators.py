"""Generators the trace runs, and where they are finalized.

A `Generator`'s frame runs as the generator is consumed (`next`, `send`) and takes the
exceptions thrown in (`throw`, `close`) at the `yield` it stopped at, as CPython's.

CPython closes a generator when its last reference goes (`g = gen(); next(g)` at the end of
the call, `next(gen())` right after the call, a `for` loop's `break`): GeneratorExit is thrown
in at its `yield`, and its `finally` blocks and `with` exits run there -- in program order with
everything else the call does. The trace does the same: a generator left suspended where
closing it runs code of its own (a handler covers the `yield`) is *pending*; after each
instruction, a pending generator that nothing the trace holds refers to any more (the frames
running, the operands their instructions took, what they hold, what the call's side effects
keep) is closed there, its `close()` traced. A running generator is never closed. One whose
closing raises (eager prints that as an unraisable exception) is a graph break.
"""
from __future__ import annotations

import itertools
import operator
import types

from ..bytecode import compat
from ..errors import Raised, Unsupported
from ..values.vars import ConstVar, ContextExitVar, ExceptionVar, IdentityKey, IteratorVar, Var
from .opcodes import Yielded

# what the reachability walk does not enter: real values, code, the trace's own bookkeeping
_OPAQUE = frozenset({"source", "born", "value", "node", "sym", "expr", "env", "code", "globals", "globals_source",
                     "cls", "cls_source", "py_type", "real", "func", "func_source", "fresh", "handle", "kind",
                     "enter_fn", "exit_fn", "made_by"})


class Generator:
    def __init__(self, tracer, frame):
        self.tracer, self.frame = tracer, frame
        self.started = self.done = False
        self.returned = False  # it returned at the last step (its StopIteration carries the value)
        self.exc_info = None  # what it handles while suspended in an `except` block (None: nothing of its own)
        self.made_by = None  # (the real function, its source, args, kwargs) that made it: one never run is rebuilt so
        self.witness = None  # where the trace held it last time it looked (see finalize)
        self.iterator = IteratorVar(step=self.next, py_type=types.GeneratorType)
        self.iterator.generator = self

    def next(self) -> Var | None:
        """The next value; None when the generator returned (its value: iterator.result)."""
        return self._resume(None, None)

    def send(self, value: Var) -> Var:
        if not self.started and not (isinstance(value, ConstVar) and value.value is None):
            raise Raised(ExceptionVar(TypeError, [ConstVar("can't send non-None value to a just-started generator")]))
        return self._yielded(self._resume(value, None))

    def throw(self, exc: ExceptionVar) -> Var:
        return self._yielded(self._resume(None, exc))

    def close(self) -> Var:
        """GeneratorExit thrown in; what the generator returned instead is close()'s result
        where this Python says so (compat.CLOSE_RETURNS_VALUE), else None."""
        if self.done or not self.started:
            self._finish()
            return ConstVar(None)
        try:
            self._resume(None, ExceptionVar(GeneratorExit, []))
        except Raised as r:
            if isinstance(r.exc, ExceptionVar) and issubclass(r.exc.cls, GeneratorExit):
                return ConstVar(None)
            raise
        if not self.done:
            raise Raised(ExceptionVar(RuntimeError, [ConstVar("generator ignored GeneratorExit")]))
        return self.iterator.result if compat.CLOSE_RETURNS_VALUE else ConstVar(None)

    def why_not_rebuilt(self) -> str | None:
        """Why the entry cannot make this generator again where it stands (None: it can: one
        never run, called again; one finished; one stopped at a plain `yield` of a real
        function's code, made standing there -- see compile._generator)."""
        if self.made_by is None:
            return "made from a function made in the call"
        if self.done or not self.started:
            return None
        frame = self.frame
        if frame.code.co_cellvars:
            return "whose variables a closure holds"
        if self.exc_info is not None:
            return "stopped in an `except` block"
        if any(isinstance(v, ContextExitVar) for v in frame.stack):
            return "stopped in a traced `with` block"
        if frame.instructions[frame.ip - 1].opname != "YIELD_VALUE":
            return "stopped elsewhere than at a yield"
        return None

    def _yielded(self, value: Var | None) -> Var:
        if value is None:
            raise Raised(self.stop())
        return value

    def stop(self) -> ExceptionVar:
        """The StopIteration of a step that found it done: the one right after it returned
        carries its return value; any later one, none (as CPython's)."""
        result, self.returned = self.iterator.result if self.returned else None, False
        none = result is None or isinstance(result, ConstVar) and result.value is None  # (`return None`: no args)
        return ExceptionVar(StopIteration, [] if none else [result])

    def _finish(self) -> None:
        """Done: its frame is gone (what it held is let go, as CPython clears the frame)."""
        self.done = True
        self.frame.stack.clear()
        self.frame.locals.clear()
        if self in self.tracer.pending:
            self.tracer.pending.remove(self)

    def _resume(self, value: Var | None, exc: ExceptionVar | None) -> Var | None:
        """One step, with the generator's own exception state: what it handles while suspended
        in an `except` block is its own, not its caller's (CPython's gi_exc_state)."""
        if self.done or exc is not None and not self.started:
            self._finish()
            if exc is not None:
                raise Raised(exc)
            return None
        tracer = self.tracer
        caller = tracer.exc_info
        if self.exc_info is not None:
            tracer.exc_info = self.exc_info
        try:
            return self._step(value, exc)
        finally:
            self.exc_info = None if tracer.exc_info is caller else tracer.exc_info
            tracer.exc_info = caller

    def _step(self, value: Var | None, exc: ExceptionVar | None) -> Var | None:
        frame = self.frame
        if self.started:
            if exc is None:
                frame.push(ConstVar(None) if value is None else value)  # what the yield evaluates to
            else:
                at = frame.instructions[frame.ip - 1]  # the YIELD_VALUE it stopped at
                after = frame.instructions[frame.ip]
                if after.opname == "RESUME" and after.arg & 3 == 3:  # (3: `await`; 3.13 keeps a flag in bit 2)
                    raise Unsupported("an exception thrown into a coroutine stopped in `await`")
                if after.opname == "RESUME" and after.arg & 3 == 2:  # `yield from`: the sub-iterator first
                    exc, yielded = self._delegate(frame.stack[-1], exc)
                    if yielded is not None:
                        return yielded  # (the sub-generator yielded: this one stays where it is)
                if exc is None:  # the sub-generator returned: `yield from` takes its value (SEND finds it done)
                    frame.push(ConstVar(None))
                else:
                    frame.push(ConstVar(None))  # (what CPython's throw sends in; the handler's depth counts it)
                    if not frame.catch(exc, at):
                        self._finish()
                        raise Raised(exc)
        self.started = True
        self.tracer.depth += 1
        try:
            self.iterator.result = frame.run()
        except Yielded as y:
            self._suspended()
            return y.value
        except Raised as r:
            self._finish()
            if isinstance(r.exc, ExceptionVar) and issubclass(r.exc.cls, StopIteration):  # PEP 479
                raise Raised(ExceptionVar(RuntimeError, [ConstVar("generator raised StopIteration")])) from None
            raise
        finally:
            self.tracer.depth -= 1
        self._finish()
        self.returned = True
        return None

    @staticmethod
    def _delegate(sub: Var, exc: ExceptionVar) -> tuple[ExceptionVar | None, Var | None]:
        """An exception thrown into a generator stopped in `yield from sub` (CPython's gen_throw):
        GeneratorExit closes sub first (an error closing it is thrown in instead); another goes
        to sub's own throw. (the exception to raise here, or None: sub returned; what sub yielded,
        or None.) A sub-iterator without throw/close: the exception is raised here."""
        inner = getattr(sub, "generator", None)
        if not isinstance(sub, IteratorVar):
            raise Unsupported("an exception thrown into a generator stopped in `yield from` over an object")
        if inner is None:
            if sub.py_type is None:
                raise Unsupported("an exception thrown into `yield from` over an iterator of unknown kind")
            return exc, None  # (list, tuple, map, ... iterators have no throw or close)
        try:
            if issubclass(exc.cls, GeneratorExit):
                inner.close()
                return exc, None
            return None, inner.throw(exc)
        except Raised as r:
            if not issubclass(exc.cls, GeneratorExit) and isinstance(r.exc, ExceptionVar) \
                    and issubclass(r.exc.cls, StopIteration) and inner.done:
                return None, None
            return r.exc, None

    def _suspended(self) -> None:
        """Stopped at a yield: pending if closing it there runs code of its own."""
        pending = self.tracer.pending
        if self.frame.runs_handler_at(self.frame.ip - 1):
            if self not in pending:
                pending.append(self)
                self.tracer.generators = self.tracer.generators or 1  # (the step loop asks only this first)
        elif self in pending:
            pending.remove(self)


def finalize(tracer, returned: Var | None = None) -> None:
    """Close the pending generators nothing refers to any more (see the module's docstring).
    `returned`: the root frame returns this, and its own frame is gone."""
    if tracer.finalizing:
        return
    near, roots, parents = None, None, None
    for gen in list(tracer.pending):
        if gen.frame in tracer.frames:  # (running: a Frame compares by identity)
            continue
        if near is None:  # (the roots a witness usually starts from)
            near = [returned] if returned is not None else []
            for frame in tracer.frames if returned is None else ():
                near += [frame.stack, frame.operands, frame.locals, frame.cells]
        if gen.witness is not None and _holds(near, gen.witness):
            continue  # (still held where the last walk found it held: the common case)
        if roots is None:
            roots = near + [tracer.exc_info, *tracer.side_effects.stores.values(),
                            *tracer.side_effects.containers.values(), *tracer.wrapped.values()]
        if gen.witness is not None and _holds(roots, gen.witness):
            continue
        if parents is None:
            parents = _walk(roots)
        if id(gen.iterator) in parents:
            gen.witness = _path(parents, gen.iterator)
            continue
        tracer.pending.remove(gen)
        tracer.finalizing = True
        try:
            gen.close()
        except Raised as r:
            raise Unsupported(f"closing a generator raised {getattr(r.exc, 'cls', Exception).__name__} (eager "
                              "prints that as an unraisable exception)") from None
        finally:
            tracer.finalizing = False


def _walk(roots) -> dict:
    """id -> (the object, what holds it: None for a root), for everything `roots` hold, through
    Vars, containers, the trace's iterators and the frames of the generators reached."""
    parents: dict = {}
    todo = [(r, None) for r in roots]
    while todo:
        x, holder = todo.pop()
        if x is None or id(x) in parents:
            continue
        parents[id(x)] = (x, holder)
        todo.extend((child, x) for child in _children(x))
    return parents


def _path(parents: dict, target) -> list:
    """From a root down to `target`, as the walk found it held."""
    path = [target]
    while (holder := parents[id(path[-1])][1]) is not None:
        path.append(holder)
    return path[::-1]


def _holds(roots, path: list) -> bool:
    """Whether `path` (a root, then what each holds) is still there."""
    if not any(map(operator.is_, roots, itertools.repeat(path[0]))):  # (by identity, in C)
        return False
    return all(_has_child(holder, child) for holder, child in zip(path, path[1:]))


def _has_child(holder, child) -> bool:
    if isinstance(holder, dict):
        return any(child is v for v in holder.values()) or any(child is k for k in holder)
    return any(child is c for c in _children(holder))


def _children(x):
    if isinstance(x, (list, tuple, set, frozenset)):
        return x
    if isinstance(x, dict):
        return [*x.keys(), *x.values()]
    if isinstance(x, IdentityKey):
        return (x.var,)
    if isinstance(x, Var):
        return [getattr(x, name, None) for name in _slots(type(x))]
    if isinstance(x, Generator):
        f = x.frame
        return (f.stack, f.locals, f.cells)
    if isinstance(x, types.MethodType):  # a generator's step
        return (x.__self__,)
    if isinstance(x, types.FunctionType) and x.__module__.startswith("rewrite."):  # map's, zip's, ... steps
        return [cell.cell_contents for cell in x.__closure__ or () if _filled(cell)]
    if type(x).__module__.startswith("rewrite.ops."):  # the iterators' steps (ops/iterators.py)
        return list(vars(x).values())
    return ()


_SLOTS: dict = {}


def _slots(cls) -> tuple:
    if cls not in _SLOTS:
        names = [n for c in cls.__mro__ for n in getattr(c, "__slots__", ())]
        _SLOTS[cls] = tuple(n for n in names if n not in _OPAQUE)
    return _SLOTS[cls]


def _filled(cell) -> bool:
    try:
        cell.cell_contents
    except ValueError:
        return False
    return True
