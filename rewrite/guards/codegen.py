"""Turn a cache entry's guards into ONE generated Python closure.

The text is what runs (and what `REWRITE_LOGS=guards` prints): a chain of `and`-ed
checks, cheapest and most discriminating first, inside a `try` so that a source that
cannot be read (a deleted global, a missing attribute) counts as a failed guard.
"""
from __future__ import annotations

import torch

from .guard import Consts, Guard, TensorMatch
from .source import GLOBALS, param_name

try:  # torch's batched tensor check (dtype, device, dispatch keys, sizes, strides, requires_grad)
    from torch._C._dynamo.guards import TensorGuards as _TensorGuards
except ImportError:  # pragma: no cover - other torch builds
    _TensorGuards = None


class GuardSet:
    """Guards collected while tracing, deduplicated, in insertion order."""

    def __init__(self):
        self._guards: dict[Guard, None] = {}
        self.examples: dict[Guard, torch.Tensor] = {}  # the traced tensor of each TensorMatch

    def add(self, guard: Guard, example: torch.Tensor | None = None) -> None:
        self._guards.setdefault(guard, None)
        if example is not None:
            self.examples.setdefault(guard, example)

    def __iter__(self):
        return iter(self._guards)

    def __len__(self):
        return len(self._guards)

    def ordered(self) -> list[Guard]:
        """Sources before the sources read through them; cheap kinds before costly ones."""
        return sorted(self._guards, key=lambda g: (g.depth(), g.priority))


class GuardFunction:
    """The generated closure plus what is needed to print and explain it."""

    def __init__(self, fn, source: str, guards: list[Guard], params: tuple[str, ...], globals_: dict):
        self.fn = fn
        self.source = source
        self.guards = guards
        self.params = params
        self.globals = globals_

    def __call__(self, *args) -> bool:
        return self.fn(*args)

    def failures(self, args) -> list[str]:
        """Every failing guard, in user terms (slow path: recompile reasons, explain)."""
        scope = dict(zip((param_name(p) for p in self.params), args))
        out = []
        for g in self.guards:
            try:
                why = g.failure(g.read(self.globals, scope))
            except Exception as e:  # the source itself cannot be read any more
                why = f"{g.source.name()} cannot be read: {type(e).__name__}: {e}"
            if why:
                out.append(why)
        return out


def _batched_tensor_checks(tensors: list[TensorMatch], guards: GuardSet, consts: Consts) -> list[str] | None:
    """All tensor guards as one call of torch's C++ tensor checker, after a type check each.

    Returns None (use the per-attribute Python checks) when the checker is unavailable.
    """
    if _TensorGuards is None or not tensors or any(g not in guards.examples for g in tensors):
        return None
    try:
        checker = _TensorGuards(*(guards.examples[g] for g in tensors),
                                dynamic_dims_sizes=[list(g.shape) for g in tensors],
                                dynamic_dims_strides=[list(g.stride) for g in tensors])
    except Exception:
        return None
    consts.values["___check_tensors"] = checker.check
    out = [f"type({g.source.expr()}) is {consts.ref(g.type)}" for g in tensors]
    args = ", ".join(g.source.expr() for g in tensors)
    out.append(f"___check_tensors({args})")
    out += [f"# {g.describe()}" for g in tensors]
    return out


def guard_source(guards: GuardSet, params: tuple[str, ...], name: str):
    """Source text defining `___make_guard(G, <consts>)`, the consts to pass, and the ordered guards."""
    ordered = guards.ordered()
    consts = Consts()
    tensors = [g for g in ordered if isinstance(g, TensorMatch)]
    batched = _batched_tensor_checks(tensors, guards, consts)
    if batched is not None:
        checks = [c for g in ordered if not isinstance(g, TensorMatch) for c in g.checks(consts)] + batched
    else:
        checks = [c for g in ordered for c in g.checks(consts)]
    checks = checks or ["True"]
    chain = "\n".join(f"                {'' if i == 0 or c.startswith('#') else 'and '}{c}"
                      for i, c in enumerate(checks))
    free = ", ".join([GLOBALS, *consts.values])
    source = (
        f"# guards of {name}: {len(ordered)} guard(s)\n"
        f"def ___make_guard({free}):\n"
        f"    def guard({', '.join(param_name(p) for p in params)}):\n"
        f"        try:\n"
        f"            return (\n{chain}\n            )\n"
        f"        except Exception:\n"
        f"            return False\n"
        f"    return guard\n")
    return source, consts.values, ordered


def make_guard_function(ns: dict, source: str, consts: dict, ordered, params, globals_, name) -> GuardFunction:
    """Instantiate a guard closure from a namespace where `source` was executed."""
    fn = ns["___make_guard"](globals_, *consts.values())
    fn.__qualname__ = fn.__name__ = f"guard_{name}"
    return GuardFunction(fn, source, ordered, params, globals_)
