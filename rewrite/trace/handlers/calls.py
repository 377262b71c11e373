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
    names, frame.kw_names = frame.kw_names, ()  # (3.11, 3.12: set by KW_NAMES)
    _call(frame, inst.arg, names)


@handler("CALL_KW")
def call_kw(frame, inst):
    """3.13: the keyword names are on the stack, above the arguments."""
    _call(frame, inst.arg, ops.python_value(frame.pop(), "keyword names"))


def _call(frame, argc: int, names: tuple):
    stack = frame.stack
    args = frame.popn(argc)
    second = stack.pop()
    first = stack.pop()
    if first is NULL:  # [NULL, callable] (until 3.12)
        fn = second
    elif second is NULL:  # [callable, NULL] (3.13)
        fn = first
    else:  # (method, self) pair
        fn, args = first, [second, *args]
    npos = len(args) - len(names)
    kwargs = dict(zip(names, args[npos:])) if names else {}
    stack.append(ops.call(frame, fn, args[:npos] if names else args, kwargs))


@handler("CALL_FUNCTION_EX")
def call_function_ex(frame, inst):
    kwargs = frame.pop() if inst.arg & 1 else DictVar({})
    args = frame.pop()
    fn = frame.pop()
    if fn is NULL:  # [callable, NULL, args] (3.13)
        fn = frame.pop()
    elif frame.stack and frame.stack[-1] is NULL:  # [NULL, callable, args]
        frame.pop()
    if not isinstance(kwargs, DictVar):
        raise Unsupported(f"**kwargs from {ops.describe(kwargs)}")
    frame.push(ops.call(frame, fn, ops.unpack(frame, args), dict(kwargs.items)))


@handler("LOAD_BUILD_CLASS")
def load_build_class(frame, inst):
    frame.push(ObjectVar(builtins.__build_class__))


@handler("SET_FUNCTION_ATTRIBUTE")
def set_function_attribute(frame, inst):
    """3.13: MAKE_FUNCTION takes the code alone; its defaults, closure ... are set after."""
    fn, value = frame.pop(), frame.pop()
    if inst.arg == 0x08:
        fn.closure = tuple(value.items)
    elif inst.arg == 0x02:
        fn.kwdefaults = value.items
    elif inst.arg == 0x01:
        fn.defaults = tuple(value.items)
    elif inst.arg == 0x04:
        fn.fields["__annotations__"] = _annotations(value)
    frame.push(fn)


def _annotations(pairs) -> DictVar:
    """The `__annotations__` MAKE_FUNCTION makes of its tuple of (name, value) pairs, flattened."""
    items = pairs.items
    return DictVar({ops.python_value(items[i], "an annotation's name"): items[i + 1] for i in range(0, len(items), 2)})


@handler("MAKE_FUNCTION")
def make_function(frame, inst):
    code = frame.pop().value
    flags = inst.arg or 0  # (3.13: none; SET_FUNCTION_ATTRIBUTE sets each after)
    closure = frame.pop().items if flags & 0x08 else ()
    annotations = _annotations(frame.pop()) if flags & 0x04 else None
    kwdefaults = frame.pop().items if flags & 0x02 else {}
    defaults = tuple(frame.pop().items) if flags & 0x01 else ()
    fn = FunctionVar(code, frame.globals, frame.global_source, defaults, kwdefaults, tuple(closure))
    if annotations is not None:
        fn.fields["__annotations__"] = annotations
    frame.push(fn)
