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

# the table lives in a leaf (rewrite/registry.py): the compiler looks backends up there by name;
# importing this package (rewrite.api does) fills it with the built-in ones
from rewrite.registry import default_backend, list_backends, lookup_backend, register_backend  # noqa: F401

from . import eager, python, triton_backend  # noqa: E402,F401  (register the built-in backends)
