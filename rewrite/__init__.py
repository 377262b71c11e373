"""rewrite: a just-in-time compiler for PyTorch that rewrites code objects instead of hooking frames.

    from rewrite import jit

    @jit
    def f(x, n):
        ...
"""
import os

from . import config, hook

# Loaded on first use, so that `import rewrite.hook` (a program that may never import torch)
# does not import torch: each public name -> the module that defines it.
_LAZY = {"jit": "api", "allow_in_graph": "api", "disable": "api", "dispatcher_of": "api", "graph_break": "api",
         "mark_dynamic": "api", "mark_static": "api", "set_stance": "api", "explain": "explaining", "reset": "dispatch",
         "BackendCompilerFailed": "errors", "RecompileLimitExceeded": "errors", "RewriteError": "errors",
         "Unsupported": "errors", "EagerWarning": "errors", "BreaksWarning": "errors", "list_backends": "codegen",
         "register_backend": "codegen", "patch_torch_compile": "patching", "unpatch_torch_compile": "patching"}

__all__ = ["jit", "reset", "config", "register_backend", "list_backends", "dispatcher_of", "explain", "disable",
           "allow_in_graph", "graph_break", "mark_dynamic", "mark_static", "set_stance", "patch_torch_compile",
           "unpatch_torch_compile",
           "RewriteError", "Unsupported", "BackendCompilerFailed", "RecompileLimitExceeded", "EagerWarning",
           "BreaksWarning"]


def __getattr__(name: str):
    if name == "hook":  # the import hook (a subpackage; torch-free)
        return hook
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module 'rewrite' has no attribute {name!r}")
    value = getattr(_load(where), "reset_all" if name == "reset" else name)
    globals()[name] = value
    return value


def _load(where: str):
    """The module a lazy name comes from: deferred imports (of torch and the compiler), each
    written out so that the layer test (tests/test_layers.py) sees the arrow."""
    if where == "api":
        from . import api as module
    elif where == "explaining":
        from . import explaining as module
    elif where == "dispatch":
        from . import dispatch as module
    elif where == "errors":
        from . import errors as module
    elif where == "patching":
        from . import patching as module
    else:
        from . import codegen as module
    return module


if os.environ.get("REWRITE_TORCH_COMPILE", "") not in ("", "0"):  # torch.compile compiles with rewrite from
    _load("patching").patch_torch_compile()  # this import on (README: "Drop-in for torch.compile")
