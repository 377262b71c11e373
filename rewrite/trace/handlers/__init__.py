"""Opcode handlers, one small function each, registered by opname (see `interpreter.handler`)."""
from . import build, calls, control, operators, stack, variables  # noqa: F401
