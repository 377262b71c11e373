"""Stack shuffling and no-ops."""
from ...values.vars import NULL
from ..opcodes import handler


@handler("NOP", "RESUME", "EXTENDED_ARG", "PRECALL", "COPY_FREE_VARS", "CACHE")
def nop(frame, inst):
    pass


@handler("POP_TOP")
def pop_top(frame, inst):
    frame.pop()


@handler("PUSH_NULL")
def push_null(frame, inst):
    frame.push(NULL)


@handler("COPY")
def copy(frame, inst):
    frame.push(frame.stack[-inst.arg])


@handler("SWAP")
def swap(frame, inst):
    s = frame.stack
    s[-1], s[-inst.arg] = s[-inst.arg], s[-1]
