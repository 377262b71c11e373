"""Where a value comes from, as a Python expression over the prologue's arguments.

A guard function and a compiled entry both take exactly what the prologue passes: the
function's arguments by name, then one cell per free variable. `G` is the function's
globals dict, bound when the guard is generated. So `LocalSource("x").expr()` is `x`,
`AttrSource(LocalSource("self"), "w").expr()` is `self.w`, `GlobalSource("k").expr()` is
`G['k']` and the contents of a free variable's cell `c` is
`CellContentsSource(LocalSource('c'))`, rendered `c.cell_contents`.
"""
from __future__ import annotations

from dataclasses import dataclass

GLOBALS = "G"  # the name of the globals dict inside generated code


def param_name(name: str) -> str:
    """The parameter name a user's local gets in generated code.

    Injective, and never `G` or a `___` helper name: `G` becomes `L_G`, a name that
    already starts with `L_` or `___` gets one more `L_` in front, all others stay.
    """
    if not name.isidentifier():  # locals such as '.0' or '@py_assert1' (resume functions take them)
        return "L_" + "".join(c if c.isalnum() or c == "_" else f"_x{ord(c):x}_" for c in name)
    if name == GLOBALS or name.startswith(("L_", "___")):
        return "L_" + name
    return name


class Source:
    def expr(self) -> str:
        raise NotImplementedError

    def name(self) -> str:
        """How the user would write it (used in messages)."""
        return self.expr()

    def root(self) -> "Source":
        return self


@dataclass(frozen=True)
class LocalSource(Source):
    local: str

    def expr(self) -> str:
        return param_name(self.local)

    def name(self) -> str:
        return self.local


@dataclass(frozen=True)
class GlobalSource(Source):
    global_name: str

    def expr(self) -> str:
        return f"{GLOBALS}[{self.global_name!r}]"

    def name(self) -> str:
        return self.global_name


@dataclass(frozen=True)
class GlobalsSource(Source):
    """The function's globals dict itself."""

    def expr(self) -> str:
        return GLOBALS

    def name(self) -> str:
        return "globals()"


@dataclass(frozen=True)
class AttrSource(Source):
    base: Source
    attr: str

    def expr(self) -> str:
        return f"{self.base.expr()}.{self.attr}"

    def name(self) -> str:
        return f"{self.base.name()}.{self.attr}"

    def root(self) -> Source:
        return self.base.root()


@dataclass(frozen=True)
class ItemSource(Source):
    base: Source
    index: object  # int or str or other constant key

    def expr(self) -> str:
        return f"{self.base.expr()}[{self.index!r}]"

    def name(self) -> str:
        return f"{self.base.name()}[{self.index!r}]"

    def root(self) -> Source:
        return self.base.root()


@dataclass(frozen=True)
class CellContentsSource(Source):
    """`<base>.cell_contents` where base evaluates to a cell (closures of inlined functions)."""
    base: Source

    def expr(self) -> str:
        return f"{self.base.expr()}.cell_contents"

    def name(self) -> str:
        return self.base.name()

    def root(self) -> Source:
        return self.base.root()
