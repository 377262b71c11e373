"""Calls and function creation."""
import builtins

from ... import ops
from ...errors import Unsupported
from ...values.vars import NULL, DictVar, FunctionVar, ObjectVar
from ..opcodes import handler


@handler("KW_NAMES")
def kw_names(frame, inst):
    frame.kw_names = frame.code.co_consts[inst.arg]


@handler("CALL")
def call(frame, inst):
    args = frame.popn(inst.arg)
    second = frame.pop()
    first = frame.pop()
    if first is NULL:
        fn = second
    else:  # (method, self) pair
        fn, args = first, [second, *args]
    names, frame.kw_names = frame.kw_names, ()
    npos = len(args) - len(names)
    kwargs = dict(zip(names, args[npos:]))
    frame.push(ops.call(frame, fn, args[:npos], kwargs))


@handler("CALL_FUNCTION_EX")
def call_function_ex(frame, inst):
    kwargs = frame.pop() if inst.arg & 1 else DictVar({})
    args = frame.pop()
    fn = frame.pop()
    if frame.stack and frame.stack[-1] is NULL:
        frame.pop()
    if not isinstance(kwargs, DictVar):
        raise Unsupported(f"**kwargs from {ops.describe(kwargs)}")
    frame.push(ops.call(frame, fn, ops.unpack(frame, args), dict(kwargs.items)))


@handler("LOAD_BUILD_CLASS")
def load_build_class(frame, inst):
    frame.push(ObjectVar(builtins.__build_class__))


@handler("MAKE_FUNCTION")
def make_function(frame, inst):
    code = frame.pop().value
    closure = frame.pop().items if inst.arg & 0x08 else ()
    if inst.arg & 0x04:
        frame.pop()  # annotations
    kwdefaults = frame.pop().items if inst.arg & 0x02 else {}
    defaults = tuple(frame.pop().items) if inst.arg & 0x01 else ()
    frame.push(FunctionVar(code, frame.globals, frame.global_source, defaults, kwdefaults, tuple(closure)))
