"""Python operators (`+`, `<`, `-x`, ...) on Vars, as one table from symbol to function."""
from __future__ import annotations

import operator

import torch

from ..errors import Unsupported
from ..values.vars import (ArrayVar, ConstVar, ListVar, ObjectVar, ScalarVar, SymIntVar, TensorVar, TracebackVar,
                           TupleVar, Var)
from .core import IMPOSSIBLE_ITEMS, MAX_CHARS, MAX_ITEMS, const, describe, fold, foldable, is_same, mutating
from .fills import inplace
from .instances import binary as user_binary, call_dunder, is_user_object
from .numpy_calls import binary as array_binary, unary as array_unary
from .sets import binary as set_binary
from .tensors import call_function, call_operator

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


NUMBERS = (int, float, bool)


def binary(frame, sym: str, a: Var, b: Var) -> Var:
    fn = BINARY[sym]
    ta, tb = type(a), type(b)  # the common cases first: numbers, tensors and numbers (what the rules below give them)
    if ta is ConstVar and tb is ConstVar and type(a.value) in NUMBERS and type(b.value) in NUMBERS:
        return ConstVar(fold(fn, a.value, b.value))  # (a number: what const() makes of it)
    if sym not in INPLACE and (ta is TensorVar and (tb is TensorVar or tb is ConstVar and type(b.value) in NUMBERS) or
                               tb is TensorVar and ta is ConstVar and type(a.value) in NUMBERS):
        return call_operator(frame, fn, a, b)
    if isinstance(a, ArrayVar) or isinstance(b, ArrayVar):
        return array_binary(frame, sym, fn, a, b)
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
    if fn in (operator.eq, operator.ne) and (isinstance(a, BY_IDENTITY) or isinstance(b, BY_IDENTITY) or
                                            _compared_by_identity(a) and _compared_by_identity(b)):
        return ConstVar(is_same(a, b, frame) is (fn is operator.eq))  # (no __eq__ of their own: object's)
    if foldable(a) and foldable(b):
        x, y = a.python_value(), b.python_value()
        if fn in (operator.mul, operator.imul) and type(x) in (str, bytes) and type(y) is int:
            repeat_count(x, y, MAX_CHARS)
        elif fn in (operator.mul, operator.imul) and type(y) in (str, bytes) and type(x) is int:
            repeat_count(y, x, MAX_CHARS)
        return const(fold(fn, x, y))
    raise Unsupported(f"operator {sym} on {describe(a)} and {describe(b)}")


# Vars of objects compared by identity (their classes keep object's __eq__): tracebacks, exceptions
BY_IDENTITY = (TracebackVar,)


def _compared_by_identity(v) -> bool:
    """An object that came in whose class compares with object's `==` (a function, a module)."""
    return isinstance(v, ObjectVar) and type(v.value).__eq__ is object.__eq__


def repeat_count(sample, n: int, cap: int = MAX_ITEMS) -> int:
    """`n`, for a sequence of as many items as `sample` (a real one of its kind) repeated n
    times: past `cap` the trace does not make it (a graph break: eager may or may not find the
    memory), unless no machine could: then the real repetition of `sample`, which raises
    CPython's own error at once (OverflowError, or MemoryError from its size checks or a
    failed allocation)."""
    total = len(sample) * max(n, 0)
    if total <= cap:
        return n
    if total >= IMPOSSIBLE_ITEMS:
        fold(operator.mul, sample, n)
    raise Unsupported(f"a sequence of {total} items made while tracing (more than {cap})",
                      "make large constant containers outside the compiled function")


def _sequence_op(frame, sym, a, b):
    """`+` and `*` on tuples and lists of Vars (items may be tensors). A tuple's `+ ()` and
    `* 1` are the tuple itself, as CPython's (an exact tuple)."""
    seqs = (TupleVar, ListVar)
    if sym in ("+", "+=") and isinstance(a, TupleVar) and isinstance(b, TupleVar) and \
            a.py_type is tuple is b.py_type and not (a.items and b.items):
        return b if not a.items else a
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
        n = repeat_count([None] * len(a.items) if isinstance(a, ListVar) else (None,) * len(a.items), b.value)
        if sym == "*=" and isinstance(a, ListVar):
            mutating(frame, a)
            a.items[:] = a.items * n
            return a
        if isinstance(a, TupleVar):
            if a.py_type is tuple and (n == 1 or not a.items):
                return a
            return TupleVar(a.items * n, py_type=torch.Size if a.py_type is torch.Size else tuple)
        return ListVar(a.items * n)
    if sym in ("==", "!=") and isinstance(a, seqs) and isinstance(b, seqs) and not (foldable(a) and foldable(b)):
        raise Unsupported("comparing sequences that hold tensors (data-dependent)")
    return None


def unary(frame, sym: str, a: Var) -> Var:
    fn = UNARY[sym]
    if isinstance(a, TensorVar):
        return call_function(frame, fn, (a,), {})
    if isinstance(a, ArrayVar):
        return array_unary(frame, sym, fn, a)
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
