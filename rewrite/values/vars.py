"""The value kinds of the symbolic interpreter.

A few kinds, not a class per Python type: what a value *does* is decided by the rule
tables in `rewrite/ops`, keyed by the underlying Python object or its type.

* TensorVar   -- a tensor in the graph: its node and the real tensor computed while tracing
* ScalarVar   -- a Python number computed in the graph (`.item()` with config.capture_scalar_outputs)
* SymIntVar   -- a Python int computed from symbolic sizes (`x.size(0)` of a dynamic size)
* ConstVar    -- an immutable Python value known at trace time (int, str, dtype, range, slice, ...)
* TupleVar / ListVar / DictVar -- containers of Vars (ListVar/DictVar created while tracing are mutable)
* SetVar      -- a set or frozenset made while tracing
* IteratorVar -- an iterator over a materialized list of Vars
* ObjectVar   -- any other real Python object, used by identity (functions, modules, classes, instances);
  CodeFunctionVar: a function that came in, guarded by its code (its identity where it decides)
* FunctionVar -- a function created while tracing (MAKE_FUNCTION), inlined when called
* MethodVar   -- a bound method on a Var (`x.relu`, `lst.append`)
* CellVar     -- a closure cell: virtual (created while tracing) or a real cell with a source
* InstanceVar -- an object of a user class made while tracing: its class and attributes (Vars)
* ExceptionVar -- an exception raised (`raise`) or caught (`except E as e`) while tracing
* BoundVar    -- a Python function bound to a Var (a method of an InstanceVar, a classmethod)
* PartialVar  -- functools.partial(func, ...)
* SuperVar    -- `super()` inside a method
* RecordedContextVar -- `torch.inference_mode()`, `torch.autocast(...)`
* GradModeVar -- `torch.no_grad()`, `enable_grad()`, `set_grad_enabled(b)`; ContextExitVar is
                 the `__exit__` a `with` block over one leaves on the stack

Every Var may carry the `Source` it was read from; guards are installed when a value is
first wrapped from its source (see `builder.py`).
"""
from __future__ import annotations

import itertools
import types

import numpy
import torch

from ..guards.source import Source


# the immutable Python values a ConstVar holds (a constant the tracer may compute with)
SCALARS = (int, float, bool, str, bytes, complex, type(None))
IMMUTABLE = SCALARS + (torch.dtype, torch.device, range, slice, types.CodeType, type(Ellipsis), frozenset,
                       torch.memory_format, torch.layout,
                       *(t for t in set(numpy.sctypeDict.values()) if issubclass(t, numpy.number | numpy.bool_)))


_mutations = 0
_serial = itertools.count()  # Vars are numbered as they are made
_watermark = 0  # the first number made after the root frame's latest checkpoint
# (module state: one trace runs at a time, under rewrite.dispatch.COMPILE_LOCK)


_undo: dict = {}  # id(var) -> (var, what it held before its first change since the latest checkpoint)
_undoable = True  # every change since the latest checkpoint is in _undo
_recording = True  # the root frame's instruction running now has a checkpoint: changes go into _undo


def note_mutation(var: "Var | None" = None) -> None:
    """A value the trace knows is about to change in place: a list, dict, set or object
    `var`, or (None) something outside the call (the side effects keep their own undo). A
    graph break resumes from the root frame's latest checkpoint: what the failing part
    changed of anything that existed then is undone first (`undo_to_checkpoint`), since the
    eager step changes it again; what it made itself after the checkpoint does not count."""
    global _mutations, _undoable, _watched
    born = getattr(var, "born", 0)
    if _watch is not None and born < _watch:
        _watched += 1
    # (a Var with a source stands for an object that existed before the call, however late it was read)
    if var is None or born < _watermark or var.source is not None:
        _mutations += 1
        if _recording and var is not None and id(var) not in _undo:
            saved = var.snapshot()
            if saved is NotImplemented:
                _undoable = False
            _undo[id(var)] = (var, saved)


_watch = None  # while a higher-order op's body is traced: the first serial of the body's own Vars
_watched = 0  # changes since to Vars older than that


def start_watch() -> tuple:
    """From now on, count changes to Vars made before now (a higher-order op's body must make
    none); returns what `end_watch` restores (bodies nest)."""
    global _watch, _watched
    saved = (_watch, _watched)
    _watch, _watched = next(_serial), 0
    return saved


def end_watch(saved: tuple) -> int:
    """The changes counted since `start_watch` (an enclosing watch counts them too)."""
    global _watch, _watched
    count = _watched
    _watch, _watched = saved[0], saved[1] + count
    return count


def mutations() -> int:
    return _mutations


def checkpoint_mark() -> int:
    """The mutation count now; Vars made from here on are newer than this checkpoint."""
    global _watermark, _undoable, _recording
    _watermark = next(_serial)
    _undo.clear()
    _undoable = _recording = True
    return _mutations


def checkpoint_dropped() -> None:
    """The root frame's instruction running now keeps no checkpoint (a break there runs the
    whole call eagerly, undoing nothing): until the next one, changes are counted, not saved."""
    global _recording
    _recording = False
    _undo.clear()


def watermark() -> int:
    return _watermark


def undo_to_checkpoint() -> bool:
    """Give the Vars changed since the latest checkpoint back what they held then (False when
    one of them cannot be)."""
    if not _undoable:
        return False
    for var, saved in _undo.values():
        var.restore(saved)
    _undo.clear()
    return True


class Var:
    __slots__ = ("source", "born")

    def __init__(self, source: Source | None = None):
        self.source = source
        self.born = next(_serial)

    def python_value(self):
        """The real Python value, when the Var stands for one known at trace time."""
        raise NotImplementedError(type(self).__name__)

    def snapshot(self):
        """What this mutable Var holds now, for `restore` (NotImplemented: it cannot be)."""
        return NotImplemented

    def restore(self, saved) -> None:
        raise NotImplementedError(type(self).__name__)

    def __repr__(self):
        return f"{type(self).__name__}()"


class TensorVar(Var):
    __slots__ = ("node", "value", "sym")

    def __init__(self, node, value, source=None, sym=None):
        self.source, self.born = source, next(_serial)  # (Var's, inline: the most made Vars)
        self.node = node
        self.value = value
        self.sym = sym  # sizes (ints and sympy expressions) when some are symbolic, else None

    def shape(self) -> tuple:
        return self.sym if self.sym is not None else tuple(self.value.shape)

    def __repr__(self):
        return f"TensorVar({self.node.name}: {str(self.value.dtype)[6:]}{list(self.value.shape)})"


class ArrayVar(Var):
    """A NumPy value the trace holds as a tensor of the graph (`tensor`, a TensorVar of the same
    dtype, values and memory): an ndarray (`kind` np.ndarray), a NumPy scalar (`kind` its class,
    np.float64, np.bool_, ...: a 0-d tensor) or a Python number NumPy computed from data (`kind`
    float, int or bool: `np.allclose(...)`). `readonly`: NumPy's array is not writeable (a
    `broadcast_to` view, a read-only input). `unshared`: NumPy's array views another's memory
    where the tensor is a copy (np.flip, `a[::-1]`: torch has no negative strides); it is
    `(fn, args, kwargs)`, the call over Vars that makes NumPy's view (what the oracle computes
    with, and what the entry makes again when the array leaves the call). `stale`: the memory
    it views was written since (the copy no longer holds what NumPy's view would: reading it
    is a graph break)."""
    __slots__ = ("tensor", "kind", "readonly", "unshared", "stale")

    def __init__(self, tensor: TensorVar, kind: type, source=None, readonly: bool = False,
                 unshared: tuple | None = None):
        super().__init__(source)
        self.tensor = tensor
        self.kind = kind
        self.readonly = readonly
        self.unshared = unshared
        self.stale = False

    @property
    def node(self):
        return self.tensor.node

    @property
    def value(self):
        return self.tensor.value

    def __repr__(self):
        return f"ArrayVar({self.kind.__name__}: {self.tensor!r})"


class ScalarVar(Var):
    """A Python number the graph computes from tensor data (`t.item()` when
    `config.capture_scalar_outputs` is on): arithmetic on it and tensor ops taking it are
    recorded; anything that needs its value in Python (a branch, a range bound) breaks."""
    __slots__ = ("node", "value")

    def __init__(self, node, value):
        super().__init__(None)
        self.node = node
        self.value = value

    def __repr__(self):
        return f"ScalarVar({self.node.name}: {type(self.value).__name__})"


class SymIntVar(Var):
    """A Python int the graph computes from symbolic sizes (`x.size(0)`, `n * 2`): its sympy
    expression, its value now (the hint), and the graph node that computes it at run time."""
    __slots__ = ("node", "expr", "value", "env")

    def __init__(self, node, expr, value: int, env, source=None):
        super().__init__(source)
        self.node = node
        self.expr = expr
        self.value = value
        self.env = env  # the trace's ShapeEnv (where a decision on it becomes a guard)

    def python_value(self):
        """Its value, for code that needs a plain int: the entry is then specialized to it."""
        return self.env.specialize(self.expr)

    def __repr__(self):
        return f"SymIntVar({self.expr} = {self.value})"


class ConstVar(Var):
    __slots__ = ("value",)

    def __init__(self, value, source=None):
        self.source, self.born = source, next(_serial)  # (Var's, inline: the most made Vars)
        self.value = value

    def python_value(self):
        return self.value

    def __repr__(self):
        return f"ConstVar({self.value!r})"


class TupleVar(Var):
    """A tuple of Vars. `py_type` keeps namedtuples and torch.return_types."""
    __slots__ = ("items", "py_type")

    def __init__(self, items, source=None, py_type=tuple):
        super().__init__(source)
        self.items = list(items)
        self.py_type = py_type

    def python_value(self):
        return make_tuple(self.py_type, [v.python_value() for v in self.items])

    def __repr__(self):
        return f"TupleVar({self.items!r})"


def make_tuple(py_type, values):
    """A tuple of type `py_type`: namedtuples take fields, torch.Size and structseqs a sequence."""
    if py_type is tuple:
        return tuple(values)
    if hasattr(py_type, "_fields"):
        return py_type(*values)
    return py_type(values)


class ListVar(Var):
    """A list, or (`py_type` collections.deque) a deque of at most `maxlen` items. `state`
    counts a deque's changes other than item assignment (its iterators compare it, as
    CPython's deque iterator compares the deque's own count)."""
    __slots__ = ("items", "mutable", "py_type", "maxlen", "state")

    def __init__(self, items, source=None, mutable=True, py_type=list, maxlen=None):
        super().__init__(source)
        self.items = list(items)
        self.mutable = mutable
        self.py_type, self.maxlen = py_type, maxlen
        self.state = 0

    def python_value(self):
        values = [v.python_value() for v in self.items]
        return values if self.py_type is list else self.py_type(values, self.maxlen)

    def snapshot(self):
        return list(self.items), self.state

    def restore(self, saved) -> None:
        self.items[:], self.state = saved  # (in place: its iterators share the list)

    def __repr__(self):
        return f"ListVar({self.items!r})"


class IdentityKey:
    """A dict key whose hash is its identity (a tensor, a module, an object): found by the
    object it stands for, and iterated as the Var it came from."""
    __slots__ = ("var", "ident")

    def __init__(self, var: "Var", ident):
        self.var, self.ident = var, ident

    def __hash__(self):
        return id(self.ident)

    def __eq__(self, other):
        return isinstance(other, IdentityKey) and other.ident is self.ident

    def __repr__(self):
        return f"IdentityKey({self.var!r})"


def key_var(key) -> "Var":
    """The Var iterating over a dict yields for `key` (see `ops.core.key_of`): the Var an
    IdentityKey stands for, else the key as a constant (as `ops.core.const` makes one)."""
    if isinstance(key, IdentityKey):
        return key.var
    t = type(key)
    if t in IMMUTABLE:
        return ConstVar(key)
    if t is tuple or t is torch.Size or issubclass(t, tuple) and hasattr(t, "_fields"):
        return TupleVar([key_var(k) for k in key], py_type=t)
    return ObjectVar(key)


# CPython's smallest dict table holds 5 entries (USABLE_FRACTION(PyDict_MINSIZE)): a dict whose
# table has fewer positions in use than that cannot be resized by one insertion
DICT_MIN_USABLE = 5


class Entries(dict):
    """A dict's items as the trace holds them (key -> Var) and what CPython's dict iterators
    read of the real dict: each key's `position` in its entry table (a new key is appended, a
    deleted one leaves a hole, `popitem` frees the last position again; positions only grow,
    in the dict's order), and `state`, the count of keys added and removed (an OrderedDict's
    iterator compares it, as do the tracer's iterators over sets).

    CPython compacts the table when an insertion finds it full, which renumbers positions;
    when that could have happened is not known to the trace beyond a bound: `filled` is an
    upper bound of the real table's positions in use (None: not known, a dict that came in),
    and `unsure` counts the insertions made where a compaction may have happened (an
    iterator that sees it change cannot tell where it is: ops/iterators.py)."""
    __slots__ = ("position", "next", "state", "filled", "unsure")

    def __init__(self, items=(), filled: int | None = -1):
        super().__init__(items)
        self.position = {k: i for i, k in enumerate(self)}
        self.next = len(self)
        self.state = self.unsure = 0
        if isinstance(items, Entries):  # a copy: CPython's keeps the table's holes
            self.filled = items.filled
        else:
            self.filled = len(self) if filled == -1 else filled

    def _add(self, key) -> None:
        if self.filled is None or self.filled >= DICT_MIN_USABLE:
            self.unsure += 1
        else:
            self.filled += 1
        self.position[key] = self.next
        self.next += 1
        self.state += 1

    def _remove(self, key) -> None:
        del self.position[key]
        self.state += 1

    def __setitem__(self, key, value) -> None:
        if key not in self:
            self._add(key)
        super().__setitem__(key, value)

    def __delitem__(self, key) -> None:
        super().__delitem__(key)
        self._remove(key)

    def pop(self, key, *default):
        if key in self:
            self._remove(key)
        return super().pop(key, *default)

    def popitem(self):
        """dict.popitem: the last item; its position is the next insertion's."""
        key, value = super().popitem()
        self.next = self.position[key]
        self._remove(key)
        if self.filled is not None:
            self.filled = max(self.filled - 1, 0)
        return key, value

    def setdefault(self, key, default=None):
        if key not in self:
            self._add(key)
        return super().setdefault(key, default)

    def update(self, *args, **kwargs) -> None:
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def clear(self) -> None:
        super().clear()
        self.position.clear()
        self.next, self.filled = 0, 0  # (a new, empty table)
        self.state += 1

    def move_to_end(self, key, last: bool = True) -> None:
        """OrderedDict.move_to_end: a change of its order only where the key moves."""
        keys = list(self)
        if keys[-1 if last else 0] == key:
            return
        value = super().pop(key)
        if last:
            super().__setitem__(key, value)
        else:
            rest = dict(self)
            super().clear()
            super().__setitem__(key, value)
            super().update(rest)
        self.state += 1

    def snapshot(self):
        return dict(self), dict(self.position), self.next, self.state, self.filled, self.unsure

    def restore(self, saved) -> None:
        items, position, self.next, self.state, self.filled, self.unsure = saved
        super().clear()
        super().update(items)
        self.position.clear()
        self.position.update(position)


class DictVar(Var):
    """Keys are real hashable Python values or IdentityKeys; values are Vars (`items`, an
    Entries). `py_type` is dict, collections.OrderedDict or collections.defaultdict (`factory`:
    its default_factory, a Var). `mutable`: made in the call, changed in the trace's view --
    with a `source` too, the root frame's own `**kwargs` (see `call_owned`)."""
    __slots__ = ("items", "mutable", "py_type", "factory")

    def __init__(self, items: dict, source=None, mutable=True, py_type=dict, factory=None):
        super().__init__(source)
        self.items = Entries(items, filled=None if source is not None else -1)
        self.mutable = mutable
        self.py_type, self.factory = py_type, factory

    def python_value(self):
        out = {key_var(k).python_value(): v.python_value() for k, v in self.items.items()}
        if self.py_type is dict:
            return out
        if self.factory is not None:
            return self.py_type(self.factory.python_value(), out)
        return self.py_type(out)

    def snapshot(self):
        return self.items.snapshot()

    def restore(self, saved) -> None:
        self.items.restore(saved)

    def __repr__(self):
        return f"DictVar({dict(self.items)!r})"


def call_owned(v: Var) -> bool:
    """A dict that came in, but that the call owns: the root frame's own `**kwargs` (CPython
    makes it for the call; nobody else holds it). Its values are read through its source; its
    changes are the trace's alone, and wherever it goes it is rebuilt from its items."""
    return isinstance(v, DictVar) and v.mutable and v.source is not None


class SetVar(Var):
    """A set (or frozenset) made while tracing; see rewrite/ops/sets.py. `items` maps each
    member's key to its Var; `real` mirrors a set of constants, for eager's iteration order."""
    __slots__ = ("items", "real", "frozen")

    def __init__(self, frozen: bool = False, source=None):
        super().__init__(source)
        self.items: Entries = Entries()  # (its `state` counts members added and removed)
        self.real: set | None = set()
        self.frozen = frozen

    def python_value(self):
        if self.real is not None and all(k[0] == "value" for k in self.items):
            # a copy of the real set: the same members as eager's, iterated in its order (a copy
            # of a set of up to four keeps its table; a larger one may iterate otherwise when
            # hashes collide)
            return frozenset(self.real) if self.frozen else set(self.real)
        values = [v.python_value() for v in self.items.values()]
        return frozenset(values) if self.frozen else set(values)

    def snapshot(self):
        return self.items.snapshot(), None if self.real is None else set(self.real)

    def restore(self, saved) -> None:
        items, self.real = saved
        self.items.restore(items)

    def __repr__(self):
        return f"SetVar({list(self.items.values())!r})"


class IteratorVar(Var):
    """An iterator: `next()` returns the next Var, or None when exhausted -- and from then
    on, as CPython's iterators stay exhausted once exhausted (a list appended to after its
    iterator ran out does not start it again).

    Over a ListVar it shares the list's own items, so appends made while looping are seen,
    as Python's list iterator sees them. With `step`, each item is computed on demand
    (generators, enumerate, zip, map, filter; the iterators of ops/iterators.py, which also
    give `snapshot` and `restore`), so they interleave with their consumer as they do in
    Python.
    """
    __slots__ = ("items", "pos", "done", "on_next", "step", "over", "result", "py_type", "generator", "remake")

    def __init__(self, items=(), live: bool = False, on_next=None, step=None, over=None, py_type=None):
        super().__init__(None)
        self.py_type = py_type  # the iterator's class in Python (a generator, map, ...); None: not known
        self.generator = None  # a traced generator's send / throw / close (trace/interpreter.Generator)
        self.over = over  # the ListVar a live iterator walks
        self.items = items if live else list(items)
        self.pos = 0
        self.done = False  # exhausted
        self.on_next = on_next  # a check run before each step
        self.step = step  # () -> Var | None, for lazy iterators
        self.result = None  # a generator's return value, once it has returned
        self.remake = None  # () -> (callable, [Var], {name: constant}): how the entry makes it again now
        # (zip, enumerate: the class called over what their iterators are now)

    def next(self):
        if self.step is not None:
            note_mutation(self)  # (undone through the step's own snapshot, where it has one)
            return self.step()
        if self.on_next is not None:
            self.on_next()
        if self.done:
            return None
        if self.born < _watermark:
            note_mutation(self)
        if self.pos >= len(self.items):
            self.done = True
            return None
        self.pos += 1
        return self.items[self.pos - 1]

    def snapshot(self):
        if self.step is not None:
            saved = getattr(self.step, "snapshot", None)
            return NotImplemented if saved is None else saved()
        return self.pos, self.done

    def restore(self, saved) -> None:
        if self.step is not None:
            self.step.restore(saved)
        else:
            self.pos, self.done = saved


class DictViewVar(Var):
    """`d.keys()`, `d.values()`, `d.items()`: live views of a DictVar."""
    __slots__ = ("dict_var", "kind")

    def __init__(self, dict_var, kind: str):
        super().__init__(None)
        self.dict_var = dict_var
        self.kind = kind

    def python_value(self):  # (a view of a copy: what the view shows now)
        return getattr(self.dict_var.python_value(), self.kind)()

    def current(self) -> list:
        items = self.dict_var.items
        if self.kind == "keys":
            return [key_var(k) for k in items]
        if self.kind == "values":
            return list(items.values())
        return [TupleVar([key_var(k), v]) for k, v in items.items()]


class ObjectVar(Var):
    __slots__ = ("value",)

    def __init__(self, value, source=None):
        super().__init__(source)
        self.value = value

    def python_value(self):
        return self.value

    def __repr__(self):
        name = getattr(self.value, "__qualname__", None) or type(self.value).__qualname__
        return f"ObjectVar({name})"


class CodeFunctionVar(ObjectVar):
    """A function that came in, guarded by its code, globals and empty `__dict__` instead of its
    identity (trace/builder.py's `_by_code`: a lambda made per call hits the cache). Where its
    identity decides what the trace computes -- its Python value folded into a dict key, a set
    member, a comparison -- `pin` guards the identity then, once."""
    __slots__ = ("pin",)

    def __init__(self, value, source, pin):
        super().__init__(value, source)
        self.pin = pin

    def python_value(self):
        if self.pin is not None:
            pin, self.pin = self.pin, None
            pin()
        return self.value


class FunctionVar(Var):
    """A function made by MAKE_FUNCTION while tracing. `fields`: what the code set of the
    function's own (`__name__`, `__qualname__`, `__doc__`, `__module__`, `__annotations__`);
    `attrs`: its `__dict__` (a DictVar, made on first use)."""
    __slots__ = ("code", "globals", "globals_source", "defaults", "kwdefaults", "closure", "fn_source", "fields",
                 "attrs")

    def __init__(self, code, globals_, globals_source, defaults, kwdefaults, closure):
        super().__init__(None)
        self.code = code
        self.globals = globals_
        self.globals_source = globals_source  # callable: name -> Source | None
        self.defaults = defaults  # tuple of Vars
        self.kwdefaults = kwdefaults  # dict name -> Var
        self.closure = closure  # tuple of CellVars
        self.fields: dict = {}
        self.attrs = None

    def snapshot(self):
        return dict(self.fields), self.defaults, self.kwdefaults, self.attrs

    def restore(self, saved) -> None:
        fields, self.defaults, self.kwdefaults, self.attrs = saved
        self.fields.clear()
        self.fields.update(fields)

    def __repr__(self):
        return f"FunctionVar({self.code.co_qualname})"


class MethodVar(Var):
    """`self_var.name`, a method looked up on a Var, not yet called."""
    __slots__ = ("self_var", "name")

    def __init__(self, self_var: Var, name: str):
        super().__init__(None)
        self.self_var = self_var
        self.name = name

    def __repr__(self):
        return f"MethodVar({self.self_var!r}.{self.name})"


class CellVar(Var):
    """A closure cell. Virtual cells hold `contents` (a Var or None when empty); real cells
    have a `source` that evaluates to the cell object, and are read with guards."""
    __slots__ = ("contents", "real")

    def __init__(self, contents=None, real=None, source=None):
        super().__init__(source)
        self.contents = contents
        self.real = real

    def snapshot(self):
        return self.contents

    def restore(self, saved) -> None:
        self.contents = saved


class InstanceVar(Var):
    """An object of a user-defined class made while tracing. `attrs` is its `__dict__`, as
    Vars; `cls_source` reaches the class (its methods are guarded through it)."""
    __slots__ = ("cls", "cls_source", "attrs", "base", "made_by")

    def __init__(self, cls: type, cls_source: Source | None, base: "Var | None" = None):
        super().__init__(None)
        self.cls = cls
        self.cls_source = cls_source
        self.attrs: Entries = Entries(filled=None)  # (its `__dict__`, which a DictVar may iterate: an
        # object's dict shares its keys with its class's others, so positions in it are not known)
        self.base = base  # of a dict or OrderedDict subclass: what the builtin holds (a DictVar)
        self.made_by = None  # (args, kwargs, state): the class's call that made it, and what it held then

    def snapshot(self):
        return self.attrs.snapshot(), None if self.base is None else self.base.snapshot()

    def restore(self, saved) -> None:
        attrs, base = saved
        self.attrs.restore(attrs)
        if base is not None:
            self.base.restore(base)

    def __repr__(self):
        return f"InstanceVar({self.cls.__qualname__})"


class ExceptionVar(Var):
    """An exception made or raised while tracing: its class and constructor arguments, and its
    state as Python keeps it -- `__cause__`, `__context__` (Vars, or None), `__suppress_context__`,
    `__traceback__` (None, or a TracebackVar once raised) and its `__dict__` (`attrs`: what the
    class's `__init__` or the code set on it, `__notes__` among them)."""
    __slots__ = ("cls", "args", "cause", "context", "suppress", "traceback", "attrs")

    def __init__(self, cls: type, args):
        super().__init__(None)
        self.cls = cls
        self.args = list(args)
        self.cause = self.context = self.traceback = None
        self.suppress = False
        self.attrs: dict = {}

    def python_value(self):
        return real_exception(self.cls, tuple(a.python_value() for a in self.args),
                              {name: v.python_value() for name, v in self.attrs.items()})

    def snapshot(self):
        return list(self.args), self.cause, self.context, self.suppress, self.traceback, dict(self.attrs)

    def restore(self, saved) -> None:
        args, self.cause, self.context, self.suppress, self.traceback, attrs = saved
        self.args[:] = args
        self.attrs.clear()
        self.attrs.update(attrs)

    def __repr__(self):
        return f"ExceptionVar({self.cls.__name__})"


def real_exception(cls: type, args: tuple, attrs: dict) -> BaseException:
    """The exception an ExceptionVar stands for: made by its class's `__new__`, then its builtin
    `__init__` (StopIteration's sets its value; one in Python is not run again: the trace ran it),
    its args and what was set on it."""
    exc = cls.__new__(cls, *args)
    if not any(isinstance(c.__dict__.get("__init__"), types.FunctionType) for c in cls.__mro__):
        cls.__init__(exc, *args)
    exc.args = args
    for name, value in attrs.items():
        setattr(exc, name, value)
    return exc


class TracebackVar(Var):
    """The `__traceback__` of an exception raised while tracing: a traceback object whose frames
    are the trace's, so nothing can be read from it (only that it is one)."""
    __slots__ = ()


class BoundVar(Var):
    """`func` bound to `self_var`: calling it inlines `func(self_var, *args)`."""
    __slots__ = ("func", "self_var", "func_source")

    def __init__(self, func, self_var: Var, func_source: Source | None):
        super().__init__(None)
        self.func = func
        self.self_var = self_var
        self.func_source = func_source

    def __repr__(self):
        return f"BoundVar({self.func.__qualname__} of {self.self_var!r})"


class PartialVar(Var):
    """`functools.partial(func, *args, **kwargs)`: calling it calls func with them first."""
    __slots__ = ("func", "args", "kwargs")

    def __init__(self, func: Var, args, kwargs: dict, source=None):
        super().__init__(source)
        self.func = func
        self.args = list(args)
        self.kwargs = dict(kwargs)

    def __repr__(self):
        return f"PartialVar({self.func!r})"


class SuperVar(Var):
    """`super()` (or `super(cls, obj)`): attributes are looked up after `cls` in obj's class's MRO."""
    __slots__ = ("cls", "obj")

    def __init__(self, cls: type, obj: Var):
        super().__init__(None)
        self.cls = cls
        self.obj = obj


class AttrDictVar(Var):
    """`obj.__dict__` of an object that came in (`obj` an ObjectVar with a source): read and
    written key by key, each as the attribute it holds (so traced attribute stores are seen,
    and only the keys read are guarded), never copied whole."""
    __slots__ = ("obj",)

    def __init__(self, obj: Var):
        super().__init__(None)
        self.obj = obj

    def __repr__(self):
        return f"AttrDictVar({self.obj!r})"


class TokenVar(Var):
    """The token `cv.set(value)` returned while tracing: the ContextVar (an ObjectVar) and
    what it held before (a Var, or None: no value)."""
    __slots__ = ("var", "prev", "first", "used")

    def __init__(self, var: Var, prev, first: bool = False):
        super().__init__(None)
        self.var = var
        self.prev = prev
        self.first = first  # the var's first set in the call: prev is what it held before the call
        self.used = False


class GradModeVar(Var):
    """A grad-mode context manager made while tracing. `mode` is what entering sets; `prev`
    is what leaving restores (for set_grad_enabled: the mode when it was made)."""
    __slots__ = ("entered_from", "made_by_set", "mode", "prev")

    def __init__(self, mode: bool, prev: bool | None = None):
        super().__init__(None)
        self.mode = mode
        self.prev = prev
        self.made_by_set = prev is not None  # set_grad_enabled(b) knows what it restores when made
        self.entered_from = None  # the grad mode just before __enter__

    def __repr__(self):
        return f"GradModeVar({self.mode})"


class ModeDecoratedVar(Var):
    """`torch.no_grad()(fn)`, `torch.autocast("cpu")(fn)` (a torch context manager used as a
    decorator): calling it calls `fn` inside an equal context (a GradModeVar or a
    RecordedContextVar like `ctx`, made anew for each call, as torch's wrapper does)."""
    __slots__ = ("ctx", "fn")

    def __init__(self, ctx: Var, fn: Var):
        super().__init__(None)
        self.ctx = ctx
        self.fn = fn


class RecordedContextVar(Var):
    """`torch.inference_mode()`, `torch.autocast(...)`: entered for real while tracing, and
    recorded in the graph as `enter_fn(*args)` ... `exit_fn(<what enter returned>)`. `fresh()`
    makes an equal context manager (a graph break inside the block re-enters one around the
    eager step and in the resume function); None: a break inside cannot split the block."""
    __slots__ = ("kind", "enter_fn", "exit_fn", "args", "handle", "node", "fresh")

    def __init__(self, kind: str, enter_fn, exit_fn, args: tuple, fresh):
        super().__init__(None)
        self.kind, self.enter_fn, self.exit_fn, self.args = kind, enter_fn, exit_fn, args
        self.handle = None  # what the real enter returned, while the block is open
        self.node = None  # the enter call in the graph
        self.fresh = fresh

    def __repr__(self):
        return f"RecordedContextVar({self.kind})"


class ContextExitVar(Var):
    """The bound `__exit__` of a traced context manager, as BEFORE_WITH leaves it on the stack."""
    __slots__ = ("ctx",)

    def __init__(self, ctx: Var):
        super().__init__(None)
        self.ctx = ctx

    def __repr__(self):
        return f"ContextExitVar({self.ctx!r})"


class NullVar(Var):
    __slots__ = ()

    def __repr__(self):
        return "NULL"


NULL = NullVar()
