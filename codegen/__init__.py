"""Backends: `(torch.fx.GraphModule, example_inputs) -> callable`, Dynamo's contract.

    from rewrite.codegen import register_backend

    @register_backend
    def my_backend(gm, example_inputs):
        return gm.forward

Built in: `eager` (runs the GraphModule), `python` (straight-line Python source that
calls torch, the default for CPU tensors) and `triton` (fused Triton kernels, the default
for CUDA tensors; CPU tensors run under Triton's interpreter when asked for).
"""
from __future__ import annotations

if __name__ != "rewrite.codegen":  # the folder installs as rewrite.codegen; one import name per folder
    raise ImportError(f"import this package as rewrite.codegen, not as {__name__}")

from typing import Callable

_BACKENDS: dict[str, Callable] = {}


def register_backend(fn: Callable | None = None, *, name: str | None = None):
    """Register `fn` under `name` (default: its __name__). Usable as a decorator."""
    def register(f):
        key = name or f.__name__
        _BACKENDS[key] = f
        return f
    return register(fn) if fn is not None else register


def list_backends() -> list[str]:
    return sorted(_BACKENDS)


def lookup_backend(backend) -> tuple[str, Callable]:
    """(name, callable) for a registered name or a callable backend."""
    if callable(backend):
        return getattr(backend, "__name__", repr(backend)), backend
    try:
        return backend, _BACKENDS[backend]
    except KeyError:
        raise ValueError(f"unknown backend {backend!r}; registered: {', '.join(list_backends())}") from None


def default_backend(example_inputs) -> str:
    """`triton` when the graph reads CUDA tensors (and triton is installed), else `python`."""
    import importlib.util
    if any(getattr(t, "is_cuda", False) for t in example_inputs) and importlib.util.find_spec("triton"):
        return "triton"
    return "python"


from . import eager, python, triton_backend  # noqa: E402,F401  (register the built-in backends)
