"""Unary, binary and comparison operators, subscripts."""
from ... import ops
from ...bytecode.compat import BINARY_OPS
from ...errors import Unsupported
from ...values.vars import ConstVar, TupleVar
from ..opcodes import handler


@handler("BINARY_OP")
def binary_op(frame, inst):
    stack = frame.stack
    b = stack.pop()
    a = stack.pop()
    stack.append(ops.binary(frame, BINARY_OPS[inst.arg], a, b))


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


@handler("TO_BOOL")
def to_bool(frame, inst):
    """3.13: the value a branch or `not` takes is made a bool first. The tracer leaves it as it
    is: the branch decides on it, or breaks on it, as before 3.13 (a break's code makes it a
    bool: compat.truth)."""


@handler("COMPARE_OP")
def compare_op(frame, inst):
    b = frame.pop()
    a = frame.pop()
    frame.push(ops.binary(frame, inst.argval, a, b))


# CALL_INTRINSIC_1 (3.12): the one-operand operations that left the opcode table, by dis's name
INTRINSICS_1 = {
    "INTRINSIC_UNARY_POSITIVE": lambda frame, v: ops.unary(frame, "+", v),
    "INTRINSIC_LIST_TO_TUPLE": lambda frame, v: TupleVar(list(v.items)),
    # a generator's handler: the tracer turns a StopIteration leaving the frame (PEP 479) itself
    "INTRINSIC_STOPITERATION_ERROR": lambda frame, v: v,
}


@handler("CALL_INTRINSIC_1")
def call_intrinsic_1(frame, inst):
    rule = INTRINSICS_1.get(inst.argrepr)
    if rule is None:
        raise Unsupported(f"{inst.argrepr or 'an intrinsic'} (CALL_INTRINSIC_1)")
    frame.push(rule(frame, frame.pop()))


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


@handler("BINARY_SLICE")
def binary_slice(frame, inst):
    stop, start = frame.pop(), frame.pop()
    obj = frame.pop()
    frame.push(ops.getitem(frame, obj, ops.make_slice([start, stop])))


@handler("STORE_SLICE")
def store_slice(frame, inst):
    stop, start = frame.pop(), frame.pop()
    obj = frame.pop()
    ops.setitem(frame, obj, ops.make_slice([start, stop]), frame.pop())


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
