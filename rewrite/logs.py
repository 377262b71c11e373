"""REWRITE_LOGS: comma-separated categories (or `all`) printed through `logging`.

Categories: graph_breaks, recompiles, guards, bytecode, trace, output_code, dynamic, perf_hints
(where a compile's time went: trace, plan, backend, guards, codegen, load).
Each is a child of the `rewrite` logger (`logging.getLogger("rewrite.guards")`, ...).
TORCH_LOGS turns on the same categories under torch's names (`graph_breaks`, `recompiles`,
`guards`, `graph_code`, `output_code`, `bytecode`, `dynamic`, with or without `+`/`-`);
the names of torch's own that rewrite has no category for are torch's alone.
"""
from __future__ import annotations

import logging
import os
import sys

CATEGORIES = ("graph_breaks", "recompiles", "guards", "bytecode", "trace", "output_code", "dynamic", "perf_hints",
              "torch_compile")
_root = logging.getLogger("rewrite")
_enabled: set[str] = set()


def get(category: str) -> logging.Logger:
    assert category in CATEGORIES, category
    return _root.getChild(category)


def enabled(category: str) -> bool:
    return category in _enabled


def set_logs(spec: str | None) -> None:
    """Turn categories on from a REWRITE_LOGS-style string ('' turns all off)."""
    _enabled.clear()
    names = [s.strip() for s in (spec or "").split(",") if s.strip()]
    for name in names:
        if name == "all":
            _enabled.update(CATEGORIES)
        elif name in CATEGORIES:
            _enabled.add(name)
        else:
            raise ValueError(f"unknown REWRITE_LOGS category {name!r}; known: all, {', '.join(CATEGORIES)}")
    for name in CATEGORIES:
        get(name).setLevel(logging.DEBUG if name in _enabled else logging.WARNING)
    if _enabled and not _root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("[rewrite.%(name)s] %(message)s".replace("%(name)s", "%(category)s")))
        handler.addFilter(_add_category)
        _root.addHandler(handler)
        _root.propagate = False


def _add_category(record: logging.LogRecord) -> bool:
    record.category = record.name.rpartition(".")[2]
    return True


# TORCH_LOGS names -> rewrite's categories
TORCH_NAMES = {"graph_breaks": "graph_breaks", "recompiles": "recompiles", "recompiles_verbose": "recompiles",
               "guards": "guards", "verbose_guards": "guards", "graph_code": "output_code", "graph": "output_code",
               "output_code": "output_code", "bytecode": "bytecode", "dynamic": "dynamic", "perf_hints": "perf_hints"}


def from_torch_logs(spec: str | None) -> list[str]:
    """rewrite's categories for a TORCH_LOGS string."""
    names = [s.strip().lstrip("+-") for s in (spec or "").split(",")]
    return [TORCH_NAMES[n] for n in names if n in TORCH_NAMES]


set_logs(",".join([os.environ.get("REWRITE_LOGS") or "", *from_torch_logs(os.environ.get("TORCH_LOGS"))]))
