"""Standard-library callables with a rule of their own (registered in the BUILTINS table):
class factories (`class` statements, `collections.namedtuple`), `functools.partial` and
`reduce`, `operator.itemgetter`/`attrgetter`, `itertools` (chain, product, combinations,
permutations, zip_longest, islice, accumulate, `chain.from_iterable`), `dict.fromkeys`,
`setattr`, `torch.finfo`/`iinfo`.

A class made inside the traced function (a `class` statement, `namedtuple(...)`) is made
once, while tracing, as eager makes it (same name, qualname and `__module__`); the
compiled code then uses that one class on every call, where eager makes a new one each
time -- only `type(a) is type(b)` across two calls can tell.
"""
from __future__ import annotations

import abc
import builtins
import collections
import functools
import itertools
import math
import operator
import types

import torch

from ..errors import Unsupported, python_error
from ..guards.guard import ItemsMatch
from ..guards.source import AttrSource
from ..values.side_effects import DELETED
from ..values.vars import (CellVar, ConstVar, DictVar, FunctionVar, IteratorVar, ListVar, ObjectVar, PartialVar,
                           SymIntVar, TensorVar, TupleVar, Var, note_mutation)
from .builtins import attribute_name
from .core import (BUILTINS, CALLS, MAX_ITEMS, const, describe, fold, foldable, getitem, is_callable, iterate,
                   python_type, python_value, rule, unpack)
from .operators import binary


def _values(args, kwargs, what):
    return ([python_value(a, what) for a in args], {k: python_value(v, what) for k, v in kwargs.items()})


# --- classes made inside the function -----------------------------------------------------------------
CLASS_BODY_NAMES = {"__name__", "__module__", "__qualname__", "__doc__"}


def _make_real(cell) -> None:
    """A cell of the enclosing function's that a class body reads: the body runs for real, so the
    cell becomes a real one holding the value (a constant or a real object; from then on it is
    read as real, and assigning it breaks the graph: the class's methods keep reading it)."""
    if not isinstance(cell, CellVar):
        raise Unsupported("a class body whose closure is not cells")
    if cell.real is not None:
        return
    value = cell.contents
    if value is None:
        cell.real = types.CellType()
    elif isinstance(value, (ConstVar, ObjectVar, SymIntVar)):  # (a size: specialized, as its value is read)
        cell.real = types.CellType(value.python_value())
    else:
        raise Unsupported(f"a class body that uses the enclosing function's variable holding {describe(value)}")
    note_mutation(cell)


@rule(builtins.__build_class__)
def _build_class(frame, args, kwargs):
    """A `class` statement: its body runs now, for real, when it reads nothing the guards miss."""
    body, name, *bases = args
    if not isinstance(body, FunctionVar) or body.defaults or body.kwdefaults:
        raise Unsupported(f"class statement with body {describe(body)}")
    for cell in body.closure:
        _make_real(cell)
    stored = set()
    for inst in __import__("dis").get_instructions(body.code):
        if inst.opname in ("STORE_NAME", "DELETE_NAME"):
            stored.add(inst.argval)
        elif inst.opname in ("LOAD_NAME", "LOAD_GLOBAL") and inst.argval not in stored | CLASS_BODY_NAMES \
                and inst.argval not in vars(builtins):
            raise Unsupported(f"a class body reading global {inst.argval!r} (not guarded)")
    fn = types.FunctionType(body.code, body.globals, python_value(name, "class"), None,
                            tuple(c.real for c in body.closure))
    real_bases, real_kwargs = _values(bases, kwargs, "class bases")
    return ObjectVar(fold(builtins.__build_class__, fn, python_value(name, "class"), *real_bases, **real_kwargs))


@rule(collections.namedtuple)
def _namedtuple(frame, args, kwargs):
    real_args, real_kwargs = _values(args, kwargs, "namedtuple()")
    real_kwargs.setdefault("module", frame.globals.get("__name__", "__main__"))  # what eager's frame gives
    return ObjectVar(fold(collections.namedtuple, *real_args, **real_kwargs))


# --- functools ------------------------------------------------------------------------------------------------
@rule(functools.partial)
def _partial(frame, args, kwargs):
    if not args:
        raise Unsupported("functools.partial() without a function (the call raises eagerly)")
    func, *bound = args
    if not is_callable(func):
        raise python_error(TypeError, "the first argument must be callable")
    if isinstance(func, PartialVar):  # partial(partial(f, a), b) is partial(f, a, b), as in Python
        return PartialVar(func.func, func.args + bound, {**func.kwargs, **kwargs})
    return PartialVar(func, bound, dict(kwargs))


def call_partial(frame, p: PartialVar, args, kwargs) -> Var:
    return CALLS.call(frame, p.func, [*p.args, *args], {**p.kwargs, **kwargs})


@rule(functools.reduce)
def _reduce(frame, args, kwargs):
    if kwargs or len(args) not in (2, 3):
        raise Unsupported("functools.reduce() arguments (the call raises eagerly)")
    items = unpack(frame, args[1])
    if len(args) == 3:
        acc = args[2]
    elif items:
        acc, items = items[0], items[1:]
    else:
        raise Unsupported("reduce() of an empty iterable with no initial value (the call raises eagerly)")
    for item in items:
        acc = CALLS.call(frame, args[0], [acc, item], {})
    return acc


# --- operator -------------------------------------------------------------------------------------------------
def getter_rule(kind):
    def construct(frame, args, kwargs):
        real_args, real_kwargs = _values(args, kwargs, f"{kind.__name__}()")
        return ObjectVar(fold(kind, *real_args, **real_kwargs))
    return construct


def call_getter(frame, getter, args, kwargs) -> Var:
    """`itemgetter(*keys)(obj)`, `attrgetter(*names)(obj)` on a Var."""
    kind, keys = getter.__reduce__()
    if len(args) != 1 or kwargs:
        raise Unsupported(f"{kind.__name__} called with {len(args)} arguments (the call raises eagerly)")
    (obj,) = args

    def one(key):
        if kind is operator.itemgetter:
            return getitem(frame, obj, const(key))
        v = obj
        for part in key.split("."):
            v = CALLS.getattr(frame, v, part)
        return v
    picked = [one(k) for k in keys]
    return picked[0] if len(keys) == 1 else TupleVar(picked)


BUILTINS[operator.itemgetter] = getter_rule(operator.itemgetter)
BUILTINS[operator.attrgetter] = getter_rule(operator.attrgetter)
GETTERS = (operator.itemgetter, operator.attrgetter)


# --- itertools ------------------------------------------------------------------------------------------------
@rule(itertools.chain)
def _chain(frame, args, kwargs):
    if kwargs:
        raise Unsupported("itertools.chain() takes no keyword arguments (the call raises eagerly)")
    sources = list(args)
    return _chained(frame, lambda: sources.pop(0) if sources else None)


def _chained(frame, next_iterable) -> IteratorVar:
    """The items of the iterables `next_iterable()` gives (None: no more), lazily, as Python's
    chain: each iterable is iterated when reached."""
    state = {"current": None}

    def step():
        while True:
            if state["current"] is None:
                iterable = next_iterable()
                if iterable is None:
                    return None
                state["current"] = iterate(frame, iterable)
            item = state["current"].next()
            if item is not None:
                return item
            state["current"] = None
    return IteratorVar(step=step, py_type=itertools.chain)


@rule(itertools.product)
def _product(frame, args, kwargs):
    repeat = python_value(kwargs.pop("repeat", ConstVar(1)), "product(repeat=)")
    if kwargs:
        raise Unsupported("itertools.product() keyword arguments (the call raises eagerly)")
    fold(itertools.product, repeat=repeat)  # (its own checks of `repeat`)
    pools = [unpack(frame, a) for a in args] * repeat  # Python's product reads every iterable first
    if math.prod(len(p) for p in pools) > MAX_ITEMS:
        raise Unsupported(f"itertools.product() of more than {MAX_ITEMS} items while tracing")
    return IteratorVar([TupleVar(list(combo)) for combo in itertools.product(*pools)], py_type=itertools.product)


def _pool_of(frame, args, kwargs, name):
    if len(args) not in (1, 2) or set(kwargs) - {"r"}:
        raise Unsupported(f"itertools.{name}() arguments (the call raises eagerly)")
    pool = unpack(frame, args[0])  # (Python's reads the whole iterable first)
    r = args[1] if len(args) == 2 else kwargs.get("r", ConstVar(None))
    return pool, python_value(r, f"{name}(r=)")


def _index_rule(combine, name):
    """combinations / permutations / combinations_with_replacement: computed on indices."""
    def construct(frame, args, kwargs):
        pool, r = _pool_of(frame, args, kwargs, name)
        if r is None and name != "permutations":
            raise Unsupported(f"itertools.{name}() missing r (the call raises eagerly)")
        picks = fold(combine, range(len(pool)), *([] if r is None else [r]))
        return IteratorVar([TupleVar([pool[i] for i in pick]) for pick in picks], py_type=combine)
    return construct


for _fn in (itertools.combinations, itertools.permutations, itertools.combinations_with_replacement):
    rule(_fn)(_index_rule(_fn, _fn.__name__))


@rule(itertools.zip_longest)
def _zip_longest(frame, args, kwargs):
    if set(kwargs) - {"fillvalue"}:
        raise Unsupported("itertools.zip_longest() keyword arguments (the call raises eagerly)")
    fill = kwargs.get("fillvalue", ConstVar(None))
    sources = [iterate(frame, a) for a in args]
    active = [True] * len(sources)

    def step():  # each round asks every iterator not yet exhausted, in order, as Python's does
        items = []
        for i, s in enumerate(sources):
            item = s.next() if active[i] else None
            if item is None:
                active[i] = False
                item = fill
            items.append(item)
        return TupleVar(items) if any(active) else None
    return IteratorVar(step=step, py_type=itertools.zip_longest)


_SINGLEDISPATCH_CODE = functools.singledispatch(lambda arg: arg).__code__


def is_singledispatch(fn) -> bool:
    """A function `functools.singledispatch` made (its `wrapper`)."""
    return isinstance(fn, types.FunctionType) and fn.__code__ is _SINGLEDISPATCH_CODE


def singledispatch_call(frame, fn: ObjectVar, args, kwargs) -> Var | None:
    """`fun(arg, ...)` of a singledispatch function: the implementation registered for the first
    argument's class (as `fun.dispatch` finds it now) called, guarded on the registry's items;
    None where that cannot be decided here (no argument: the wrapper's own TypeError; an ABC
    among the registered classes, whose virtual subclasses change the answer)."""
    if not args or fn.source is None:
        return None
    registry = fn.value.registry
    if any(isinstance(cls, abc.ABCMeta) for cls in registry):
        return None
    frame.tracer.guards.add(ItemsMatch(AttrSource(fn.source, "registry"), tuple(registry.items())))
    impl = fn.value.dispatch(python_type(args[0]))
    return CALLS.call(frame, ObjectVar(impl), list(args), kwargs)


_TEE = type(itertools.tee(())[0])


@rule(itertools.tee)
def _tee(frame, args, kwargs):
    """tee(it, n): n iterators over one source, each taking from a shared buffer what another
    already drew (the source advanced only by the one ahead), as CPython's."""
    if kwargs or len(args) not in (1, 2):
        raise Unsupported("itertools.tee() arguments (the call raises eagerly)")
    n = python_value(args[1], "tee()") if len(args) == 2 else 2
    fold(itertools.tee, (), n)  # (its own errors: n not an int, n < 0)
    source, buffer = iterate(frame, args[0]), []

    def child():
        at = [0]

        def step():
            if at[0] == len(buffer):
                item = source.next()
                if item is None:
                    return None
                buffer.append(item)
            at[0] += 1
            return buffer[at[0] - 1]
        return IteratorVar(step=step, py_type=_TEE)
    return TupleVar([child() for _ in range(n)])


@rule(itertools.islice)
def _islice(frame, args, kwargs):
    if kwargs or len(args) not in (2, 3, 4):
        raise Unsupported("itertools.islice() arguments (the call raises eagerly)")
    bounds = [python_value(a, "islice()") for a in args[1:]]
    start, stop, stride = (0, bounds[0], 1) if len(bounds) == 1 else (*bounds, 1)[:3]
    start, stride = start or 0, stride or 1
    fold(itertools.islice, (), start, stop, stride)  # (bad bounds: eager's ValueError)
    source = iterate(frame, args[0])
    state = {"count": 0, "next": start}

    def step():  # CPython's islice_next, counter for counter
        if stop is not None and state["count"] >= stop:
            return None
        while state["count"] < state["next"]:
            if source.next() is None:
                return None
            state["count"] += 1
        if stop is not None and state["count"] >= stop:
            return None
        item = source.next()
        if item is None:
            return None
        state["count"] += 1
        state["next"] += stride
        if stop is not None and state["next"] > stop:
            state["next"] = stop
        return item
    return IteratorVar(step=step, py_type=itertools.islice)


def chain_from_iterable(iterable):
    """`itertools.chain.from_iterable`, a name the tracer can hold (the classmethod is bound anew
    on each access)."""
    return itertools.chain.from_iterable(iterable)


@rule(chain_from_iterable)
def _chain_from_iterable(frame, args, kwargs):
    if kwargs or len(args) != 1:
        raise Unsupported("chain.from_iterable() takes one argument (the call raises eagerly)")
    return _chained(frame, iterate(frame, args[0]).next)


@rule(itertools.accumulate)
def _accumulate(frame, args, kwargs):
    if len(args) not in (1, 2) or set(kwargs) - {"func", "initial"}:
        raise Unsupported("itertools.accumulate() arguments (the call raises eagerly)")
    func = args[1] if len(args) == 2 else kwargs.get("func", ConstVar(None))
    initial = kwargs.get("initial", ConstVar(None))
    source = iterate(frame, args[0])
    state = {"total": None, "started": False}

    def step():
        if not state["started"]:
            state["started"] = True
            if not (isinstance(initial, ConstVar) and initial.value is None):
                state["total"] = initial
                return initial
        item = source.next()
        if item is None:
            return None
        total = state["total"]
        if total is None:
            state["total"] = item
        elif isinstance(func, ConstVar) and func.value is None:
            state["total"] = binary(frame, "+", total, item)
        else:
            state["total"] = CALLS.call(frame, func, [total, item], {})
        return state["total"]
    return IteratorVar(step=step, py_type=itertools.accumulate)


# --- builtins that act on attributes ----------------------------------------------------------------------
@rule(setattr)
def _setattr(frame, args, kwargs):
    if len(args) != 3 or kwargs:
        raise Unsupported("setattr() takes three arguments (the call raises eagerly)")
    CALLS.setattr(frame, args[0], attribute_name(args[1], "setattr()"), args[2])
    return ConstVar(None)


@rule(delattr)
def _delattr(frame, args, kwargs):
    if len(args) != 2 or kwargs:
        raise Unsupported("delattr() takes two arguments (the call raises eagerly)")
    CALLS.setattr(frame, args[0], attribute_name(args[1], "delattr()"), DELETED)
    return ConstVar(None)


# --- torch's number-format information --------------------------------------------------------------------
def _type_info(kind):
    def construct(frame, args, kwargs):
        if not all(foldable(a) for a in args) or not all(foldable(v) for v in kwargs.values()):
            raise Unsupported(f"torch.{kind.__name__}({', '.join(map(describe, args))})")
        real_args, real_kwargs = _values(args, kwargs, f"torch.{kind.__name__}()")
        if not real_args and not real_kwargs:
            frame.tracer.read_default_dtype()
        return ObjectVar(fold(kind, *real_args, **real_kwargs))
    return construct


BUILTINS[torch.finfo] = _type_info(torch.finfo)
BUILTINS[torch.iinfo] = _type_info(torch.iinfo)
TYPE_INFO = (torch.finfo, torch.iinfo)


# --- torch's grouping helper for foreach kernels ----------------------------------------------------
@rule(torch._C._group_tensors_by_device_and_dtype)
def _group_by_device_and_dtype(frame, args, kwargs):
    """`torch._C._group_tensors_by_device_and_dtype(tensorlistlist, with_indices)` (what the
    optimizers' foreach paths call): grouped by the real function on the tensors the trace
    holds (their devices and dtypes are guarded), the groups handed back as those tensors' Vars."""
    names = ("tensorlistlist", "with_indices")
    bound = dict(zip(names, args)) | kwargs
    if set(bound) - set(names) or "tensorlistlist" not in bound:
        raise Unsupported("_group_tensors_by_device_and_dtype() arguments (the call raises eagerly)")
    lists = [unpack(frame, lst) for lst in unpack(frame, bound["tensorlistlist"])]
    with_indices = python_value(bound.get("with_indices", ConstVar(False)), "with_indices")
    by_id = {}
    real = []
    for lst in lists:
        row = []
        for v in lst:
            if isinstance(v, TensorVar):
                by_id[id(v.value)] = v
                row.append(v.value)
            elif isinstance(v, ConstVar) and v.value is None:
                row.append(None)
            else:
                raise Unsupported(f"_group_tensors_by_device_and_dtype over {describe(v)}")
        real.append(row)
    groups = fold(torch._C._group_tensors_by_device_and_dtype, real, with_indices)
    out = {}
    for key, (grouped, indices) in groups.items():
        rows = ListVar([ListVar([ConstVar(None) if t is None else by_id[id(t)] for t in row]) for row in grouped])
        out[key] = TupleVar([rows, ListVar([ConstVar(i) for i in indices])])
    return DictVar(out)
