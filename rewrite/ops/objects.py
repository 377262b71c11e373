"""Attributes and methods of Python objects, modules, classes and the tracer's containers."""
from __future__ import annotations

import collections
import inspect
import operator
import re
import types
import weakref

import torch

from ..errors import Unsupported, python_error
from ..guards.guard import HasAttrMatch, IdMatch, NotInDictMatch
from ..guards.source import AttrSource, ModuleAttrSource, ObjectAttrSource
from ..registry import ALLOWED
from ..values.side_effects import DELETED, location
from ..values.vars import (BoundVar, ConstVar, DictVar, DictViewVar, InstanceVar, ListVar, MethodVar, ObjectVar,
                           TensorVar, TupleVar, Var, key_var)
from . import attrdict, bases, context_vars, fills, markers
from .bases import METHODS
from .core import CALLS, OBJECTS, const, describe, find_key, fold, foldable, mutating, python_value, sort_items, unpack
from .functions import builtin_attr, function_attr
from .instances import (_MISSING, GENERIC_GETATTRIBUTE, OBJECT_SLOTS, _heap_type, _on_class, bind, class_attr,
                        class_source, getattr_fallback, hooked_getattr, own_getattribute)
from .tensors import missing_attribute, read_state

# modules whose attributes are taken as constants without a guard (Dynamo does the same for torch)
TRUSTED_MODULES = ("torch", "math", "operator", "builtins", "typing", "numbers", "functools", "itertools",
                   "collections", "dataclasses", "enum", "types")
TYPE_INFO = (torch.finfo, torch.iinfo)
CONSTANT_OBJECTS = TYPE_INFO + (re.Pattern, re.Match)  # immutable objects: what they hold is constant
BUILTIN_METHODS = (types.MethodDescriptorType, types.WrapperDescriptorType)  # read from a class: unbound
# read from a class as constants (its identity is guarded)
CLASS_METADATA = {"__name__", "__qualname__", "__module__", "__doc__", "__mro__", "__bases__"}


def trusted(module: types.ModuleType) -> bool:
    return module.__name__.partition(".")[0] in TRUSTED_MODULES


_APPLY: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def autograd_apply(cls):
    """`cls.apply` as a plain function the graph can call (one per autograd.Function class):
    its forward and backward run as eager runs them, inside the compiled code."""
    fn = _APPLY.get(cls)
    if fn is None:
        def apply(*args, **kwargs):
            return cls.apply(*args, **kwargs)
        apply.__name__ = f"{cls.__name__}_apply"
        apply.__qualname__ = f"{cls.__qualname__}.apply"
        ALLOWED.add(apply)
        _APPLY[cls] = fn = apply
    return fn


def trusted_globals(globals_: dict) -> bool:
    """The globals of a function of a trusted module (`dataclasses.fields`, say)."""
    return str(globals_.get("__name__", "")).partition(".")[0] in TRUSTED_MODULES


def _type_expression(value) -> bool:
    """A type expression: `int | None`, `list[int]`, `typing.Optional[X]` -- immutable, its
    attributes constants (what `typing.get_args` / `get_origin` read)."""
    t = type(value)
    return issubclass(t, (types.UnionType, types.GenericAlias)) or t.__module__ == "typing"


def getattr_object(frame, var: ObjectVar, name: str) -> Var:
    value = var.value
    if not issubclass(type(value), (type, types.ModuleType)):
        hook = own_getattribute(type(value))
        if hook is not None:  # the class's own __getattribute__ (a transformers config's)
            return hooked_getattr(frame, var, name, hook)
        return generic_getattr(frame, var, name)
    tracer = frame.tracer  # (a module's attribute read before: found by ops.getattr_ already)
    source = AttrSource(var.source, name) if var.source is not None else None
    if source is not None:
        stored = tracer.side_effects.load(source, location(value, name))
        if stored is not None:  # written earlier in this trace
            return stored
    if isinstance(value, types.ModuleType):
        try:
            attr = getattr(value, name)
        except AttributeError:
            raise Unsupported(f"module {value.__name__} has no attribute {name!r}") from None
        if trusted(value):
            getter = None if type(value) is types.ModuleType else \
                getattr(inspect.getattr_static(type(value), name, None), "getter", None)  # (a module subclass's)
            kind = markers.state(getter) if getter is not None else None
            if kind is not None:  # torch.backends.cudnn.allow_tf32: a flag read through the module's class
                return read_state(frame, getter, kind, [], {})
            read = tracer.wrap(attr, None)  # torch, math, ...: taken as constants, as Dynamo does
            if type(value) is types.ModuleType and type(read) is ObjectVar:
                tracer.module_reads[(id(value), name)] = read
            return read
        return tracer.wrap(attr, source)
    if name in CLASS_METADATA:
        return const(getattr(value, name))
    if name == "apply" and issubclass(value, torch.autograd.Function):
        return ObjectVar(autograd_apply(value))  # a custom autograd.Function: one op of the graph
    static = class_attr(value, name)
    if static is _MISSING:
        static = inspect.getattr_static(value, name, _MISSING)  # the metaclass's
    if static is _MISSING:  # eager's AttributeError (`type(exit).__exit__` in ExitStack.push); a class
        if hasattr(type(value), "__getattr__") or type(value).__getattribute__ is not type.__getattribute__:
            raise Unsupported(f"class {value.__qualname__} has no attribute {name!r} (its metaclass has __getattr__)")
        if source is not None:  # that came in may gain it: guarded absent
            tracer.guards.add(HasAttrMatch(source.base, name, False))
        fold(getattr, value, name)
        raise Unsupported(f"class {value.__qualname__} has no attribute {name!r}")
    if isinstance(static, types.WrapperDescriptorType) and static in OBJECT_SLOTS:  # object.__setattr__
        return ObjectVar(static)
    if isinstance(static, staticmethod):
        return tracer.wrap(static.__func__, None) if source is None else tracer.wrap(getattr(value, name), source)
    if isinstance(static, classmethod):
        return BoundVar(static.__func__, var, AttrSource(source, "__func__") if source is not None else None)
    if isinstance(static, BUILTIN_METHODS):  # `list.__getitem__`, `dict.get`: the unbound builtin
        return tracer.wrap(static, source) if source is not None else ObjectVar(static)
    get = class_attr(type(static), "__get__") if not isinstance(static, type) else _MISSING
    if isinstance(get, types.FunctionType):  # a descriptor of Python code read from the class: its
        descriptor = tracer.wrap(static, source) if source is not None else ObjectVar(static)  # __get__(None, cls)
        return tracer.inline(get, [descriptor, ConstVar(None), var], {}, None, frame)
    if isinstance(static, types.ClassMethodDescriptorType) and not _heap_type(value):  # int.from_bytes
        return ObjectVar(getattr(value, name))
    if isinstance(static, property) or hasattr(type(static), "__get__") and \
            not isinstance(static, types.FunctionType):
        raise Unsupported(f"descriptor {name!r} of class {value.__qualname__}")
    return tracer.wrap(static, source)


def generic_getattr(frame, var: ObjectVar, name: str, fallback: bool = True) -> Var:
    """`var.name` on an object that came in, as Python's generic lookup (`object.__getattribute__`)
    finds it; `fallback`: then the class's `__getattr__`, as a plain attribute read does. Of
    an object whose class defines `__getattribute__`, the values read are guarded past it
    (ObjectAttrSource): the trace ran that method already."""
    value = var.value
    tracer = frame.tracer
    raw = own_getattribute(type(value)) is not None
    source, deleted = None, False
    if var.source is not None:
        source = (ObjectAttrSource if raw else AttrSource)(var.source, name)
        stored = tracer.side_effects.stored(source, location(value, name))
        deleted = stored is DELETED
        if stored is not None and not deleted:  # written earlier in this trace
            return stored
    if not raw and not deleted and issubclass(type(value), torch.nn.Module):
        found = _module_attr(frame, var, name, source)
        if found is not None:
            return found
    if issubclass(type(value), CONSTANT_OBJECTS) or _type_expression(value):  # torch.finfo(dtype).eps, (int | None).__args__,
        return const(fold(getattr, value, name))  # pattern.search: constants of a constant (their methods fold)
    if context_vars.is_context_var(value) and name in context_vars.METHODS:
        return MethodVar(var, name)
    if type(value) is types.SimpleNamespace and name in value.__dict__:
        return tracer.wrap(value.__dict__[name], source)
    if issubclass(type(value), (types.FunctionType, types.CodeType)):
        found = function_attr(frame, var, name)
        if found is not None:
            return found
    found = builtin_attr(frame, var, name)  # (None: no builtin callable)
    if found is not None:
        return found
    if not raw and type(value).__getattribute__ not in GENERIC_GETATTRIBUTE and not isinstance(value, torch.nn.Module):
        raise Unsupported(f"attribute of {describe(var)}, whose class defines __getattribute__")
    inst_dict = getattr(value, "__dict__", None) if not raw else _raw_dict(value)
    if deleted:  # (deleted earlier in this trace: the lookup goes on past the instance)
        inst_dict = {k: v for k, v in inst_dict.items() if k != name}
    if name == "__dict__" and inst_dict is not None and var.source is not None and \
            isinstance(class_attr(type(value), "__dict__"), types.GetSetDescriptorType):  # (a class's own __dict__)
        return attrdict.of(frame, var)
    static = class_attr(type(value), name)  # (what the class holds: the instance's dict is read apart)
    data_descriptor = static is not _MISSING and hasattr(type(static), "__set__")
    on_class = AttrSource(class_source(var.source, type(value)), name) if var.source is not None else None
    if isinstance(static, property):
        if static.fget is None:
            raise Unsupported(f"property {name!r} has no getter")
        if on_class is not None:  # this property object, on the class, now
            tracer.guards.add(IdMatch(on_class, static))
        return tracer.inline(static.fget, [var], {}, AttrSource(on_class, "fget") if on_class else None, frame)
    if inst_dict is not None and name in inst_dict and not data_descriptor:
        return tracer.wrap(inst_dict[name], source)
    if isinstance(static, types.FunctionType):
        if on_class is not None:  # the method found now: on the class, not shadowed by the instance
            tracer.guards.add(IdMatch(on_class, static))
            if inst_dict is not None:
                tracer.guards.add(NotInDictMatch(var.source, name, raw))
        return MethodVar(var, name)
    if bases.is_base_method(static) and bases.builtin_of(type(value)) is not None:  # `registry.get(k)`
        if on_class is not None:
            tracer.guards.add(IdMatch(on_class, static))
            if inst_dict is not None:
                tracer.guards.add(NotInDictMatch(var.source, name, raw))
        return BoundVar(static, var, None)
    if isinstance(static, (staticmethod, classmethod)):
        if on_class is not None and inst_dict is not None:
            tracer.guards.add(NotInDictMatch(var.source, name, raw))
        return bind(frame, var, static, name, on_class)
    if isinstance(static, BUILTIN_METHODS) and (inst_dict is None or name not in inst_dict):
        if on_class is not None:  # `rng.random`: a method in C of the object's class (a call of it breaks the graph)
            tracer.guards.add(IdMatch(on_class, static))
            if inst_dict is not None:
                tracer.guards.add(NotInDictMatch(var.source, name, raw))
        return MethodVar(var, name)
    if isinstance(static, types.MemberDescriptorType):  # a __slots__ attribute
        try:
            return tracer.wrap(getattr(value, name), source)
        except AttributeError:
            raise Unsupported(f"slot {name!r} of {describe(var)} is empty (the call raises eagerly)") from None
    if name == "__class__":
        return tracer.wrap(type(value), class_source(var.source, type(value)) if var.source is not None else None)
    if issubclass(type(value), torch.nn.Module) and static is _MISSING:
        for store in ("_parameters", "_buffers", "_modules"):
            d = value.__dict__.get(store)
            if d is not None and name in d:  # what nn.Module.__getattr__ finds: read from that dict
                return tracer.wrap(d[name], ModuleAttrSource(var.source, store, name) if var.source else None)
    if static is not _MISSING and not hasattr(type(static), "__get__"):
        return tracer.wrap(static, source)  # a plain class attribute
    if static is _MISSING and (inst_dict is None or name not in inst_dict):
        absent = var.source is not None and inst_dict is not None and not deleted  # (not the trace's doing)
        if fallback and isinstance(class_attr(type(value), "__getattr__"), types.FunctionType):
            if absent:  # (while the instance does not have it)
                tracer.guards.add(NotInDictMatch(var.source, name, raw))
            return getattr_fallback(frame, var, name)
        if raw:  # (hasattr would run the class's __getattribute__: the dict's answer is the lookup's)
            if absent:
                tracer.guards.add(NotInDictMatch(var.source, name, raw))
            raise python_error(AttributeError, f"{type(value).__name__!r} object has no attribute {name!r}")
        missing_attribute(frame, var, name)
    raise Unsupported(f"attribute {name!r} of {describe(var)}")


def _module_attr(frame, var: ObjectVar, name: str, source) -> Var | None:
    """`module.name` where the module's class has no such attribute (the generic lookup below
    would come to the same, after every other rule): what its `__dict__` holds, else what
    nn.Module.__getattr__ finds in its parameters, buffers and submodules. None: the class has
    it, or nothing has (the rules below say what then)."""
    value = var.value
    if class_attr(type(value), name) is not _MISSING:
        return None
    found = value.__dict__
    if name in found:
        return frame.tracer.wrap(found[name], source)
    for store in ("_parameters", "_buffers", "_modules"):
        d = found.get(store)
        if d is not None and name in d:
            return frame.tracer.wrap(d[name], ModuleAttrSource(var.source, store, name) if var.source else None)
    return None


def _raw_dict(value):
    try:
        return object.__getattribute__(value, "__dict__")
    except AttributeError:
        return None


def setattr_object(frame, var: Var, name: str, value) -> None:
    """`obj.name = value` (value DELETED: `del obj.name`) on an object that came in. A class's
    own `__setattr__` / `__delattr__` is traced; otherwise see `raw_setattr_object`."""
    obj = var.value if isinstance(var, ObjectVar) else None
    if obj is not None and not isinstance(obj, (type, types.ModuleType, torch.nn.Module)):
        slot = "__delattr__" if value is DELETED else "__setattr__"
        hook = class_attr(type(obj), slot)
        if isinstance(hook, types.FunctionType):  # (ModelOutput's, a config's attribute_map)
            args = [var, ConstVar(name)] + ([] if value is DELETED else [value])
            frame.tracer.inline(hook, args, {}, _on_class(var, slot), frame)
            return
    raw_setattr_object(frame, var, name, value, plain=True)


def raw_setattr_object(frame, var: Var, name: str, value, plain: bool = False) -> None:
    """What `object.__setattr__(obj, name, value)` does on an object that came in (`plain`: a
    plain `obj.name = value`, whose class has no __setattr__ of its own): recorded as a side
    effect, replayed after the graph. Objects whose class customizes attribute assignment in
    C (other than nn.Module for plain values) or has a data descriptor there are not traced."""
    obj = var.value if isinstance(var, ObjectVar) else None
    if type(obj) is types.ModuleType and var.source is not None and not trusted(obj):
        return _setattr_module(frame, var, name, value)
    if obj is None or var.source is None or isinstance(obj, (type, types.ModuleType)):
        raise Unsupported(f"assignment to attribute {name!r} of {describe(var)}")
    cls = type(obj)
    static = inspect.getattr_static(cls, name, _MISSING)
    if static is not _MISSING and hasattr(type(static), "__set__"):
        raise Unsupported(f"assignment to {cls.__qualname__}.{name}, a property or slot")
    if plain and cls.__setattr__ is torch.nn.Module.__setattr__:
        if value is DELETED or isinstance(getattr(value, "value", None), torch.nn.Module) or name.startswith("_") \
                or name in obj._parameters or name in obj._modules:
            raise Unsupported(f"assignment to {cls.__qualname__}.{name} (module structure or parameter)")
        if isinstance(value, TensorVar) and name not in obj._buffers and not hasattr(obj, name):
            raise Unsupported(f"assigning a new tensor attribute {name!r} to a module")
    elif plain and (cls.__delattr__ is not object.__delattr__ if value is DELETED else
                    cls.__setattr__ is not object.__setattr__):
        raise Unsupported(f"assignment to an attribute of {cls.__qualname__}, which defines "
                          f"{'__delattr__' if value is DELETED else '__setattr__'}")
    raw = own_getattribute(cls) is not None or not plain
    inst_dict = _raw_dict(obj)
    if inst_dict is None:
        raise Unsupported(f"assignment to an attribute of {cls.__qualname__}, which has no __dict__")
    target = (ObjectAttrSource if raw else AttrSource)(var.source, name)
    where = location(obj, name)
    if value is DELETED and frame.tracer.side_effects.load(target, where) is None and name not in inst_dict:
        raise Unsupported(f"del of attribute {name!r} it does not have (the call raises eagerly)")
    effects = frame.tracer.side_effects
    original = None
    if name in inst_dict and type(inst_dict[name]) in (type(None), bool) and effects.stored(target, where) is None:
        # a flag (None or a bool; not a counter, which would recompile each call): what it held is
        # guarded, so a flag set and reset again in the call is no write
        original = frame.tracer.wrap(inst_dict[name], target)
    effects.store(target, value, where, existed=name in inst_dict, original=original)


def _setattr_module(frame, var: ObjectVar, name: str, value) -> None:
    """`module.name = value` (`sys.stderr = ...` in contextlib.redirect_stderr, a library's
    flag): a write into the module's namespace, which its functions read as globals -- one
    target whichever way it is reached (`location`), replayed after the graph. Modules taken as
    constants (torch, math, ...: `TRUSTED_MODULES`) are not written to while tracing."""
    namespace = vars(var.value)
    target, where = AttrSource(var.source, name), location(var.value, name)
    effects = frame.tracer.side_effects
    if value is DELETED and effects.load(target, where) is None and name not in namespace:
        raise Unsupported(f"del of attribute {name!r} the module does not have (the call raises eagerly)")
    original = None
    if name in namespace and type(namespace[name]) in (type(None), bool) and effects.stored(target, where) is None:
        original = frame.tracer.wrap(namespace[name], target)  # (a flag set and reset in the call: no write)
    effects.store(target, value, where, existed=name in namespace, original=original)


# --- container methods -----------------------------------------------------------------------------------
def list_method(frame, lst: ListVar, name: str, args: list[Var], kwargs) -> Var:
    items = lst.items
    if name == "append":
        mutating(frame, lst)
        items.append(args[0])
    elif name == "insert":
        mutating(frame, lst)
        items.insert(python_value(args[0], "list.insert"), args[1])
    elif name == "pop":
        mutating(frame, lst)
        return fold(items.pop, python_value(args[0], "list.pop") if args else -1)
    elif name == "clear":
        mutating(frame, lst)
        items.clear()
    elif name == "reverse":
        mutating(frame, lst)
        items.reverse()
    elif name == "copy":
        return ListVar(items)
    elif name == "sort" and not args and not set(kwargs) - {"key", "reverse"}:
        ordered = sort_items(frame, list(items), kwargs.get("key"), kwargs.get("reverse"), "list.sort()")
        mutating(frame, lst)
        items[:] = ordered
    elif name in ("index", "count", "remove") and foldable(lst):
        values = lst.python_value()
        result = fold(getattr(values, name), *(python_value(a, f"list.{name}") for a in args),
                      **{k: python_value(v, f"list.{name}") for k, v in kwargs.items()})
        if name == "remove":
            mutating(frame, lst)
            items[:] = [const(v) for v in values]
        return const(result)
    else:
        raise Unsupported(f"list.{name}")
    return ConstVar(None)


def dict_method(frame, d: DictVar, name: str, args: list[Var], kwargs) -> Var:
    items = d.items
    if name == "get":
        key = find_key(frame, items, args[0])
        return items.get(key, args[1] if len(args) > 1 else ConstVar(None))
    if name in ("keys", "values", "items"):
        return DictViewVar(d, name)
    if name == "copy":
        return DictVar(items, py_type=d.py_type, factory=d.factory)
    if name in ("pop", "setdefault", "clear", "popitem", "move_to_end"):
        if name == "move_to_end" and d.py_type is not collections.OrderedDict:
            raise Unsupported(f"dict.{name}")
        mutating(frame, d)
        if name == "pop":
            key = find_key(frame, items, args[0])
            if key not in items and len(args) < 2:
                raise python_error(KeyError, key_var(key).python_value())
            return items.pop(key, args[1] if len(args) > 1 else None)
        if name == "popitem":
            last = python_value(kwargs.get("last", args[0] if args else ConstVar(True)), "popitem(last=)")
            if not items:
                raise python_error(KeyError, "popitem(): dictionary is empty" if d.py_type is not collections.OrderedDict
                                   else "dictionary is empty")
            if d.py_type is not collections.OrderedDict:  # (dict.popitem frees the last position again)
                key, value = items.popitem()
                return TupleVar([key_var(key), value])
            key = next(reversed(items)) if last else next(iter(items))
            return TupleVar([key_var(key), items.pop(key)])
        if name == "move_to_end":
            return METHODS["move_to_end"][0](frame, d, args, kwargs)
        if name == "setdefault":
            return items.setdefault(find_key(frame, items, args[0]), args[1] if len(args) > 1 else ConstVar(None))
        if name == "clear":
            items.clear()
            return ConstVar(None)
    if name in ("__or__", "__ror__") and len(args) == 1 and not kwargs:  # (what `|` calls: another dict, else
        other = args[0]                                                 # NotImplemented)
        if not (isinstance(other, DictVar) or isinstance(other, InstanceVar) and isinstance(other.base, DictVar)):
            return ObjectVar(NotImplemented)
        pair = (d, other) if name == "__or__" else (other, d)
        return CALLS.call(frame, ObjectVar(operator.or_), list(pair), {})
    if name == "__ior__" and len(args) == 1 and not kwargs:  # dict.update's, returning the dict
        fills.fill(frame, d, "update", args, {})
        return d
    raise Unsupported(f"dict.{name}")


def tuple_method(frame, t: TupleVar, name: str, args, kwargs) -> Var:
    if name in ("index", "count") and foldable(t):
        return const(fold(getattr(t.python_value(), name), *(python_value(a, f"tuple.{name}") for a in args)))
    fields = getattr(t.py_type, "_fields", None) if issubclass(t.py_type, tuple) else None
    if fields is not None and name == "_replace" and not args:
        unknown = [k for k in kwargs if k not in fields]
        if unknown:
            raise Unsupported(f"{t.py_type.__name__}._replace() got unexpected field names {unknown} "
                              "(the call raises eagerly)")
        return TupleVar([kwargs.get(f, item) for f, item in zip(fields, t.items)], py_type=t.py_type)
    if fields is not None and name == "_asdict" and not args and not kwargs:
        return DictVar(dict(zip(fields, t.items)))
    if t.py_type is torch.Size and name == "numel" and not args and not kwargs and foldable(t):
        return const(t.python_value().numel())
    raise Unsupported(f"tuple.{name} on {describe(t)}")


def tuple_field(t: TupleVar, name: str) -> Var | None:
    """`point.x` on a namedtuple, `result.values` on torch.return_types.max, `point._fields`."""
    fields = getattr(t.py_type, "_fields", None) or getattr(t.py_type, "__match_args__", None)
    if fields and name in fields:
        return t.items[fields.index(name)]
    if fields and name in ("_fields", "_field_defaults"):
        return const(getattr(t.py_type, name))
    return None


def tuple_new(frame, args, kwargs) -> Var:
    """`tuple.__new__(cls, iterable)`, as a namedtuple's `_make` and `__new__` call it."""
    if len(args) != 2 or kwargs or not isinstance(args[0], ObjectVar) or not isinstance(args[0].value, type) \
            or not issubclass(args[0].value, tuple):
        raise Unsupported(f"tuple.__new__({', '.join(map(describe, args))})")
    cls = args[0].value
    if cls is not tuple and not hasattr(cls, "_fields"):
        raise Unsupported(f"tuple.__new__ of {cls.__qualname__}")
    return TupleVar(unpack(frame, args[1]), py_type=cls)


OBJECTS.fill(generic_getattr=generic_getattr, raw_setattr=raw_setattr_object)
