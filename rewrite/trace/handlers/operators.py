"""Unary, binary and comparison operators, subscripts."""
from ... import ops
from ...bytecode.compat import BINARY_OPS
from ...values.vars import ConstVar
from ..opcodes import handler


@handler("BINARY_OP")
def binary_op(frame, inst):
    b = frame.pop()
    a = frame.pop()
    frame.push(ops.binary(frame, BINARY_OPS[inst.arg], a, b))


@handler("UNARY_NEGATIVE")
def unary_negative(frame, inst):
    frame.push(ops.unary(frame, "-", frame.pop()))


@handler("UNARY_POSITIVE")
def unary_positive(frame, inst):
    frame.push(ops.unary(frame, "+", frame.pop()))


@handler("UNARY_INVERT")
def unary_invert(frame, inst):
    frame.push(ops.unary(frame, "~", frame.pop()))


@handler("UNARY_NOT")
def unary_not(frame, inst):
    frame.push(ConstVar(not ops.truthy(frame, frame.pop())))


@handler("COMPARE_OP")
def compare_op(frame, inst):
    b = frame.pop()
    a = frame.pop()
    frame.push(ops.binary(frame, inst.argval, a, b))


@handler("IS_OP")
def is_op(frame, inst):
    b = frame.pop()
    a = frame.pop()
    frame.push(ConstVar(ops.is_same(a, b, frame) != bool(inst.arg)))


@handler("CONTAINS_OP")
def contains_op(frame, inst):
    container = frame.pop()
    item = frame.pop()
    frame.push(ConstVar(ops.contains(frame, container, item) != bool(inst.arg)))


@handler("BINARY_SUBSCR")
def binary_subscr(frame, inst):
    index = frame.pop()
    obj = frame.pop()
    frame.push(ops.getitem(frame, obj, index))


@handler("STORE_SUBSCR")
def store_subscr(frame, inst):
    index = frame.pop()
    obj = frame.pop()
    value = frame.pop()
    ops.setitem(frame, obj, index, value)


@handler("DELETE_SUBSCR")
def delete_subscr(frame, inst):
    index = frame.pop()
    obj = frame.pop()
    ops.delitem(frame, obj, index)
