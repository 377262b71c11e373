"""The symbolic bytecode interpreter: frames, the step loop, inlining.

`Tracer` holds what one trace builds (graph, guards, wrapped inputs); `Frame` runs one
code object's instructions over a stack of Vars, calling the opcode handlers registered
in `rewrite/trace/handlers`. The interpreter never touches the graph itself: torch
ops go through `rewrite.ops`, which asks the `GraphBuilder`.
"""
from __future__ import annotations

import dis
import functools
import sys
import types

import torch

from .. import config, logs, ops
from ..bytecode import compat, original_code
from ..bytecode.compat import NOT_TRY_HANDLERS, except_clauses, exception_handlers, handled_offsets
from ..bytecode.splice import binding_error
from ..errors import PythonError, Raised, RaisesEagerly, Unsupported, UserError
from ..guards.codegen import GuardSet
from ..guards.guard import (DefaultDtypeMatch, GradModeMatch, IdMatch, ModeActiveMatch, NoFunctionModeMatch,
                           NotInMatch, torch_mode_active)
from ..guards.shapes import ShapeEnv
from ..guards.source import AttrSource, CellContentsSource, GlobalSource, GlobalsSource, ItemSource, LocalSource, Source
from ..ops import exceptions
from ..ops.contexts import close, errors_at_start
from ..ops.core import const
from ..ops.markers import disabled, dynamo_patch
from ..ops.objects import trusted_globals
from ..values.side_effects import SideEffects, location
from ..values.vars import (BoundVar, CellVar, ConstVar, DictVar, ExceptionVar, FunctionVar, ObjectVar,
                           TensorVar, TupleVar, Var, checkpoint_dropped, checkpoint_mark)
from . import handlers  # noqa: F401  (registers the opcode handlers in opcodes.HANDLERS)
from .builder import DynamicPolicy, wrap
from .generators import Generator, finalize
from .graph import GraphBuilder
from .opcodes import HANDLERS, SPECIALIZERS, Lazy, Return

# what a graph op may raise on other values than the trace's (the sizes, dtypes and devices are guarded):
# an `except` that matches none of these cannot see a graph op's error (an `except NotImplementedError:`)
OP_ERRORS = (RuntimeError, IndexError, ValueError, TypeError, OverflowError, ZeroDivisionError, MemoryError)

# instructions that let go of nothing (they push, or do nothing; the names of every Python traced):
# after them, no generator can have lost its last reference (trace/generators.py)
ONLY_PUSH = frozenset({"LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_FAST_AND_CLEAR", "LOAD_FAST_LOAD_FAST", "LOAD_CONST",
                       "LOAD_DEREF", "LOAD_CLOSURE", "LOAD_GLOBAL", "PUSH_NULL", "COPY", "NOP", "RESUME", "KW_NAMES",
                       "PRECALL", "EXTENDED_ARG", "MAKE_CELL", "COPY_FREE_VARS", "JUMP_FORWARD", "JUMP_BACKWARD",
                       "JUMP_BACKWARD_NO_INTERRUPT"})


@functools.lru_cache(maxsize=4096)
def instructions_of(code: types.CodeType):
    """The instructions of `code`, their indices by offset, its try/with facts, its exception
    handlers, and what the step loop reads of each instruction: (the instruction, its handler,
    the checkpoint it takes there: compat.checkpoint_kind) -- for the root frame, and for an
    inlined one (no checkpoint: only the root frame's are resumed from) -- then each one's line
    (that of the last instruction before it that has one, where it has none)."""
    insts = list(dis.get_instructions(code))
    steps = tuple((inst, _handler_of(inst), compat.checkpoint_kind(inst, code)) for inst in insts)
    steps = (steps, tuple((inst, fn, 0) for inst, fn, _ in steps))  # (an inlined frame's: no checkpoint kept)
    lines, line = [], code.co_firstlineno
    for inst in insts:
        if inst.positions is not None and inst.positions.lineno is not None:
            line = inst.positions.lineno
        lines.append(line)
    return insts, {inst.offset: i for i, inst in enumerate(insts)}, handled_offsets(code, insts), \
        exception_handlers(code), steps, tuple(lines)


def _logged(steps: tuple) -> tuple:
    """`steps` with each handler logging its instruction first (REWRITE_LOGS=trace)."""
    log = logs.get("trace")

    def logging(fn):
        def step(frame, inst):
            log.debug("%s%s:%s %s %s %s", "  " * frame.tracer.depth, frame.code.co_name, frame.lineno, inst.opname,
                      inst.argrepr, frame.stack)
            return fn(frame, inst)
        return step
    return tuple((inst, logging(fn), keep) for inst, fn, keep in steps)


def _handler_of(inst):
    """The step loop's handler of `inst`: one made for it (opcodes.specializer), or its opcode's."""
    make = SPECIALIZERS.get(inst.opname)
    return (make is not None and make(inst)) or HANDLERS.get(inst.opname, _unsupported)


def _unsupported(frame, inst):
    """The handler of an opcode the tracer has none for."""
    raise Unsupported(f"opcode {inst.opname} is not supported")


def _caller_handles() -> bool:
    """Whether the call being traced runs where an exception is being handled (not one of
    rewrite's own: a retrace runs inside the handler of the exception that asked for it)."""
    exc = sys.exc_info()[1]
    return exc is not None and not type(exc).__module__.startswith("rewrite.")


def exception_var(error: BaseException) -> ExceptionVar:
    """The traced form of an exception a Python operation raised while tracing."""
    return ExceptionVar(type(error), [const(a) for a in error.args])


class Checkpoint:
    """The root frame just before one instruction: where a graph break resumes from."""
    __slots__ = ("ip", "stack", "locals", "kw_names", "graph_mark", "mutations", "grad_enabled")

    def __init__(self, frame):
        self.mutations = checkpoint_mark()
        self.ip = frame.ip
        self.stack = list(frame.stack)
        self.locals = dict(frame.locals)
        if frame.cells:
            for name in frame.code.co_cellvars:  # the frame's own cells, as locals (a resume function
                cell = frame.cells.get(name)   # takes them as parameters, and MAKE_CELL wraps each again)
                if cell is not None and cell.contents is not None:
                    self.locals[name] = cell.contents
        self.kw_names = frame.kw_names
        tracer = frame.tracer
        self.graph_mark = tracer.graph.mark()
        self.grad_enabled = tracer.grad_enabled


class Tracer:
    """One trace of one call: the graph, the guards and the wrapped inputs."""

    def __init__(self, code: types.CodeType, globals_: dict, names: tuple[str, ...], args: tuple,
                 clone_inputs: bool = False, dynamic=None, facts: bool = True):
        self.code = code
        self.dynamic = dynamic if dynamic is not None else DynamicPolicy(None, {})
        self.shape_env = ShapeEnv()
        self.globals = globals_
        self.graph = GraphBuilder(clone_inputs, facts)
        self.guards = GuardSet()
        self.wrapped: dict[Source, Var] = {}
        self.by_identity: dict[int, Var] = {}  # id(object) -> its Var (objects kept alive by the call)
        # (id(globals or module), name) -> the Var of a module read as a global, of a trusted
        # module's attribute: read again while the trace has written no source (Frame.load_global,
        # module_attr), without making its source and asking side_effects again
        self.module_reads: dict[tuple, Var] = {}
        self.kept: list = []  # objects the trace made to read (copies), alive as long as it: ids stay unique
        self.traced_ids: dict = {}  # id(Var) -> (Var, TracedId): id() of values the trace made
        self.steps = 0
        self.root_ops = 0  # ops recorded by the root frame's own code (ops.tensors._record)
        self.depth = 0
        self.log_trace = logs.enabled("trace")
        self.grad_at_start = self.grad_enabled = torch.is_grad_enabled()
        self.default_dtype_read = False  # (its guard is in: ops.tensors._record asks no more)
        self.break_errors: list[bool] = []  # error_on_graph_break blocks open, innermost last
        self.errors_at_start = errors_at_start()  # torch's flag when the compile began
        self.state_reads = 0  # reads of state the entry's end sees otherwise (grad mode, torch's
        # state, what the call wrote): see instances.construct
        self.exc_info: Var = ConstVar(None)  # the exception being handled (sys.exception())
        self.outer_exc_info = self.exc_info  # (the caller's, where no handler of the trace's runs: exceptions.handled)
        self.outer_exc_guarded = False
        self.caller_handles = _caller_handles()  # (read now: later the tracer's own handlers run)
        self.root_cells_shared = False  # a closure over the root frame's cells was made
        self.open_contexts: list = []  # recorded contexts (autocast, ...) entered for real, innermost last
        self.ops_in_try = False  # graph ops an `except` covers: the entry runs eagerly if the graph raises
        self.numpy_unshared: dict = {}  # memory -> arrays viewing it in NumPy, copies here (ops/arrays.py)
        self.frames: list = []  # the frames running now, outermost first
        self.generators = 0  # generators made that may need closing: from the first on, frames keep their operands
        self.pending: list = []  # suspended generators whose closing runs code (trace/generators.py)
        self.finalizing = False
        self.side_effects = SideEffects(self)
        if compat.UNTRACED:  # the prologue works on 3.12 and 3.13; their opcode handlers are to come
            raise Unsupported(compat.UNTRACED)
        if torch_mode_active():
            e = Unsupported("a TorchDispatchMode or TorchFunctionMode is active (it would see the trace's ops)")
            e.guards = GuardSet()  # (the entry that runs the call eagerly takes only calls under a mode:
            e.guards.add(ModeActiveMatch())  # without a guard, every call after one would run eagerly)
            raise e
        self.guards.add(NoFunctionModeMatch())  # (traced under none: an entry runs under none)
        # the root frame's own **kwargs: a dict CPython made for this call, which nobody else holds.
        # Read through its source (its values are the call's inputs), changed in the trace's view
        # only (no side effect to replay) and rebuilt from its items wherever it goes (DictVar)
        self.own_kwargs = LocalSource(_varkw(code)) if code.co_flags & 0x08 else None
        nargs = len(names) - len(code.co_freevars)
        locals_ = {n: Lazy(v, LocalSource(n)) for n, v in zip(names[:nargs], args[:nargs])}
        cells = {n: CellVar(real=c, source=LocalSource(n)) for n, c in zip(names[nargs:], args[nargs:])}
        self.root = Frame(self, code, locals_, cells, globals_, GlobalSource, None)

    def run(self) -> Var:
        try:
            return self.root.run()
        finally:  # the ops ran for real under the traced modes: leave them as the caller had them
            for guard in self.shape_env.guards():  # what the trace assumed of symbolic sizes
                self.guards.add(guard)
            while self.open_contexts:
                close(self, self.open_contexts[-1])
            torch._C._set_grad_enabled(self.grad_at_start)

    def set_grad(self, enabled: bool) -> None:
        """Switch grad mode from here on: in the graph, and for the real ops the trace runs."""
        self.read_grad_mode()  # what leaving a `with` restores is the mode the entry was traced under
        if enabled != self.grad_enabled:
            self.graph.set_grad(enabled)
            torch._C._set_grad_enabled(enabled)
            self.grad_enabled = enabled

    def read_default_dtype(self) -> None:
        """The default dtype shaped a result (a factory call, promotion with a Python float, a
        floating result of integer tensors): guarded once (`default_dtype_read`)."""
        self.guards.add(DefaultDtypeMatch(torch.get_default_dtype()))
        self.default_dtype_read = True

    def release(self) -> None:
        """Let go of what the trace holds of the call -- its inputs, the values it computed --
        once the entry is built: its objects refer to each other (frames and their tracer,
        iterators and their frames), so without this they would live, the call's tensors with
        them, until the garbage collector runs (and a generator that came in would be closed
        late). Only the guards, the shape environment and the graph's nodes stay."""
        for frame in (self.root, *self.frames):
            frame.locals.clear()
            frame.stack.clear()
            frame.cells.clear()
            frame.checkpoint = frame.operands = None
        for table in (self.frames, self.wrapped, self.by_identity, self.module_reads, self.kept, self.traced_ids,
                      self.pending, self.open_contexts):
            table.clear()
        self.side_effects = SideEffects(self)
        self.exc_info = self.outer_exc_info = ConstVar(None)
        self.guards.examples.clear()
        self.graph.release()

    def errors_on_break(self) -> bool:
        """Whether a graph break here raises (torch._dynamo.error_on_graph_break(True) is on)."""
        return self.break_errors[-1] if self.break_errors else self.errors_at_start

    def module_attr(self, value, name: str) -> Var | None:
        """The Var of module `value`'s attribute `name` read before in this trace, while it has
        written no source (see module_reads), or None."""
        if type(value) is types.ModuleType and not self.side_effects.stores:
            return self.module_reads.get((id(value), name))
        return None

    def read_grad_mode(self) -> bool:
        """Grad mode was read while tracing: the entry is only valid when called under the
        mode this trace started with. Returns the mode now (a traced `with` may have changed it)."""
        self.guards.add(GradModeMatch(self.grad_at_start))
        self.state_reads += 1
        return self.grad_enabled

    # -- wrapping real values from sources (installs guards) --------------------------------
    def wrap(self, value, source: Source | None) -> Var:
        if source is None:
            return wrap(self, value, None)
        var = self.wrapped.get(source)
        if var is None:
            var = self.wrapped[source] = wrap(self, value, source)
            if source == self.own_kwargs and isinstance(var, DictVar):
                var.mutable = True  # (the call's own: see own_kwargs)
        return var

    # -- calls into Python functions ---------------------------------------------------------
    def inline(self, fn, args: list[Var], kwargs: dict[str, Var], fn_source: Source | None, caller: "Frame") -> Var:
        """Run a user function's bytecode in a new frame and return its result."""
        if isinstance(fn, FunctionVar):
            code, globals_, defaults, kwdefaults = fn.code, fn.globals, fn.defaults, fn.kwdefaults
            closure = fn.closure
            global_source = fn.globals_source
        else:
            why = disabled(fn)  # (however it was reached: a call, a method, a property, a hook)
            if why is not None:
                raise Unsupported(why)
            original = dynamo_patch(fn)
            if original is not None:  # (Dynamo's wrapper on torch.optim's _init_group: the function itself)
                fn, fn_source = original, AttrSource(fn_source, "_torchdynamo_orig_callable") if fn_source else None
            code, globals_ = original_code(fn.__code__), fn.__globals__
            defaults, kwdefaults, cells = fn.__defaults__ or (), fn.__kwdefaults__ or {}, fn.__closure__ or ()
            of = AttrSource(fn_source, "__defaults__") if fn_source and defaults else None  # (one per tuple)
            defaults = tuple(self.wrap(v, ItemSource(of, i) if of else None) for i, v in enumerate(defaults))
            of = AttrSource(fn_source, "__kwdefaults__") if fn_source and kwdefaults else None
            kwdefaults = {k: self.wrap(v, ItemSource(of, k) if of else None) for k, v in kwdefaults.items()}
            of = AttrSource(fn_source, "__closure__") if fn_source and cells else None
            closure = tuple(CellVar(real=c, source=ItemSource(of, i) if of else None) for i, c in enumerate(cells))
            global_source = _global_source_for(globals_, self.globals, fn_source)
            if fn_source is not None:  # the function object may keep its identity and change its code
                self.guards.add(IdMatch(AttrSource(fn_source, "__code__"), fn.__code__))
        if code.co_flags & (0x80 | 0x100 | 0x200):
            raise Unsupported(f"call to coroutine function {code.co_qualname}")
        if self.depth >= config.max_inline_depth:
            raise Unsupported(f"inlining deeper than {config.max_inline_depth} calls ({code.co_qualname})")
        locals_ = bind_arguments(code, args, kwargs, defaults, kwdefaults)
        cells = {}  # MAKE_CELL creates the frame's own cells
        for name, cell in zip(code.co_freevars, closure):
            cells[name] = cell
        frame = Frame(self, code, locals_, cells, globals_, global_source, caller)
        if code.co_flags & 0x20:  # a generator: its body runs as it is consumed, as in Python
            if frame.yields_in_handler():
                self.generators += 1  # (one that may have to be closed: the frames keep their operands now)
            gen = Generator(self, frame)
            if not isinstance(fn, FunctionVar):  # (what calling it again makes: the entry's rebuild of one never run)
                gen.made_by = (fn, fn_source, list(args), dict(kwargs))
            return gen.iterator
        self.depth += 1
        try:
            return frame.run()
        finally:
            self.depth -= 1

@functools.lru_cache(maxsize=1024)
def _yields_in_handler(code: types.CodeType) -> bool:
    insts, index_of, _, handlers, _, _ = instructions_of(code)
    for inst in insts:
        entry = handlers.get(inst.offset) if inst.opname == "YIELD_VALUE" else None
        if entry is not None and insts[index_of[entry[0]]].opname not in NOT_TRY_HANDLERS:
            return True
    return False


def _varkw(code: types.CodeType) -> str:
    """The name of the `**kwargs` parameter of a function with one."""
    return code.co_varnames[code.co_argcount + code.co_kwonlyargcount + bool(code.co_flags & 0x04)]


def _global_source_for(globals_: dict, root_globals: dict, fn_source: Source | None):
    if globals_ is root_globals:
        return GlobalSource
    if fn_source is None or trusted_globals(globals_):
        return None  # torch's own functions: their globals are constants, as torch's attributes are
    of = AttrSource(fn_source, "__globals__")  # (one object for all its reads: its hash made once)
    return lambda name: ItemSource(of, name)


def bind_arguments(code, args, kwargs, defaults, kwdefaults) -> dict[str, Var]:
    """Python's argument binding, over Vars; where it fails, Python's own TypeError (the user's)."""
    npos, nkw = code.co_argcount, code.co_kwonlyargcount
    names = code.co_varnames
    has_varargs, has_varkw = bool(code.co_flags & 0x04), bool(code.co_flags & 0x08)

    def fail():
        error = binding_error(code, len(defaults), kwdefaults, len(args), kwargs)
        if error is None:  # (binds in Python: the tracer's binding is wrong)
            raise Unsupported(f"binding the arguments of {code.co_qualname}")
        return PythonError(error)
    out: dict[str, Var] = {}
    if len(args) > npos and not has_varargs:
        raise fail()
    for name, value in zip(names[:npos], args):
        out[name] = value
    rest = dict(kwargs)
    posonly = names[:code.co_posonlyargcount]
    for name in names[:npos + nkw]:
        if name in rest and name not in posonly:
            if name in out:
                raise fail()
            out[name] = rest.pop(name)
    first_default = npos - len(defaults)
    for i, name in enumerate(names[:npos]):
        if name not in out:
            if i >= first_default:
                out[name] = defaults[i - first_default]
            else:
                raise fail()
    for name in names[npos:npos + nkw]:
        if name not in out:
            if name in kwdefaults:
                out[name] = kwdefaults[name]
            else:
                raise fail()
    i = npos + nkw
    if has_varargs:
        out[names[i]] = TupleVar(args[npos:])
        i += 1
    if has_varkw:
        out[names[i]] = DictVar(rest)
    elif rest:
        raise fail()
    return out


_METHOD_KINDS = (types.MethodType, types.BuiltinMethodType, types.MethodWrapperType)  # (a bound `__exit__`: no
# other object is asked its __name__, which a class of the user's may answer in Python)


def untraced_with_open(stack) -> bool:
    """Whether a `with` block over a context manager of the user's is open -- one the tracer did
    not enter (its real `__exit__` on the stack) or one whose `__exit__` it traces: either may
    swallow an exception (breaks.plan lets only a call break there)."""
    for v in stack:
        t = type(v)
        if t is TensorVar or t is ConstVar:  # (most of what a stack holds: neither)
            continue
        if isinstance(v, ObjectVar) and type(v.value) in _METHOD_KINDS and v.value.__name__ == "__exit__" or \
                isinstance(v, BoundVar) and v.func.__name__ == "__exit__":
            return True
    return False


class Frame:
    """The state of one (possibly inlined) function while it is interpreted."""

    def __init__(self, tracer: Tracer, code, locals_, cells, globals_, global_source, parent):
        self.tracer = tracer
        self.code = code
        self.instructions, self.index_of, (self.handled, self.user_try, self.caught), self.handlers, self.step_table, \
            self.lines = instructions_of(code)
        self.locals: dict = locals_
        self.cells: dict[str, CellVar] = cells
        self.globals = globals_
        self.builtins = globals_.get("__builtins__", __builtins__)
        if isinstance(self.builtins, types.ModuleType):
            self.builtins = self.builtins.__dict__
        self.global_source = global_source
        self.parent = parent
        # (no `try` nor `with` in its code or its callers': in_try is False without the walk)
        self.may_catch = self.handled or parent is not None and parent.may_catch
        self.stack: list[Var] = []
        self.ip = 0
        self.checkpoint: Checkpoint | None = None  # root frame only
        self.counted = 0  # the instruction from which the steps run are not counted yet (see run)
        self.kw_names: tuple[str, ...] = ()
        self.operands: list | None = None  # the stack before the instruction running now (what it took)
        self._catches: dict = {}  # (handler, errors) -> whether its `except` clauses may match them

    def in_try(self, errors: tuple = OP_ERRORS) -> bool:
        """Whether an exception of a class in `errors` (by default, what a graph op may raise on
        other values) raised now could be caught by a handler of this frame or a caller's: an
        `except` that may end it and whose clauses may match it (StaticCache's `except
        NotImplementedError:` around `index_copy_` does not: a `finally` lets it go on), or a
        `with` over a context manager the trace did not enter itself (its `__exit__` may swallow
        the exception). Traced grad-mode `with`s only re-raise."""
        frame = self
        while frame is not None and frame.may_catch:  # (none above one that may not: the walk ends)
            if frame.handled:  # (a code with no `try` and no `with`: nothing of it can catch)
                targets = frame.caught.get(frame.instructions[frame.ip - 1].offset) if frame.ip else None
                if targets and any(frame._may_catch(target, errors) for target in targets):
                    return True
                if untraced_with_open(frame.stack):
                    return True
            frame = frame.parent
        return False

    def _may_catch(self, target: int, errors: tuple) -> bool:
        """Whether the handler at `target` has an `except` clause that may match `errors`."""
        key = (target, errors)
        if key not in self._catches:
            clauses = except_clauses(self.instructions, self.index_of, target)
            self._catches[key] = clauses is None or any(self._matches(loads, errors) for loads in clauses)
        return self._catches[key]

    def _matches(self, loads: list, errors: tuple) -> bool:
        """Whether an `except` clause (the instructions that load its classes) may match: its
        classes as the trace reads them (guarded as any read); one it cannot read may."""
        stack: list[Var] = []
        try:
            for inst in loads:
                if inst.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
                    stack.append(self.load_global(inst.argval))
                elif inst.opname == "LOAD_ATTR":
                    stack.append(ops.getattr_(self, stack.pop(), inst.argval))
                elif inst.opname == "LOAD_FAST":
                    stack.append(self.load_local(inst.argval))
                elif inst.opname == "LOAD_DEREF":
                    stack.append(self.load_cell(inst.argval))
                elif inst.opname == "BUILD_TUPLE":
                    stack[-inst.arg:] = [TupleVar(stack[-inst.arg:])] if inst.arg else [TupleVar([])]
            classes = ops.python_value(stack[-1], "an except clause")
        except (Unsupported, UserError, Raised, IndexError):
            return True
        classes = classes if isinstance(classes, tuple) else (classes,)
        return any(not isinstance(c, type) or any(issubclass(e, c) for e in errors) for c in classes)

    # -- stack helpers used by handlers -------------------------------------------------------
    def push(self, v: Var) -> None:
        self.stack.append(v)

    def pop(self) -> Var:
        return self.stack.pop()

    def popn(self, n: int) -> list[Var]:
        if n == 0:
            return []
        out = self.stack[-n:]
        del self.stack[-n:]
        return out

    def jump(self, offset: int) -> None:
        index, ip = self.index_of[offset], self.ip
        self.tracer.steps += ip - self.counted  # (the instructions run since the last jump)
        self.ip = self.counted = index
        if index < ip:  # (a loop: where a trace too long is stopped)
            self.check_length()

    # -- variables -----------------------------------------------------------------------------
    def load_local(self, name: str) -> Var:
        v = self.locals.get(name)
        if v is None:
            raise Unsupported(f"local variable {name!r} read before assignment")
        if isinstance(v, Lazy):
            v = self.locals[name] = self.tracer.wrap(v.value, v.source)
        return v

    def load_global(self, name: str) -> Var:
        tracer = self.tracer
        if self.global_source is not None:
            if tracer.side_effects.stores:
                stored = tracer.side_effects.load(self.global_source(name), location(self.globals, name))
                if stored is not None:
                    return stored
            else:
                known = tracer.module_reads.get((id(self.globals), name))
                if known is not None:
                    return known
        if name in self.globals:
            value = self.globals[name]
            if self.global_source is None:
                if trusted_globals(self.globals):  # dataclasses, functools, ...: constants, as their attributes are
                    return tracer.wrap(value, None)
                raise Unsupported(f"global {name!r} of a function the tracer cannot locate")
            var = tracer.wrap(value, self.global_source(name))
            if type(value) is types.ModuleType and type(var) is ObjectVar:
                tracer.module_reads[(id(self.globals), name)] = var
            return var
        if name in self.builtins:
            if self.global_source is GlobalSource:  # a later global of that name would shadow it
                self.tracer.guards.add(NotInMatch(GlobalsSource(), name))
            elif self.global_source is not None:
                self.tracer.guards.add(NotInMatch(self.global_source(name).base, name))
            return ObjectVar(self.builtins[name])
        raise Unsupported(f"name {name!r} is not defined")

    def load_cell(self, name: str) -> Var:
        cell = self.cells[name]
        if cell.real is None:
            if cell.contents is None:
                raise Unsupported(f"free variable {name!r} read before assignment")
            return cell.contents
        source = CellContentsSource(cell.source) if cell.source is not None else None
        if source is not None:
            stored = self.tracer.side_effects.load(source, location(cell.real, None))
            if stored is not None:
                return stored
        try:
            value = cell.real.cell_contents
        except ValueError:
            raise Unsupported(f"free variable {name!r} read before assignment") from None
        return self.tracer.wrap(value, source)

    # -- the loop ------------------------------------------------------------------------------
    def runs_handler_at(self, index: int) -> bool:
        """Whether an exception raised at instruction `index` runs code of the function's own (a
        handler of a `try` or `with` covers it, not one Python adds)."""
        entry = self.handlers.get(self.instructions[index].offset)
        return entry is not None and self.instructions[self.index_of[entry[0]]].opname not in NOT_TRY_HANDLERS

    def yields_in_handler(self) -> bool:
        """Whether a generator of this code can stop at a `yield` whose closing runs its code."""
        return _yields_in_handler(self.code)

    def run(self) -> Var:
        tracer = self.tracer
        frames = tracer.frames
        if frames:  # the caller's run so far counted now: only the running frame has a run open
            caller = frames[-1]
            tracer.steps += caller.ip - caller.counted
            caller.counted = caller.ip
        frames.append(self)
        self.counted = self.ip  # (Tracer.steps counts what ran from here: at each jump, and at the end)
        try:
            return self._run()
        finally:
            tracer.frames.pop()
            tracer.steps += self.ip - self.counted
            self.counted = self.ip  # (a jump made while it waits -- a generator thrown into -- adds none)

    @property
    def lineno(self) -> int:
        """The line of the instruction running now (or of the `def`, before the first)."""
        return self.lines[self.ip - 1] if self.ip else self.code.co_firstlineno

    def check_length(self) -> None:
        """Stop a trace past config.max_trace_instructions: asked where a frame starts or resumes
        and at each backward jump, of the running frame. (`Tracer.steps` counts the instructions
        run, a straight run of them at a time: at each jump, where a frame stops, and where it
        calls another -- so the running frame's is the one run not counted yet.)"""
        limit = config.max_trace_instructions
        frames = self.tracer.frames
        top = frames[-1] if frames else self  # (this frame, or the one running while it is thrown into)
        if self.tracer.steps + top.ip - top.counted > limit:  # (with what runs now)
            raise Unsupported(f"trace longer than {limit} instructions")

    def _run(self) -> Var:
        """Run the frame's instructions from `ip` until it returns (Return) or raises. The root
        frame keeps a checkpoint before each instruction a break may resume from (see
        compat.checkpoint_kind); an inlined frame's steps keep none (see instructions_of: a
        break there runs the whole call eagerly). The step loop is what runs per instruction:
        the exceptions are caught outside it (and it starts again where a handler of the
        frame's caught one), logging wraps the handlers (`_logged`).

        A binary operator on a tensor and a tensor or a number is recorded as an op, and an op
        breaks only where an `except` may see it, a size came from data or sizes are symbols
        (ops.tensors._record): elsewhere the loop keeps no checkpoint before one -- the most
        frequent instruction a trace runs (a break that comes there anyway, one the rules above
        did not foresee, runs the whole call eagerly)."""
        tracer = self.tracer
        is_root = self is tracer.root
        steps = self.step_table[0 if is_root else 1]
        if tracer.log_trace:
            steps = _logged(steps)
        stack, graph, shape_env = self.stack, tracer.graph, tracer.shape_env
        inst = ip = None
        try:
            self.check_length()
        except Unsupported as e:
            raise self._locate(e)
        while True:
            try:
                while True:
                    if tracer.generators:  # (frames keep their operands from the first generator on)
                        self.operands = None
                        if tracer.pending and (inst is None or inst.opname not in ONLY_PUSH):
                            self._finalize()  # (the previous instruction may have let go of a generator's last reference)
                        self.operands = list(stack)
                    ip = self.ip
                    inst, fn, keep = steps[ip]
                    if keep:  # (where a break may resume: elsewhere a break runs the whole call eagerly)
                        if keep == 4:  # a binary operator (see below)
                            a, b = type(stack[-2]), type(stack[-1])
                            take = (a is not ConstVar or b is not ConstVar) and not (
                                (a is TensorVar and (b is TensorVar or b is ConstVar) or a is ConstVar and b is TensorVar)
                                and not self.may_catch and not graph.data_dependent and not shape_env.hints)
                        elif keep == 5:  # an attribute: a module's read before is what it read (ops.getattr_)
                            v = stack[-1]
                            take = type(v) is not ConstVar and not (
                                type(v) is ObjectVar and tracer.module_attr(v.value, inst.argval) is not None)
                        else:
                            take = keep == 3 or keep == 2 and type(stack[-2]) is not ConstVar or \
                                type(stack[-1]) is not ConstVar
                        if take:
                            self.checkpoint = Checkpoint(self)
                        elif self.checkpoint is not None:
                            self.checkpoint = None
                            checkpoint_dropped()
                    elif self.checkpoint is not None:
                        self.checkpoint = None
                        checkpoint_dropped()
                    self.ip = ip + 1
                    fn(self, inst)
            except Return as r:
                if is_root and tracer.pending:  # (its frame goes: what only its locals held, too)
                    self._finalize(r.value)
                return r.value
            except Unsupported as e:
                raise self._locate(e, ip)
            except (Raised, PythonError) as e:
                exc = e.exc if isinstance(e, Raised) else exception_var(e.error)
                if isinstance(exc, ExceptionVar) and exc.traceback is None:  # raised here, first
                    exceptions.chain(self, exc)
                    exceptions.raised(exc)
                if not self.catch(exc, inst):
                    if is_root:  # the call raises: where, is for the graph break (or eager run) to find
                        raise self._locate(RaisesEagerly(f"raising {exc.cls.__name__} (the call raises eagerly)",
                                                         exc.cls), ip)
                    raise Raised(exc) from None
            except RecursionError:
                raise self._locate(Unsupported("recursion too deep while tracing"), ip)
            except UserError as e:  # a torch op raised: the call runs eagerly, where an `except` may catch it
                if e.covered is None:
                    e.covered = self.in_try((type(e.error),))
                raise

    def _finalize(self, returned: Var | None = None) -> None:
        try:
            finalize(self.tracer, returned)
        except Unsupported as e:
            raise self._locate(e)

    def catch(self, exc: Var, inst) -> bool:
        """Hand a traced exception to this frame's handler for `inst`, as the interpreter
        does: the stack cut to the handler's depth, (lasti,) the exception pushed."""
        entry = self.handlers.get(inst.offset)
        if entry is None:
            return False
        target, depth, lasti = entry
        del self.stack[depth:]
        if lasti:
            self.push(ConstVar(inst.offset))
        self.push(exc)
        self.jump(target)
        return True

    def _locate(self, e: Unsupported, index: int | None = None) -> Unsupported:
        """`e`, located at the instruction at `index` (by default the one running now)."""
        e.locate(self.code.co_filename, self.lineno if index is None else self.lines[index], self.code.co_name)
        return e
