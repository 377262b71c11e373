"""What Python's own protocols do to Vars: truth, identity, iteration, subscripts, constants."""
from __future__ import annotations

import collections
import operator
import types

import torch

from ..errors import PythonError, Unsupported, python_error
from ..values.vars import (AttrDictVar, BoundVar, CellVar, ConstVar, DictVar, DictViewVar, ExceptionVar, FunctionVar, IdentityKey,
                            InstanceVar, IteratorVar, ListVar, MethodVar, SetVar, SymIntVar, key_var,
                            ObjectVar, ScalarVar, TensorVar, TupleVar, Var, note_mutation)

SCALARS = (int, float, bool, str, bytes, complex, type(None))
IMMUTABLE = SCALARS + (torch.dtype, torch.device, range, slice, types.CodeType, type(Ellipsis), frozenset,
                       torch.memory_format, torch.layout)

DATA_DEPENDENT_HINT = "use torch.where or torch.cond, or move the branch out of the compiled function"


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
    if isinstance(v, ExceptionVar):
        return all(foldable(i) for i in v.args)
    if isinstance(v, SetVar):
        return all(k[0] == "value" for k in v.items)
    if isinstance(v, SymIntVar):
        return True  # its value specializes the entry (see SymIntVar.python_value)
    if isinstance(v, ObjectVar):
        return isinstance(v.value, (type, types.FunctionType, types.BuiltinFunctionType, types.ModuleType))
    return False


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
    if isinstance(v, InstanceVar):
        from .instances import class_attr
        h = class_attr(v.cls, "__hash__")
        if h is None:
            raise python_error(TypeError, f"unhashable type: {v.cls.__name__!r}")
        if h is not object.__hash__ or class_attr(v.cls, "__eq__") is not object.__eq__:
            raise Unsupported(f"dict key {describe(v)} with its own __hash__ or __eq__")
        return IdentityKey(v, v)
    if isinstance(v, ObjectVar):
        t = type(v.value)
        if t.__hash__ is object.__hash__ and t.__eq__ is object.__eq__ or isinstance(v.value, IDENTITY_KEYS):
            return IdentityKey(v, v.value)
        raise Unsupported(f"dict key {describe(v)} with its own __hash__ (found by its value, which is not guarded)")
    raise Unsupported(f"dict key {describe(v)}")


IDENTITY_KEYS = (type, types.FunctionType, types.BuiltinFunctionType, types.ModuleType, types.MethodType)  # (by identity)


def find_key(frame, items: dict, v: Var):
    """`key_of(v)`, for a lookup in (or an insertion into) a dict holding `items`: when an
    object that came in is not among the dict's keys, that it is none of the objects that came
    in as keys is guarded (the lookup would find one of them if it were)."""
    key = key_of(v)
    if isinstance(key, IdentityKey) and isinstance(v, ObjectVar) and v.source is not None and key not in items:
        from ..guards.guard import DistinctMatch
        for k in items:
            if isinstance(k, IdentityKey) and isinstance(k.var, ObjectVar) and k.var.source is not None:
                frame.tracer.guards.add(DistinctMatch(v.source, k.var.source))
    return key


def mutating(frame, v) -> None:
    """`v` (a ListVar, DictVar or SetVar) is about to change in place: fine for one made while
    tracing; a list or dict that came in is changed in the trace's view and refilled by the
    entry; a set that came in, or a frozenset, is not changed by the trace."""
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


def is_same(a: Var, b: Var, frame=None) -> bool:
    same = _real_identity(a) is _real_identity(b)
    if frame is not None and a.source is not None and b.source is not None and a.source != b.source:
        from ..guards.guard import AliasMatch, DistinctMatch  # the branch taken depends on the answer
        frame.tracer.guards.add(AliasMatch(a.source, b.source) if same else DistinctMatch(a.source, b.source))
    return same


def truthy(frame, v: Var) -> bool:
    if isinstance(v, ConstVar):
        return bool(v.value)
    if isinstance(v, SymIntVar):
        import sympy
        return v.env.decide(sympy.Ne(v.expr, 0))
    if isinstance(v, (TupleVar, ListVar, DictVar, SetVar)):
        return len(v.items) > 0
    if isinstance(v, DictViewVar):
        return len(v.dict_var.items) > 0
    if isinstance(v, (TensorVar, ScalarVar)):
        raise Unsupported("data-dependent branching: the condition depends on a tensor's value", DATA_DEPENDENT_HINT)
    from .instances import call_dunder, is_user_object
    if is_user_object(v):
        for name in ("__bool__", "__len__"):
            result = call_dunder(frame, v, name)
            if result is not None:
                if not isinstance(result, ConstVar) or type(result.value) not in (bool, int):
                    raise Unsupported(f"{name} returned {describe(result)}")
                return bool(result.value)
        from .bases import protocol
        inherited = protocol(frame, v, "__len__")  # a dict subclass: empty is false
        if inherited is not None:
            return bool(inherited.value)
        if isinstance(v, InstanceVar):
            return True
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
        from .sets import members
        return members(v)
    if isinstance(v, ConstVar) and isinstance(v.value, (range, str, bytes, tuple, frozenset)):
        return [const(x) for x in v.value]
    if isinstance(v, TensorVar):
        from .tensors import tensor_len
        return [getitem(frame, v, ConstVar(i)) for i in range(tensor_len(frame, v))]
    if isinstance(v, ObjectVar):
        from .modules import iterate_modules
        items = iterate_modules(frame, v)
        if items is not None:
            return items
    it = _user_iter(frame, v)
    if it is not None:
        return unpack(frame, it)
    raise Unsupported(f"iteration over {describe(v)}")


def _user_iter(frame, v: Var):
    """iter(v) for a user object whose class defines __iter__ (a generator method, or one
    returning an iterable the tracer knows)."""
    from .instances import call_dunder
    it = call_dunder(frame, v, "__iter__")
    if it is None:
        from .bases import protocol
        it = protocol(frame, v, "__iter__")
    if it is None or isinstance(it, IteratorVar):
        return it
    if isinstance(it, (ListVar, TupleVar, DictVar, DictViewVar)):
        return iterate(frame, it)
    raise Unsupported(f"__iter__ of {describe(v)} returned {describe(it)}")


def iterate(frame, v: Var) -> IteratorVar:
    if isinstance(v, IteratorVar):
        return v
    if isinstance(v, ListVar):
        return IteratorVar(v.items, live=True, over=v)
    if isinstance(v, (DictVar, DictViewVar)):
        d = v if isinstance(v, DictVar) else v.dict_var
        size, it = len(d.items), IteratorVar(unpack(frame, v))
        ordered = issubclass(d.py_type, collections.OrderedDict)

        def unchanged():  # a dict checks its size at every step; an OrderedDict not once it gave its last key
            if len(d.items) != size and not (ordered and it.pos >= len(it.items)):
                raise python_error(RuntimeError, "OrderedDict mutated during iteration" if ordered else
                                   "dictionary changed size during iteration")
        it.on_next = unchanged
        return it
    it = _user_iter(frame, v)
    if it is not None:
        return it
    return IteratorVar(unpack(frame, v))


def contains(frame, container: Var, item: Var) -> bool:
    if isinstance(container, SetVar):
        from .sets import member_key
        found = member_key(item) in container.items
        if not found and isinstance(item, ObjectVar) and item.source is not None:  # (as find_key guards)
            from ..guards.guard import DistinctMatch
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
        for el in container.items:
            if is_same(el, item):
                return True
            if isinstance(el, TensorVar) or isinstance(item, TensorVar):
                raise Unsupported("`in` over tensors compares tensor values (data-dependent)", DATA_DEPENDENT_HINT)
            if fold(operator.eq, python_value(el, "`in`"), python_value(item, "`in`")):
                return True
        return False
    if isinstance(container, ConstVar):
        return fold(operator.contains, container.value, python_value(item, "`in`"))
    if isinstance(container, AttrDictVar):
        from . import attrdict
        return attrdict.contains(frame, container, item)
    from .instances import call_dunder
    user = call_dunder(frame, container, "__contains__", item)
    if user is not None:
        return truthy(frame, user)
    from .bases import protocol
    inherited = protocol(frame, container, "__contains__", item)
    if inherited is not None:
        return truthy(frame, inherited)
    if call_dunder(frame, container, "__iter__") is not None:
        return contains(frame, ListVar(unpack(frame, container)), item)
    raise Unsupported(f"`in` on {describe(container)}")


def getitem(frame, obj: Var, index: Var) -> Var:
    if isinstance(obj, TensorVar):
        from .tensors import call_function
        return call_function(frame, operator.getitem, (obj, index), {})
    if isinstance(obj, ObjectVar):
        from .modules import index_modules
        picked = index_modules(frame, obj, index)
        if picked is not None:
            return picked
        annotation = _annotation(obj, index)
        if annotation is not None:
            return annotation
    if isinstance(obj, (TupleVar, ListVar)):
        i = _index(obj, python_value(index, "an index into a sequence"))
        try:
            picked = obj.items[i]
        except IndexError:
            raise python_error(IndexError, f"{type(obj).__name__[:-3].lower()} index out of range") from None
        except TypeError as e:
            raise Unsupported(f"sequence index {i!r}: {e}") from None
        if isinstance(i, slice):
            if isinstance(obj, ListVar):
                return ListVar(picked)
            py_type = obj.py_type if obj.py_type in (tuple, torch.Size) else tuple
            return TupleVar(picked, py_type=py_type)
        return picked
    if isinstance(obj, AttrDictVar):
        from . import attrdict
        return attrdict.getitem(frame, obj, index)
    if isinstance(obj, DictVar):
        key = find_key(frame, obj.items, index)
        if key not in obj.items:
            return missing(frame, obj, key)
        return obj.items[key]
    if isinstance(obj, ConstVar):
        return const(fold(operator.getitem, obj.value, plain_slice(python_value(index, "an index"))))
    from .instances import call_dunder
    user = call_dunder(frame, obj, "__getitem__", index)
    if user is not None:
        return user
    from .bases import protocol
    inherited = protocol(frame, obj, "__getitem__", index)
    if inherited is not None:
        return inherited
    raise Unsupported(f"subscript of {describe(obj)}")


def missing(frame, d: DictVar, key) -> Var:
    """`d[key]` for a key `d` does not hold: a defaultdict's factory makes the value (and it
    is inserted), any other dict raises KeyError."""
    if d.factory is None or isinstance(d.factory, ConstVar) and d.factory.value is None:
        raise python_error(KeyError, key_var(key).python_value())
    from . import call
    value = call(frame, d.factory, [], {})
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
        from .tensors import call_function
        call_function(frame, operator.setitem, (obj, index, value), {})
        return
    if isinstance(obj, (ListVar, DictVar)):
        mutating(frame, obj)
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
        from . import attrdict
        attrdict.setitem(frame, obj, index, value)
        return
    from .instances import call_dunder
    if call_dunder(frame, obj, "__setitem__", index, value) is not None:
        return
    from .bases import protocol
    if protocol(frame, obj, "__setitem__", index, value) is not None:
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
        from ..values.side_effects import DELETED
        from . import attrdict
        attrdict.setitem(frame, obj, index, DELETED)
        return
    from .instances import call_dunder
    if call_dunder(frame, obj, "__delitem__", index) is not None:
        return
    from .bases import protocol
    if protocol(frame, obj, "__delitem__", index) is not None:
        return
    raise Unsupported(f"del on an item of {describe(obj)}")
