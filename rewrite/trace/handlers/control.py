"""Jumps, loops, return, raise and exception handlers."""
from ... import ops
from ...bytecode.compat import END_FOR_POPS, SEND_KEEPS_ITERATOR, for_iter_exit
from ...errors import Raised, Unsupported
from ...ops import contexts, exceptions
from ...values.vars import BoundVar, ConstVar, ContextExitVar, ExceptionVar, IteratorVar, ObjectVar
from ..opcodes import Return, Yielded, handler


@handler("JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT")
def jump(frame, inst):
    frame.jump(inst.argval)


def _pop_jump_if(want: bool):
    def pop_jump_if(frame, inst):
        if ops.truthy(frame, frame.stack.pop()) is want:
            frame.jump(inst.argval)
    return pop_jump_if


def _pop_jump_if_none(want: bool):
    def pop_jump_if_none(frame, inst):
        v = frame.pop()
        if (isinstance(v, ConstVar) and v.value is None) is want:
            frame.jump(inst.argval)
    return pop_jump_if_none


handler("POP_JUMP_FORWARD_IF_TRUE", "POP_JUMP_BACKWARD_IF_TRUE", "POP_JUMP_IF_TRUE")(_pop_jump_if(True))
handler("POP_JUMP_FORWARD_IF_FALSE", "POP_JUMP_BACKWARD_IF_FALSE", "POP_JUMP_IF_FALSE")(_pop_jump_if(False))
handler("POP_JUMP_FORWARD_IF_NONE", "POP_JUMP_BACKWARD_IF_NONE", "POP_JUMP_IF_NONE")(_pop_jump_if_none(True))
handler("POP_JUMP_FORWARD_IF_NOT_NONE", "POP_JUMP_BACKWARD_IF_NOT_NONE", "POP_JUMP_IF_NOT_NONE")(_pop_jump_if_none(False))


@handler("JUMP_IF_TRUE_OR_POP")
def jump_if_true_or_pop(frame, inst):
    if ops.truthy(frame, frame.stack[-1]):
        frame.jump(inst.argval)
    else:
        frame.pop()


@handler("JUMP_IF_FALSE_OR_POP")
def jump_if_false_or_pop(frame, inst):
    if not ops.truthy(frame, frame.stack[-1]):
        frame.jump(inst.argval)
    else:
        frame.pop()


@handler("GET_ITER")
def get_iter(frame, inst):
    frame.push(ops.iterate(frame, frame.pop()))


@handler("FOR_ITER")
def for_iter(frame, inst):
    item = frame.stack[-1].next()
    if item is None:
        frame.stack.pop()
        frame.jump(for_iter_exit(inst))
    else:
        frame.stack.append(item)


@handler("END_FOR")
def end_for(frame, inst):
    frame.popn(END_FOR_POPS)


@handler("GET_YIELD_FROM_ITER")
def get_yield_from_iter(frame, inst):
    frame.push(ops.iterate(frame, frame.pop()))


@handler("SEND")
def send(frame, inst):
    """One step of `yield from`: the sub-iterator's next item, or (exhausted) its return value."""
    sent = frame.pop()
    if not (isinstance(sent, ConstVar) and sent.value is None):
        raise Unsupported("generator.send() of a value into `yield from`")
    item = frame.stack[-1].next()
    if item is None:
        it = frame.stack[-1] if SEND_KEEPS_ITERATOR else frame.pop()
        frame.push(it.result if it.result is not None else ConstVar(None))
        frame.jump(inst.argval)
    else:
        frame.push(item)


@handler("END_SEND")
def end_send(frame, inst):
    del frame.stack[-2]


@handler("RETURN_VALUE")
def return_value(frame, inst):
    raise Return(frame.pop())


@handler("RETURN_CONST")
def return_const(frame, inst):
    raise Return(ops.const(inst.argval))


@handler("RETURN_GENERATOR")
def return_generator(frame, inst):
    frame.push(ConstVar(None))  # what the generator's first resumption sends in (POP_TOP drops it)


@handler("YIELD_VALUE")
def yield_value(frame, inst):
    raise Yielded(frame.pop())


@handler("RAISE_VARARGS")
def raise_varargs(frame, inst):
    """`raise` (re-raise), `raise exc`, `raise exc from cause`, with the TypeErrors CPython's
    `do_raise` gives for what cannot be raised; an explicit raise sets `__context__`."""
    if inst.arg == 0:
        exc = exceptions.handled(frame)
        if isinstance(exc, ConstVar) and exc.value is None:
            raise Raised(_error(RuntimeError, "No active exception to reraise"))
        if not isinstance(exc, ExceptionVar):
            raise Unsupported("bare raise with no exception being handled (the call raises eagerly)")
        raise Raised(exc)
    cause = frame.pop() if inst.arg == 2 else None
    exc = _exception(frame, frame.pop(), "exceptions must derive from BaseException")
    if cause is not None:
        if not (isinstance(cause, ConstVar) and cause.value is None):
            cause = _exception(frame, cause, "exception causes must derive from BaseException")
        exceptions.set_cause(exc, cause)
    exceptions.chain(frame, exc)
    exceptions.raised(exc)
    raise Raised(exc)


def _exception(frame, v, error: str) -> ExceptionVar:
    """What `raise v` raises: an exception, or a class called with no arguments; TypeError
    `error` for a value that is neither."""
    if isinstance(v, ObjectVar) and isinstance(v.value, type) and issubclass(v.value, BaseException):
        v = ops.call(frame, v, [], {})  # `raise ValueError`: the class, called
    if isinstance(v, ExceptionVar):
        return v
    if isinstance(v, ObjectVar) and isinstance(v.value, BaseException) or \
            isinstance(v, IteratorVar) and v.py_type is None:
        raise Unsupported(f"raise of {ops.describe(v)}")  # (an exception that came in: not traced)
    if not issubclass(ops.python_type(v), BaseException):
        raise Raised(_error(TypeError, error))
    raise Unsupported(f"raise of {ops.describe(v)}")


def _error(cls: type, message: str) -> ExceptionVar:
    return ExceptionVar(cls, [ConstVar(message)])


@handler("PUSH_EXC_INFO")
def push_exc_info(frame, inst):
    exc = frame.pop()
    frame.push(frame.tracer.exc_info)
    frame.tracer.exc_info = exc
    frame.push(exc)


@handler("POP_EXCEPT")
def pop_except(frame, inst):
    frame.tracer.exc_info = frame.pop()


@handler("CHECK_EXC_MATCH")
def check_exc_match(frame, inst):
    match = ops.python_value(frame.pop(), "except")
    exc = frame.stack[-1]
    frame.push(ConstVar(issubclass(exc.cls, match)))


@handler("CLEANUP_THROW")
def cleanup_throw(frame, inst):
    """3.12: an exception thrown into a generator stopped in `yield from` came back out of the
    sub-iterator: StopIteration ends the `yield from` with its value, any other goes on."""
    exc = frame.pop()
    frame.popn(2)  # (the sub-iterator, the last value sent)
    if isinstance(exc, ExceptionVar) and issubclass(exc.cls, StopIteration):
        frame.push(ConstVar(None))
        frame.push(exc.args[0] if exc.args else ConstVar(None))
        return
    raise Raised(exc)


@handler("RERAISE")
def reraise(frame, inst):
    exc = frame.pop()
    if inst.arg:
        frame.pop()  # the lasti the handler kept
    raise Raised(exc)


@handler("WITH_EXCEPT_START")
def with_except_start(frame, inst):
    """An exception leaves a `with` block: the mode switched by a traced context is restored
    (the exception goes on); a user context manager's `__exit__(type, exc, tb)` is inlined
    (a true result swallows it)."""
    exit_fn, exc = frame.stack[-4], frame.stack[-1]
    if isinstance(exit_fn, ContextExitVar):
        ops.call(frame, exit_fn, [], {})
        frame.push(ConstVar(False))
    elif isinstance(exit_fn, BoundVar) and isinstance(exc, ExceptionVar):
        tb = exc.traceback or ConstVar(None)
        frame.push(ops.call(frame, exit_fn, [ObjectVar(exc.cls), exc, tb], {}))
    else:
        raise Unsupported(f"an exception leaving a with block over {ops.describe(exit_fn)}")


@handler("LOAD_ASSERTION_ERROR")
def load_assertion_error(frame, inst):
    frame.push(ops.const(AssertionError))


@handler("BEFORE_WITH")
def before_with(frame, inst):
    binds = frame.instructions[frame.ip].opname != "POP_TOP"  # (`with ctx as x:`, not `with ctx:`)
    exit_fn, entered = contexts.enter(frame, frame.stack[-1], binds)  # Unsupported before the stack changes
    frame.pop()
    frame.push(exit_fn)
    frame.push(entered)
