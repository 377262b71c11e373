"""The per-code-object cache: entries, dispatch over them, recompile limits, the miss path.

Each entry function starts with its own guards (generated, inlined) and returns NEXT when
one fails. The prologue calls `slot.ref()`: the only entry, or, with several, a generated
dispatch that picks the entry by the facts that tell the entries apart (a size, a dtype, a
Python number's value), then tries them newest first:

    def dispatch(x, n):
        try:
            ___e = ___table.get((x.shape[0], n))     # the entry compiled for these facts
        except Exception:
            ___e = None
        if ___e is not None:
            ___r = ___e(x, n)
            if ___r is not ___NEXT:
                return ___r
        ___r = ___e0(x, n)                           # newest first (guards keep it correct)
        if ___r is not ___NEXT:
            return ___r
        ...
        return ___NEXT                               # -> slot.call: the miss path

Entries are held by identity in a tuple that is replaced, never changed in place, and a new
dispatch is published by one attribute store: a thread calling meanwhile runs the old one or
the new one, each whole. Compiles take one process-wide re-entrant lock without waiting (as
Dynamo does): a call that finds another thread compiling runs eagerly.
"""
from __future__ import annotations

import functools
import math
import sys
import threading
import types
import warnings
import weakref

import torch

from . import codeload, config, logs, persist, strict, watch
from .bytecode import compat
from .bytecode.splice import prologue_names
from .compile import Entry, compile_entry
from .errors import (BackendCompilerFailed, BreaksWarning, EagerWarning, InternalError, RecompileLimitExceeded,
                     Unsupported, UserError)
from .guards.guard import EqualsMatch, TensorMatch, TypeMatch
from .guards.source import comment, param_name
from .registry import default_backend, lookup_backend
from .slot import MISS, NEXT, NEXT_REF, Options, Slot, _miss, _next, orphan  # noqa: F401  (re-exported: callees, api)


_ALL: "weakref.WeakSet[Dispatcher]" = weakref.WeakSet()
OBSERVERS: list[list] = []  # explain() collects (dispatcher, entry) for each compile while it runs
COMPILE_LOCK = threading.RLock()  # one compile at a time in the process; compile state is shared


class Dispatcher:
    MISS = MISS

    def __init__(self, code, globals_: dict, options: Options, qualname: str, slot: Slot | None = None):
        self.code = code
        self.globals = globals_
        self.options = options
        self.qualname = qualname
        self.params = prologue_names(code)
        self.entries: tuple[Entry, ...] = ()  # newest first; replaced whole, never changed in place
        self.compiles = 0
        # (source's expression, kind) -> sizes or int the first compile saw (None: dynamic since)
        self.frame_state: dict = {}
        self.slot = slot if slot is not None else Slot()
        self.slot.ref, self.slot.call = NEXT_REF, _weak_miss(weakref.ref(self))
        self.slot.name, self.slot.owner = qualname, weakref.ref(self)
        self._published: list = []  # what slot.ref refers to, now and before (the slot holds it weakly)
        weakref.finalize(self, orphan, self.slot)
        self.recompile_limit: int | None = None  # None: config.get("recompile_limit")
        self.on_limit = None  # called instead of warning when the limit is hit (the import hook)
        self._busy = False  # compiling now (read and written under COMPILE_LOCK only)
        self._warned_limit = False
        self.warn_eager = False  # say when a call runs wholly eagerly (set by jit: not resume functions, the hook)
        self._warned_eager = False
        self.callees: dict = {}  # (code, share key) -> the jitted copy its eager parts called last (callees.router)
        self.route = None  # that router (api.jit makes it)
        self.share = ()  # what else its functions share besides code and globals (callees.share_key)
        self.on_plain = None  # called when a compile found no tensors and no ops (callees._make sets it)
        self.plain = False  # (then: callees call the original function, not this one's)
        self.root = None  # a weak reference to the @jit function's dispatcher whose eager part this is
        self.breaks = 0  # graph breaks compiled under it (this one a root: see _count_break)
        self.graph_ops = self.eager_ops = 0  # ops compiled into graphs under it, ops traced that run outside any
        self.persisted = persist.Held()  # what the persistent cache holds for it (rewrite/persist.py)
        persist.prefetch()
        self._warned_breaks = self._warned_share = False
        _ALL.add(self)

    # -- the miss path ----------------------------------------------------------------------
    def miss(self, *args):
        if not COMPILE_LOCK.acquire(blocking=False):
            return MISS  # another thread is compiling: this call runs eagerly
        try:
            held = stance()
            if held != "default" and _stance_says_eager(self, held, args):
                return MISS
            entry, first = self._entry_for(args)
        finally:
            COMPILE_LOCK.release()
        if first is None and entry is None:
            return MISS
        result = entry.fn(*args) if first is None else first(*args)
        return MISS if result is NEXT else result

    def _entry_for(self, args):
        """(The entry for this call, compiled now if none accepts it (under COMPILE_LOCK); what
        runs this call in its place: None, or the compile's own result -- see compile.first_call_source.)"""
        if self._busy:  # a call made while this function is being compiled (recursion) runs eagerly
            return None, None
        for e in self.entries:  # another thread may have compiled it since this call's guards ran
            if e.guard.fn(*args):
                return e, None
        if self.entries and logs.enabled("recompiles"):
            logs.get("recompiles").debug("%s", self._recompile_reason(args))
        limit, most = self.recompile_limit or config.get("recompile_limit"), config.get("accumulated_recompile_limit")
        hit = ("recompile_limit", limit) if len(self.entries) >= limit else \
            ("accumulated_recompile_limit", most) if self.compiles >= most else None
        if hit is not None:
            self._limit_hit(args, *hit)
            return None, None
        self._busy = True
        try:
            loaded = persist.load(self, args)  # (an entry a process before this one compiled: the call ran in it)
            entry = loaded[0] if loaded is not None else compile_entry(self, args)
        except Unsupported:  # only with fullgraph=True; otherwise it becomes a fallback entry
            raise
        except BackendCompilerFailed as e:
            if not config.get("suppress_errors"):
                raise
            warnings.warn(f"rewrite: {e}; running {self.qualname} eagerly", RuntimeWarning, stacklevel=3)
            return None, None
        except UserError as e:
            # the user's own code raised while tracing: eager raises it, from the user's line
            return None, strict.checker(self, e)
        except Exception as e:
            if not config.get("suppress_errors"):
                raise InternalError(f"rewrite failed to compile {self.qualname}: {type(e).__name__}: {e}") from e
            warnings.warn(f"rewrite: internal error compiling {self.qualname} ({type(e).__name__}: {e}); "
                          "running it eagerly", RuntimeWarning, stacklevel=3)
            return None, None
        finally:
            self._busy = False
        self.compiles += 1
        first, entry.first = entry.first, None  # (this call's alone: never published with the entry)
        if loaded is not None:
            first = loaded[1]  # (what the call returned, or raised, in the loaded entry)
        if entry.error is not None:  # a fallback: in strict mode, eager's run is checked (rewrite/strict.py)
            first, entry.error = strict.checker(self, entry.error, entry.where), None
        if self.on_plain is not None and not entry.graph and entry.graph_break is None \
                and entry.reason is None and not _holds_tensors(args):
            self.on_plain()  # (a callee copy with no tensors and no ops: called as it is from now on)
        if entry.graph_break is not None:
            self._count_break(entry)
        self._count_ops(entry)
        persist.store(self, entry)
        if entry.reason is not None:
            if logs.enabled("graph_breaks"):
                logs.get("graph_breaks").debug("%s runs eagerly: %s", self.qualname, entry.reason)
            if self.warn_eager and not entry.raises and not self._warned_eager:
                self._warned_eager = True
                self._warn_eager(entry)
        self.entries = (entry, *self.entries)
        for observer in OBSERVERS:
            observer.append((self, entry))
        self._publish()
        return entry, first

    def _limit_hit(self, args, knob: str, limit: int):
        if self.on_limit is not None:  # the import hook: the function runs its original code from now on
            self.on_limit()
            return MISS
        if self.options.fullgraph:
            raise RecompileLimitExceeded(f"{self.qualname} hit config.{knob} ({limit})")
        if not self._warned_limit:
            self._warned_limit = True
            reasons = self.entries[0].guard.failures(args) if self.entries else []
            last = reasons[0] if reasons else "unknown"
            where = f"{self.code.co_filename}:{self.code.co_firstlineno}"
            # attributed to the function's own definition, wherever it is called from
            warnings.warn_explicit(f"rewrite: {self.qualname} ({where}) hit config.{knob} "
                                   f"({limit}); calls no cache entry accepts now run eagerly. "
                                   f"Last reason: {last}", RuntimeWarning, self.code.co_filename,
                                   self.code.co_firstlineno, module=self.globals.get("__name__"))
        return MISS

    def _count_break(self, entry) -> None:
        """Once per @jit function: its calls compiled more graph breaks than config says."""
        root = self.root() if self.root is not None else self
        if root is None:
            return
        root.breaks += 1
        if root.warn_eager and root.breaks > config.graph_break_warning and not root._warned_breaks:
            root._warned_breaks = True
            at = "".join(f" (the last at {f}:{line}: {entry.graph_break.splitlines()[0]})"
                         for f, line, _fn in entry.where[-1:])
            warnings.warn_explicit(f"rewrite: {root.qualname} compiled {root.breaks} graph breaks, in it and in the "
                                   f"functions it calls{at}; each returns to Python between graphs, so its calls "
                                   "may run slower than eager. rewrite.explain(fn)(...) lists them", BreaksWarning,
                                   root.code.co_filename, root.code.co_firstlineno,
                                   module=root.globals.get("__name__"))

    def _count_ops(self, entry) -> None:
        """Once per @jit function: more than a quarter of the ops its compiles traced (in it and
        the functions it calls) run outside any graph -- a break in a call that runs as it is,
        a frame that runs eagerly (a lower bound: Entry.eager_ops)."""
        root = self.root() if self.root is not None else self
        if root is None or entry.raises or entry.reason is not None and root is self:
            return  # (a root that runs wholly eagerly: _warn_eager says so)
        root.graph_ops += entry.ops if entry.graph else 0
        root.eager_ops += entry.eager_ops
        if logs.enabled("graph_breaks") and entry.graph and (entry.graph_break is not None or self is not root):
            logs.get("graph_breaks").debug("%s (%s:%s): a graph of %d ops%s", self.qualname, self.code.co_filename,
                                           self.code.co_firstlineno, entry.ops,
                                           "" if self is root else f", part of {root.qualname}'s calls")
        if root.warn_eager and not root._warned_share and root.eager_ops * 4 > root.eager_ops + root.graph_ops:
            root._warned_share = True
            at = "".join(f" (the last at {f}:{line}: {(entry.eager_reason or '').splitlines()[0]})"
                         for f, line, _fn in entry.where[-1:])
            warnings.warn_explicit(f"rewrite: {root.qualname}: at least {root.eager_ops} of the "
                                   f"{root.eager_ops + root.graph_ops} tensor ops its calls traced (in it and in "
                                   f"the functions it calls) run outside any graph{at}: graph breaks in calls "
                                   "that run as they are, or functions that run eagerly. rewrite.explain(fn)(...) "
                                   "lists them", BreaksWarning, root.code.co_filename, root.code.co_firstlineno,
                                   module=root.globals.get("__name__"))

    def _warn_eager(self, entry) -> None:
        """Once per function: this call (and the calls its entry accepts) ran wholly eagerly.
        Once per process where this Python is not traced at all."""
        global _WARNED_UNTRACED
        reason = entry.reason.split("\n  at ")[0].splitlines()[0]
        if compat.UNTRACED and reason == compat.UNTRACED:
            if not _WARNED_UNTRACED:
                _WARNED_UNTRACED = True
                warnings.warn_explicit(f"rewrite: {reason}: every @jit function runs eagerly on Python "
                                       f"{compat.VERSION} (said once per process)", EagerWarning,
                                       self.code.co_filename, self.code.co_firstlineno,
                                       module=self.globals.get("__name__"))
            return
        at = "".join(f" (at {f}:{line})" for f, line, _fn in entry.where[-1:])
        warnings.warn_explicit(f"rewrite: {self.qualname} ran wholly eagerly, none of its own code compiled: "
                               f"{reason}{at}. (The functions it calls compile on their own.) "
                               "rewrite.explain(fn)(...) shows the graphs and breaks", EagerWarning,
                               self.code.co_filename, self.code.co_firstlineno, module=self.globals.get("__name__"))

    def _recompile_reason(self, args) -> str:
        lines = [f"Recompiling function {self.qualname} in {self.code.co_filename}:{self.code.co_firstlineno}",
                 "    triggered by the following guard failure(s):"]
        for e in self.entries:
            for why in e.guard.failures(args)[:1]:
                lines.append(f"    - {self.code.co_name}/{e.index}: {why}")
        return "\n".join(lines)

    # -- the hit path -------------------------------------------------------------------------
    def _publish(self) -> None:
        """Point the prologue at the entries as they are now: one store, of one function."""
        entries = self.entries
        hit = _next if not entries else entries[0].fn if len(entries) == 1 else self._dispatch(entries)
        self._published.append(hit)  # every one stays: a thread may be about to call an older one
        self.republish()

    def republish(self) -> None:
        """The prologue at the newest published hit -- or, while the stance is "force_eager", at
        one that runs the original bytecode (cache hits included, as under torch.compile)."""
        hit = self._published[-1] if self._published else None
        self.slot.ref = _MISS_REF if _FORCED_EAGER else NEXT_REF if hit is None else weakref.ref(hit)

    def _dispatch(self, entries) -> object:
        """Generate the dispatch over `entries` (see the module's docstring)."""
        args = ", ".join(param_name(p) for p in self.params)
        keys, table = dispatch_key(entries)
        names = [f"___e{i}" for i in range(len(entries))]
        lines = []
        if keys:
            key = keys[0] if len(keys) == 1 else f"({''.join(k + ', ' for k in keys)})"
            lines += ["try:", f"    ___e = ___table.get({key})",
                      "except Exception:", "    ___e = None", "if ___e is not None:", f"    ___r = ___e({args})",
                      "    if ___r is not ___NEXT:", "        return ___r"]
        for name in names:
            lines += [f"___r = {name}({args})", "if ___r is not ___NEXT:", "    return ___r"]
        lines.append("return ___NEXT")
        body = "".join(f"        {line}\n" for line in lines)
        key_text = f"keyed on ({', '.join(keys)})" if keys else "tried in order"
        source = (f"# dispatch of {comment(self.qualname)}: {len(entries)} entries, newest first, "
                  f"{comment(key_text)}\n"
                  f"def ___make({', '.join(['G', '___NEXT', '___table', *names])}):\n"
                  f"    def dispatch({args}):\n{body}"
                  f"    return dispatch\n")
        ns = codeload.load("dispatch", f"{self.code.co_name}_{len(entries)}", source, {})
        fn = ns["___make"](self.globals, NEXT, table, *[e.fn for e in entries])
        fn.__qualname__ = fn.__name__ = f"dispatch_{self.code.co_name}"
        return fn

    def disable_entry(self, entry, why: str) -> None:
        """Stop running an entry's compiled code (it raised where eager does not): warn once,
        and let the entry run its calls eagerly, guarded as before."""
        with COMPILE_LOCK:  # (a compile publishing meanwhile would put the old function back)
            if entry not in self.entries or entry.reason is not None:
                return
            entry.reason = why
            entry.fn = _eager_in_place_of(entry)
            self._publish()
        warnings.warn_explicit(f"rewrite: {self.qualname}: {why}; that cache entry runs its calls eagerly from now "
                               "on", RuntimeWarning, self.code.co_filename, self.code.co_firstlineno,
                               module=self.globals.get("__name__"))

    # -- choosing a backend --------------------------------------------------------------------
    def backend_for(self, cap):
        backend = self.options.backend
        if backend is None:
            backend = default_backend([v for _, v, _ in cap.tracer.graph.inputs])
        return lookup_backend(backend)

    def reset(self) -> None:
        self.entries = ()
        self.compiles = 0
        self.frame_state.clear()
        self._warned_limit = False
        self._published.clear()  # (what rewrite made for it goes now: reset() while other threads call is racy)
        self.republish()


def _weak_miss(ref):
    """slot.call: the dispatcher's miss path, through a weak reference (see Slot)."""
    def call(*args):
        d = ref()
        return MISS if d is None else d.miss(*args)
    return call


def _eager_in_place_of(entry):
    """An entry that runs its calls eagerly (MISS), guarded as the entry it replaces."""
    guard = entry.guard.fn

    def eager_entry(*args):
        return MISS if guard(*args) else NEXT
    return eager_entry


# -- what tells entries apart ------------------------------------------------------------------
_COST = {"type": 0, "value": 1, "dtype": 2, "numel": 2, "dim": 3, "size": 4}  # a cheap read first (x.numel()
# ~130 ns, x.shape[i] ~230 ns: one numel tells apart entries for sizes of one rank)


def _facts(entry) -> dict[str, tuple[int, object]]:
    """expression -> (cost, value) of what the entry's guards pin: types, dtypes, ranks,
    static sizes, values of Python scalars."""
    out = {}
    for g in entry.guard.guards:
        if isinstance(g, TensorMatch):
            e = g.source.expr()
            out[f"{e}.dtype"] = (_COST["dtype"], g.dtype)
            out[f"{e}.dim()"] = (_COST["dim"], len(g.shape))
            for i, size in enumerate(g.shape):
                if size is not None:
                    out[f"{e}.shape[{i}]"] = (_COST["size"], size)
            if None not in g.shape:
                out[f"{e}.numel()"] = (_COST["numel"], math.prod(g.shape))
        elif isinstance(g, EqualsMatch) and type(g.value) in (int, str, bool, bytes, type(None)):
            out[g.source.expr()] = (_COST["value"], g.value)
        elif isinstance(g, TypeMatch):
            out[f"type({g.source.expr()})"] = (_COST["type"], g.type)
    return out


def dispatch_key(entries, most: int = 4) -> tuple[list[str], dict]:
    """The fewest, cheapest expressions whose values tell `entries` apart (all of them read
    by every entry's guards), and the table from their values to the newest entry pinning them."""
    facts = [_facts(e) for e in entries]
    common = set(facts[0]).intersection(*facts[1:])

    def groups(exprs) -> int:
        return len({tuple(f[x][1] for x in exprs) for f in facts})

    chosen: list[str] = []
    best = 1
    while best < len(entries) and len(chosen) < most:
        ranked = sorted(common - set(chosen), key=lambda x: (-groups([*chosen, x]), facts[0][x][0], x))
        if not ranked or groups([*chosen, ranked[0]]) == best:
            break
        chosen.append(ranked[0])
        best = groups(chosen)
    table: dict = {}
    if chosen:
        for e, f in zip(entries, facts):
            key = tuple(f[x][1] for x in chosen)
            table.setdefault(key[0] if len(chosen) == 1 else key, e.fn)  # (one fact: no tuple to build)
    return chosen, table


_WARNED_UNTRACED = False  # (the once-per-process warning of an untraced Python)


# -- torch.compiler.set_stance ---------------------------------------------------------------
_MISS_REF = weakref.ref(_miss)
_FORCED_EAGER = False  # stance "force_eager" in force: every prologue runs the original


def stance() -> str:
    """torch.compiler's stance (`set_stance`), read where torch._dynamo is imported already
    (a stance can only be set through it; this never imports it)."""
    frames = sys.modules.get("torch._dynamo.eval_frame")
    return "default" if frames is None else frames._stance.stance


def _dynamo_imported(dynamo) -> None:
    """torch._dynamo is imported (before rewrite, or now): follow its stance changes -- torch's
    `set_stance` as a call, a context manager or a decorator, each through
    `torch._dynamo.decorators._set_stance` -- and its `reset()`, which resets rewrite too."""
    decorators = sys.modules["torch._dynamo.decorators"]
    if not getattr(decorators._set_stance, "rewrite_watches", False):
        decorators._set_stance = _then(decorators._set_stance, stance_changed)
        decorators._set_stance._dynamo_forbidden = True  # (as torch marks its own)
    if not getattr(dynamo.reset, "rewrite_watches", False):
        dynamo.reset = _then(dynamo.reset, reset_all)
    stance_changed()  # (its stance now)


def _then(original, after):
    """`original`, then `after()`; what `original` returned."""
    @functools.wraps(original)
    def call(*args, **kwargs):
        result = original(*args, **kwargs)
        after()
        return result
    call.rewrite_watches = True
    return call


def stance_changed() -> None:
    """After a stance change: hits follow "force_eager" too (every prologue repointed)."""
    global _FORCED_EAGER
    forced = stance() == "force_eager"
    if forced != _FORCED_EAGER:
        _FORCED_EAGER = forced
        for d in list(_ALL):
            d.republish()


def _stance_says_eager(d: Dispatcher, held: str, args) -> bool:
    """What a miss does under a stance other than "default", as torch.compile does: run
    eagerly without compiling ("force_eager", "eager_on_recompile"), or raise where a compile
    would be needed for a call with tensors ("fail_on_recompile"). Stances torch adds after
    these compile as "default" does."""
    if held in ("force_eager", "eager_on_recompile"):
        return True
    if held == "fail_on_recompile" and _holds_tensors(args):
        where = f"filename: '{d.code.co_filename}', function name: '{d.code.co_name}', line number: " \
                f"{d.code.co_firstlineno}"
        reasons = d._recompile_reason(args).split("\n", 1)[1:] if d.entries else []
        raise RuntimeError("Detected recompile when torch.compile stance is 'fail_on_recompile'. " + where +
                           "".join("\n" + r for r in reasons))
    return False


def reset_all() -> None:
    """Every cache entry of every jitted function dropped (rewrite.reset; torch._dynamo.reset too)."""
    for d in list(_ALL):
        d.reset()


watch.after_import("torch._dynamo", _dynamo_imported)


def _holds_tensors(args) -> bool:
    """Whether a call's arguments (and cells) hold a tensor, one container level deep."""
    for a in args:
        if type(a) is types.CellType:
            try:
                a = a.cell_contents
            except ValueError:
                continue
        items = a.values() if isinstance(a, dict) else a if isinstance(a, (tuple, list)) else (a,)
        if any(isinstance(i, torch.Tensor) for i in items):
            return True
    return False
