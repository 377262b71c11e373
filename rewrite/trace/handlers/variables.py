"""Loads and stores: constants, locals, globals, cells, attributes, imports."""
import importlib.util
import sys

from ... import ops
from ...bytecode.compat import (LOAD_FAST_LOADS_CELLS, NULL_ABOVE_CALLABLE, load_attr_pushes_null,
                                load_global_pushes_null, super_attr)
from ...errors import Unsupported
from ...guards.source import CellContentsSource
from ...values.side_effects import DELETED, location
from ...values.vars import NULL, SCALARS, CellVar, ConstVar, ObjectVar, note_mutation
from ..opcodes import Lazy, handler, specializer


@handler("LOAD_CONST")
def load_const(frame, inst):
    frame.stack.append(ops.const(inst.argval))


@specializer("LOAD_CONST")
def load_scalar(inst):
    """A number, string or None (most constants): one ConstVar, made once, pushed each time the
    instruction runs -- as CPython pushes the one object of co_consts (a Var of an immutable
    value, which nothing changes)."""
    if type(inst.argval) not in SCALARS:
        return None
    var = ConstVar(inst.argval)

    def load_scalar(frame, inst):
        frame.stack.append(var)
    return load_scalar


@handler("LOAD_FAST", "LOAD_FAST_CHECK")
def load_fast(frame, inst):
    v = frame.locals.get(inst.argval)
    if v is None or type(v) is Lazy or LOAD_FAST_LOADS_CELLS:  # (unbound, not read yet, or a cell: the long way)
        _load_fast(frame, inst.argval)
    else:
        frame.stack.append(v)


@handler("LOAD_FAST_LOAD_FAST")
def load_fast_load_fast(frame, inst):
    """3.13: two locals pushed, in the order named."""
    for name in inst.argval:
        _load_fast(frame, name)


def _load_fast(frame, name: str):
    if LOAD_FAST_LOADS_CELLS and name not in frame.locals and name in frame.cells:
        _push_cell(frame, name)  # (3.13's LOAD_CLOSURE; an inlined comprehension's variable of
        # the same name is a local while the comprehension runs)
    else:
        frame.push(frame.load_local(name))


@handler("LOAD_FAST_AND_CLEAR")
def load_fast_and_clear(frame, inst):
    """An inlined comprehension (3.12) saves the local its variable shadows, NULL if unbound."""
    frame.push(frame.locals.pop(inst.argval, NULL))


@handler("STORE_FAST")
def store_fast(frame, inst):
    _store_fast(frame, inst.argval)


@handler("STORE_FAST_STORE_FAST")
def store_fast_store_fast(frame, inst):
    """3.13: the top into the first name, the next into the second."""
    for name in inst.argval:
        _store_fast(frame, name)


@handler("STORE_FAST_LOAD_FAST")
def store_fast_load_fast(frame, inst):
    store, load = inst.argval
    _store_fast(frame, store)
    _load_fast(frame, load)


def _store_fast(frame, name: str):
    v = frame.stack.pop()
    if v is NULL:  # (the comprehension's saved local was unbound: it is again)
        frame.locals.pop(name, None)
    else:
        frame.locals[name] = v


@handler("DELETE_FAST")
def delete_fast(frame, inst):
    frame.locals.pop(inst.argval, None)


def _push(frame, value, null: bool):
    """`value`, with a NULL where this Python's calls want it (below it until 3.12, above it from 3.13)."""
    stack = frame.stack
    if null and not NULL_ABOVE_CALLABLE:
        stack.append(NULL)
    stack.append(value)
    if null and NULL_ABOVE_CALLABLE:
        stack.append(NULL)


@handler("LOAD_GLOBAL")
def load_global(frame, inst):
    _push(frame, frame.load_global(inst.argval), load_global_pushes_null(inst))


@handler("STORE_GLOBAL")
def store_global(frame, inst):
    if frame.global_source is None:
        raise Unsupported(f"assignment to global {inst.argval!r} of a function the tracer cannot locate")
    name = inst.argval
    frame.tracer.side_effects.store(frame.global_source(name), frame.pop(), location(frame.globals, name),
                                    existed=name in frame.globals)


@handler("MAKE_CELL")
def make_cell(frame, inst):
    frame.cells[inst.argval] = CellVar(contents=frame.locals.pop(inst.argval, None))


@handler("LOAD_CLOSURE")
def load_closure(frame, inst):
    _push_cell(frame, inst.argval)


def _push_cell(frame, name: str):
    if frame is frame.tracer.root:  # a closure over the root frame's cells: no graph break may
        frame.tracer.root_cells_shared = True  # give a resume function new cells after this
    frame.push(frame.cells[name])


@handler("LOAD_DEREF")
def load_deref(frame, inst):
    cell = frame.cells[inst.argval]
    if isinstance(cell.contents, Lazy):
        cell.contents = frame.tracer.wrap(cell.contents.value, cell.contents.source)
    frame.push(frame.load_cell(inst.argval))


@handler("STORE_DEREF")
def store_deref(frame, inst):
    cell = frame.cells[inst.argval]
    if cell.real is None:  # a cell made while tracing
        note_mutation(cell)
        cell.contents = frame.pop()
    elif cell.source is None:
        raise Unsupported(f"assignment to nonlocal {inst.argval!r} of a function the tracer cannot locate")
    else:
        frame.tracer.side_effects.store(CellContentsSource(cell.source), frame.pop(), location(cell.real, None))


@handler("LOAD_ATTR")
def load_attr(frame, inst):
    obj = frame.stack.pop()  # (3.12's method bit: LOAD_METHOD's NULL, the attribute bound)
    _push(frame, ops.getattr_(frame, obj, inst.argval), load_attr_pushes_null(inst))


@handler("LOAD_SUPER_ATTR")
def load_super_attr(frame, inst):
    """`super().name` (3.12): super, the class cell's contents and the first argument on the stack."""
    self_, cls, sup = frame.pop(), frame.pop(), frame.pop()
    method, _two_args = super_attr(inst)
    bound = ops.call(frame, sup, [cls, self_], {})
    _push(frame, ops.getattr_(frame, bound, inst.argval), method)


@handler("LOAD_METHOD")
def load_method(frame, inst):
    obj = frame.pop()
    frame.push(NULL)
    frame.push(ops.getattr_(frame, obj, inst.argval))


@handler("STORE_ATTR")
def store_attr(frame, inst):
    obj = frame.pop()
    ops.setattr_(frame, obj, inst.argval, frame.pop())


@handler("DELETE_ATTR")
def delete_attr(frame, inst):
    ops.setattr_(frame, frame.pop(), inst.argval, DELETED)


@handler("IMPORT_NAME")
def import_name(frame, inst):
    """`import m` inside a function: the module, when it is imported already (importing runs
    its code: a graph break). Like torch's own modules, it is then read without guards."""
    fromlist = ops.python_value(frame.pop(), "import")
    level = ops.python_value(frame.pop(), "import")
    name = inst.argval
    resolved = importlib.util.resolve_name("." * level + name, frame.globals.get("__package__")) if level else name
    if resolved not in sys.modules:
        raise Unsupported(f"import of {resolved} (not imported yet: importing it runs its code)")
    frame.push(ObjectVar(__import__(name, frame.globals, None, fromlist, level)))


@handler("IMPORT_FROM")
def import_from(frame, inst):
    frame.push(ops.getattr_(frame, frame.stack[-1], inst.argval))
