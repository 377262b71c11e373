"""Building and unpacking tuples, lists, dicts, slices and strings."""
from ... import ops
from ...errors import Unsupported
from ...ops import sets
from ...values.vars import ConstVar, DictVar, ListVar, TupleVar
from ..opcodes import handler


@handler("BUILD_TUPLE")
def build_tuple(frame, inst):
    frame.push(TupleVar(frame.popn(inst.arg)))


@handler("BUILD_LIST")
def build_list(frame, inst):
    frame.push(ListVar(frame.popn(inst.arg)))


@handler("BUILD_MAP")
def build_map(frame, inst):
    flat = frame.popn(2 * inst.arg)
    frame.push(DictVar({ops.key_of(k): v for k, v in zip(flat[::2], flat[1::2])}))


@handler("BUILD_CONST_KEY_MAP")
def build_const_key_map(frame, inst):
    keys = ops.key_of(frame.pop())
    frame.push(DictVar(dict(zip(keys, frame.popn(inst.arg)))))


@handler("BUILD_SLICE")
def build_slice(frame, inst):
    parts = frame.popn(inst.arg)
    frame.push(ops.make_slice(parts))


@handler("BUILD_STRING")
def build_string(frame, inst):
    parts = frame.popn(inst.arg)
    frame.push(ConstVar("".join(ops.python_value(p, "an f-string part") for p in parts)))


_CONVERSIONS = {0: None, 1: str, 2: repr, 3: ascii}  # f"{x!s}", f"{x!r}", f"{x!a}"


@handler("FORMAT_VALUE")
def format_value(frame, inst):
    spec = frame.pop().value if inst.arg & 0x04 else ""
    _format(frame, frame.pop(), _CONVERSIONS[inst.arg & 0x03], spec)


@handler("CONVERT_VALUE")
def convert_value(frame, inst):
    """3.13 spells FORMAT_VALUE as CONVERT_VALUE (the `!r`), then FORMAT_SIMPLE or FORMAT_WITH_SPEC."""
    value = ops.python_value(frame.pop(), "a value formatted in an f-string")
    frame.push(ConstVar(ops.fold(_CONVERSIONS[inst.arg], value)))


@handler("FORMAT_SIMPLE")
def format_simple(frame, inst):
    _format(frame, frame.pop(), None, "")


@handler("FORMAT_WITH_SPEC")
def format_with_spec(frame, inst):
    spec = frame.pop().value
    _format(frame, frame.pop(), None, spec)


def _format(frame, v, conv, spec: str):
    value = ops.python_value(v, "a value formatted in an f-string")
    if conv is not None:
        value = ops.fold(conv, value)
    frame.push(ConstVar(ops.fold(format, value, spec)))


def _building(frame, depth):
    """The list or dict a display is building; one that came in from outside (a resume
    function's parameter) must not be changed as a copy."""
    target = frame.stack[-depth]
    if not target.mutable:
        raise Unsupported(f"building into {ops.describe(target)} that came from outside")
    return target


@handler("BUILD_SET")
def build_set(frame, inst):
    frame.push(sets.make(frame, frame.popn(inst.arg)))


@handler("SET_ADD")
def set_add(frame, inst):
    v = frame.pop()
    sets.add(frame.stack[-inst.arg], v)


@handler("SET_UPDATE")
def set_update(frame, inst):
    v = frame.pop()
    sets.update(frame, frame.stack[-inst.arg], v)


@handler("LIST_APPEND")
def list_append(frame, inst):
    v = frame.pop()
    _building(frame, inst.arg).items.append(v)


@handler("LIST_EXTEND")
def list_extend(frame, inst):
    v = frame.pop()
    _building(frame, inst.arg).items.extend(ops.unpack(frame, v))


@handler("LIST_TO_TUPLE")
def list_to_tuple(frame, inst):
    frame.push(TupleVar(frame.pop().items))


@handler("MAP_ADD")
def map_add(frame, inst):
    value = frame.pop()
    key = frame.pop()
    _building(frame, inst.arg).items[ops.key_of(key)] = value


@handler("DICT_UPDATE", "DICT_MERGE")
def dict_update(frame, inst):
    other = frame.pop()
    if not isinstance(other, DictVar):
        raise Unsupported(f"dict update from {ops.describe(other)}")
    target = _building(frame, inst.arg)
    if inst.opname == "DICT_MERGE" and set(target.items) & set(other.items):
        raise Unsupported("keyword argument given twice")
    target.items.update(other.items)


@handler("UNPACK_SEQUENCE")
def unpack_sequence(frame, inst):
    frame.stack.extend(reversed(ops.unpack_targets(frame, frame.pop(), inst.arg)))


@handler("UNPACK_EX")
def unpack_ex(frame, inst):
    before, after = inst.arg & 0xFF, inst.arg >> 8
    frame.stack.extend(reversed(ops.unpack_targets(frame, frame.pop(), before, True, after)))
