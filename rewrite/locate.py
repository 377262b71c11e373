"""How to find a generated entry's constants again in another process (the persistent cache).

A compiled entry refers to objects by name (`___Linear`, `___forward`, `___float32`): what
they are in this process. To load the entry in a new one, each is written down as a
*locator*, a small tuple of strings and numbers that `marshal` stores, and found again from
it on load:

    ("lit", 3)                                   a literal: itself
    ("module", "torch.nn.functional")           a module already imported (never imported here)
    ("name", "torch.nn.modules.linear", "Linear.forward", ("<hash>", "<defaults>"))
                                                 getattr along the qualname from the module; a
                                                 Python function's fingerprint (its code's
                                                 hash, its defaults) must be the same
    ("wrapped", "transformers...", "GPT2LMHeadModel.forward", 2, (...))
                                                 the same, then 2 steps along `__wrapped__`
                                                 (a function under functools.wraps decorators)
    ("dtype", "float32"), ("device", "cuda:0"), ("torch", "strided")
    ("enum", <class's locator>, "RED")
    ("op", "aten::add", "Tensor")                a torch operator (overload, or "" for the packet)
    ("attr", <class's locator>, "dtype")         a descriptor in a class's own namespace (property,
                                                 staticmethod, classmethod, cached_property)
    ("code", "___forward")                       the code object of another constant (a function)
    ("classcode", "___Output", "__init__", 0, "<hash>")
                                                 the code of the first function along a method
                                                 (it, then what it wraps) in the namespace of a
                                                 class that is another constant (a dataclass's
                                                 __init__); its hash must be the same
    ("codeof", "transformers...", "GPT2Attention.forward", (0, 3), "<hash>")
                                                 the code object along that path -- the first
                                                 function along the one of that name in the
                                                 module of its file, then its 3rd constant (a
                                                 nested function's code) -- with that hash
    ("globals", "transformers.utils.generic")   a module's namespace (`f.__globals__ is ___c`)
    ("tuple", (<locator>, ...))                  a tuple of located objects
    ("rewrite", "NEXT")                          rewrite's own singletons

An object with no rule (an instance, a closure, a lambda, a tensor constant) has no locator:
`locate` returns None and the entry is not persisted. `find` raises `Lost` for a locator that
finds nothing, or something else than was written down: that entry is then a miss, never a
wrong hit. Where a locator names a code object's hash, `find` checks it at once, or, given a
list, leaves the code there: an entry's loader checks all its code objects with one hash
(`check_codes`: one `marshal.dumps` of them all, a few µs each, against one per code object).
Entry-specific objects (the tensor checker, a GraphFailure) are made by `rewrite/persist.py`
from their own records.
"""
from __future__ import annotations

import enum
import hashlib
import itertools
import marshal
import sys
import types
import weakref

import torch

from .ops.log_calls import DEFERRED
from .slot import MISS, NEXT

_LITERALS = (type(None), bool, int, float, complex, str, bytes)


class Lost(Exception):
    """A constant cannot be found again (the entry that needs it is a miss)."""


INTERNAL = {"NEXT": NEXT, "MISS": MISS, "DEFERRED": DEFERRED}


def marshallable(obj) -> bool:
    """A value `marshal` writes and reads back equal, of the same type: a literal locator's."""
    if type(obj) in _LITERALS or obj is Ellipsis:
        return True
    return type(obj) in (tuple, frozenset) and all(marshallable(x) for x in obj)


_HASHES: dict[int, tuple] = {}  # id(code) -> (weak reference to it, code_hash): this process's (by id: a
# code object's own hash walks all of it, tens of µs for a large function)


def code_hash(code) -> str:
    """A hash of everything a code object is (bytecode, constants -- nested code objects by
    their own hash --, names, flags, file, line numbers), the same in every process (marshal's
    default format is not: its references depend on reference counts)."""
    held = _HASHES.get(id(code))
    if held is not None and held[0]() is code:
        return held[1]
    digest = _marshalled_hash(code)
    if digest is None:
        digest = _walked_hash(code)
    key = id(code)
    _HASHES[key] = (weakref.ref(code, lambda _, key=key: _HASHES.pop(key, None)), digest)
    return digest


def _marshalled_hash(code) -> str | None:
    """code_hash from marshal's bytes of `code` in format 0 (no references, no interning flags),
    the same in every process (since Python 3.11 marshal writes a set's items sorted, whatever
    the string hashes: CPython PR 27926); twice as fast as the walk. None where a constant is
    one marshal cannot write (a rewritten code's prologue holds its slot)."""
    try:
        return hashlib.sha256(marshal.dumps(code, 0)).hexdigest()
    except ValueError:
        return None


def _walked_hash(code) -> str:
    """code_hash, field by field (see _marshalled_hash)."""
    h = hashlib.sha256(code.co_code)
    h.update(code.co_linetable)
    h.update(code.co_exceptiontable)
    h.update(repr((code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount, code.co_nlocals,
                   code.co_stacksize, code.co_flags, code.co_firstlineno, code.co_names, code.co_varnames,
                   code.co_freevars, code.co_cellvars, code.co_filename, code.co_name, code.co_qualname)).encode())
    for const in code.co_consts:
        _feed(h, const)
    return h.hexdigest()


def _feed(h, const) -> None:
    """Add a code constant to hash `h`, the same way in every process."""
    t = type(const)
    if t is str:
        h.update(b"s%d:" % len(const))
        h.update(const.encode("utf-8", "surrogatepass"))
    elif t is bytes:
        h.update(b"b%d:" % len(const))
        h.update(const)
    elif t is types.CodeType:
        h.update(b"c" + code_hash(const).encode())
    elif t is tuple:
        h.update(b"t%d(" % len(const))
        for c in const:
            _feed(h, c)
        h.update(b")")
    elif t is frozenset:  # (set order depends on string hashes: per process)
        inner = []
        for c in const:
            sub = hashlib.sha256()
            _feed(sub, c)
            inner.append(sub.digest())
        h.update(b"f%d(" % len(const) + b"".join(sorted(inner)) + b")")
    elif marshallable(const):
        h.update(f"{t.__name__}:{const!r};".encode())
    else:  # an object only generated code holds (a rewritten code's prologue: its slot, NEXT, ...): by
        # its kind and name, as its repr may hold an address
        h.update(f"<{t.__module__}.{t.__qualname__} {getattr(const, '__qualname__', '')}>".encode())


def fingerprint(fn) -> tuple:
    """What makes a Python function found by name the one an entry was compiled against: its
    code's hash (code_hash: bytecode, constants, names, line numbers) and its defaults (their
    values if literals, else their types); () for an object without code."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return ()
    return code_hash(code), _defaults(fn)


def _defaults(fn) -> str:
    if not fn.__defaults__ and not fn.__kwdefaults__:
        return ""
    defaults = [*(fn.__defaults__ or ()), *sorted((fn.__kwdefaults__ or {}).items())]
    return repr([d if marshallable(d) else type(d).__qualname__ for d in defaults])


def _checked(code, digest: str, codes: list | None):
    """`code`, if its hash is `digest` (else Lost) -- or left in `codes` to be checked with the
    rest of the entry's (check_codes)."""
    if codes is not None:
        codes.append((code, digest))
    elif code_hash(code) != digest:
        raise Lost(f"{code.co_qualname} changed since the entry was compiled")
    return code


def codes_digest(codes: list) -> str | None:
    """One hash of the code objects of `codes` ((code, its hash) pairs, as find leaves them):
    SHA-256 of marshal's format-0 bytes of them all (each once, in order), or None where marshal
    cannot write one (see _marshalled_hash)."""
    unique = tuple({id(code): code for code, _ in codes}.values())
    try:
        return hashlib.sha256(marshal.dumps(unique, 0)).hexdigest()
    except ValueError:
        return None


def check_codes(codes: list, digest: str | None) -> None:
    """Raise Lost unless every code object of `codes` has its hash: all at once where `digest`
    (codes_digest, when the record was made) is theirs, else one by one (naming the changed one)."""
    if digest is not None and codes_digest(codes) == digest:
        return
    for code, expected in codes:
        _checked(code, expected, None)


def _walk(module: str, qualname: str):
    obj = sys.modules.get(module)
    if obj is None:
        raise Lost(f"module {module} is not imported")
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def _by_name(obj):
    module = getattr(obj, "__module__", None) or getattr(getattr(obj, "__objclass__", None), "__module__", None)
    qualname = getattr(obj, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str) or "<" in qualname:
        return None
    try:
        found = _walk(module, qualname)
    except Exception:
        return None
    print_ = fingerprint(obj) if isinstance(obj, types.FunctionType) else ()
    if found is obj:
        return ("name", module, qualname, print_)
    for depth in range(1, 9):  # a function under decorators (functools.wraps): the name is the outermost's
        found = getattr(found, "__wrapped__", None)
        if found is None:
            return None
        if found is obj:
            return ("wrapped", module, qualname, depth, print_)
    return None


_TYPES = {id(v): k for k, v in vars(types).items() if isinstance(v, type)}  # FunctionType, ... (named "function")


def _class_attribute(obj):
    """A descriptor (property, staticmethod, classmethod, cached_property) of a class, found
    through the function it wraps: ("attr", <the class's locator>, name)."""
    inner = getattr(obj, "fget", None) or getattr(obj, "__func__", None) or getattr(obj, "func", None)
    qualname = getattr(inner, "__qualname__", None)
    module = getattr(inner, "__module__", None)
    if not isinstance(qualname, str) or "." not in qualname or not isinstance(module, str):
        return None
    owner, _, name = qualname.rpartition(".")
    try:
        cls = _walk(module, owner)
    except Exception:
        return None
    loc = _by_name(cls) if isinstance(cls, type) else None
    if loc is None or vars(cls).get(name) is not obj:
        return None
    return ("attr", loc, name)


def locate(obj, consts: dict):
    """The locator of `obj` (one of `consts`, name -> object), or None."""
    if marshallable(obj):
        return ("lit", obj)
    for name, value in INTERNAL.items():
        if obj is value:
            return ("rewrite", name)
    if isinstance(obj, types.ModuleType):
        return ("module", obj.__name__) if sys.modules.get(obj.__name__) is obj else None
    if isinstance(obj, torch.dtype):
        return ("dtype", str(obj).rpartition(".")[2])
    if isinstance(obj, torch.device):
        return ("device", str(obj))
    if isinstance(obj, (torch.layout, torch.memory_format)):
        name = str(obj).rpartition(".")[2]
        return ("torch", name) if getattr(torch, name, None) is obj else None
    if isinstance(obj, enum.Enum):
        cls = _by_name(type(obj))
        return ("enum", cls, obj.name) if cls is not None and type(obj)[obj.name] is obj else None
    if isinstance(obj, torch._ops.OpOverload):
        return ("op", obj._schema.name, obj._overloadname)
    if isinstance(obj, torch._ops.OpOverloadPacket):
        return ("op", obj._qualified_op_name, "")
    if type(obj) is dict:
        return _globals_locator(obj)
    if type(obj) is tuple:  # (of classes, say: `tuple(map(type, args)) == ___c`)
        items = tuple(locate(x, consts) for x in obj)
        return ("tuple", items) if None not in items else None
    if isinstance(obj, types.CodeType):
        for name, value in consts.items():  # (the code of a function the entry holds: checked with it)
            if getattr(value, "__code__", None) is obj and isinstance(value, types.FunctionType):
                return ("code", name)
        for name, value in consts.items():
            if isinstance(value, type):  # (a method the class made: a dataclass's generated __init__)
                for attr, member in vars(value).items():
                    for i, fn in enumerate(_functions_along(member)):
                        if fn.__code__ is obj:
                            return ("classcode", name, attr, i, code_hash(obj))
        return _code_locator(obj)
    if isinstance(obj, type) and id(obj) in _TYPES and getattr(types, _TYPES[id(obj)]) is obj:
        return ("name", "types", _TYPES[id(obj)], "")
    return _by_name(obj) or _class_attribute(obj)


_FILES: dict[str, str] = {}  # a module's file -> its name (sys.modules scanned for a file not known)
_NAMESPACES: dict[int, str] = {}  # id of a module's __dict__ -> its name (scanned with the files)


def _scan_modules() -> None:
    for mname, module in list(sys.modules.items()):
        f = getattr(module, "__file__", None)
        if isinstance(f, str):
            _FILES[f] = mname
        if isinstance(module, types.ModuleType):
            _NAMESPACES[id(vars(module))] = mname


def _module_of_file(filename: str) -> str | None:
    if filename.startswith("<frozen ") and filename.endswith(">"):  # (a frozen stdlib module: no __file__)
        name = filename[len("<frozen "):-1]
        return name if name in sys.modules else None
    name = _FILES.get(filename)
    if name is None or getattr(sys.modules.get(name), "__file__", None) != filename:
        _scan_modules()
        name = _FILES.get(filename)
    return name


def _globals_locator(namespace: dict):
    """A module's namespace (`f.__globals__ is ___c`): ("globals", its name)."""
    def module():
        found = sys.modules.get(_NAMESPACES.get(id(namespace), ""))
        return found if isinstance(found, types.ModuleType) and vars(found) is namespace else None
    if module() is None:
        _scan_modules()
    return ("globals", _NAMESPACES[id(namespace)]) if module() is not None else None


def _functions_along(obj):
    """The Python functions `obj` is or wraps (decorators' __wrapped__, a property's fget, a
    method's or staticmethod's __func__, a partial's func, a wrapper's closure), nearest first."""
    for _ in range(10):
        if isinstance(obj, types.FunctionType):
            yield obj
            for cell in obj.__closure__ or ():  # (a wrapper that keeps what it wraps in a cell)
                try:
                    inner = cell.cell_contents
                except ValueError:
                    continue
                if isinstance(inner, types.FunctionType):
                    yield inner
        obj = getattr(obj, "__wrapped__", None) or getattr(obj, "fget", None) or \
            getattr(obj, "__func__", None) or getattr(obj, "func", None)
        if obj is None:
            return


def _path_within(code, target) -> tuple | None:
    """The indices along co_consts from `code` to the code object `target` (nested in it), or None."""
    if code is target:
        return ()
    for i, const in enumerate(code.co_consts):
        if isinstance(const, types.CodeType):
            path = _path_within(const, target)
            if path is not None:
                return (i, *path)
    return None


def _code_locator(code):
    """A code object read by the guards (`f.__code__ is ___c`): ("codeof", the module of its
    file, the qualname of the outermost function it is in, the path to it, its hash)."""
    module = _module_of_file(code.co_filename)
    top = getattr(code, "co_qualname", code.co_name).split(".<locals>.")[0]
    if module is None or "<" in top:
        return None
    try:
        functions = list(_functions_along(_walk(module, top)))
    except Exception:  # (not reachable by that name: no locator)
        return None
    for i, fn in enumerate(functions):
        path = _path_within(fn.__code__, code)
        if path is not None:
            return ("codeof", module, top, (i, *path), code_hash(code))
    return None


def _code_at(module: str, top: str, path: tuple):
    """The code object along `path` from the function named `top` in `module` (see _code_locator)."""
    fn = next(itertools.islice(_functions_along(_walk(module, top)), path[0], None), None)
    if fn is None:
        raise Lost(f"{module}.{top} is not the function the entry was compiled against")
    code = fn.__code__
    for i in path[1:]:
        code = code.co_consts[i]
        if not isinstance(code, types.CodeType):
            raise Lost(f"{module}.{top} is not the function the entry was compiled against")
    return code


def find(loc, found: dict, codes: list | None = None):
    """The object `loc` locates (`found`: the entry's constants found so far, by name). The
    hashes of the code objects it names are checked here, or, where `codes` is a list, left
    there (see _checked)."""
    rule = _RULES.get(loc[0])
    if rule is None:
        raise Lost(f"no rule finds {loc!r}")
    try:
        return rule(loc, found, codes)
    except Lost:
        raise
    except Exception as e:
        raise Lost(f"{loc!r}: {type(e).__name__}: {e}") from None


def _module(loc, found, codes):
    module = sys.modules.get(loc[1])
    if module is None:
        raise Lost(f"module {loc[1]} is not imported")
    return module


def _dtype(loc, found, codes):
    obj = getattr(torch, loc[1])
    if not isinstance(obj, torch.dtype):
        raise Lost(f"torch.{loc[1]} is not a dtype")
    return obj


def _op(loc, found, codes):
    namespace, _, name = loc[1].partition("::")
    packet = getattr(getattr(torch.ops, namespace), name)
    return getattr(packet, loc[2]) if loc[2] else packet


def _classcode(loc, found, codes):
    fn = next(itertools.islice(_functions_along(vars(found[loc[1]])[loc[2]]), loc[3], None), None)
    if fn is None:
        raise Lost(f"{loc[2]} of {found[loc[1]].__qualname__} changed since the entry was compiled")
    return _checked(fn.__code__, loc[4], codes)


def _named(loc, found, codes):
    obj = _walk(loc[1], loc[2])
    for _ in range(loc[3] if loc[0] == "wrapped" else 0):
        obj = obj.__wrapped__
    if not loc[-1]:
        return obj
    if isinstance(obj, types.FunctionType) and _defaults(obj) == loc[-1][1]:
        _checked(obj.__code__, loc[-1][0], codes)
        return obj
    raise Lost(f"{loc[1]}.{loc[2]} changed since the entry was compiled")


_RULES = {  # a locator's kind -> (locator, found, codes) -> the object (see the module's docstring)
    "lit": lambda loc, found, codes: loc[1],
    "rewrite": lambda loc, found, codes: INTERNAL[loc[1]],
    "module": _module,
    "globals": lambda loc, found, codes: vars(_module(loc, found, codes)),
    "dtype": _dtype,
    "device": lambda loc, found, codes: torch.device(loc[1]),
    "torch": lambda loc, found, codes: getattr(torch, loc[1]),
    "enum": lambda loc, found, codes: find(loc[1], found, codes)[loc[2]],
    "op": _op,
    "tuple": lambda loc, found, codes: tuple(find(x, found, codes) for x in loc[1]),
    "attr": lambda loc, found, codes: vars(find(loc[1], found, codes))[loc[2]],
    "code": lambda loc, found, codes: found[loc[1]].__code__,
    "classcode": _classcode,
    "codeof": lambda loc, found, codes: _checked(_code_at(loc[1], loc[2], loc[3]), loc[4], codes),
    "name": _named,
    "wrapped": _named,
}
