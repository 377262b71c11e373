"""Symbolic sizes: one ShapeEnv per trace, sympy symbols for the dynamic dimensions.

A dimension is dynamic when the policy says so (`jit(dynamic=True)`, `mark_dynamic`, or
automatically: it changed since the function's first compile). Its size becomes a symbol
(`s0`), with the size seen now as the symbol's *hint*; the trace still runs every op on the
real tensors, so hints are always at hand. Two dynamic sizes equal now share one symbol
(duck sizing), which the guards check. Sizes 0 and 1 are never dynamic.

Whatever the trace decides from a symbolic size is recorded as a relation that must hold
(`s0 > 100`, `s0 == 5` when a size is specialized), and the guard closure checks each
relation as plain Python over the sizes (`x.size(0) > 100`): no sympy at call time.
"""
from __future__ import annotations

from .. import logs
from .guard import ShapeMatch
from .source import Source

# the tensor attributes that mark sizes dynamic or static for the next compile: rewrite's own
# (rewrite.mark_dynamic / mark_static) and the ones torch._dynamo.mark_dynamic /
# maybe_mark_dynamic / mark_static set
DYNAMIC_DIMS = ("_rewrite_dynamic_dims", "_dynamo_dynamic_indices", "_dynamo_weak_dynamic_indices")
STATIC_DIMS = ("_rewrite_static_dims", "_dynamo_static_indices")


class ShapeEnv:
    def __init__(self):
        self.hints: dict[sympy.Symbol, int] = {}
        self.sources: dict[sympy.Symbol, list[Source]] = {}
        self._by_hint: dict[int, sympy.Symbol] = {}
        self.relations: dict[sympy.Basic, None] = {}  # what the entry assumes, in order
        self.int_symbols: set = set()  # symbols of int arguments: a decision on one specializes it
        self.log = logs.get("dynamic") if logs.enabled("dynamic") else None

    def __bool__(self):
        return bool(self.hints)

    # -- symbols ---------------------------------------------------------------------------------
    def size(self, hint: int, source: Source, integer: bool = False) -> sympy.Symbol:
        """The symbol of a dynamic size read from `source` (equal sizes share one), or with
        `integer`, of an int argument (its own symbol; a branch on it specializes it)."""
        import sympy  # imported with the first symbolic size (it is slow to import)
        sym = self._by_hint.get(hint) if not integer else None
        if integer:
            sym = sympy.Symbol(f"s{len(self.hints)}", integer=True, positive=True)
            self.hints[sym] = hint
            self.sources[sym] = [source]
            self.int_symbols.add(sym)
            if self.log:
                self.log.debug("create symbol %s = %d for int %s", sym, hint, source.name())
            return sym
        if sym is None:
            sym = sympy.Symbol(f"s{len(self.hints)}", integer=True, positive=True)
            self._by_hint[hint] = sym
            self.hints[sym] = hint
            self.sources[sym] = []
            if self.log:
                self.log.debug("create symbol %s = %d for %s", sym, hint, source.name())
        self.sources[sym].append(source)
        return sym

    def hint(self, expr) -> int:
        if isinstance(expr, int):
            return expr
        return int(expr.xreplace(self.hints))

    # -- decisions -------------------------------------------------------------------------------
    def decide(self, rel: sympy.Basic) -> bool:
        """The truth of `rel` now; the entry is valid only while it stays so (a guard)."""
        import sympy  # imported with the first symbolic size (it is slow to import)
        if rel in (sympy.true, sympy.false):
            return bool(rel)
        pinned = rel.free_symbols & self.int_symbols
        for sym in pinned:  # an int in a branch stays specialized
            self._pin(sym)
        value = bool(rel.xreplace(self.hints))
        if pinned == rel.free_symbols:
            return value  # implied by the pins
        fact = rel if value else rel.negated
        if fact not in (sympy.true, sympy.false) and fact not in self.relations:
            self.relations[fact] = None
            if self.log:
                self.log.debug("guard %s", fact)
        return value

    def specialize(self, expr) -> int:
        """The value of `expr` now, made a guard for each symbol in it (`s0 == 5`)."""
        if isinstance(expr, int) or expr.is_Integer:
            return int(expr)
        for sym in expr.free_symbols:
            self._pin(sym)
        return self.hint(expr)

    def _pin(self, sym) -> None:
        import sympy  # imported with the first symbolic size (it is slow to import)
        fact = sympy.Eq(sym, self.hints[sym])
        if fact not in self.relations:
            self.relations[fact] = None
            if self.log:
                self.log.debug("specialize %s = %d", sym, self.hints[sym])

    def equal(self, a, b) -> bool:
        """Whether two sizes are equal now (guarded when either is symbolic)."""
        import sympy  # imported with the first symbolic size (it is slow to import)
        if isinstance(a, int) and isinstance(b, int):
            return a == b
        return self.decide(sympy.Eq(a, b))

    # -- guards ----------------------------------------------------------------------------------
    def guards(self) -> list:
        """Everything the entry assumes, as guards: each symbol >= 2 (sizes 0 and 1 get their
        own entries), the other sources of a symbol equal to its first, then the relations."""
        if not self.hints:
            return []
        import sympy  # imported with the first symbolic size (it is slow to import)
        first = {sym: srcs[0] for sym, srcs in self.sources.items()}
        bounds, rest = self._bounds()
        out = []
        for sym, (lo, hi) in bounds.items():  # one range check per symbol: 2 <= s0, s0 > 3 -> s0 >= 4
            rel = sympy.Eq(sym, lo) if lo == hi else sympy.Ge(sym, lo) if hi is None else \
                sympy.And(sympy.Ge(sym, lo), sympy.Le(sym, hi))
            out.append(ShapeMatch(rel, ((sym, first[sym]),)))
        for sym, srcs in self.sources.items():
            for i, src in enumerate(srcs[1:]):
                other = sympy.Symbol(f"{sym.name}_{i + 1}", integer=True, positive=True)
                out.append(ShapeMatch(sympy.Eq(other, sym), ((other, src), (sym, first[sym]))))
        for rel in rest:
            out.append(ShapeMatch(rel, tuple((sym, first[sym]) for sym in sorted(rel.free_symbols, key=str))))
        return out

    def _bounds(self):
        """Relations of one symbol with a constant folded into a range per symbol; the rest."""
        import sympy  # imported with the first symbolic size (it is slow to import)
        bounds = {sym: [2, None] for sym in self.hints}
        rest = []
        for rel in self.relations:
            lhs, rhs = getattr(rel, "lhs", None), getattr(rel, "rhs", None)
            if isinstance(lhs, sympy.Integer) and isinstance(rhs, sympy.Symbol):
                rel, lhs, rhs = rel.reversed, rhs, lhs
            if not (isinstance(lhs, sympy.Symbol) and isinstance(rhs, sympy.Integer) and lhs in bounds) \
                    or isinstance(rel, sympy.Ne):
                rest.append(rel)
                continue
            lo, hi = bounds[lhs]
            c = int(rhs)
            if isinstance(rel, sympy.Eq):
                lo, hi = c, c
            elif isinstance(rel, (sympy.StrictGreaterThan, sympy.GreaterThan)):
                lo = max(lo, c + 1 if isinstance(rel, sympy.StrictGreaterThan) else c)
            else:
                c = c - 1 if isinstance(rel, sympy.StrictLessThan) else c
                hi = c if hi is None else min(hi, c)
            bounds[lhs] = [lo, hi]
        return {s: tuple(b) for s, b in bounds.items()}, rest
