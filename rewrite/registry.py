"""Tables a lower layer owns and an upper layer fills: the one idiom for "code below calls code
written above it" (see `rewrite/layers.py`). Nobody imports upward; the upper layer fills the
table when it is imported, and `check()` (run when `rewrite.api` is imported) says which
table was left empty.

* `DISABLED`, `ALLOWED`: the functions `rewrite.disable` / `rewrite.allow_in_graph` marked
  (filled by the API, read by the rules in `rewrite/ops`).
* `OWNER`: the attribute of a jitted function that holds its dispatcher.
* The backends, by name (`register_backend`: `rewrite.codegen` registers its own when it is
  imported, users theirs; the compiler looks them up by name).
* `Protocol`: a few functions a lower layer calls and an upper one supplies -- Python's
  protocols are mutually recursive (iterating a user object runs its `__iter__`, which the
  tracer inlines, which iterates ...), so the rules' bottom calls their top through these.
"""
from __future__ import annotations

import importlib.util
import weakref
from typing import Callable

OWNER = "__rewrite_dispatcher__"  # the attribute of a jitted function that holds its dispatcher
DISABLED: "weakref.WeakSet" = weakref.WeakSet()  # functions that always run eagerly
ALLOWED: "weakref.WeakSet" = weakref.WeakSet()  # functions recorded as one graph node


# --- protocols ---------------------------------------------------------------------------------
class Protocol:
    """Named functions a lower module calls (`CALLS.call(frame, fn, args, kwargs)`) and an
    upper module supplies at import (`CALLS.fill(call=call)`)."""
    ALL: list["Protocol"] = []

    def __init__(self, name: str, owner: str, *slots: str):
        self.name, self.owner, self.slots = name, owner, slots
        Protocol.ALL.append(self)

    def fill(self, **fns: Callable) -> None:
        unknown = set(fns) - set(self.slots)
        assert not unknown, f"{self.name} has no {sorted(unknown)}"
        self.__dict__.update(fns)

    def missing(self) -> list[str]:
        return [s for s in self.slots if s not in self.__dict__]

    def __repr__(self):
        return f"Protocol({self.name!r}, owner {self.owner}, {', '.join(self.slots)})"


def check() -> None:
    """Every protocol filled (an upper module that should fill one was not imported)."""
    empty = [f"{p.name}.{s} (of {p.owner})" for p in Protocol.ALL for s in p.missing()]
    if empty:
        raise ImportError(f"rewrite: protocols left unfilled: {', '.join(empty)}")


# --- backends ----------------------------------------------------------------------------------
_BACKENDS: dict[str, Callable] = {}


def register_backend(fn: Callable | None = None, *, name: str | None = None, native: bool = False):
    """Register `fn` under `name` (default: its __name__). Usable as a decorator. A backend
    gets Dynamo's contract (see rewrite/handoff.py); `native=True` (rewrite's own, which read
    sizes from the real example inputs and the traced meta) marks `fn.rewrite_native`, and
    such a backend gets the graph as traced."""
    def register(f):
        key = name or f.__name__
        _BACKENDS[key] = f
        if native:
            f.rewrite_native = True
        return f
    return register(fn) if fn is not None else register


def own_backends() -> list[str]:
    """The backends rewrite itself registered (and users through `rewrite.register_backend`)."""
    return sorted(_BACKENDS)


def list_backends() -> list[str]:
    """rewrite's own backends, then every other name torch's Dynamo registry knows (its own,
    `torch._dynamo.register_backend`'s and the `torch_dynamo_backends` entry points)."""
    return own_backends() + _torch_backends()


def lookup_backend(backend) -> tuple[str, Callable]:
    """(name, callable) for a callable backend, a name of rewrite's or, after those, a name
    torch's Dynamo registry resolves ("inductor", "aot_eager", "cudagraphs", ...)."""
    if callable(backend):
        return getattr(backend, "__name__", repr(backend)), backend
    if backend in _BACKENDS:
        return backend, _BACKENDS[backend]
    found = _torch_backend(backend)
    if found is None:
        raise ValueError(f"unknown backend {backend!r}; rewrite's: {', '.join(own_backends())}; torch's: "
                         f"{', '.join(_torch_backends())}")
    return backend, found


def _torch_backend(name: str) -> Callable | None:
    """torch's own lookup of a Dynamo backend name; None when it knows none by that name."""
    from torch._dynamo.backends import registry  # (deferred: importing torch._dynamo costs ~1.4 s, only
    try:  # paid when a name is not rewrite's)
        return registry.lookup_backend(name)
    except Exception:  # (torch's InvalidBackend, or an entry point that fails to load)
        return None


def _torch_backends() -> list[str]:
    """The names torch's Dynamo registry knows that are not rewrite's (those come first)."""
    from torch._dynamo.backends import registry  # (deferred, as above)
    return sorted(name for name in registry.list_backends(exclude_tags=()) if name not in _BACKENDS)


def default_backend(example_inputs) -> str:
    """`triton` when the graph reads CUDA tensors (and triton is installed), else `python`."""
    if any(getattr(t, "is_cuda", False) for t in example_inputs) and importlib.util.find_spec("triton"):
        return "triton"
    return "python"
