"""Objects of user classes: made while tracing (InstanceVar), their attributes and methods,
`super()`, and Python's operator protocol (`__add__`, `__len__`, `__getitem__`, `__call__`,
...) on objects of classes that define it in Python -- made while tracing or passed in.

An object made while tracing lives only in the trace: `__init__` is inlined, attribute
stores go to its `attrs`, and if it outlives the call (returned, stored on an object that
came in, handed to a graph break) the entry rebuilds it with `new_instance(cls, attrs)`,
as `copy` and `pickle` do: `cls.__new__(cls)` and its `__dict__` filled.
"""
from __future__ import annotations

import abc
import collections
import functools
import operator
import types

import torch

from ..errors import PythonError, Raised, Unsupported, python_error, traced_error_type
from ..guards.source import AttrSource, ItemSource, TypeSource
from ..values.side_effects import DELETED
from ..values.vars import (BoundVar, ConstVar, DictVar, ExceptionVar, InstanceVar, ListVar, ObjectVar, ScalarVar,
                           SuperVar, SymIntVar, TensorVar, TupleVar, Var, mutations, note_mutation)
from . import bases
from .core import _MISSING, BUILTINS, CALLS, OBJECTS, USER, class_attr, const, describe, is_same, python_type, truthy

METACLASSES = (type, abc.ABCMeta)
# the `__getattribute__` slots of builtin types that are Python's generic lookup (what
# `object.__getattribute__` does); a class inheriting one of them reads attributes as objects do
GENERIC_GETATTRIBUTE = frozenset(t.__getattribute__ for t in (
    object, dict, list, tuple, set, frozenset, int, float, complex, str, bytes, bytearray,
    collections.defaultdict, collections.deque, BaseException))
# classes whose objects are plain values to the tracer (ObjectVar rules), never user objects
NOT_USER = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType,
            torch.nn.Module, torch.Tensor)


def new_instance(cls, attrs: dict, items: dict | list | None = None):
    """What the entry calls to rebuild an object the trace made: its attributes, and for a
    dict or list subclass its items (set with the builtin's own methods, past the class's)."""
    if items is None:
        obj = object.__new__(cls)
    elif isinstance(items, list):  # a list subclass
        obj = list.__new__(cls)
        list.extend(obj, items)
    else:
        obj = dict.__new__(cls)
        setitem = collections.OrderedDict.__setitem__ if isinstance(obj, collections.OrderedDict) else dict.__setitem__
        for k, v in items.items():
            setitem(obj, k, v)
    if cls.__dictoffset__ and not any("__slots__" in c.__dict__ for c in cls.__mro__):
        object.__getattribute__(obj, "__dict__").update(attrs)  # (past a __getattribute__ of the class's own)
    else:
        for name, value in attrs.items():  # (slots: each set through its descriptor)
            object.__setattr__(obj, name, value)
    return obj


def _heap_type(cls) -> bool:
    return bool(cls.__flags__ & (1 << 9))  # Py_TPFLAGS_HEAPTYPE: defined by a class statement


# builtin bases an object made while tracing may have: what the builtin holds is a DictVar / ListVar
CONTAINER_BASES = (dict, collections.OrderedDict, list)


def why_not_constructible(cls: type) -> str | None:
    if type(cls) not in METACLASSES and type(cls).__call__ is not type.__call__:
        return f"its metaclass {type(cls).__qualname__} defines __call__"
    if issubclass(cls, torch.nn.Module):
        return "modules are made outside the compiled function"
    for base in cls.__mro__[:-1]:
        if not _heap_type(base) and base not in CONTAINER_BASES:
            return f"it derives from {base.__qualname__}"
    if cls.__new__ not in (object.__new__, dict.__new__, list.__new__) and \
            not isinstance(class_attr(cls, "__new__"), staticmethod):
        return "its __new__ is not a Python function"
    if own_getattribute(cls) is None and cls.__getattribute__ not in GENERIC_GETATTRIBUTE:
        return "it defines __getattribute__"
    if class_attr(cls, "__del__") is not _MISSING:
        return "it defines __del__"
    if not isinstance(class_attr(cls, "__init__"), types.FunctionType) and cls.__init__ is not object.__init__ \
            and cls.__init__ not in (dict.__init__, collections.OrderedDict.__init__, list.__init__):
        return "its __init__ is not a Python function"
    return None


def allocate(frame, cls_var: ObjectVar) -> InstanceVar:
    """`object.__new__(cls)`: an object of `cls` with nothing set on it."""
    cls = cls_var.value
    why = why_not_constructible(cls)
    if why is not None:
        raise Unsupported(f"constructing {cls.__module__}.{cls.__qualname__} while tracing ({why})")
    base = DictVar({}) if issubclass(cls, dict) else ListVar([]) if issubclass(cls, list) else None
    return InstanceVar(cls, cls_var.source, base)


def _object_new(frame, args, kwargs):
    """`object.__new__(cls)` (`super().__new__(cls)` in a class's own __new__)."""
    if not args or not isinstance(args[0], ObjectVar) or not isinstance(args[0].value, type):
        raise Unsupported(f"object.__new__({', '.join(map(describe, args))})")
    cls = args[0].value
    if len(args) > 1 or kwargs:  # (object_new's excess-argument checks)
        if cls.__new__ is not object.__new__:
            raise python_error(TypeError, "object.__new__() takes exactly one argument (the type to instantiate)")
        if cls.__init__ is object.__init__:
            raise python_error(TypeError, f"{cls.__name__}() takes no arguments")
    return allocate(frame, args[0])


def construct(frame, cls_var: ObjectVar, args, kwargs) -> Var:
    cls = cls_var.value
    new = class_attr(cls, "__new__")
    if isinstance(new, staticmethod):  # the class's own __new__, traced; __init__ runs on what it made
        made = frame.tracer.inline(new.__func__, [cls_var, *args], kwargs, None, frame)
        if not (isinstance(made, InstanceVar) and issubclass(made.cls, cls)):
            return made
        init = class_attr(made.cls, "__init__")
        if isinstance(init, types.FunctionType):
            result = frame.tracer.inline(init, [made, *args], kwargs, _on_class(made, "__init__"), frame)
            if not (isinstance(result, ConstVar) and result.value is None):
                raise Unsupported(f"{cls.__qualname__}.__init__ returned {describe(result)} (the call raises eagerly)")
        return made
    inst = allocate(frame, cls_var)
    tracer = frame.tracer
    before = (tracer.graph.mark()[1], len(tracer.side_effects.stores), len(tracer.side_effects.containers), mutations(),
              tracer.state_reads)
    init = class_attr(cls, "__init__")
    if isinstance(init, types.FunctionType):
        result = tracer.inline(init, [inst, *args], kwargs, _on_class(inst, "__init__"), frame)
        if not (isinstance(result, ConstVar) and result.value is None):
            raise Unsupported(f"{cls.__qualname__}.__init__ returned {describe(result)} (the call raises eagerly)")
    elif inst.base is not None:
        bases.call(frame, init, inst, list(args), kwargs)  # dict.__init__: its items
    elif args or kwargs:
        raise Unsupported(f"{cls.__qualname__}() takes no arguments (the call raises eagerly)")
    after = (tracer.graph.mark()[1], len(tracer.side_effects.stores), len(tracer.side_effects.containers), mutations(),
             tracer.state_reads)
    passed = {id(a) for a in (*args, *kwargs.values())}
    # (nor read state that is another at the entry's end, where it would run again: grad mode, which
    # the graph may switch, `self.prev = torch.is_grad_enabled()`; a global or attribute the call
    # wrote, which the entry writes after it rebuilds the values)
    if before == after and all(id(v) in passed or _immutable(v) for _, v in _held(inst)):
        inst.made_by = (list(args), dict(kwargs), state(inst))  # the entry may call the class to rebuild it
    return inst


def _held(inst: InstanceVar):
    yield from inst.attrs.items()
    yield from _items(inst)


def _items(inst: InstanceVar):
    """(key or index, Var) of what the builtin base holds."""
    if inst.base is None:
        return ()
    items = inst.base.items
    return enumerate(items) if isinstance(items, list) else items.items()


def _immutable(v: Var) -> bool:
    """A value nothing can change in place behind the object's back (a tensor's data is the
    graph's: the rebuilt object holds the graph's output)."""
    if isinstance(v, (ConstVar, TensorVar, ScalarVar, SymIntVar)):
        return True
    if isinstance(v, ObjectVar):  # came in: its changes are the trace's side effects
        return v.source is not None or isinstance(v.value, (type, types.FunctionType, types.BuiltinFunctionType))
    return isinstance(v, TupleVar) and all(_immutable(i) for i in v.items)


def state(inst: InstanceVar) -> tuple:
    """What the object holds, by identity of the Vars (attributes, items)."""
    return tuple((k, id(v)) for k, v in inst.attrs.items()), tuple((k, id(v)) for k, v in _items(inst))


def made_as_called(inst: InstanceVar):
    """(args, kwargs) of the class's call that made `inst`, when calling it again makes the same
    object: it ran no op and changed nothing else, what the object holds is what it was passed
    or immutable, and nothing changed the object since. Else None (its state is copied)."""
    if inst.made_by is None or inst.made_by[2] != state(inst):
        return None
    return inst.made_by[:2]


def _on_class(v: Var, name: str):
    """The source of `type(v).name`, through which what the class holds there is guarded."""
    if isinstance(v, InstanceVar):
        return AttrSource(v.cls_source, name) if v.cls_source is not None else None
    if isinstance(v, ObjectVar) and v.source is not None:
        return AttrSource(class_source(v.source, type(v.value)), name)
    return None


_OBJECT_GETATTRIBUTE = object.__getattribute__


def own_getattribute(cls: type):
    """The class's `__getattribute__` when Python code defines it, else None."""
    if getattr(cls, "__getattribute__", None) is _OBJECT_GETATTRIBUTE:  # (most classes: one lookup, in C)
        return None
    hook = class_attr(cls, "__getattribute__")
    return hook if isinstance(hook, types.FunctionType) else None


def class_source(source, cls: type):
    """The source of an object's class: `obj.__class__` (one attribute read), or `type(obj)`
    when the class's own `__getattribute__` would answer `obj.__class__`."""
    return TypeSource(source) if own_getattribute(cls) is not None else AttrSource(source, "__class__")


def hooked_getattr(frame, v: Var, name: str, hook) -> Var:
    """`v.name` when v's class defines `__getattribute__`: that method traced (guarded on the
    class holding it), then the class's `__getattr__` if it raised AttributeError, as Python's
    attribute lookup does."""
    try:
        return frame.tracer.inline(hook, [v, ConstVar(name)], {}, _on_class(v, "__getattribute__"), frame)
    except (PythonError, Raised) as e:
        error = traced_error_type(e)
        if error is None or not issubclass(error, AttributeError) or \
                not isinstance(class_attr(type_of(v), "__getattr__"), types.FunctionType):
            raise
    return getattr_fallback(frame, v, name)


def _hashable_in(value, table: dict) -> bool:
    try:
        return value in table
    except TypeError:
        return False


def type_of(v: Var) -> type:
    if isinstance(v, InstanceVar):
        return v.cls
    return python_type(v)


def bind(frame, v: Var, static, name: str, source) -> Var:
    """What reading `name` gives when the class holds `static` there (a non-data descriptor
    or a plain value): methods bind to `v`, staticmethods unwrap, classmethods bind to the class."""
    tracer = frame.tracer
    if isinstance(static, types.FunctionType):
        return BoundVar(static, v, source)
    if isinstance(static, staticmethod):
        return tracer.wrap(static.__func__, source)
    if isinstance(static, classmethod):
        cls_var = ObjectVar(type_of(v), source.base if source is not None else None)
        return BoundVar(static.__func__, cls_var, AttrSource(source, "__func__") if source is not None else None)
    if hasattr(type(static), "__get__"):
        raise Unsupported(f"descriptor {name!r} of class {type_of(v).__qualname__} ({type(static).__qualname__})")
    if source is not None:
        return tracer.wrap(static, source)
    return const(static)


def getattr_instance(frame, inst: InstanceVar, name: str) -> Var:
    hook = own_getattribute(inst.cls)
    if hook is not None:
        return hooked_getattr(frame, inst, name, hook)
    return generic_getattr_instance(frame, inst, name)


def generic_getattr_instance(frame, inst: InstanceVar, name: str, fallback: bool = True) -> Var:
    """What `object.__getattribute__` finds on an object the trace made (`fallback`: then
    the class's `__getattr__`, as a plain attribute read does)."""
    if name == "__class__":
        return ObjectVar(inst.cls, inst.cls_source)
    if name == "__dict__":  # the attributes themselves (a DictVar over the very dict)
        view = DictVar({})
        view.items = inst.attrs
        view.born = inst.born  # (its changes are the object's: undone at a break as the object's are)
        return view
    static = class_attr(inst.cls, name)
    source = _on_class(inst, name)
    if isinstance(static, property):
        return _property_get(frame, inst, static, name, source)
    if is_cached_property(static) and static.attrname is not None and not inst.cls.__dictoffset__:
        raise python_error(TypeError, f"No '__dict__' attribute on {inst.cls.__name__!r} instance to cache "
                                      f"{static.attrname!r} property.")
    if is_cached_property(static) and static.attrname is not None:
        # computed once, kept in the object's __dict__ (its lock is for threads that share the object)
        if static.attrname in inst.attrs:
            return inst.attrs[static.attrname]
        value = frame.tracer.inline(static.func, [inst], {}, AttrSource(source, "func") if source else None, frame)
        store(inst, static.attrname, value)
        return value
    if is_slot(inst.cls, static):  # a __slots__ name: what the object holds there, if anything
        if name in inst.attrs:
            return inst.attrs[name]
        found = getattr_fallback(frame, inst, name) if fallback else None
        if found is not None:
            return found
        raise python_error(AttributeError, _error_of(getattr, inst.cls, name))
    if name == "__dict__" and not inst.cls.__dictoffset__:
        raise python_error(AttributeError, _error_of(getattr, inst.cls, name))
    if static is not _MISSING and hasattr(type(static), "__set__"):
        raise Unsupported(f"descriptor {name!r} of class {inst.cls.__qualname__} ({type(static).__qualname__})")
    if inst.base is not None and bases.is_base_method(static) and name not in inst.attrs:
        return BoundVar(static, inst, None)  # `output.keys()`: the dict's
    if name in inst.attrs:
        return inst.attrs[name]
    if static is not _MISSING:
        return bind(frame, inst, static, name, source)
    found = getattr_fallback(frame, inst, name) if fallback else None
    if found is not None:
        return found
    raise python_error(AttributeError, f"{inst.cls.__name__!r} object has no attribute {name!r}")


def _property_get(frame, v: Var, prop: property, name: str, source) -> Var:
    if prop.fget is None:
        raise Unsupported(f"property {name!r} has no getter (the call raises eagerly)")
    return frame.tracer.inline(prop.fget, [v], {}, AttrSource(source, "fget") if source else None, frame)


def getattr_fallback(frame, v: Var, name: str) -> Var | None:
    """`type(v).__getattr__(v, name)` when the class defines one in Python."""
    hook = class_attr(type_of(v), "__getattr__")
    if not isinstance(hook, types.FunctionType):
        return None
    return frame.tracer.inline(hook, [v, ConstVar(name)], {}, _on_class(v, "__getattr__"), frame)


def setattr_instance(frame, inst: InstanceVar, name: str, value) -> None:
    """`inst.name = value` (value DELETED: `del inst.name`)."""
    static = class_attr(inst.cls, name)
    if isinstance(static, property):
        fn = static.fdel if value is DELETED else static.fset
        if fn is None:
            raise Unsupported(f"property {name!r} cannot be {'deleted' if value is DELETED else 'set'} "
                              "(the call raises eagerly)")
        source = _on_class(inst, name)
        which = "fdel" if value is DELETED else "fset"
        frame.tracer.inline(fn, [inst] + ([] if value is DELETED else [value]), {},
                            AttrSource(source, which) if source else None, frame)
        return
    if static is not _MISSING and hasattr(type(static), "__set__") and not is_slot(inst.cls, static):
        raise Unsupported(f"assignment to descriptor {name!r} of class {inst.cls.__qualname__}")
    slot = "__delattr__" if value is DELETED else "__setattr__"
    hook = class_attr(inst.cls, slot)
    if isinstance(hook, types.FunctionType):  # the class's own __setattr__ (a frozen dataclass's raises)
        args = [inst, ConstVar(name)] + ([] if value is DELETED else [value])
        frame.tracer.inline(hook, args, {}, _on_class(inst, slot), frame)
        return
    store(inst, name, value)


def is_cached_property(static) -> bool:
    """functools.cached_property (or the same class of a fresh import of functools)."""
    return isinstance(static, functools.cached_property) or \
        type(static).__qualname__ == "cached_property" and type(static).__module__ == "functools"


def is_slot(cls: type, static) -> bool:
    """Whether `static` (found on `cls`) is a slot a class statement's `__slots__` made."""
    return isinstance(static, types.MemberDescriptorType) and _heap_type(static.__objclass__) \
        and static.__objclass__ in cls.__mro__


def _error_of(op, cls: type, name: str, *value) -> str:
    """The message of the AttributeError `op` raises for `name` on an empty object of `cls`
    (this Python's own words: a slot not set, no __dict__ to set a name in)."""
    try:
        op(object.__new__(cls), name, *value)
    except AttributeError as e:
        return str(e)
    raise Unsupported(f"{op.__name__}({cls.__qualname__!r}, {name!r}) did not raise")


def store(inst: InstanceVar, name: str, value) -> None:
    """object.__setattr__ / object.__delattr__ on an object the trace made."""
    static = class_attr(inst.cls, name)
    if not inst.cls.__dictoffset__ and not is_slot(inst.cls, static):  # no __dict__, no such slot
        op = (delattr,) if value is DELETED else (setattr, None)
        raise python_error(AttributeError, _error_of(op[0], inst.cls, name, *op[1:]))
    note_mutation(inst)
    if value is DELETED:
        if name not in inst.attrs:
            if is_slot(inst.cls, static):
                raise python_error(AttributeError, _error_of(delattr, inst.cls, name))
            raise Unsupported(f"del of attribute {name!r} it does not have (the call raises eagerly)")
        del inst.attrs[name]
    else:
        inst.attrs[name] = value


# --- object's own slots, called explicitly (`object.__setattr__(self, "x", v)` in a frozen dataclass,
# `super().__getattribute__(key)` in a class's own __getattribute__) ----------------------------------
def _slot_args(slot: str, args, kwargs, n: int):
    if kwargs or len(args) != n or not isinstance(args[1], ConstVar) or type(args[1].value) is not str:
        raise Unsupported(f"object.{slot}({', '.join(map(describe, args))})")
    return args[0], args[1].value


def _object_getattribute(frame, args, kwargs):
    obj, name = _slot_args("__getattribute__", args, kwargs, 2)
    if isinstance(obj, InstanceVar):
        return generic_getattr_instance(frame, obj, name, fallback=False)
    if isinstance(obj, ObjectVar) and not issubclass(type(obj.value), (type, types.ModuleType)):
        return OBJECTS.generic_getattr(frame, obj, name, fallback=False)
    return CALLS.getattr(frame, obj, name)  # (a value the tracer models: its lookup is the generic one)


def _object_setattr(frame, args, kwargs):
    obj, name = _slot_args("__setattr__", args, kwargs, 3)
    _raw_setattr(frame, obj, name, args[2])
    return ConstVar(None)


def _object_delattr(frame, args, kwargs):
    obj, name = _slot_args("__delattr__", args, kwargs, 2)
    _raw_setattr(frame, obj, name, DELETED)
    return ConstVar(None)


def _raw_setattr(frame, obj: Var, name: str, value) -> None:
    if isinstance(obj, InstanceVar):
        store(obj, name, value)
    elif isinstance(obj, ObjectVar):
        OBJECTS.raw_setattr(frame, obj, name, value)
    else:
        raise Unsupported(f"object.__setattr__ on {describe(obj)}")


def _object_init(frame, args, kwargs):
    if len(args) != 1 or kwargs:
        raise Unsupported("object.__init__() takes exactly one argument (the call raises eagerly)")
    return ConstVar(None)


OBJECT_SLOTS = {object.__setattr__: _object_setattr, object.__delattr__: _object_delattr,
                object.__init__: _object_init, object.__getattribute__: _object_getattribute,
                object.__new__: _object_new}


# --- super() ------------------------------------------------------------------------------------------
def make_super(frame, args) -> SuperVar:
    if args:
        if len(args) != 2 or not isinstance(args[0], ObjectVar) or not isinstance(args[0].value, type):
            raise Unsupported(f"super({', '.join(map(describe, args))})")
        return SuperVar(args[0].value, args[1])
    if "__class__" not in frame.cells or not frame.code.co_argcount:
        raise Unsupported("super() outside a method (the call raises eagerly)")
    cls = frame.load_cell("__class__")
    first = frame.code.co_varnames[0]
    obj = frame.cells[first].contents if first in frame.cells else frame.load_local(first)
    if not isinstance(cls, ObjectVar) or obj is None:
        raise Unsupported("super() in a method whose first argument is rebound")
    return SuperVar(cls.value, obj)


def getattr_super(frame, sup: SuperVar, name: str) -> Var:
    obj = sup.obj
    if isinstance(obj, ObjectVar) and issubclass(type(obj.value), type):
        return _getattr_super_of_class(frame, sup, name)
    if not isinstance(obj, (InstanceVar, ObjectVar, ExceptionVar)):
        raise Unsupported(f"super() over {describe(obj)}")
    mro = type_of(obj).__mro__
    if sup.cls not in mro:
        raise Unsupported("super(type, obj): obj is not an instance of type (the call raises eagerly)")
    cls_source = _on_class(obj, "__mro__")
    for i in range(mro.index(sup.cls) + 1, len(mro)):
        base = mro[i]
        if name not in base.__dict__:
            continue
        static = base.__dict__[name]
        if isinstance(static, types.WrapperDescriptorType):
            if static in GENERIC_GETATTRIBUTE:  # `super().__getattribute__` reaching dict's, list's, ...
                static = object.__getattribute__
            if static in OBJECT_SLOTS:
                return BoundVar(static, obj, None)
        if bases.is_base_method(static) or isinstance(obj, ExceptionVar) and _hashable_in(static, BUILTINS):
            return BoundVar(static, obj, None)  # `super().get(key)`: the builtin's, on its part of obj
        if base is object:
            raise Unsupported(f"super().{name} resolves to object.{name}")
        source = None
        if cls_source is not None:  # type(obj).__mro__[i].name: that base, and what it holds now
            source = AttrSource(ItemSource(cls_source, i), name)
        if isinstance(static, property):
            return _property_get(frame, obj, static, name, source)
        return bind(frame, obj, static, name, source)
    raise Unsupported(f"super() object has no attribute {name!r} (the call raises eagerly)")


def _getattr_super_of_class(frame, sup: SuperVar, name: str) -> Var:
    """`super().name` where the object is a class (in `__new__` or a classmethod): functions
    unbound, classmethods bound to the class, staticmethods (`object.__new__`) as they are."""
    cls = sup.obj.value
    if not issubclass(cls, sup.cls):
        raise Unsupported("super(type, cls): cls is not a subclass of type (the call raises eagerly)")
    mro = cls.__mro__
    for base in mro[mro.index(sup.cls) + 1:]:
        if name not in base.__dict__:
            continue
        static = base.__dict__[name]
        if static is object.__new__ or isinstance(static, types.FunctionType):
            return ObjectVar(static)
        if isinstance(static, staticmethod):
            return ObjectVar(static.__func__)
        if isinstance(static, classmethod):
            return BoundVar(static.__func__, sup.obj, None)
        raise Unsupported(f"super().{name} in a classmethod ({type(static).__qualname__})")
    raise Unsupported(f"super() object has no attribute {name!r} (the call raises eagerly)")


# --- the operator protocol ------------------------------------------------------------------------------
def is_user_object(v: Var) -> bool:
    if isinstance(v, InstanceVar):
        return True
    return isinstance(v, ObjectVar) and not issubclass(type(v.value), NOT_USER) and _heap_type(type(v.value))


# what a special method set to None (`__iter__ = None`) makes its protocol raise; any other:
# "'NoneType' object is not callable" (CPython calls what the class holds)
BLOCKED = {"__iter__": "'{}' object is not iterable", "__contains__": "'{}' object is not a container",
           "__hash__": "unhashable type: '{}'", "__reversed__": "'{}' object is not reversible"}


def dunder(frame, v: Var, name: str) -> Var | None:
    """`type(v).name` bound to `v`, when v is a user object whose class defines it in Python.
    A class that sets it to None blocks the protocol: the TypeError eager raises."""
    if not is_user_object(v):
        return None
    cls = type_of(v)
    static = class_attr(cls, name)
    if isinstance(static, types.FunctionType):
        return BoundVar(static, v, _on_class(v, name))
    if static is None:
        raise python_error(TypeError, BLOCKED.get(name, "'NoneType' object is not callable").format(cls.__name__))
    return None


def call_dunder(frame, v: Var, name: str, *args: Var) -> Var | None:
    method = dunder(frame, v, name)
    if method is None:
        return None
    return call_bound(frame, method, list(args), {})


def call_bound(frame, b: BoundVar, args, kwargs) -> Var:
    if b.func in OBJECT_SLOTS:
        return OBJECT_SLOTS[b.func](frame, [b.self_var, *args], kwargs)
    if bases.is_base_method(b.func):  # `super().get(key)` in a dict subclass
        return bases.call(frame, b.func, b.self_var, args, kwargs)
    if not isinstance(b.func, types.FunctionType) and _hashable_in(b.func, BUILTINS):  # BaseException.__init__
        return BUILTINS[b.func](frame, [b.self_var, *args], kwargs)
    return frame.tracer.inline(b.func, [b.self_var, *args], kwargs, b.func_source, frame)


REFLECTED = {"__add__": "__radd__", "__sub__": "__rsub__", "__mul__": "__rmul__", "__truediv__": "__rtruediv__",
             "__floordiv__": "__rfloordiv__", "__mod__": "__rmod__", "__pow__": "__rpow__",
             "__matmul__": "__rmatmul__", "__lshift__": "__rlshift__", "__rshift__": "__rrshift__",
             "__and__": "__rand__", "__or__": "__ror__", "__xor__": "__rxor__",
             "__lt__": "__gt__", "__le__": "__ge__", "__gt__": "__lt__", "__ge__": "__le__",
             "__eq__": "__eq__", "__ne__": "__ne__"}


def _not_implemented(v: Var) -> bool:
    return isinstance(v, ObjectVar) and v.value is NotImplemented


BASE_COMPARISONS = {dict.__eq__: operator.eq, dict.__ne__: operator.ne, list.__eq__: operator.eq,
                    list.__ne__: operator.ne}


def _not_in_python(frame, self: Var, method: str, other: Var) -> Var | None:
    """`self.method(other)` when the class does not define it in Python: object's own
    (NotImplemented: None; its __ne__ inverts the class's __eq__); one of a builtin base
    (tuple.__eq__, str.__add__) or any other kind of attribute is not traced."""
    static = class_attr(type_of(self), method)
    if static is object.__ne__:
        return _ne_by_eq(frame, self, other)
    if static is _MISSING or static is getattr(object, method, _MISSING):
        return None
    if static in BASE_COMPARISONS and isinstance(self, InstanceVar) and self.base is not None:
        # a dict or list subclass's inherited ==, !=: its builtin part compared (NotImplemented for another kind)
        part = other.base if isinstance(other, InstanceVar) and other.base is not None else other
        if type(part) is not type(self.base) or getattr(part, "py_type", None) not in (dict, list) and \
                not isinstance(other, InstanceVar):
            return ObjectVar(NotImplemented)
        return CALLS.call(frame, ObjectVar(BASE_COMPARISONS[static]), [self.base, part], {})
    raise Unsupported(f"operator {method} of {type_of(self).__qualname__} inherited from "
                      f"{getattr(getattr(static, '__objclass__', None), '__qualname__', type(static).__qualname__)}")


def _ne_by_eq(frame, self: Var, other: Var) -> Var | None:
    """object.__ne__: the class's own __eq__, its result's truth inverted (a tensor's truth is
    data-dependent, or ambiguous: as eager), NotImplemented passed on."""
    result = call_dunder(frame, self, "__eq__", other)
    if result is None or _not_implemented(result):
        return result
    return ConstVar(not truthy(frame, result))


def binary(frame, fn, a: Var, b: Var) -> Var | None:
    """`a <op> b` when either side is a user object: Python's order of `__op__`, `__rop__`
    (the right operand first when its class is a subclass that overrides it) and, for
    augmented assignment, `__iop__` before both. None: neither side is a user object."""
    if not (is_user_object(a) or is_user_object(b)):
        return None
    base = fn.__name__.rstrip("_")
    name = f"__{base}__"
    if name not in REFLECTED and f"__{base[1:]}__" in REFLECTED:  # iadd: __iadd__ first, then as add
        result = call_dunder(frame, a, name, b)
        if result is not None and not _not_implemented(result):
            return result
        name = f"__{base[1:]}__"
    reflected = REFLECTED[name]
    ta = type_of(a) if is_user_object(a) else None
    tb = type_of(b) if is_user_object(b) else None
    order = [(a, name, b), (b, reflected, a)]
    if tb is not None and tb is not ta and (ta is None or issubclass(tb, ta)) and \
            class_attr(tb, reflected) is not (class_attr(ta, reflected) if ta else _MISSING):
        order.reverse()
    for self, method, other in order:
        if not is_user_object(self):
            continue  # a builtin value: returns NotImplemented for a user object
        result = call_dunder(frame, self, method, other)
        if result is None:
            result = _not_in_python(frame, self, method, other)
        if result is not None and not _not_implemented(result):
            return result
    if name in ("__eq__", "__ne__"):  # object's default: identity
        return ConstVar(is_same(a, b, frame) == (name == "__eq__"))
    raise Unsupported(f"operator {fn.__name__} on {describe(a)} and {describe(b)} (the call raises eagerly)")


USER.fill(is_user_object=is_user_object, call_dunder=call_dunder)
