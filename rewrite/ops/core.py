"""What Python's own protocols do to Vars: truth, identity, iteration, subscripts, constants,
dict keys, ordering. The bottom of `rewrite/ops`: it imports no other rule module, and reaches
the kinds' rules above it (a tensor's subscript, a user object's `__iter__`) through the
protocol tables below, which their modules fill when imported."""
from __future__ import annotations

import collections
import functools
import inspect
import operator
import sys
import types

import torch

from ..errors import PythonError, Raised, Unsupported, python_error, traced_error_type
from ..guards.guard import AliasMatch, DistinctMatch, IdMatch, LenMatch, MemberMatch, TypeMatch
from ..registry import Protocol
from ..values.side_effects import DELETED
from ..values.vars import (IMMUTABLE, SCALARS, ArrayVar, AttrDictVar, BoundVar, CellVar, ConstVar, DictVar, DictViewVar,
                           ExceptionVar, FunctionVar, GradModeVar, IdentityKey, InstanceVar, IteratorVar, ListVar,
                           MethodVar, ModeDecoratedVar, ObjectVar, PartialVar, RecordedContextVar, ScalarVar, SetVar,
                           SuperVar, SymIntVar, TensorVar, TupleVar, Var, key_var, note_mutation)
from .iterators import deque_iterator, dict_iterator, set_iterator


DATA_DEPENDENT_HINT = "use torch.where or torch.cond, or move the branch out of the compiled function"
# Items of a container the trace makes from constants (`[0] * n`, `list(range(n))`): past this, a
# graph break (each item is a Var). Past IMPOSSIBLE_ITEMS no machine has the memory: CPython
# raises MemoryError at once (its size checks, or a failed allocation), and so does the trace.
MAX_ITEMS = 100_000
MAX_CHARS = 1 << 26  # (of a str or bytes the trace folds: one object, not a Var each)
IMPOSSIBLE_ITEMS = 1 << 48

# The protocols below (truth, iteration, membership, subscripts) are Python's, over every kind
# of Var; what a kind does for them is the rule of that kind's module, above this one, and
# running a user's __iter__ means tracing it (ops.call, the top). So core calls up through
# these tables, which the kinds' modules fill when they are imported (rewrite.registry.check):
CALLS = Protocol("CALLS", "rewrite.ops.core",  # the rules' interface (rewrite/ops/__init__.py)
                 "call",  # (frame, fn, args, kwargs) -> Var: calling any Var
                 "getattr",  # (frame, obj, name) -> Var
                 "setattr",  # (frame, obj, name, value) -> None
                 "call_method")  # (frame, MethodVar, args, kwargs) -> Var: a method of a container Var
USER = Protocol("USER", "rewrite.ops.core",  # objects of the user's classes (ops/instances.py, ops/bases.py)
                "is_user_object",  # (v) -> bool
                "call_dunder",  # (frame, v, name, *args) -> Var | None: type(v).name in Python, called
                "base_protocol")  # (frame, v, name, *args) -> Var | None: a dict / list base's builtin method
TENSORS = Protocol("TENSORS", "rewrite.ops.core",  # ops/tensors.py
                   "call_function",  # (frame, fn, args, kwargs) -> Var: a torch op on Vars, into the graph
                   "tensor_len")  # (frame, tensor Var) -> int
ARRAYS = Protocol("ARRAYS", "rewrite.ops.core",  # ops/numpy_calls.py: NumPy arrays the trace holds as tensors
                  "getitem",  # (frame, ArrayVar, index) -> Var
                  "setitem",  # (frame, ArrayVar, index, value) -> None
                  "unpack",  # (frame, ArrayVar) -> [Var]: its rows (or items)
                  "truth",  # (frame, ArrayVar) -> raises: eager's error, or data-dependent
                  "tensor_subscript")  # (frame, tensor, index, value=None) -> Var | None: with arrays in them
SETS = Protocol("SETS", "rewrite.ops.core",  # ops/sets.py
                "member_key",  # (v) -> the key a set finds v by
                "members")  # (set Var) -> [Var] in iteration order
MODULES = Protocol("MODULES", "rewrite.ops.core",  # ops/modules.py: nn.Sequential, ModuleList, ModuleDict
                   "iterate",  # (frame, ObjectVar) -> [Var] | None
                   "index")  # (frame, ObjectVar, index) -> Var | None
ATTRDICT = Protocol("ATTRDICT", "rewrite.ops.core",  # ops/attrdict.py: `obj.__dict__` read and written key by key
                    "getitem", "setitem", "contains",
                    "whole")  # (frame, AttrDictVar) -> DictVar: a copy, its keys guarded
OBJECTS = Protocol("OBJECTS", "rewrite.ops.core",  # ops/objects.py: attributes of real objects (ObjectVars)
                   "generic_getattr",  # (frame, ObjectVar, name, fallback) -> Var: object.__getattribute__
                   "raw_setattr")  # (frame, Var, name, value, plain=False) -> None: object.__setattr__, recorded

# the rules of Python callables (builtins, functools, itertools, collections, ...): a callable
# -> rule(frame, args, kwargs) -> Var, filled by the modules that define them (`@rule(fn)`)
BUILTINS = {}


def rule(*fns):
    def register(impl):
        for fn in fns:
            BUILTINS[fn] = impl
        return impl
    return register


def class_attr(cls: type, name: str):
    """`name` as the class defines it (no descriptor binding), or _MISSING."""
    for base in cls.__mro__:
        if name in base.__dict__:
            return base.__dict__[name]
    return _MISSING


_MISSING = object()


def const(value) -> Var:
    """A Var for a value the tracer computed itself (no source, so no guard)."""
    t = type(value)
    if t in IMMUTABLE:
        return ConstVar(value)
    if t is tuple or t is torch.Size or (issubclass(t, tuple) and hasattr(t, "_fields")):
        return TupleVar([const(v) for v in value], py_type=t)
    if t is list:
        return ListVar([const(v) for v in value])
    if t is dict:  # (keys as key_of makes them: an object hashed by identity is found by identity)
        return DictVar({k if type(k) in IMMUTABLE else key_of(const(k)): const(v) for k, v in value.items()})
    if isinstance(value, torch.Tensor):
        raise Unsupported("a tensor constant the tracer cannot locate as an input")
    return ObjectVar(value)


def fold(fn, *args, **kwargs):
    """Run a pure Python operation of the user's on real values; its errors are the user's."""
    try:
        return fn(*args, **kwargs)
    except Exception as e:
        raise PythonError(e) from e


def foldable(v: Var) -> bool:
    """Whether the tracer may compute with the real Python value of `v`."""
    if isinstance(v, ConstVar):
        return True
    if isinstance(v, (TupleVar, ListVar)):
        return all(foldable(i) for i in v.items)
    if isinstance(v, DictVar):
        return all(foldable(i) for i in v.items.values())
    if isinstance(v, DictViewVar):
        return v.dict_var.py_type in (dict, collections.OrderedDict) and foldable(v.dict_var) and \
            all(not isinstance(k, IdentityKey) for k in v.dict_var.items)
    if isinstance(v, ExceptionVar):
        return _plain_exception(v.cls) and all(foldable(i) for i in v.args + list(v.attrs.values()))
    if isinstance(v, SetVar):
        return all(k[0] == "value" for k in v.items)
    if isinstance(v, SymIntVar):
        return True  # its value specializes the entry (see SymIntVar.python_value)
    if isinstance(v, ObjectVar):
        return isinstance(v.value, (type, types.FunctionType, types.BuiltinFunctionType, types.ModuleType))
    return False


def _plain_exception(cls: type) -> bool:
    """Whether an exception of `cls` may be computed with as a real one (its str, repr, fields):
    no class of its own defines Python code other than `__init__` (which the trace ran)."""
    for base in cls.__mro__:
        if base.__module__ == "builtins":
            return True
        for name, value in base.__dict__.items():
            if name not in ("__init__", "__dict__", "__weakref__", "__module__", "__qualname__", "__doc__") \
                    and hasattr(type(value), "__get__"):
                return False
    return True


def python_value(v: Var, what: str = "this operation"):
    if not foldable(v):
        if isinstance(v, (TensorVar, ScalarVar)):
            raise Unsupported(f"{what} needs the value of {describe(v)} (data-dependent)", DATA_DEPENDENT_HINT)
        raise Unsupported(f"{what} needs the Python value of {describe(v)}")
    return v.python_value()


def describe(v: Var) -> str:
    if isinstance(v, TensorVar):
        return "a tensor"
    if isinstance(v, ScalarVar):
        return "a number read from a tensor (.item())"
    if isinstance(v, ArrayVar):
        return "a NumPy array" if v.kind.__name__ == "ndarray" else f"a NumPy {v.kind.__name__} computed from data"
    if isinstance(v, ConstVar):
        return f"{type(v.value).__name__} {v.value!r}"
    if isinstance(v, ObjectVar):
        val = v.value
        if isinstance(val, types.ModuleType):
            return f"module {val.__name__}"
        name = getattr(val, "__qualname__", None)
        if callable(val) and name:
            mod = getattr(val, "__module__", None)
            return f"{type(val).__name__} {mod + '.' if mod and mod != 'builtins' else ''}{name}"
        return f"object of type {type(val).__qualname__}"
    if isinstance(v, FunctionVar):
        return f"function {v.code.co_qualname}"
    if isinstance(v, AttrDictVar):
        return f"the __dict__ of {describe(v.obj)} (read key by key only)"
    if isinstance(v, MethodVar):
        return f"method {v.name} of {describe(v.self_var)}"
    if isinstance(v, (InstanceVar, ExceptionVar)):
        return f"object of type {v.cls.__qualname__}"
    if isinstance(v, SetVar):
        return "a frozenset" if v.frozen else "a set"
    if isinstance(v, SymIntVar):
        return f"a symbolic size {v.expr}"
    if isinstance(v, BoundVar):
        return f"method {v.func.__qualname__}"
    return {TupleVar: "a tuple", ListVar: "a list", DictVar: "a dict", IteratorVar: "an iterator",
            CellVar: "a cell"}.get(type(v), type(v).__name__)


def python_type(v: Var) -> type:
    if isinstance(v, TensorVar):
        return type(v.value)
    if isinstance(v, ArrayVar):
        return v.kind
    if isinstance(v, (ConstVar, ObjectVar)):
        return type(v.value)
    if isinstance(v, TupleVar):
        return v.py_type
    if isinstance(v, (FunctionVar, ModeDecoratedVar)):
        return types.FunctionType
    if isinstance(v, DictViewVar):
        return type(getattr({}, v.kind)())
    if isinstance(v, (InstanceVar, ExceptionVar)):
        return v.cls
    if isinstance(v, SymIntVar):
        return int
    if isinstance(v, SetVar):
        return frozenset if v.frozen else set
    if isinstance(v, PartialVar):
        return functools.partial
    if isinstance(v, GradModeVar):
        return torch.set_grad_enabled if v.made_by_set else torch.enable_grad if v.mode else torch.no_grad
    if isinstance(v, RecordedContextVar):
        return {"inference_mode": torch.inference_mode, "record_function": torch.autograd.profiler.record_function}.get(
            v.kind, torch.autocast)
    if isinstance(v, (DictVar, ListVar)):
        return v.py_type
    if isinstance(v, IteratorVar):
        if v.py_type is None:
            raise Unsupported("the type of an iterator whose class the tracer does not know")
        return v.py_type
    if isinstance(v, MethodVar):
        return _method_type(v)
    return {BoundVar: types.MethodType, SuperVar: super, ListVar: list, DictVar: dict}.get(type(v), object)


def _method_type(m: MethodVar) -> type:
    """The class of a bound method: a builtin's (`{}.get`: builtin_function_or_method, `[].__len__`:
    method-wrapper) or a Python function's (MethodType)."""
    static = inspect.getattr_static(python_type(m.self_var), m.name, None)
    if isinstance(static, types.MethodDescriptorType):
        return types.BuiltinMethodType
    if isinstance(static, types.WrapperDescriptorType):
        return types.MethodWrapperType
    return types.MethodType


def is_callable(v: Var) -> bool:
    """callable(v), for any kind of Var."""
    if isinstance(v, (ConstVar, ObjectVar)):
        return callable(v.value)
    if isinstance(v, (FunctionVar, MethodVar, BoundVar, PartialVar, ModeDecoratedVar)):
        return True
    if isinstance(v, (InstanceVar, ExceptionVar)):
        return class_attr(v.cls, "__call__") not in (_MISSING, None)
    if isinstance(v, (TupleVar, ListVar, DictVar, SetVar, DictViewVar, IteratorVar, TensorVar, SymIntVar, ScalarVar,
                      ArrayVar)):
        return False
    raise Unsupported(f"callable() of {describe(v)}")


def key_of(v: Var):
    """A dict key: the real hashable value, or an IdentityKey for a value hashed by identity
    that the trace holds as a Var (a tensor, an object made while tracing, an object that
    came in whose class keeps object's hash and equality)."""
    if isinstance(v, (ConstVar, SymIntVar)) or (isinstance(v, TupleVar) and foldable(v)):
        key = v.python_value()
        fold(hash, key)  # unhashable: the user's TypeError
        return key
    if isinstance(v, TensorVar):
        return IdentityKey(v, v.value)
    if isinstance(v, ArrayVar):
        if v.kind.__hash__ is None:
            raise python_error(TypeError, f"unhashable type: {v.kind.__name__!r}")
        raise Unsupported(f"dict key {describe(v)} (hashed by its value: data-dependent)")
    if isinstance(v, InstanceVar):
        h = class_attr(v.cls, "__hash__")
        if h is None:
            raise python_error(TypeError, f"unhashable type: {v.cls.__name__!r}")
        if h is not object.__hash__ or class_attr(v.cls, "__eq__") is not object.__eq__:
            raise Unsupported(f"dict key {describe(v)} with its own __hash__ or __eq__")
        return IdentityKey(v, v)
    if isinstance(v, ObjectVar):
        t = type(v.value)
        if t.__hash__ is object.__hash__ and t.__eq__ is object.__eq__ or isinstance(v.value, IDENTITY_KEYS):
            return IdentityKey(v, v.python_value())  # (a function guarded by its code: by its identity now)
        raise Unsupported(f"dict key {describe(v)} with its own __hash__ (found by its value, which is not guarded)")
    raise Unsupported(f"dict key {describe(v)}")


IDENTITY_KEYS = (type, types.FunctionType, types.BuiltinFunctionType, types.ModuleType, types.MethodType)  # (by identity)


def find_key(frame, items: dict, v: Var):
    """`key_of(v)`, for a lookup in (or an insertion into) a dict holding `items`: when an
    object that came in is not among the dict's keys, that it is none of the objects that came
    in as keys is guarded (the lookup would find one of them if it were)."""
    key = key_of(v)
    if isinstance(key, IdentityKey) and isinstance(v, ObjectVar) and v.source is not None and key not in items:
        for k in items:
            if isinstance(k, IdentityKey) and isinstance(k.var, ObjectVar) and k.var.source is not None:
                frame.tracer.guards.add(DistinctMatch(v.source, k.var.source))
    return key


def mutating(frame, v, assigns: bool = False) -> None:
    """`v` (a ListVar, DictVar or SetVar) is about to change in place: fine for one made while
    tracing; a list or dict that came in is changed in the trace's view and refilled by the
    entry; a set that came in, or a frozenset, is not changed by the trace. A deque counts the
    change (its iterators raise on it), unless it `assigns` an item."""
    if isinstance(v, ListVar) and v.py_type is not list and not assigns:
        v.state += 1
    if isinstance(v, SetVar):
        if v.frozen or v.source is not None:
            raise Unsupported(f"changing {describe(v)} that came from outside" if v.source else "changing a frozenset")
        note_mutation(v)
    elif v.mutable:
        note_mutation(v)
    else:
        frame.tracer.side_effects.mutate(v)


def make_slice(parts: list[Var]) -> Var:
    """A slice of constants; symbolic bounds stay in it as Vars (a tensor slice keeps them
    symbolic, anything else specializes them: see `plain_slice`)."""
    for p in parts:
        if not isinstance(p, (ConstVar, SymIntVar)):
            raise Unsupported(f"slice bound {describe(p)}")
    return ConstVar(slice(*(p if isinstance(p, SymIntVar) else p.value for p in parts)))


def plain_slice(v):
    """A slice with its symbolic bounds specialized (for Python sequences)."""
    if isinstance(v, slice) and any(isinstance(p, SymIntVar) for p in (v.start, v.stop, v.step)):
        return slice(*(p.python_value() if isinstance(p, SymIntVar) else p for p in (v.start, v.stop, v.step)))
    return v


def _index(seq: Var, i):
    """An index into a tuple, list or deque as Python takes it (a deque takes no slices)."""
    i = plain_slice(i)
    if isinstance(seq, ListVar) and seq.py_type is not list and not isinstance(i, int):
        raise python_error(TypeError, f"sequence index must be integer, not '{type(i).__name__}'")
    return i


def _real_identity(v: Var):
    if isinstance(v, (TensorVar,)):
        return v.value
    if isinstance(v, (ConstVar, ObjectVar)):
        return v.value
    return v


def is_same(a: Var, b: Var, frame) -> bool:
    """`a is b`; between two values that came in, guarded on the answer (every branch on it,
    `==` of objects compared by identity and `in` too, depends on it)."""
    same = _real_identity(a) is _real_identity(b) or _empty_tuple(a) and _empty_tuple(b)
    if a.source is not None and b.source is not None and a.source != b.source:
        # (the branch taken depends on the answer)
        frame.tracer.guards.add(AliasMatch(a.source, b.source) if same else DistinctMatch(a.source, b.source))
    return same


def len_result(result: Var) -> int:
    """What `len()` (or a truth test) makes of what a class's `__len__` returned: an index
    >= 0, else CPython's errors."""
    if not isinstance(result, ConstVar):
        raise Unsupported(f"__len__ returned {describe(result)}")
    n = fold(operator.index, result.value)
    if n < 0:
        raise python_error(ValueError, "__len__() should return >= 0")
    if n > sys.maxsize:
        raise python_error(OverflowError, "cannot fit 'int' into an index-sized integer")
    return n


def _empty_tuple(v: Var) -> bool:
    """An empty tuple: CPython's one `()` (a tuple subclass's empty object is its own)."""
    return isinstance(v, TupleVar) and v.py_type is tuple and not v.items


def truthy(frame, v: Var) -> bool:
    if isinstance(v, ConstVar):
        return bool(v.value)
    if isinstance(v, SymIntVar):
        import sympy  # (deferred: sympy is imported with the first symbolic size)
        return v.env.decide(sympy.Ne(v.expr, 0))
    if isinstance(v, (TupleVar, ListVar, DictVar, SetVar)):
        return len(v.items) > 0
    if isinstance(v, DictViewVar):
        return len(v.dict_var.items) > 0
    if isinstance(v, (TensorVar, ScalarVar)):
        raise Unsupported("data-dependent branching: the condition depends on a tensor's value", DATA_DEPENDENT_HINT)
    if isinstance(v, ArrayVar):
        ARRAYS.truth(frame, v)
    if USER.is_user_object(v):
        result = USER.call_dunder(frame, v, "__bool__")
        if result is not None:
            if python_type(result) is not bool:
                raise python_error(TypeError, f"__bool__ should return bool, returned {python_type(result).__name__}")
            return result.value
        result = USER.call_dunder(frame, v, "__len__")
        if result is not None:
            return len_result(result) != 0
        inherited = USER.base_protocol(frame, v, "__len__")  # a dict subclass: empty is false
        if inherited is not None:
            return bool(inherited.value)
        if isinstance(v, InstanceVar):
            return True
    if isinstance(v, ObjectVar) and type(v.value) in (set, frozenset):
        return came_in_set_len(frame, v) > 0
    if isinstance(v, ObjectVar):
        val = v.value
        if val is None:
            return False
        t = type(val)
        if isinstance(val, (type, types.FunctionType, types.BuiltinFunctionType, types.ModuleType)):
            return True
        if hasattr(t, "__bool__") or hasattr(t, "__len__"):
            raise Unsupported(f"truth value of {describe(v)} (user-defined __bool__/__len__)")
        return True
    return True


def unpack(frame, v: Var) -> list[Var]:
    """The items iterating over `v` yields."""
    if isinstance(v, (TupleVar, ListVar)):
        return list(v.items)
    if isinstance(v, DictVar):
        return [key_var(k) for k in v.items]
    if isinstance(v, IteratorVar):
        items = []
        while (item := v.next()) is not None:
            items.append(item)
        return items
    if isinstance(v, DictViewVar):
        return v.current()
    if isinstance(v, SetVar):
        return SETS.members(v)
    if isinstance(v, ConstVar) and isinstance(v.value, (range, str, bytes, tuple, frozenset)):
        if fold(len, v.value) > MAX_ITEMS:
            raise Unsupported(f"iterating over {describe(v)[:60]} while tracing (more than {MAX_ITEMS} items)")
        return [const(x) for x in v.value]
    if isinstance(v, TensorVar):
        return [getitem(frame, v, ConstVar(i)) for i in range(TENSORS.tensor_len(frame, v))]
    if isinstance(v, ArrayVar):
        return ARRAYS.unpack(frame, v)
    if isinstance(v, ObjectVar) and type(v.value) is frozenset:
        return came_in_frozenset_members(frame, v)
    if isinstance(v, ObjectVar):
        items = MODULES.iterate(frame, v)
        if items is not None:
            return items
    it = _user_iter(frame, v)
    if it is None and _old_sequence(v):
        it = _sequence_iterator(frame, v)
    if it is not None:
        return unpack(frame, it)
    raise Unsupported(f"iteration over {describe(v)}")


def check_iterable(v: Var) -> None:
    """iter(v)'s TypeError where Python cannot iterate `v` (what iter(), `for`, list(), tuple()
    raise; other places word it their own way and are not checked here)."""
    if _not_iterable(v):
        raise python_error(TypeError, f"'{python_type(v).__name__}' object is not iterable")


def _not_iterable(v: Var) -> bool:
    """A value Python cannot iterate: a number or None, an exception, a function, an object of a
    class of the user's with neither __iter__ nor __getitem__ (its metaclass plain)."""
    if isinstance(v, ConstVar):
        return type(v.value) in (int, float, complex, bool, type(None))
    if isinstance(v, (ExceptionVar, FunctionVar)):
        return not hasattr(python_type(v), "__iter__") and not hasattr(python_type(v), "__getitem__")
    if USER.is_user_object(v):
        cls = type_of_user(v)
        return type(cls) is type and all(class_attr(cls, n) is _MISSING for n in ("__iter__", "__getitem__"))
    return False


def _old_sequence(v: Var) -> bool:
    """An object iterated through its `__getitem__` (its class has no `__iter__`)."""
    return USER.is_user_object(v) and class_attr(type_of_user(v), "__getitem__") not in (_MISSING, None)


def unpack_targets(frame, v: Var, before: int, star: bool = False, after: int = 0) -> list[Var]:
    """`a, b = v` (`before` targets) or `a, *m, b = v` (the starred one a ListVar): the values
    for the targets, in order. As CPython's UNPACK_SEQUENCE / UNPACK_EX: an exact list or tuple
    by its length, anything else through its iterator, of which `a, b = v` takes no more than
    one item past the targets; their errors are CPython's own messages."""
    exact = isinstance(v, (ListVar, TupleVar)) and v.py_type in (list, tuple)
    if exact:
        items = list(v.items)
    elif star:
        items = unpack(frame, iterate(frame, v))
    else:
        it, items = iterate(frame, v), []
        while len(items) <= before and (item := it.next()) is not None:
            items.append(item)
    if len(items) < before + after or not star and len(items) > before:
        raise PythonError(_unpack_error(v.py_type if exact else None, len(items), before, star, after))
    if not star:
        return items
    return items[:before] + [ListVar(items[before:len(items) - after])] + items[len(items) - after:]


def _unpack_error(kind: type | None, count: int, before: int, star: bool, after: int) -> ValueError:
    """The ValueError this Python raises unpacking `count` values of a `kind` (list or tuple;
    None: an iterator) into those targets: the real unpack's."""
    values = [None] * count
    try:
        _unpacker(before, star, after)(kind(values) if kind is not None else iter(values))
    except ValueError as e:
        return e
    raise AssertionError(f"unpacking {count} values into {before}, {star}, {after} did not raise")


@functools.lru_cache(maxsize=256)
def _unpacker(before: int, star: bool, after: int):
    targets = [f"a{i}" for i in range(before)] + (["*m"] if star else []) + [f"b{i}" for i in range(after)]
    namespace: dict = {}
    exec(f"def unpack(seq):\n    {', '.join(targets)}, = seq\n", namespace)
    return namespace["unpack"]


def _user_iter(frame, v: Var):
    """iter(v) for a user object whose class defines __iter__ (a generator method, or one
    returning an iterable the tracer knows)."""
    it = USER.call_dunder(frame, v, "__iter__")
    if it is None:
        it = USER.base_protocol(frame, v, "__iter__")
    if it is None and isinstance(v, ObjectVar) and isinstance(v.value, type) and \
            isinstance(class_attr(type(v.value), "__iter__"), types.FunctionType):  # a class its metaclass iterates
        it = CALLS.call(frame, ObjectVar(class_attr(type(v.value), "__iter__")), [v], {})
    if it is None or isinstance(it, IteratorVar):
        return it
    if isinstance(it, (ListVar, TupleVar, DictVar, DictViewVar)):
        return iterate(frame, it)
    raise Unsupported(f"__iter__ of {describe(v)} returned {describe(it)}")


def iterate(frame, v: Var) -> IteratorVar:
    """iter(v), as CPython's iterator of that kind walks it (ops/iterators.py)."""
    if isinstance(v, IteratorVar):
        return v
    if isinstance(v, ListVar):
        if v.py_type is not list:
            return deque_iterator(v)
        return IteratorVar(v.items, live=True, over=v, py_type=LIST_ITERATOR)
    if isinstance(v, DictVar):
        return dict_iterator(v)
    if isinstance(v, DictViewVar):
        return dict_iterator(v.dict_var, v.kind)
    if isinstance(v, SetVar):
        return set_iterator(v, SETS.members(v))
    it = _user_iter(frame, v)
    if it is not None:
        return it
    if _old_sequence(v):
        return _sequence_iterator(frame, v)
    check_iterable(v)
    return IteratorVar(unpack(frame, v), py_type=_iterator_type(v))


LIST_ITERATOR = type(iter([]))


class _Sequence:
    def __getitem__(self, i):
        raise IndexError(i)


SEQUENCE_ITERATOR = type(iter(_Sequence()))


def type_of_user(v: Var) -> type:
    return v.cls if isinstance(v, InstanceVar) else type(v.value)


def _sequence_iterator(frame, v: Var) -> IteratorVar:
    """iter(v) for an object whose class has `__getitem__` and no `__iter__` (the old sequence
    protocol): v[0], v[1], ... each asked for at its step, until IndexError or StopIteration;
    exhausted for good from then on."""
    state = [0, False]  # the next index, done

    def step():
        if state[1]:
            return None
        try:
            item = getitem(frame, v, ConstVar(state[0]))
        except (PythonError, Raised) as e:
            error = traced_error_type(e)
            if error is None or not issubclass(error, (IndexError, StopIteration)):
                raise
            state[1] = True
            return None
        state[0] += 1
        return item
    step.snapshot = lambda: tuple(state)
    step.restore = lambda saved: state.__setitem__(slice(None), saved)
    return IteratorVar(step=step, py_type=SEQUENCE_ITERATOR)


def _iterator_type(v: Var) -> type | None:
    """The class of `iter(v)` where it is known without running anything (None: not known)."""
    if isinstance(v, ConstVar):
        return type(iter(v.value))  # (a str, range, bytes, tuple or frozenset)
    if isinstance(v, TupleVar):
        return type(iter(()))
    return None


def sort_keys(frame, items: list[Var], key: Var | None, what: str) -> list:
    """The Python values an ordering compares: `key(item)` for each item (traced calls), or the items."""
    if key is None or isinstance(key, ConstVar) and key.value is None:
        keyed = items
    else:
        keyed = [CALLS.call(frame, key, [item], {}) for item in items]
    if any(isinstance(k, TensorVar) for k in keyed):
        raise Unsupported(f"{what} compares tensor values (data-dependent)", DATA_DEPENDENT_HINT)
    return [python_value(k, what) for k in keyed]


def sort_items(frame, items: list[Var], key, reverse, what: str) -> list[Var]:
    """Python's stable sort of Vars by their keys' values (equal keys keep their order, reversed too)."""
    keys = sort_keys(frame, items, key, what)
    rev = python_value(reverse, what) if reverse is not None else False
    order = fold(sorted, range(len(items)), key=keys.__getitem__, reverse=rev)
    return [items[i] for i in order]


def contains(frame, container: Var, item: Var) -> bool:
    if isinstance(container, SetVar):
        found = SETS.member_key(item) in container.items
        if not found and isinstance(item, ObjectVar) and item.source is not None:  # (as find_key guards)
            for member in container.items.values():
                if isinstance(member, ObjectVar) and member.source is not None:
                    frame.tracer.guards.add(DistinctMatch(item.source, member.source))
        return found
    if isinstance(container, DictVar) or isinstance(container, DictViewVar) and container.kind == "keys":
        d = container if isinstance(container, DictVar) else container.dict_var
        return find_key(frame, d.items, item) in d.items
    if isinstance(container, DictViewVar):
        container = ListVar(container.current())
    if isinstance(container, (TupleVar, ListVar)):
        return any(_is_member(frame, el, item) for el in container.items)
    if isinstance(container, ObjectVar) and type(container.value) is frozenset:
        if container.source is not None:  # (dataclasses' _ATOMIC_TYPES: the same frozenset holds the same)
            frame.tracer.guards.add(IdMatch(container.source, container.value))
        return fold(operator.contains, container.value, python_value(item, "`in`"))
    if isinstance(container, ConstVar):
        return fold(operator.contains, container.value, python_value(item, "`in`"))
    if isinstance(container, ObjectVar) and type(container.value) is set and container.source is not None:
        return _in_set(frame, container, item)
    if isinstance(container, IteratorVar):  # consumed up to the first equal item, as CPython's search
        while (el := container.next()) is not None:
            if _is_member(frame, el, item):
                return True
        return False
    if isinstance(container, AttrDictVar):
        return ATTRDICT.contains(frame, container, item)
    user = USER.call_dunder(frame, container, "__contains__", item)
    if user is not None:
        return truthy(frame, user)
    inherited = USER.base_protocol(frame, container, "__contains__", item)
    if inherited is not None:
        return truthy(frame, inherited)
    it = _user_iter(frame, container)
    if it is None and _old_sequence(container):
        it = _sequence_iterator(frame, container)
    if it is not None:  # (item by item, up to the first equal one, as CPython's search)
        while (el := it.next()) is not None:
            if _is_member(frame, el, item):
                return True
        return False
    raise Unsupported(f"`in` on {describe(container)}")


def came_in_set_len(frame, s: ObjectVar) -> int:
    """len() of a set or frozenset that came in (a global, a dict's value, an attribute: what its
    truth and len() read) -- a frozenset guarded by identity (it cannot change), a set by its
    type and length (not one the call changed: the trace does not follow its members). One
    without a source (a trusted module's constant) is a constant."""
    if s.source is not None:
        if type(s.value) is frozenset:
            frame.tracer.guards.add(IdMatch(s.source, s.value))
        else:
            if frame.tracer.side_effects.changed(s.source):
                raise Unsupported("the length of a set that came in and that the call changed")
            frame.tracer.guards.add(TypeMatch(s.source, set))
            frame.tracer.guards.add(LenMatch(s.source, len(s.value)))
    return len(s.value)


def came_in_frozenset_members(frame, s: ObjectVar) -> list[Var]:
    """The members of a frozenset that came in, in its own iteration order (guarded by identity:
    the same object iterates the same way), where they are constants."""
    if not all(type(m) in SCALARS for m in s.value):
        raise Unsupported(f"iteration over {describe(s)} of members other than numbers and strings")
    if fold(len, s.value) > MAX_ITEMS:
        raise Unsupported(f"iterating over {describe(s)} while tracing (more than {MAX_ITEMS} items)")
    if s.source is not None:
        frame.tracer.guards.add(IdMatch(s.source, s.value))
    return [const(m) for m in s.value]


def _in_set(frame, s: ObjectVar, item: Var) -> bool:
    """`item in s` for a set that came in: guarded on the answer (the item a constant that hashes
    and compares without user code: a builtin value, a class, a function)."""
    if frame.tracer.side_effects.changed(s.source):
        raise Unsupported("`in` on a set that came in and that the call changed")
    value = python_value(item, "`in`") if isinstance(item, (ConstVar, SymIntVar)) or isinstance(item, ObjectVar) \
        and isinstance(item.value, (type, types.FunctionType, types.BuiltinFunctionType)) else None  # (a size: its value)
    if value is None and not (isinstance(item, ConstVar) and item.value is None):
        raise Unsupported(f"`in` on a set that came in, of {describe(item)}")
    found = fold(operator.contains, s.value, value)
    frame.tracer.guards.add(TypeMatch(s.source, set))
    frame.tracer.guards.add(MemberMatch(s.source, value, found))
    return found


def _is_member(frame, el: Var, item: Var) -> bool:
    """`el is item or el == item`, for `in` over a sequence's items."""
    if is_same(el, item, frame):
        return True
    if isinstance(el, ObjectVar) and isinstance(item, ObjectVar) and type(el.value).__eq__ is object.__eq__:
        return False  # (compared by identity: is_same's answer, guarded)
    if isinstance(el, TensorVar) or isinstance(item, TensorVar):
        raise Unsupported("`in` over tensors compares tensor values (data-dependent)", DATA_DEPENDENT_HINT)
    return fold(operator.eq, python_value(el, "`in`"), python_value(item, "`in`"))


def getitem(frame, obj: Var, index: Var) -> Var:
    if isinstance(obj, TensorVar):
        return ARRAYS.tensor_subscript(frame, obj, index) or \
            TENSORS.call_function(frame, operator.getitem, (obj, index), {})
    if isinstance(obj, ArrayVar):
        return ARRAYS.getitem(frame, obj, index)
    if isinstance(obj, ObjectVar):
        picked = MODULES.index(frame, obj, index)
        if picked is not None:
            return picked
        annotation = _annotation(obj, index)
        if annotation is not None:
            return annotation
    if isinstance(obj, (TupleVar, ListVar)):
        i = _index(obj, python_value(index, "an index into a sequence"))
        try:
            picked = obj.items[i]
        except Exception:  # (eager's error: what an empty one of its kind raises, out of range there too)
            kind = obj.py_type if obj.py_type in (list, tuple, collections.deque, torch.Size) else tuple
            fold(operator.getitem, kind(), i)
            raise
        if isinstance(i, slice):
            if isinstance(obj, ListVar):
                return ListVar(picked)
            if obj.py_type is tuple and len(picked) == len(obj.items) and i.indices(len(picked))[::2] == (0, 1):
                return obj  # (the whole of a tuple: CPython's slice is the tuple itself)
            py_type = obj.py_type if obj.py_type in (tuple, torch.Size) else tuple
            return TupleVar(picked, py_type=py_type)
        return picked
    if isinstance(obj, AttrDictVar):
        return ATTRDICT.getitem(frame, obj, index)
    if isinstance(obj, DictVar):
        key = find_key(frame, obj.items, index)
        if key not in obj.items:
            return missing(frame, obj, key)
        return obj.items[key]
    if isinstance(obj, ConstVar):
        return const(fold(operator.getitem, obj.value, plain_slice(python_value(index, "an index"))))
    user = USER.call_dunder(frame, obj, "__getitem__", index)
    if user is not None:
        return user
    inherited = USER.base_protocol(frame, obj, "__getitem__", index)
    if inherited is not None:
        return inherited
    raise Unsupported(f"subscript of {describe(obj)}")


def missing(frame, d: DictVar, key) -> Var:
    """`d[key]` for a key `d` does not hold: a defaultdict's factory makes the value (and it
    is inserted), any other dict raises KeyError."""
    if d.factory is None or isinstance(d.factory, ConstVar) and d.factory.value is None:
        raise python_error(KeyError, key_var(key).python_value())
    value = CALLS.call(frame, d.factory, [], {})
    mutating(frame, d)
    d.items[key] = value
    return value


def _annotation(obj: ObjectVar, index: Var):
    """`list[Tensor]`, `Optional["X"]`, `dict[str, int]`: a type annotation, made at trace time
    (typing caches them; the result is a constant), or None when `obj[index]` is not one."""
    target = obj.value
    if isinstance(target, type):
        hook = getattr(target, "__class_getitem__", None)
        if hook is None or getattr(hook, "__module__", None) not in (None, "typing", "builtins"):
            return None  # (a class's own __class_getitem__ is its code: not folded)
    elif type(target).__module__ != "typing":
        return None

    def plain(v):
        if isinstance(v, ConstVar):
            return v.value
        if isinstance(v, ObjectVar) and (isinstance(v.value, type) or type(v.value).__module__ in ("typing", "types")):
            return v.value
        if isinstance(v, TupleVar):
            return tuple(plain(i) for i in v.items)
        raise Unsupported(f"a type annotation over {describe(v)}")
    made = fold(operator.getitem, target, plain(index))
    return ObjectVar(made)


def setitem(frame, obj: Var, index: Var, value: Var) -> None:
    if isinstance(obj, TensorVar):
        if ARRAYS.tensor_subscript(frame, obj, index, value) is None:
            TENSORS.call_function(frame, operator.setitem, (obj, index, value), {})
        return
    if isinstance(obj, ArrayVar):
        ARRAYS.setitem(frame, obj, index, value)
        return
    if isinstance(obj, (ListVar, DictVar)):
        mutating(frame, obj, assigns=True)
    if isinstance(obj, ListVar):
        i = _index(obj, python_value(index, "a list index"))
        if isinstance(i, slice):  # (taken whole first: ops/fills.py, the row of list.__setitem__)
            fold(operator.setitem, obj.items, i, unpack(frame, value))
        else:
            fold(operator.setitem, obj.items, i, value)
        return
    if isinstance(obj, DictVar):
        obj.items[find_key(frame, obj.items, index)] = value
        return
    if isinstance(obj, AttrDictVar):
        ATTRDICT.setitem(frame, obj, index, value)
        return
    if USER.call_dunder(frame, obj, "__setitem__", index, value) is not None:
        return
    if USER.base_protocol(frame, obj, "__setitem__", index, value) is not None:
        return
    raise Unsupported(f"item assignment on {describe(obj)}")


def delitem(frame, obj: Var, index: Var) -> None:
    if isinstance(obj, (ListVar, DictVar)):
        mutating(frame, obj)
    if isinstance(obj, ListVar):
        fold(operator.delitem, obj.items, _index(obj, python_value(index, "a list index")))
        return
    if isinstance(obj, DictVar):
        fold(operator.delitem, obj.items, find_key(frame, obj.items, index))
        return
    if isinstance(obj, AttrDictVar):
        ATTRDICT.setitem(frame, obj, index, DELETED)
        return
    if USER.call_dunder(frame, obj, "__delitem__", index) is not None:
        return
    if USER.base_protocol(frame, obj, "__delitem__", index) is not None:
        return
    raise Unsupported(f"del on an item of {describe(obj)}")
