"""The per-code-object cache: entries, LRU order, recompile limits, the miss path.

The prologue calls `slot.guard(*args, *cells)`, the newest entry's guard closure, and on
success `slot.entry(...)`. Otherwise it calls `slot.call(...)`: `Dispatcher.miss` when
there is no other entry, else a generated function that tries the other entries' guards
in most-recently-hit order:

    def dispatch(x, n):
        if ___g1(x, n):
            return ___hit(1, x, n)      # promote entry 1 to the front, then run it
        if ___g2(x, n):
            return ___hit(2, x, n)
        return ___miss(x, n)

Promotion rebinds the slot and the closure cells of that function, so reordering costs no
code generation. A new entry regenerates it (once per compile).
"""
from __future__ import annotations

import warnings
import weakref
from typing import TYPE_CHECKING

import torch

from . import codeload, config, logs
from .bytecode.splice import prologue_names
from .slot import MISS, Options, Slot, _Miss, _never  # noqa: F401  (torch-free: the import hook uses them)

if TYPE_CHECKING:
    from .compile import Entry
from .errors import BackendCompilerFailed, InternalError, RecompileLimitExceeded, Unsupported, UserError
from .guards.source import param_name


_ALL: "weakref.WeakSet[Dispatcher]" = weakref.WeakSet()
OBSERVERS: list[list] = []  # explain() collects (dispatcher, entry) for each compile while it runs


class Dispatcher:
    MISS = MISS

    def __init__(self, code, globals_: dict, options: Options, qualname: str, slot: Slot | None = None):
        self.code = code
        self.globals = globals_
        self.options = options
        self.qualname = qualname
        self.params = prologue_names(code)
        self.entries: list[Entry] = []
        self.compiles = 0
        self.frame_state: dict = {}  # (source, kind) -> sizes or int seen by the first compile (None: dynamic since)
        self.slot = slot if slot is not None else Slot()
        self.slot.guard, self.slot.entry, self.slot.call = _never, None, self.miss
        self.slot.name = qualname
        self.recompile_limit: int | None = None  # None: config.recompile_limit
        self.on_limit = None  # called instead of warning when the limit is hit (the import hook)
        self._busy = False
        self._warned_limit = False
        self._cells: dict = {}
        _ALL.add(self)

    # -- the miss path ----------------------------------------------------------------------
    def miss(self, *args):
        if self._busy:  # a call made while this function is being compiled runs eagerly
            return MISS
        if self.entries and logs.enabled("recompiles"):
            logs.get("recompiles").debug("%s", self._recompile_reason(args))
        limit = self.recompile_limit or config.recompile_limit
        if len(self.entries) >= limit or self.compiles >= config.accumulated_recompile_limit:
            return self._limit_hit(args)
        rng = _rng_state()
        self._busy = True
        try:
            from .compile import compile_entry  # (rewrite.compile -> breaks -> api -> this module)
            entry = compile_entry(self, args)
        except Unsupported:  # only with fullgraph=True; otherwise it becomes a fallback entry
            _set_rng_state(rng)
            raise
        except BackendCompilerFailed as e:
            _set_rng_state(rng)
            if not config.suppress_errors:
                raise
            warnings.warn(f"rewrite: {e}; running {self.qualname} eagerly", RuntimeWarning, stacklevel=2)
            return MISS
        except UserError:
            # the user's own code raised while tracing: eager raises it, from the user's line
            _set_rng_state(rng)
            return MISS
        except Exception as e:
            _set_rng_state(rng)
            if not config.suppress_errors:
                raise InternalError(f"rewrite failed to compile {self.qualname}: {type(e).__name__}: {e}") from e
            warnings.warn(f"rewrite: internal error compiling {self.qualname} ({type(e).__name__}: {e}); "
                          "running it eagerly", RuntimeWarning, stacklevel=2)
            return MISS
        finally:
            self._busy = False
        _set_rng_state(rng)
        self.compiles += 1
        if entry.reason is not None and logs.enabled("graph_breaks"):
            logs.get("graph_breaks").debug("%s runs eagerly: %s", self.qualname, entry.reason)
        self.entries.insert(0, entry)
        for observer in OBSERVERS:
            observer.append((self, entry))
        self._regenerate()
        return entry.fn(*args)

    def _limit_hit(self, args):
        if self.on_limit is not None:  # the import hook: the function runs its original code from now on
            self.on_limit()
            return MISS
        if self.options.fullgraph:
            raise RecompileLimitExceeded(f"{self.qualname} hit config.recompile_limit ({config.recompile_limit})")
        if not self._warned_limit:
            self._warned_limit = True
            reasons = self.entries[0].guard.failures(args) if self.entries else []
            last = reasons[0] if reasons else "unknown"
            where = f"{self.code.co_filename}:{self.code.co_firstlineno}"
            # attributed to the function's own definition, wherever it is called from
            warnings.warn_explicit(f"rewrite: {self.qualname} ({where}) hit config.recompile_limit "
                                   f"({config.recompile_limit}); calls no cache entry accepts now run eagerly. "
                                   f"Last reason: {last}", RuntimeWarning, self.code.co_filename,
                                   self.code.co_firstlineno, module=self.globals.get("__name__"))
        return MISS

    def _recompile_reason(self, args) -> str:
        lines = [f"Recompiling function {self.qualname} in {self.code.co_filename}:{self.code.co_firstlineno}",
                 "    triggered by the following guard failure(s):"]
        for e in self.entries:
            for why in e.guard.failures(args)[:1]:
                lines.append(f"    - {self.code.co_name}/{e.index}: {why}")
        return "\n".join(lines)

    # -- the hit path -------------------------------------------------------------------------
    def _hit(self, i, *args):
        entry = self.entries.pop(i)
        self.entries.insert(0, entry)
        self._rebind()
        return entry.fn(*args)

    def _regenerate(self) -> None:
        """Generate the dispatch function over entries 1..n-1 (entry 0 is tried by the prologue)."""
        n = len(self.entries)
        args = ", ".join(param_name(p) for p in self.params)
        lines = []
        for i in range(1, n):
            lines.append(f"if ___g{i}({args}):")
            lines.append(f"    return ___hit({i}, {args})")
        lines.append(f"return ___miss({args})")
        free = ", ".join(["___miss", "___hit"] + [f"___g{i}" for i in range(1, n)])
        body = "".join(f"        {line}\n" for line in lines)
        source = (f"# dispatch of {self.qualname}: entries 1..{n - 1}, most recently hit first "
                  f"(the prologue tries entry 0)\n"
                  f"def ___make({free}):\n"
                  f"    def dispatch({args}):\n{body}"
                  f"    return dispatch\n")
        ns = codeload.load("dispatch", f"{self.code.co_name}_{n}", source, {})
        fn = ns["___make"](self.miss, self._hit, *[e.guard.fn for e in self.entries[1:]])
        self._cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))
        fn.__qualname__ = fn.__name__ = f"dispatch_{self.code.co_name}"
        self.slot.call = fn
        self._rebind()

    def _rebind(self) -> None:
        for i, e in enumerate(self.entries[1:], start=1):
            self._cells[f"___g{i}"].cell_contents = e.guard.fn
        first = self.entries[0]
        self.slot.guard, self.slot.entry = first.guard.fn, first.fn

    def disable_entry(self, entry, why: str) -> None:
        """Stop running an entry's compiled code (it raised where eager does not): warn once,
        and let the entry run its calls eagerly, guarded as before."""
        if entry not in self.entries or entry.reason is not None:
            return
        entry.reason = why
        entry.fn = _eager_entry
        warnings.warn_explicit(f"rewrite: {self.qualname}: {why}; that cache entry runs its calls eagerly from now "
                               "on", RuntimeWarning, self.code.co_filename, self.code.co_firstlineno,
                               module=self.globals.get("__name__"))
        self._rebind()

    # -- choosing a backend --------------------------------------------------------------------
    def backend_for(self, cap):
        from rewrite.codegen import default_backend, lookup_backend
        backend = self.options.backend
        if backend is None:
            backend = default_backend([v for _, v, _ in cap.tracer.graph.inputs])
        return lookup_backend(backend)

    def reset(self) -> None:
        self.entries.clear()
        self.compiles = 0
        self.frame_state.clear()
        self._warned_limit = False
        self.slot.guard, self.slot.entry, self.slot.call = _never, None, self.miss


def _eager_entry(*args):
    return MISS


def reset_all() -> None:
    for d in list(_ALL):
        d.reset()


def _rng_state():
    state = torch.random.get_rng_state()
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() and torch.cuda.is_initialized() else None
    return state, cuda


def _set_rng_state(saved) -> None:
    state, cuda = saved
    torch.random.set_rng_state(state)
    if cuda is not None:
        torch.cuda.set_rng_state_all(cuda)

