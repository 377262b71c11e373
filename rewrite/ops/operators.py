"""Python operators (`+`, `<`, `-x`, ...) on Vars, as one table from symbol to function."""
from __future__ import annotations

import operator

import torch

from ..errors import Unsupported
from ..values.vars import ConstVar, ListVar, ScalarVar, SymIntVar, TensorVar, TupleVar, Var
from .core import const, describe, fold, foldable, mutating
from .fills import inplace
from .instances import binary as user_binary, call_dunder, is_user_object
from .sets import binary as set_binary
from .tensors import call_function

BINARY = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
    "//": operator.floordiv, "%": operator.mod, "**": operator.pow, "@": operator.matmul,
    "<<": operator.lshift, ">>": operator.rshift, "&": operator.and_, "|": operator.or_, "^": operator.xor,
    "+=": operator.iadd, "-=": operator.isub, "*=": operator.imul, "/=": operator.itruediv,
    "//=": operator.ifloordiv, "%=": operator.imod, "**=": operator.ipow, "@=": operator.imatmul,
    "<<=": operator.ilshift, ">>=": operator.irshift, "&=": operator.iand, "|=": operator.ior,
    "^=": operator.ixor,
    "<": operator.lt, "<=": operator.le, "==": operator.eq, "!=": operator.ne, ">": operator.gt, ">=": operator.ge,
}
INPLACE = {sym for sym in BINARY if sym.endswith("=") and sym not in ("<=", ">=", "==", "!=")}
UNARY = {"-": operator.neg, "+": operator.pos, "~": operator.invert}
# the operator module's functions, routed to the same rules
OPERATOR_FUNCTIONS = {fn: sym for sym, fn in BINARY.items()}


def binary(frame, sym: str, a: Var, b: Var) -> Var:
    fn = BINARY[sym]
    if isinstance(a, SymIntVar) or isinstance(b, SymIntVar):
        result = symint_op(frame, BINARY[sym[:-1]] if sym in INPLACE else fn, a, b)
        if result is not None:
            return result
    if sym in INPLACE and not is_user_object(b):  # `xs += it`, `d |= it`, `s |= t`: in place, as CPython fills them
        result = inplace(frame, sym, a, b)
        if result is not None:
            return result
    result = set_binary(frame, fn, a, b)
    if result is not None:
        return result
    user = user_binary(frame, fn, a, b)
    if user is not None:
        return user
    if isinstance(a, TensorVar) or isinstance(b, TensorVar):
        if sym in INPLACE and not isinstance(a, TensorVar):
            fn = BINARY[sym[:-1]]  # `n += t` with n a number rebinds n, nothing is mutated
        return call_function(frame, fn, (a, b), {})
    if isinstance(a, ScalarVar) or isinstance(b, ScalarVar):
        return _scalar_op(frame, BINARY[sym[:-1]] if sym in INPLACE else fn, a, b)
    seq = _sequence_op(frame, sym, a, b)
    if seq is not None:
        return seq
    if foldable(a) and foldable(b):
        return const(fold(fn, a.python_value(), b.python_value()))
    raise Unsupported(f"operator {sym} on {describe(a)} and {describe(b)}")


def _sequence_op(frame, sym, a, b):
    """`+` and `*` on tuples and lists of Vars (items may be tensors)."""
    seqs = (TupleVar, ListVar)
    if sym in ("+", "+=") and isinstance(a, seqs) and type(a) is type(b):
        sizes = torch.Size in (getattr(a, "py_type", None), getattr(b, "py_type", None))
        py_type = torch.Size if sizes else tuple  # tuple + Size is a Size, as torch.Size.__radd__ makes it
        if isinstance(a, ListVar) and a.py_type is not b.py_type:
            raise Unsupported(f"operator + on a {a.py_type.__name__} and a {b.py_type.__name__} (the call raises eagerly)")
        if isinstance(a, ListVar) and a.py_type is not list:  # deque + deque: a's maxlen
            return ListVar((a.items + b.items)[-a.maxlen:] if a.maxlen else [] if a.maxlen == 0 else a.items + b.items,
                           py_type=a.py_type, maxlen=a.maxlen)
        return TupleVar(a.items + b.items, py_type=py_type) if isinstance(a, TupleVar) else ListVar(a.items + b.items)
    if sym == "*" and isinstance(b, seqs) and isinstance(a, ConstVar) and type(a.value) is int:
        a, b = b, a  # `2 * [x]`
    if sym in ("*", "*=") and isinstance(a, seqs) and isinstance(b, ConstVar) and type(b.value) is int:
        if isinstance(a, ListVar) and a.py_type is not list:
            raise Unsupported("operator * on a deque")
        if sym == "*=" and isinstance(a, ListVar):
            mutating(frame, a)
            a.items[:] = a.items * b.value
            return a
        if isinstance(a, TupleVar):
            return TupleVar(a.items * b.value, py_type=torch.Size if a.py_type is torch.Size else tuple)
        return ListVar(a.items * b.value)
    if sym in ("==", "!=") and isinstance(a, seqs) and isinstance(b, seqs) and not (foldable(a) and foldable(b)):
        raise Unsupported("comparing sequences that hold tensors (data-dependent)")
    return None


def unary(frame, sym: str, a: Var) -> Var:
    fn = UNARY[sym]
    if isinstance(a, TensorVar):
        return call_function(frame, fn, (a,), {})
    if isinstance(a, ScalarVar):
        return _scalar_op(frame, fn, a)
    if isinstance(a, SymIntVar) and fn in (operator.neg, operator.pos):
        return symint_op(frame, fn, a)
    if foldable(a):
        return const(fold(fn, a.python_value()))
    user = call_dunder(frame, a, {"-": "__neg__", "+": "__pos__", "~": "__invert__"}[sym])
    if user is not None:
        return user
    raise Unsupported(f"unary {sym} on {describe(a)}")


def symint_op(frame, fn, *args: Var) -> Var | None:
    """Arithmetic and comparisons on symbolic sizes: `+ - * // %` stay symbolic (a node and
    an expression); a comparison is decided now and becomes a guard. None: not for sizes."""
    if not all(isinstance(a, SymIntVar) or isinstance(a, ConstVar) and type(a.value) is int for a in args):
        return None
    from ..symbolic import RELATIONS, SYMPY_OPS  # (deferred: sympy, imported with the first symbolic size)
    exprs = [a.expr if isinstance(a, SymIntVar) else a.value for a in args]
    env = next(a.env for a in args if isinstance(a, SymIntVar))
    if fn in RELATIONS:
        return ConstVar(env.decide(RELATIONS[fn](*exprs)))
    if fn not in SYMPY_OPS:
        return None  # `/`, `**`, bit operations: on the specialized values
    value = fold(fn, *(a.value for a in args))
    expr = SYMPY_OPS[fn](*exprs)
    if expr.is_Integer:
        return ConstVar(int(expr))
    node = frame.tracer.graph.int_node("call_function", fn, args, value)
    return SymIntVar(node, expr, value, env)


def _scalar_op(frame, fn, *args: Var) -> ScalarVar:
    """Arithmetic on numbers the graph computes (captured `.item()`s): recorded, not folded."""
    for a in args:
        if not isinstance(a, ScalarVar) and not (isinstance(a, ConstVar) and type(a.value) in (int, float, bool)):
            raise Unsupported(f"operator {fn.__name__} on a captured scalar and {describe(a)}")
    node, result = frame.tracer.graph.call("call_function", fn, args, {})
    return ScalarVar(node, result)
