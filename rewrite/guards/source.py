"""Where a value comes from, as a Python expression over the prologue's arguments.

A guard function and a compiled entry both take exactly what the prologue passes: the
function's arguments by name, then one cell per free variable. `G` is the function's
globals dict, bound when the guard is generated. So `LocalSource("x").expr()` is `x`,
`AttrSource(LocalSource("self"), "w").expr()` is `self.w`, `GlobalSource("k").expr()` is
`G['k']` and the contents of a free variable's cell `c` is
`CellContentsSource(LocalSource('c'))`, rendered `c.cell_contents`.
"""
from __future__ import annotations

import contextlib
import keyword
import math
from dataclasses import dataclass

from ..errors import Unsupported

GLOBALS = "G"  # the name of the globals dict inside generated code
ODICT = "__import__('collections').OrderedDict"
FROM_NUMPY = "__import__('torch').from_numpy"  # (generated code names builtins only)
_names: dict | None = None  # while a guard closure is generated: source -> the local holding its value
_used: set | None = None  # the named sources the expressions rendered so far read
_ids: dict | None = None  # id(source) -> its local or None, for the sources `_names` was made from
_UNKNOWN = object()


def is_identifier(name) -> bool:
    """Safe to write into generated code as a name: a str, ASCII (Python folds other
    identifiers to NFKC, so `o.ﬁeld` in source reads `o.field`), an identifier, no keyword."""
    return type(name) is str and name.isascii() and name.isidentifier() and not keyword.iskeyword(name)


def py_str(text: str) -> str:
    """A string literal for `text` (quotes, newlines, NUL, emoji: all escaped); a str
    subclass's own __repr__ is never called."""
    return str.__repr__(text)


def attr_expr(base: str, attr: str) -> str:
    """`base.attr`, or `getattr(base, '...')` for a name that is not a plain identifier."""
    return f"{base}.{attr}" if is_identifier(attr) else f"getattr({base}, {py_str(attr)})"


def is_literal(obj) -> bool:
    """True when `repr(obj)` evaluates back to an equal object of the same type."""
    t = type(obj)
    if t is float:
        return math.isfinite(obj)
    if t in (int, bool, str, bytes, type(None)):
        return True
    if t is tuple:
        return all(is_literal(v) for v in obj)
    return obj is Ellipsis


def key_expr(key) -> str:
    """A subscript's key written as a literal (only keys whose repr is one: see ItemSource)."""
    if not is_literal(key):
        raise ValueError(f"{type(key).__name__} key without a literal form")
    return py_str(key) if type(key) is str else repr(key)


def comment(text: str) -> str:
    """`text` made safe for a `#` comment of generated code: one line, printable ASCII."""
    text = str.__str__(text)
    if text.isascii() and text.isprintable():  # (the common case: as it is)
        return text[:200]
    return "".join(c if c.isascii() and c.isprintable() else "?" for c in text)[:200]


def param_name(name: str) -> str:
    """The parameter name a user's local gets in generated code.

    Injective, and never `G` or a `___` helper name: `G` becomes `L_G`, a name that
    already starts with `L_` or `___` gets one more `L_` in front, all others stay.
    """
    if not is_identifier(name):  # locals such as '.0' or '@py_assert1' (resume functions take them)
        return "L_" + "".join(c if c.isascii() and (c.isalnum() or c == "_") else f"_x{ord(c):x}_" for c in name)
    if name == GLOBALS or name.startswith(("L_", "___")):
        return "L_" + name
    return name


class Source:
    def expr(self) -> str:
        raise NotImplementedError

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "expr" in cls.__dict__:
            cls.expr = _shared(cls.__dict__["expr"])

    def bases(self) -> list["Source"]:
        """The sources this one is read through, nearest first."""
        base = getattr(self, "base", None)
        return [base, *base.bases()] if isinstance(base, Source) else []

    def name(self) -> str:
        """How the user would write it (used in messages)."""
        return self.expr()

    def root(self) -> "Source":
        return self


def _shared(render):
    """`expr()` that, while a guard closure is generated, names a value read more than once
    by the local it was bound to (see `shared_names`)."""
    def expr(self):
        if _names is not None:
            name = _ids.get(id(self), _UNKNOWN) if _ids is not None else _UNKNOWN
            if name is _UNKNOWN:  # (a source made since: found by equality, a hash in Python)
                name = _names.get(self)
            if name is not None:
                _used.add(self)
                return name
        return render(self)
    expr.__wrapped__ = render
    return expr


@contextlib.contextmanager
def shared_names(names: dict, ids: dict | None = None):
    """Render source expressions with `names` (source -> local) substituted; yields the set
    of named sources rendered so far (the caller binds each before its first use). `ids`:
    id(source) -> its local or None, for the very source objects that will be rendered (each
    then found by its id, not by hashing it)."""
    global _names, _used, _ids
    saved = _names, _used, _ids
    _names, _used, _ids = names, set(), ids
    try:
        yield _used
    finally:
        _names, _used, _ids = saved


def source_kind(cls):
    """`@dataclass(frozen=True)` for a Source kind, its hash computed once per object, as it is
    made: sources nest (`a.b.c[0].d`), and the trace and guard generation hash each of them
    many times (GPT-2's trace: 24,000 times, of 6,700 sources)."""
    own = cls.__dict__.get("__post_init__")  # (a kind's own checks: ItemSource refuses a key with no literal)
    checks = own if own is not None else getattr(getattr(cls, "__post_init__", None), "checks", None)

    def __post_init__(self):
        if checks is not None:
            checks(self)
        object.__setattr__(self, "_hash", fields_hash(self))
    __post_init__.checks = checks  # (what a kind made from this one runs first too)
    cls.__post_init__ = __post_init__  # (before dataclass(): the __init__ it makes calls it)
    cls = dataclass(frozen=True)(cls)
    fields_hash = cls.__hash__

    def __hash__(self):
        return self._hash
    cls.__hash__ = __hash__
    bases_of = cls.bases

    def bases(self):  # (read for every part of every guard's source: computed once per source)
        b = self.__dict__.get("_bases")
        if b is None:
            b = tuple(bases_of(self))
            object.__setattr__(self, "_bases", b)
        return b
    cls.bases = bases
    # (pickled and copied without what is computed: str hashes vary between processes)
    cls.__getstate__ = lambda self: {k: v for k, v in self.__dict__.items() if k not in ("_hash", "_bases")}

    def __setstate__(self, state):
        self.__dict__.update(state)
        object.__setattr__(self, "_hash", fields_hash(self))
    cls.__setstate__ = __setstate__
    return cls


def raw_expr(source: Source) -> str:
    """The source's own expression (its bases may still be named)."""
    return type(source).expr.__wrapped__(source)


@source_kind
class LocalSource(Source):
    local: str

    def expr(self) -> str:
        return param_name(self.local)

    def name(self) -> str:
        return self.local


@source_kind
class GlobalSource(Source):
    global_name: str

    def expr(self) -> str:
        return f"{GLOBALS}[{py_str(self.global_name)}]"

    def name(self) -> str:
        return self.global_name


@source_kind
class GlobalsSource(Source):
    """The function's globals dict itself."""

    def expr(self) -> str:
        return GLOBALS

    def name(self) -> str:
        return "globals()"


@source_kind
class AttrSource(Source):
    base: Source
    attr: str

    def expr(self) -> str:
        return attr_expr(self.base.expr(), self.attr)

    def name(self) -> str:
        return f"{self.base.name()}.{self.attr}"

    def root(self) -> Source:
        return self.base.root()


@source_kind
class ObjectAttrSource(AttrSource):
    """`object.__getattribute__(base, 'attr')`: the attribute as Python's generic lookup finds
    it, past a class's own `__getattribute__` (which the trace ran; a guard or the entry
    reading it must not run it again)."""

    def expr(self) -> str:
        return f"object.__getattribute__({self.base.expr()}, {py_str(self.attr)})"


@source_kind
class BaseCopySource(Source):
    """`dict.copy(base)` / `list.copy(base)`: what a dict or list subclass holds as that builtin,
    copied past the subclass's own methods (`__getitem__`, `get`, `__iter__`, ...). An OrderedDict
    subclass's ("odict") in its links' order, through OrderedDict's own `items`."""
    base: Source
    builtin: str  # "dict", "list" or "odict"

    def expr(self) -> str:
        if self.builtin == "odict":
            return f"dict({ODICT}.items({self.base.expr()}))"
        return f"{self.builtin}.copy({self.base.expr()})"

    def name(self) -> str:
        return f"{self.builtin}.copy({self.base.name()})"

    def root(self) -> Source:
        return self.base.root()


@source_kind
class ContextVarSource(Source):
    """`base.get(NotImplemented)`: what ContextVar `base` holds in the current context
    (NotImplemented: no value set there)."""
    base: Source

    def expr(self) -> str:
        return f"{self.base.expr()}.get(NotImplemented)"

    def name(self) -> str:
        return f"{self.base.name()}.get()"

    def root(self) -> Source:
        return self.base.root()


@source_kind
class WeakrefSource(Source):
    """`base()` of a weak reference `base` (its type guarded): what it refers to, or None."""
    base: Source

    def expr(self) -> str:
        return f"{self.base.expr()}()"

    def name(self) -> str:
        return f"{self.base.name()}()"

    def root(self) -> Source:
        return self.base.root()


@source_kind
class TypeSource(Source):
    """`type(base)`: the class attribute lookup starts from (not `base.__class__`, which a
    class's `__getattribute__` or a `__class__` property could answer)."""
    base: Source

    def expr(self) -> str:
        return f"type({self.base.expr()})"

    def name(self) -> str:
        return f"type({self.base.name()})"

    def root(self) -> Source:
        return self.base.root()


@source_kind
class ItemSource(Source):
    base: Source
    index: object  # a key whose repr is a literal: int, str, bool, None, finite float, tuple of them

    def __post_init__(self):
        if not is_literal(self.index):  # (an object's repr is not code to paste: a key from data)
            raise Unsupported(f"an item of {self.base.name()} whose key ({type(self.index).__name__}) "
                              "has no literal form")

    def expr(self) -> str:
        return f"{self.base.expr()}[{key_expr(self.index)}]"

    def name(self) -> str:
        return f"{self.base.name()}[{self.index!r}]"

    def root(self) -> Source:
        return self.base.root()


@source_kind
class DictKeysSource(Source):
    """`list(base)`: a dict's keys, in its order (of a dict, OrderedDict or defaultdict that
    came in whose keys are not all literals: tensors, modules, objects). Named once in a guard
    and read by index (`ItemSource(DictKeysSource(d), i)`)."""
    base: Source

    def expr(self) -> str:
        return f"list({self.base.expr()})"

    def name(self) -> str:
        return f"list({self.base.name()})"

    def root(self) -> Source:
        return self.base.root()


@source_kind
class DictItemSource(Source):
    """`base[<key>]` for a key without a literal form, read through its own source (a
    DictKeysSource item, say): `state[list(state)[0]]`."""
    base: Source
    key: Source

    def expr(self) -> str:
        return f"{self.base.expr()}[{self.key.expr()}]"

    def bases(self) -> list[Source]:
        """(the key's sources too: a guard binds them before this one)"""
        return [self.base, *self.base.bases(), self.key, *self.key.bases()]

    def name(self) -> str:
        return f"{self.base.name()}[{self.key.name()}]"

    def root(self) -> Source:
        return self.base.root()


@source_kind
class ModuleAttrSource(Source):
    """`module.name` for a submodule, parameter or buffer, read from the dict nn.Module keeps
    it in (`module._modules['name']`): what `module.name` gives when nothing shadows it, at
    a dict lookup's cost instead of a call of nn.Module.__getattr__."""
    base: Source
    store: str  # "_modules", "_parameters" or "_buffers"
    attr: str

    def expr(self) -> str:
        return f"{self.base.expr()}.{self.store}[{py_str(self.attr)}]"

    def name(self) -> str:
        return f"{self.base.name()}.{self.attr}"

    def root(self) -> Source:
        return self.base.root()


@source_kind
class SizeSource(Source):
    """`tensor.size(dim)`: a dynamic size (read as `tensor.shape[dim]`: half the cost, no
    argument parsing)."""
    base: Source
    dim: int

    def expr(self) -> str:
        return f"{self.base.expr()}.shape[{self.dim}]"

    def name(self) -> str:
        return f"{self.base.name()}.size({self.dim})"

    def root(self) -> Source:
        return self.base.root()


@source_kind
class ArrayTensorSource(Source):
    """`torch.from_numpy(base)`: the tensor a NumPy array that came in is read as (its memory)."""
    base: Source

    def expr(self) -> str:
        return f"{FROM_NUMPY}({self.base.expr()})"

    def name(self) -> str:
        return self.base.name()

    def root(self) -> Source:
        return self.base.root()


@source_kind
class CellContentsSource(Source):
    """`<base>.cell_contents` where base evaluates to a cell (closures of inlined functions)."""
    base: Source

    def expr(self) -> str:
        return f"{self.base.expr()}.cell_contents"

    def name(self) -> str:
        return self.base.name()

    def root(self) -> Source:
        return self.base.root()
