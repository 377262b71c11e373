"""Sympy helpers for symbolic sizes: Python's `//` and `%` on sizes, the operator tables,
and rendering an expression as plain Python for the guard closure. Imported only once a
trace has a symbolic size (sympy takes a quarter of a second to import).
"""
from __future__ import annotations

import operator

import sympy


class FloorDiv(sympy.Function):
    """Python's `//` on sizes (non-negative)."""
    is_integer = True

    @classmethod
    def eval(cls, a, b):
        if a.is_Integer and b.is_Integer:
            return sympy.Integer(int(a) // int(b))
        if b == 1:
            return a
        if a == 0:
            return sympy.Integer(0)
        return None


class PyMod(sympy.Function):
    """Python's `%` on sizes (non-negative)."""
    is_integer = True

    @classmethod
    def eval(cls, a, b):
        if a.is_Integer and b.is_Integer:
            return sympy.Integer(int(a) % int(b))
        if b == 1:
            return sympy.Integer(0)
        return None


SYMPY_OPS = {operator.add: lambda a, b: a + b, operator.sub: lambda a, b: a - b,
             operator.mul: lambda a, b: a * b, operator.floordiv: FloorDiv, operator.mod: PyMod,
             operator.neg: lambda a: -a}
RELATIONS = {operator.lt: sympy.Lt, operator.le: sympy.Le, operator.gt: sympy.Gt, operator.ge: sympy.Ge,
             operator.eq: sympy.Eq, operator.ne: sympy.Ne}



def to_python(expr, name_of) -> str:
    """A relation or size expression as Python source, symbols rendered by `name_of`."""
    if isinstance(expr, sympy.Symbol):
        return name_of(expr)
    if isinstance(expr, (int, sympy.Integer)):
        return str(int(expr))
    if expr is sympy.true or expr is sympy.false:
        return str(bool(expr))
    args = [to_python(a, name_of) for a in expr.args]
    if isinstance(expr, sympy.Add):
        return "(" + " + ".join(args) + ")"
    if isinstance(expr, sympy.Mul):
        return "(" + " * ".join(args) + ")"
    if isinstance(expr, sympy.Pow) and expr.exp.is_Integer and int(expr.exp) > 0:
        return f"({args[0]} ** {int(expr.exp)})"
    if isinstance(expr, FloorDiv):
        return f"({args[0]} // {args[1]})"
    if isinstance(expr, (PyMod, sympy.Mod)):
        return f"({args[0]} % {args[1]})"
    if isinstance(expr, sympy.Min):
        return f"min({', '.join(args)})"
    if isinstance(expr, sympy.Max):
        return f"max({', '.join(args)})"
    if isinstance(expr, sympy.And):
        return " and ".join(f"({a})" for a in args)
    ops = {sympy.Eq: "==", sympy.Ne: "!=", sympy.Lt: "<", sympy.Le: "<=", sympy.Gt: ">", sympy.Ge: ">="}
    for cls, op in ops.items():
        if isinstance(expr, cls):
            return f"{args[0]} {op} {args[1]}"
    raise NotImplementedError(f"rendering {type(expr).__name__} {expr}")
