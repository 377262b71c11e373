"""Load generated Python source (guards, entries, backend code) under a real file name.

Each source is written once to `<cache dir>/<kind>/<name>_<hash>.py` and registered with
`linecache`, so tracebacks, `inspect` and debuggers show the generated code itself.
"""
from __future__ import annotations

import hashlib
import linecache
import os
import tempfile

from . import config

_written: set[str] = set()


def cache_dir() -> str:
    root = config.cache_dir or os.path.join(tempfile.gettempdir(), f"rewrite-{os.getuid()}")
    return root


def path_for(kind: str, name: str, source: str) -> str:
    digest = hashlib.sha1(source.encode()).hexdigest()[:12]
    safe = "".join(c if c.isalnum() or c == "_" else "_" for c in name)[:60]
    return os.path.join(cache_dir(), kind, f"{safe}_{digest}.py")


def load(kind: str, name: str, source: str, namespace: dict) -> dict:
    """Exec `source` in `namespace` (filled in place and returned) with a real file name."""
    path = path_for(kind, name, source)
    if path not in _written:
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            if not os.path.exists(path):
                tmp = f"{path}.{os.getpid()}.tmp"
                with open(tmp, "w") as f:
                    f.write(source)
                os.replace(tmp, path)
        except OSError:
            pass  # the linecache entry below still serves tracebacks
        _written.add(path)
    linecache.cache[path] = (len(source), None, source.splitlines(True), path)
    exec(compile(source, path, "exec"), namespace)
    return namespace
