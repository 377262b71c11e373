"""rewrite: a just-in-time compiler for PyTorch that rewrites code objects instead of hooking frames.

    from rewrite import jit

    @jit
    def f(x, n):
        ...
"""
from . import config
from .api import allow_in_graph, disable, dispatcher_of, graph_break, jit, mark_dynamic, mark_static
from .explain import explain
from .dispatch import reset_all as reset
from .errors import BackendCompilerFailed, RecompileLimitExceeded, RewriteError, Unsupported
from codegen import list_backends, register_backend

__all__ = ["jit", "reset", "config", "register_backend", "list_backends", "dispatcher_of", "explain", "disable",
           "allow_in_graph", "graph_break", "mark_dynamic", "mark_static",
           "RewriteError", "Unsupported", "BackendCompilerFailed", "RecompileLimitExceeded"]
