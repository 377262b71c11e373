"""Turn a cache entry's guards into ONE generated Python closure.

The text is what runs (and what `REWRITE_LOGS=guards` prints): a chain of `and`-ed
checks, cheapest and most discriminating first, inside a `try` so that a source that
cannot be read (a deleted global, a missing attribute) counts as a failed guard.
"""
from __future__ import annotations

from .. import codeload
from .guard import Consts, Guard
from .source import GLOBALS, param_name


class GuardSet:
    """Guards collected while tracing, deduplicated, in insertion order."""

    def __init__(self):
        self._guards: dict[Guard, None] = {}

    def add(self, guard: Guard) -> None:
        self._guards.setdefault(guard, None)

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
                value = eval(g.source.expr(), {GLOBALS: self.globals, "___grad_enabled": None}, scope) \
                    if g.priority != 6 else None
                why = g.failure(value)
            except Exception as e:  # the source itself cannot be read any more
                why = f"{g.source.name()} cannot be read: {type(e).__name__}: {e}"
            if why:
                out.append(why)
        return out


def build_guard_function(guards: GuardSet, params: tuple[str, ...], globals_: dict, name: str) -> GuardFunction:
    ordered = guards.ordered()
    consts = Consts()
    checks = [check for g in ordered for check in g.checks(consts)] or ["True"]
    chain = "\n".join(f"                {'' if i == 0 else 'and '}{c}" for i, c in enumerate(checks))
    free = ", ".join([GLOBALS, *consts.values])
    source = (
        f"# guards of {name}: {len(ordered)} guard(s), {len(checks)} check(s)\n"
        f"def ___make({free}):\n"
        f"    def guard({', '.join(param_name(p) for p in params)}):\n"
        f"        try:\n"
        f"            return (\n{chain}\n            )\n"
        f"        except Exception:\n"
        f"            return False\n"
        f"    return guard\n")
    ns = codeload.load("guards", name, source, {})
    fn = ns["___make"](globals_, *consts.values.values())
    fn.__qualname__ = fn.__name__ = f"guard_{name}"
    return GuardFunction(fn, source, ordered, params, globals_)
