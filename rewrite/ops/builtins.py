"""Builtin functions on Vars: one small rule per builtin, in the BUILTINS table.

Builtins not in the table are folded when they are pure and every argument is a known
Python value (PURE); anything else is unsupported.
"""
from __future__ import annotations

import abc
import copy
import inspect
import operator
import sys
import types

import torch

from ..bytecode.resume import list_iterator_at
from ..errors import PythonError, Raised, Unsupported, WholeCallEager, python_error, traced_error_type
from ..guards.guard import HasAttrMatch, IdMatch
from ..guards.source import AttrSource
from ..values.side_effects import DELETED, location
from ..values.vars import (ConstVar, DictVar, DictViewVar, ExceptionVar, FunctionVar, InstanceVar, IteratorVar,
                           ListVar, ObjectVar, SetVar, SymIntVar, TensorVar, TracebackVar, TupleVar, Var)
from .bases import protocol
from .copying import deepcopy, shallow
from .core import (BUILTINS, CALLS, DATA_DEPENDENT_HINT, LIST_ITERATOR, came_in_set_len, check_iterable, const,
                   describe, fold, foldable, is_callable, iterate, len_result, python_type, python_value, rule,
                   sort_items, sort_keys, truthy, unpack)
from .fills import fill
from .instances import _MISSING as missing, call_dunder, class_attr, class_source, is_slot, is_user_object, type_of
from .iterators import deque_iterator, dict_iterator, reversed_list
from .modules import container_modules
from .objects import tuple_new
from .operators import binary
from .sets import from_iterable, make
from .signatures import check, eager_error
from .tensors import call_torch, sym_size, tensor_len

# builtins that read the frame calling them. At a graph break they would read the entry's frame:
# called from the compiled function itself, the whole call runs eagerly; called from a helper,
# the call of that helper runs eagerly at the break, in a real frame. `vars` and `dir` only
# without arguments (breaks.py keeps functions that name any of these from breaking at all).
FRAME_READERS = {locals, eval, exec, breakpoint, sys._getframe, inspect.currentframe}
FRAME_READER_NAMES = {fn.__name__ for fn in FRAME_READERS} | {"vars", "dir"}  # as code names them




def _frame_reader(fn):
    def impl(frame, args, kwargs):
        if fn in (vars, dir) and (args or kwargs):
            raise Unsupported(f"call to builtin {fn.__name__}")
        why = f"{fn.__name__}() reads the frame that calls it"
        raise WholeCallEager(why) if frame is frame.tracer.root else Unsupported(why)
    return impl


for _fn in (*FRAME_READERS, vars, dir):
    BUILTINS[_fn] = _frame_reader(_fn)


# builtins that are pure functions of their (Python) arguments
PURE = {abs, all, any, ascii, bin, bool, callable, chr, complex, divmod, float, format, frozenset, hash, hex,
        int, len, max, min, oct, ord, pow, repr, round, slice, sorted, str, sum, tuple, list, dict, range,
        reversed, enumerate, zip, isinstance, issubclass}


@rule(len)
def _len(frame, args, kwargs):
    (v,) = args
    if isinstance(v, TensorVar):
        if v.sym is not None and v.value.dim() and not isinstance(v.sym[0], int):
            return sym_size(frame, v, 0)
        return ConstVar(tensor_len(frame, v))
    if isinstance(v, (TupleVar, ListVar, DictVar)):
        return ConstVar(len(v.items))
    if isinstance(v, DictViewVar):
        return ConstVar(len(v.dict_var.items))
    if isinstance(v, SetVar):
        return ConstVar(len(v.items))
    if isinstance(v, ObjectVar):
        if type(v.value) in (set, frozenset):
            return ConstVar(came_in_set_len(frame, v))
        mods = container_modules(frame, v)
        if mods is not None:
            return ConstVar(len(mods.items))
    user = call_dunder(frame, v, "__len__")
    if user is not None:
        return user if isinstance(user, SymIntVar) else ConstVar(len_result(user))
    inherited = protocol(frame, v, "__len__")
    if inherited is not None:
        return inherited
    if isinstance(v, IteratorVar) and v.py_type is not None and not hasattr(v.py_type, "__len__") or \
            isinstance(v, (ExceptionVar, FunctionVar, TracebackVar)):  # (their classes have no __len__)
        raise python_error(TypeError, f"object of type '{python_type(v).__name__}' has no len()")
    return ConstVar(fold(len, python_value(v, "len()")))


@rule(copy.deepcopy)
def _deepcopy(frame, args, kwargs):
    return deepcopy(frame, args, kwargs)


@rule(copy.copy)
def _copy(frame, args, kwargs):
    return shallow(frame, args, kwargs)


class TracedId(int):
    """`id()` of a value the trace made (or of a tensor): a stand-in, negative so it never equals
    a real object's id, the same for the same Var. Good as a key (copy.deepcopy's memo); the
    entry refuses to hand one out (it is not the id eager would give)."""


@rule(id)
def _id(frame, args, kwargs):
    (v,) = args
    if isinstance(v, ObjectVar) and not isinstance(v.value, torch.Tensor):
        if v.source is not None:  # the object that came in: its id, while it is that object
            frame.tracer.guards.add(IdMatch(v.source, v.value))
        return ConstVar(id(v.value))
    if isinstance(v, ConstVar) and any(v.value is s for s in (None, True, False, Ellipsis, NotImplemented)):
        return ConstVar(id(v.value))  # (singletons: the same object in the entry)
    ids = frame.tracer.traced_ids
    if id(v) not in ids:
        ids[id(v)] = (v, TracedId(-1 - len(ids)))  # (v kept alive: its id stays its own)
    return ConstVar(ids[id(v)][1])


@rule(isinstance)
def _isinstance(frame, args, kwargs):
    """isinstance(v, classes) as the class check of v's class (guarded): what isinstance does,
    but for a class whose metaclass decides by the object itself (`__instancecheck__`: a
    runtime-checkable Protocol reads its attributes), and for errors (isinstance's own)."""
    v, cls = args
    classes = python_value(cls, "isinstance()")
    for c in _flat(classes):
        if isinstance(c, type) and type(c).__instancecheck__ not in (type.__instancecheck__,
                                                                      abc.ABCMeta.__instancecheck__):
            if isinstance(v, ConstVar):
                return ConstVar(fold(isinstance, v.value, classes))
            raise Unsupported(f"isinstance() with {c!r}, whose class {type(c).__qualname__} decides it by the object")
    try:
        return ConstVar(issubclass(python_type(v), classes))
    except Exception:  # noqa: BLE001  (not classes: isinstance's own error, whatever the object)
        fold(isinstance, None, classes)
        raise Unsupported(f"isinstance() with {classes!r}") from None


def _flat(classes):
    """The classes of a (nested) tuple of them, or of a union."""
    if isinstance(classes, tuple):
        for c in classes:
            yield from _flat(c)
    elif isinstance(classes, types.UnionType):
        yield from _flat(classes.__args__)
    else:
        yield classes


@rule(type)
def _type(frame, args, kwargs):
    if len(args) != 1:
        raise Unsupported("type() with three arguments (class creation)")
    v = args[0]  # its type is guarded already; the source lets attributes of the class be guarded
    if isinstance(v, InstanceVar):  # made in the call: its class is reached the way it was called
        return ObjectVar(v.cls, v.cls_source)
    cls = python_type(v)
    return ObjectVar(cls, class_source(v.source, cls) if v.source is not None else None)


def attribute_name(v: Var, what: str) -> str:
    """The name getattr / hasattr / setattr / delattr are given: a str, or CPython's TypeError."""
    name = python_value(v, what)
    if not isinstance(name, str):
        raise python_error(TypeError, f"attribute name must be string, not '{type(name).__name__}'")
    return name


@rule(getattr)
def _getattr(frame, args, kwargs):
    name = attribute_name(args[1], "getattr()")
    if len(args) == 3:
        if _hooked(args[0]):  # the lookup is the class's code: run once, AttributeError gives the default
            found = _traced_getattr(frame, args[0], name)
            return args[2] if found is None else found
        if isinstance(args[0], (ExceptionVar, FunctionVar)):
            found = _traced_getattr(frame, args[0], name)
            return args[2] if found is None else found
        if not has_attr(frame, args[0], name):
            return args[2]
    return CALLS.getattr(frame, args[0], name)


@rule(hasattr)
def _hasattr(frame, args, kwargs):
    return ConstVar(has_attr(frame, args[0], attribute_name(args[1], "hasattr()")))


def _hooked(v: Var) -> bool:
    """An object whose class looks attributes up in Python (`__getattribute__`, `__getattr__`):
    of a module, other code than nn.Module's own `__getattr__` (diffusers' ModelMixin reads its
    config first) -- nn.Module's finds only parameters, buffers and submodules (_has_attr)."""
    if isinstance(v, ObjectVar) and issubclass(type(v.value), torch.nn.Module):
        cls = type(v.value)
        return class_attr(cls, "__getattr__") is not _MODULE_GETATTR or \
            isinstance(class_attr(cls, "__getattribute__"), types.FunctionType)
    if not is_user_object(v):
        return False
    cls = type_of(v)
    return any(isinstance(class_attr(cls, hook), types.FunctionType) for hook in ("__getattribute__", "__getattr__"))


_MODULE_GETATTR = torch.nn.Module.__getattr__


def _traced_getattr(frame, v: Var, name: str) -> Var | None:
    """`v.name` traced as Python runs it; None where it raised AttributeError (each path
    guards what it read, the absence of the name included)."""
    try:
        return CALLS.getattr(frame, v, name)
    except (PythonError, Raised) as e:
        error = traced_error_type(e)
        if error is None or not issubclass(error, AttributeError):
            raise
        return None


def has_attr(frame, v: Var, name: str) -> bool:
    if _hooked(v) or isinstance(v, (ExceptionVar, FunctionVar)):  # (what the trace holds of them: its lookup)
        return _traced_getattr(frame, v, name) is not None
    present = _has_attr(frame, v, name)
    if v.source is not None and isinstance(v, ObjectVar):  # the answer may change between calls
        frame.tracer.guards.add(HasAttrMatch(v.source, name, present))
    return present


def _has_attr(frame, v: Var, name: str) -> bool:
    if isinstance(v, TensorVar):
        return hasattr(v.value, name)
    if isinstance(v, InstanceVar):  # an object made in the call: its attributes are the trace's
        static = class_attr(v.cls, name)
        if name in v.attrs or static is not missing and not is_slot(v.cls, static):
            return True
        if class_attr(v.cls, "__getattr__") is not missing:
            raise Unsupported(f"hasattr on {describe(v)}, whose class defines __getattr__")
        return False
    if isinstance(v, ObjectVar) and v.source is not None:  # stored or deleted earlier in this call
        stored = frame.tracer.side_effects.stored(AttrSource(v.source, name), location(v.value, name))
        if stored is DELETED:
            return False
        if stored is not None:
            return True
    if isinstance(v, (ConstVar, ObjectVar)):
        value = v.value
        if isinstance(value, torch.nn.Module) and name in {**value._parameters, **value._buffers, **value._modules}:
            return True
        if inspect.getattr_static(value, name, _MISSING) is not _MISSING:
            return True
        if isinstance(value, torch.nn.Module) and type(value).__getattr__ is torch.nn.Module.__getattr__:
            return False  # (what nn.Module's own __getattr__ finds is in the three dicts read above)
        if hasattr(type(value), "__getattr__"):
            raise Unsupported(f"hasattr on {describe(v)}, whose class defines __getattr__")
        return False
    return hasattr(python_type(v), name)


_MISSING = object()


@rule(range)
def _range(frame, args, kwargs):
    return ConstVar(fold(range, *(python_value(a, "range()") for a in args)))


@rule(enumerate)
def _enumerate(frame, args, kwargs):
    start = python_value(kwargs.get("start", args[1] if len(args) > 1 else ConstVar(0)), "enumerate()")
    fold(enumerate, (), start)  # (its own check of `start`)
    source, count = iterate(frame, args[0]), [start]

    def step():
        item = source.next()
        if item is None:
            return None
        count[0] += 1
        return TupleVar([ConstVar(count[0] - 1), item])
    it = IteratorVar(step=step, py_type=enumerate)
    it.remake = lambda: (enumerate, [source, ConstVar(count[0])], {})
    return it


@rule(zip)
def _zip(frame, args, kwargs):
    if set(kwargs) - {"strict"}:
        raise Unsupported("zip() with keyword arguments other than strict (the call raises eagerly)")
    strict = bool(python_value(kwargs["strict"], "zip(strict=)")) if "strict" in kwargs else False
    sources = [iterate(frame, a) for a in args]

    def uneven(i: int, how: str):
        plural = " " if i == 1 else "s 1-"
        return python_error(ValueError, f"zip() argument {i + 1} is {how} than argument{plural}{i}")

    def step():
        items = []
        for i, s in enumerate(sources):
            item = s.next()
            if item is None:
                if strict and i > 0:
                    raise uneven(i, "shorter")
                if strict and i == 0:
                    for j, other in enumerate(sources[1:], 1):
                        if other.next() is not None:
                            raise uneven(j, "longer")
                return None
            items.append(item)
        return TupleVar(items) if items else None
    it = IteratorVar(step=step, py_type=zip)
    it.remake = lambda: (zip, sources, {"strict": True} if strict else {})
    return it


@rule(list_iterator_at)
def _list_iterator_at(frame, args, kwargs):
    lst, pos = args
    if not isinstance(lst, ListVar) or not isinstance(pos, ConstVar):
        raise Unsupported("list_iterator_at over something that is not a list")
    it = IteratorVar(lst.items, live=True, over=lst, py_type=LIST_ITERATOR)
    it.pos = pos.value
    return it


@rule(reversed)
def _reversed(frame, args, kwargs):
    """reversed(v): CPython's reverse iterators over lists, deques and dicts walk the container
    as it is at each step (ops/iterators.py); over immutable values, the items reversed."""
    (v,) = args
    user = call_dunder(frame, v, "__reversed__")
    if user is not None:
        return user
    if isinstance(v, ListVar):
        return reversed_list(v) if v.py_type is list else deque_iterator(v, reverse=True)
    if isinstance(v, DictVar):
        return dict_iterator(v, reverse=True)
    if isinstance(v, DictViewVar):
        return dict_iterator(v.dict_var, v.kind, reverse=True)
    if isinstance(v, SetVar) or isinstance(v, IteratorVar) and v.py_type is not None:
        raise python_error(TypeError, f"'{python_type(v).__name__}' object is not reversible")
    kind = reversed if isinstance(v, TupleVar) else None  # (others: not known)
    if isinstance(v, ConstVar) and isinstance(v.value, range):
        kind = type(iter(range(0)))
    return IteratorVar(list(reversed(unpack(frame, v))), py_type=kind)


@rule(iter)
def _iter(frame, args, kwargs):
    if len(args) == 2:
        return _call_iterator(frame, *args)
    return iterate(frame, args[0])


def _call_iterator(frame, fn: Var, sentinel: Var) -> IteratorVar:
    """iter(fn, sentinel): fn called at each step until it returns what equals the sentinel
    (or raises StopIteration); exhausted for good from then on, as CPython's callable iterator."""
    if not is_callable(fn):
        fold(iter, object(), None)  # (this Python's TypeError: an object that is not callable either)
    done = [False]

    def step():
        if done[0]:
            return None
        try:
            value = CALLS.call(frame, fn, [], {})
        except (PythonError, Raised) as e:
            error = traced_error_type(e)
            if error is None or not issubclass(error, StopIteration):
                raise
            value = sentinel
        if value is sentinel or fold(operator.eq, python_value(value, "iter(fn, sentinel)"),
                                     python_value(sentinel, "iter(fn, sentinel)")):
            done[0] = True
            return None
        return value
    return IteratorVar(step=step, py_type=type(iter(int, 1)))


@rule(next)
def _next(frame, args, kwargs):
    it = args[0]
    if not isinstance(it, IteratorVar):
        raise Unsupported(f"next() on {describe(it)}")
    item = it.next()
    if item is None:
        if len(args) > 1:
            return args[1]
        raise Raised(it.generator.stop()) if it.generator is not None else python_error(StopIteration)
    return item


def _set_of(frozen: bool):
    def impl(frame, args, kwargs):
        if kwargs or len(args) > 1:
            raise Unsupported("set() arguments (the call raises eagerly)")
        if not args:
            return ConstVar(frozenset()) if frozen else make(frame, [])
        if frozen and (isinstance(args[0], SetVar) and args[0].frozen or
                       isinstance(args[0], ConstVar) and type(args[0].value) is frozenset):
            return args[0]  # (CPython's frozenset() of a frozenset is that frozenset)
        s = from_iterable(frame, args[0], frozen)
        if frozen and s.real is not None and all(isinstance(i, ConstVar) for i in s.items.values()):
            return ConstVar(frozenset(s.real))
        return s
    return impl


BUILTINS[set] = _set_of(False)
BUILTINS[frozenset] = _set_of(True)


@rule(tuple)
def _tuple(frame, args, kwargs):
    if args and isinstance(args[0], TupleVar) and args[0].py_type is tuple:
        return args[0]  # (CPython's tuple() of a tuple is that tuple)
    if args:
        check_iterable(args[0])
    return TupleVar(unpack(frame, args[0]) if args else [])


@rule(list)
def _list(frame, args, kwargs):
    if args:
        check_iterable(args[0])
    return ListVar(unpack(frame, args[0]) if args else [])


@rule(dict)
def _dict(frame, args, kwargs, py_type=dict, factory=None):
    """dict(...), OrderedDict(...), defaultdict(factory, ...): a new one, updated as their
    __init__ updates it (a dict's __init__ is its update: ops/fills.py)."""
    if len(args) > 1:  # (defaultdict's message is dict's; OrderedDict's differs: it raises eagerly)
        raise python_error(TypeError, f"dict expected at most 1 argument, got {len(args)}")
    made = DictVar({}, py_type=py_type, factory=factory)
    fill(frame, made, "update", args, kwargs)
    return made


def _min_max(which):
    def impl(frame, args, kwargs):
        name = which.__name__
        if set(kwargs) - {"key", "default"} or (len(args) > 1 and "default" in kwargs):
            raise Unsupported(f"{name}() arguments (the call raises eagerly)")
        items = unpack(frame, args[0]) if len(args) == 1 else list(args)
        if not items:
            if "default" in kwargs:
                return kwargs["default"]
            raise Unsupported(f"{name}() of an empty sequence (the call raises eagerly)")
        if any(isinstance(i, SymIntVar) for i in items) and not kwargs and \
                all(isinstance(i, SymIntVar) or isinstance(i, ConstVar) and type(i.value) is int for i in items):
            return _symbolic_extreme(frame, which, items)
        if any(isinstance(i, TensorVar) for i in items) and "key" not in kwargs:
            raise Unsupported(f"{name}() over tensors compares tensor values (data-dependent)",
                              f"use torch.{name}imum or torch.{name}")
        keys = sort_keys(frame, items, kwargs.get("key"), f"{name}()")
        return items[fold(which, range(len(items)), key=keys.__getitem__)]  # the first extreme, as Python's
    return impl


def _symbolic_extreme(frame, which, items):
    """min/max of sizes: symbolic (sympy Min/Max), computed by the graph."""
    import sympy  # (deferred: sympy, imported with the first symbolic size)
    if len(items) == 1:
        return items[0]
    exprs = [i.expr if isinstance(i, SymIntVar) else i.value for i in items]
    expr = (sympy.Min if which is min else sympy.Max)(*exprs)
    value = which(i.value for i in items)
    if expr.is_Integer:
        return ConstVar(int(expr))
    env = next(i.env for i in items if isinstance(i, SymIntVar))
    node = frame.tracer.graph.int_node("call_function", which, tuple(items), value)
    return SymIntVar(node, expr, value, env)


@rule(sorted)
def _sorted(frame, args, kwargs):
    items = unpack(frame, args[0])
    if set(kwargs) - {"key", "reverse"}:  # (list.sort's TypeError, once the iterable is taken)
        raise PythonError(eager_error(sorted, 1, kwargs))
    return ListVar(sort_items(frame, items, kwargs.get("key"), kwargs.get("reverse"), "sorted()"))


BUILTINS[min] = _min_max(min)
BUILTINS[max] = _min_max(max)


@rule(abs)
def _abs(frame, args, kwargs):
    if isinstance(args[0], TensorVar):
        return call_torch(frame, torch.abs, args, {})
    return const(fold(abs, python_value(args[0], "abs()")))


@rule(sum)
def _sum(frame, args, kwargs):
    total = args[1] if len(args) > 1 else kwargs.get("start", ConstVar(0))
    if isinstance(total, ConstVar) and type(total.value) in (str, bytes):  # (CPython checks the start first)
        kind, join = ("strings", "''") if type(total.value) is str else ("bytes", "b''")
        raise python_error(TypeError, f"sum() can't sum {kind} [use {join}.join(seq) instead]")
    items = unpack(frame, args[0])
    for item in items:
        total = binary(frame, "+", total, item)
    return total


def _truth_of(fn, negate: bool):
    def truth(frame, args, kwargs):
        if len(args) != 1 or kwargs:
            fold(fn, *[None] * len(args), **{k: None for k in kwargs})  # (eager's TypeError)
        if isinstance(args[0], TensorVar):
            raise Unsupported(f"operator.{fn.__name__}() of a tensor reads its value (data-dependent)",
                              DATA_DEPENDENT_HINT)
        return ConstVar(truthy(frame, args[0]) is not negate)
    return truth


BUILTINS[operator.truth] = _truth_of(operator.truth, False)
BUILTINS[operator.not_] = _truth_of(operator.not_, True)


def _converter(kind):
    def impl(frame, args, kwargs):
        if args and isinstance(args[0], TensorVar):
            raise Unsupported(f"{kind.__name__}() of a tensor reads its value (data-dependent)", DATA_DEPENDENT_HINT)
        if kind is bool and args:
            return ConstVar(truthy(frame, args[0]))
        return const(fold(kind, *(python_value(a, f"{kind.__name__}()") for a in args)))
    return impl


for _kind in (bool, int, float, complex):
    BUILTINS[_kind] = _converter(_kind)


@rule(print)
def _print(frame, args, kwargs):
    raise Unsupported("call to print (printing and logging break the graph)",
                      "move the print out of the compiled function")


@rule(callable)
def _callable(frame, args, kwargs):
    return ConstVar(is_callable(args[0]))


@rule(map)
def _map(frame, args, kwargs):
    fn, *its = args
    sources = [iterate(frame, i) for i in its]

    def step():
        items = [s.next() for s in sources]
        if not items or any(i is None for i in items):
            return None
        return CALLS.call(frame, fn, items, {})
    return IteratorVar(step=step, py_type=map)


@rule(filter)
def _filter(frame, args, kwargs):
    fn, it = args
    source = iterate(frame, it)

    def step():
        while (item := source.next()) is not None:
            test = item if isinstance(fn, ConstVar) and fn.value is None else CALLS.call(frame, fn, [item], {})
            if truthy(frame, test):
                return item
        return None
    return IteratorVar(step=step, py_type=filter)


def _any_all_impl(which):
    def impl(frame, args, kwargs):  # short-circuits, as the builtins do
        it, stop_on = iterate(frame, args[0]), which is any
        while (item := it.next()) is not None:
            if truthy(frame, item) is stop_on:
                return ConstVar(stop_on)
        return ConstVar(not stop_on)
    return impl


BUILTINS[any] = _any_all_impl(any)
BUILTINS[all] = _any_all_impl(all)


def call_builtin(frame, fn, args: list[Var], kwargs: dict[str, Var]) -> Var:
    impl = BUILTINS.get(fn)
    if impl is not None:
        check(fn, args, kwargs)
        return impl(frame, args, kwargs)
    if (fn in PURE or getattr(fn, "__module__", None) == "math") and \
            all(foldable(a) for a in args) and all(foldable(v) for v in kwargs.values()):
        values = [_pure_value(a) for a in args]
        result = fold(fn, *values, **{k: _pure_value(v) for k, v in kwargs.items()})
        return next((a for a, v in zip(args, values) if v is result and isinstance(a, SetVar)), None) or const(result)
    if getattr(fn, "__module__", None) == "math":
        raise Unsupported(f"math.{fn.__name__} on {', '.join(describe(a) for a in args)}",
                          "use the torch function of the same name on tensors")
    raise Unsupported(f"call to builtin {getattr(fn, '__name__', fn)}")



def _pure_value(v: Var):
    """What a pure builtin is given for `v`: a set's own real set (which iterates exactly as
    eager's does: `repr(s)`; a copy of a larger set may iterate otherwise), else its value."""
    if isinstance(v, SetVar) and not v.frozen and v.real is not None and all(k[0] == "value" for k in v.items):
        return v.real
    return v.python_value()


@rule(tuple.__new__)
def _tuple_new(frame, args, kwargs):
    return tuple_new(frame, args, kwargs)
