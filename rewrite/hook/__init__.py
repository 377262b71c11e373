"""Rewrite every function of a program's own modules as they are imported.

    python -m rewrite.hook [--include GLOB ...] [--exclude GLOB ...] [--backend NAME]
                           [--fullgraph] [--report] [--torch-compile | --torch-compile-only]
                           script.py [args]
    python -m rewrite.hook [options] -m module [args]

or, from a `conftest.py` or `sitecustomize.py`:

    import rewrite.hook
    rewrite.hook.install(include=["mypkg"], backend="python")
    ...
    rewrite.hook.uninstall()

Which modules: those whose file lies under `root` (the script's directory, or the current
directory for `-m`; `install(root=...)`), plus those an `include` pattern names, minus those
an `exclude` pattern names. The standard library, site-packages, torch, triton and rewrite
itself are never instrumented unless a pattern includes them by name. A pattern with a `/`
or ending in `.py` matches file paths (fnmatch); otherwise module names, a package's name
covering its submodules (`mypkg` matches `mypkg.sub.mod`).

What happens to each function: see `rewrite/hook/instrument.py` (raw splice at import, the
decision at its first call, original code back for functions that never touch torch).
Nothing here imports torch: a program that never does runs without it.
"""
from __future__ import annotations

import atexit
import fnmatch
import importlib.abc
import importlib.machinery
import os
import site
import sys
import sysconfig

from ..bytecode import dynamo
from ..slot import Options
from .instrument import LAZIES
from .instrument import instrument as _instrument  # (the submodule keeps the name `instrument`)

__all__ = ["install", "uninstall", "installed", "options", "report", "Rules"]

_OWN = ("rewrite", "torch", "triton", "_pytest", "pytest", "pluggy")


class Rules:
    """Which modules the hook instruments."""

    def __init__(self, include=(), exclude=(), root: str | None = None):
        self.include, self.exclude = list(include or ()), list(exclude or ())
        self.root = os.path.realpath(root) + os.sep if root else None
        system = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
        system.update(site.getsitepackages() + [site.getusersitepackages()])
        self.system = tuple(os.path.realpath(p) + os.sep for p in system if p)

    @staticmethod
    def _matches(pattern: str, name: str, path: str) -> bool:
        if "/" in pattern or pattern.endswith(".py"):
            return fnmatch.fnmatch(path, pattern) or fnmatch.fnmatch(path, os.path.join("*", pattern))
        return fnmatch.fnmatch(name, pattern) or fnmatch.fnmatch(name, pattern + ".*")

    def may_want(self, name: str) -> bool:
        """False when the name alone rules a module out (the standard library, torch, rewrite)."""
        top = name.partition(".")[0]
        if top not in _OWN and top not in sys.stdlib_module_names:
            return True
        return any(not ("/" in p or p.endswith(".py")) and self._matches(p, name, "") for p in self.include)

    def wants(self, name: str, path: str | None) -> bool:
        if not path or not path.endswith(".py"):
            return False
        path = os.path.realpath(path)
        if any(self._matches(p, name, path) for p in self.exclude):
            return False
        if any(self._matches(p, name, path) for p in self.include):
            return True
        if name.split(".")[0] in _OWN or path.startswith(self.system):
            return False
        return self.root is not None and path.startswith(self.root)


class _Loader(importlib.machinery.SourceFileLoader):
    """A source loader whose code objects come out instrumented (the .pyc cache keeps the
    original bytecode: instrumentation happens per import, after loading)."""

    options: Options = Options()

    def get_code(self, fullname):
        code = super().get_code(fullname)
        return _instrument(code, self.options) if code is not None else None


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self, rules: Rules, options: Options):
        self.rules, self.options = rules, options
        self.modules: list[str] = []

    def find_spec(self, fullname, path, target=None):
        if not self.rules.may_want(fullname):  # most imports: decided by name, no second path search
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is None or type(spec.loader) is not importlib.machinery.SourceFileLoader \
                or not self.rules.wants(fullname, spec.origin):
            return None
        loader = _Loader(fullname, spec.origin)
        loader.options = self.options
        spec.loader = loader
        self.modules.append(fullname)
        return spec


_finder: _Finder | None = None


def install(include=(), exclude=(), backend=None, fullgraph: bool = False, root: str | None = None,
            dynamic: bool | None = None) -> None:
    """Instrument modules imported from now on (see the module docstring for which)."""
    global _finder
    uninstall()
    if backend is not None and isinstance(backend, str):
        from ..codegen import lookup_backend  # (deferred: imports torch, only when a backend is named)
        lookup_backend(backend)  # an unknown name fails now
    _finder = _Finder(Rules(include, exclude, root), Options(backend, fullgraph, dynamic))
    sys.meta_path.insert(0, _finder)
    dynamo.watch()  # torch.compile of instrumented functions reads their original instructions
    importlib.invalidate_caches()


def uninstall() -> None:
    """Stop instrumenting new imports (modules already imported stay as they are)."""
    global _finder
    if _finder is not None and _finder in sys.meta_path:
        sys.meta_path.remove(_finder)
    _finder = None


def installed() -> bool:
    return _finder is not None


def options() -> Options:
    return _finder.options if _finder is not None else Options()


def report(file=None) -> str:
    """Which functions were compiled, with graphs, graph breaks and recompiles; how many
    were instrumented and how many turned out not to touch torch."""
    graphs = {id(z): _graphs(z.dispatcher) for z in LAZIES if z.decided in ("compiled", "unstable")}
    compiled = [z for z in LAZIES if z.decided == "compiled" and graphs[id(z)]]
    plain = sum(z.decided == "plain" for z in LAZIES)
    empty = sum(z.decided == "no graph" or z.decided == "compiled" and not graphs[id(z)] for z in LAZIES)
    unstable = sum(z.decided == "unstable" for z in LAZIES)
    lines = [f"rewrite.hook: {len(LAZIES)} functions instrumented, {len(compiled)} compiled, "
             f"{plain} never touched torch, {empty} captured no op and {unstable} kept recompiling "
             f"(original code restored), {len(LAZIES) - len(compiled) - plain - empty - unstable} never called"]
    if compiled:
        lines.append(f"{'function':50} {'graphs':>6} {'breaks':>6} {'eager':>6} {'recompiles':>10}")
    for z in compiled + [z for z in LAZIES if z.decided == "unstable"]:
        d = z.dispatcher
        breaks = sum(e.graph_break is not None for e in d.entries)
        eager = sum(e.reason is not None for e in d.entries)
        where = f"{z.original.co_qualname} ({os.path.basename(z.original.co_filename)}:{z.original.co_firstlineno})"
        lines.append(f"{where[:50]:50} {graphs[id(z)]:6d} {breaks:6d} {eager:6d} {max(0, d.compiles - 1):10d}")
    text = "\n".join(lines)
    if file is not None:
        print(text, file=file)
    return text


def _graphs(dispatcher, seen=None) -> int:
    """Graphs a function's entries captured, those of the resume functions after its graph
    breaks included (a function whose first graph is empty breaks before its ops)."""
    from ..api import dispatcher_of  # (deferred: the hook imports no torch; this runs after the program)
    seen = set() if seen is None else seen
    if dispatcher is None or id(dispatcher) in seen:
        return 0
    seen.add(id(dispatcher))
    n = 0
    for e in dispatcher.entries:
        n += e.graph
        for fn in e.resumes:
            try:
                n += _graphs(dispatcher_of(fn), seen)
            except ValueError:  # (a resume function that runs as it is)
                pass
    return n


def report_at_exit(file=None) -> None:
    def at_exit():
        sys.stdout.flush()  # the program's output first
        report(file or sys.stderr)
    atexit.register(at_exit)
