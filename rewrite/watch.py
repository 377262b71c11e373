"""Run code right after a module is imported -- or now, if it is imported already.

rewrite follows some of torch._dynamo's state (the stance, `reset()`, the instruction reader
torch.compile uses) without ever importing torch._dynamo itself (1.4 s, triton and sympy).
A meta-path finder that finds nothing itself wraps the loader of the one module named: the
module runs as it would, then the callbacks run on it. Until then it costs a name compare
per import; nothing at all on any call. Torch-free.
"""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import threading

_AFTER: dict[str, list] = {}  # module name -> callbacks, each called once with the module
_LOCK = threading.Lock()


def after_import(name: str, callback) -> None:
    """`callback(module)` once `name` is imported: now if it is, else right after its import
    (idempotent for one callback)."""
    with _LOCK:
        module = sys.modules.get(name)
        if module is None:
            callbacks = _AFTER.setdefault(name, [])
            if callback not in callbacks:
                callbacks.append(callback)
            if _FINDER not in sys.meta_path:
                sys.meta_path.insert(0, _FINDER)
            return
    callback(module)


class _ThenCall(importlib.abc.Loader):
    """The module's own loader, then the callbacks waiting for it."""

    def __init__(self, loader, name: str):
        self.loader, self.name = loader, name

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        with _LOCK:
            callbacks = _AFTER.pop(self.name, [])
        for callback in callbacks:
            callback(module)

    def __getattr__(self, name):  # (what else a loader offers: get_code, get_source, is_package, ...)
        return getattr(self.loader, name)


class _Finder(importlib.abc.MetaPathFinder):
    """Finds nothing itself: it wraps the loader of a module someone waits for."""

    def find_spec(self, fullname, path, target=None):
        if fullname not in _AFTER:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is not None and spec.loader is not None:
            spec.loader = _ThenCall(spec.loader, fullname)
        return spec


_FINDER = _Finder()
