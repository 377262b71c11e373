"""Guard kinds: one fact about one source that must hold for a cache entry to be reused.

Each kind renders as Python boolean expressions (`checks`) and, on the slow path, says in
user terms why it failed (`failure`). `Consts` names the objects the expressions need
(`___c0`, ...) and binds them as closure variables of the generated guard function.
"""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field

import torch

from .source import GLOBALS, Source, is_identifier, is_literal, key_expr, py_str

LITERAL_TYPES = (int, float, bool, str, bytes, complex, type(None))


class Consts:
    """Names for the objects generated code refers to; literals are written inline."""

    def __init__(self):
        self.values: dict[str, object] = {}
        self._ids: dict[int, str] = {}
        self._next: dict[str, int] = {}  # name base -> the suffix to try next (no probe from 1 each time)

    def ref(self, obj) -> str:
        if is_literal(obj):
            return repr(obj)
        key = id(obj)
        if key not in self._ids:
            base = "___" + _hint(obj)
            i = self._next.get(base, 0)
            name = f"{base}_{i}" if i else base
            while name in self.values:
                i += 1
                name = f"{base}_{i}"
            self._next[base] = i + 1
            self._ids[key] = name
            self.values[name] = obj
        return self._ids[key]


def _hint(obj) -> str:
    """A readable identifier for a constant in generated code: ___Tensor, ___float32, ..."""
    if isinstance(obj, torch.dtype):
        return str(obj).rpartition(".")[2]
    name = getattr(obj, "__name__", None) if isinstance(obj, type) or callable(obj) else None
    if is_identifier(name):  # (ASCII: `___ﬁeld` would read as `___field`, another constant's name)
        return name
    return "c"


class Guard:
    source: Source
    priority = 5  # lower runs first among guards on sources of the same depth

    def checks(self, c: Consts) -> list[str]:
        raise NotImplementedError

    def failure(self, value) -> str | None:
        """Why `value` (the source's value now) fails this guard, or None if it passes."""
        raise NotImplementedError

    def read(self, globals_: dict, scope: dict):
        """The source's value now, evaluated as the generated code would (slow path)."""
        return eval(self.source.expr(), {GLOBALS: globals_}, scope)

    def depth(self) -> int:
        """How many sources the guard's is read through (`bases`: computed once per source)."""
        bases = getattr(self.source, "bases", None)
        return len(bases()) if bases is not None else 0


@dataclass(frozen=True)
class EqualsMatch(Guard):
    """A Python scalar seen while tracing: same type, same value."""
    source: Source
    value: object
    priority = 0

    def checks(self, c):
        e, v = self.source.expr(), self.value
        if v is None or type(v) is bool:
            return [f"{e} is {v!r}"]
        tname = type(v).__name__ if type(v) in LITERAL_TYPES else c.ref(type(v))
        if type(v) is float and math.isnan(v):
            return [f"type({e}) is float", f"{e} != {e}"]
        if type(v) is float and v == 0.0:  # -0.0 == 0.0, but 1 / -0.0 is -inf
            return [f"type({e}) is float", f"{e} == 0.0", f"{c.ref(math.copysign)}(1.0, {e}) == {math.copysign(1.0, v)!r}"]
        return [f"type({e}) is {tname}", f"{e} == {c.ref(v)}"]

    def failure(self, value):
        v = self.value
        if type(value) is not type(v):
            return f"type({self.source.name()}) is {type(v).__name__} (actual {type(value).__name__})"
        if type(v) is float:
            same = (value != value) if math.isnan(v) else (value == v and math.copysign(1, value) == math.copysign(1, v))
        else:
            same = value == v
        return None if same else f"{self.source.name()} == {v!r} (actual {value!r})"


@dataclass(frozen=True)
class TypeMatch(Guard):
    source: Source
    type: type
    priority = 1

    def checks(self, c):
        return [f"type({self.source.expr()}) is {c.ref(self.type)}"]

    def failure(self, value):
        if type(value) is self.type:
            return None
        return f"type({self.source.name()}) is {self.type.__qualname__} (actual {type(value).__qualname__})"


@dataclass(frozen=True, eq=False)
class IdMatch(Guard):
    """The very object seen while tracing (functions, modules, classes)."""
    source: Source
    obj: object
    priority = 2

    def __eq__(self, other):
        return type(other) is IdMatch and other.source == self.source and other.obj is self.obj

    def __hash__(self):
        return hash((self.source, id(self.obj)))

    def checks(self, c):
        return [f"{self.source.expr()} is {c.ref(self.obj)}"]

    def failure(self, value):
        if value is self.obj:
            return None
        return f"{self.source.name()} is not the object seen while tracing ({_short(self.obj)}, now {_short(value)})"


@dataclass(frozen=True)
class ClassAttrMatch(Guard):
    """`cls.<name>` is the object seen while tracing, for a class the trace pinned an object's
    type to (a TypeMatch): one check per class however many of its instances the call used --
    each module's `forward`, looked up on its class."""
    cls: type
    name: str
    obj: object
    source: Source = None  # (made from the fields: for ordering and messages)
    priority = 2

    def __post_init__(self):
        if self.source is None:
            object.__setattr__(self, "source", _StateSource(f"{self.cls.__qualname__}.{self.name}"))

    def checks(self, c):
        return [f"{c.ref(self.cls)}.{self.name} is {c.ref(self.obj)}"]

    def read(self, globals_, scope):
        return getattr(self.cls, self.name)

    def failure(self, value):
        if value is self.obj:
            return None
        return f"{self.source.name()} is not the object seen while tracing ({_short(self.obj)}, now {_short(value)})"


@dataclass(frozen=True)
class AliasMatch(Guard):
    """Two sources held the very same object while tracing (the graph has one input for both)."""
    source: Source
    other: Source
    priority = 5

    def checks(self, c):
        return [f"{self.source.expr()} is {self.other.expr()}"]

    def read(self, globals_, scope):  # (both sources: the failure is about the pair)
        return tuple(eval(s.expr(), {GLOBALS: globals_}, scope) for s in (self.source, self.other))

    def failure(self, value):
        a, b = value
        return None if a is b else f"{self.source.name()} is no longer the same object as {self.other.name()}"


@dataclass(frozen=True)
class DistinctMatch(Guard):
    """Two sources held different objects while tracing, and the code asked (`a is b`)."""
    source: Source
    other: Source
    priority = 5

    def checks(self, c):
        return [f"{self.source.expr()} is not {self.other.expr()}"]

    read = AliasMatch.read

    def failure(self, value):
        a, b = value
        return None if a is not b else f"{self.source.name()} is now the same object as {self.other.name()}"


@dataclass(frozen=True)
class UnaliasedMatch(Guard):
    """Sources that held pairwise different objects while tracing: objects that came in, that
    the call changes (and the others of their classes it holds) -- what the entry replays
    assumes it (one passed twice would see both writes) --, or a group of DistinctMatch pairs
    (codegen._merge_distinct)."""
    source: Source
    others: tuple
    priority = 6

    def checks(self, c):
        ids = ", ".join(f"id({s.expr()})" for s in (self.source, *self.others))
        return [f"len({{{ids}}}) == {1 + len(self.others)}"]

    def read(self, globals_, scope):
        return tuple(eval(s.expr(), {GLOBALS: globals_}, scope) for s in (self.source, *self.others))

    def depth(self) -> int:
        return max(Guard.depth(DistinctMatch(s, s)) for s in (self.source, *self.others))

    def failure(self, value):
        sources = (self.source, *self.others)
        for i, a in enumerate(value):
            for j in range(i):
                if value[j] is a:
                    return f"{sources[i].name()} is now the same object as {sources[j].name()}"
        return None


@dataclass(frozen=True)
class NotInDictMatch(Guard):
    """An attribute resolved on the class is not shadowed by the instance's __dict__."""
    source: Source
    name: str
    raw: bool = False  # the class defines __getattribute__: read the dict past it
    priority = 3

    def checks(self, c):
        if self.raw:
            return [f"{py_str(self.name)} not in object.__getattribute__({self.source.expr()}, '__dict__')"]
        return [f"{py_str(self.name)} not in {self.source.expr()}.__dict__"]

    def read(self, globals_, scope):
        return eval(self.source.expr(), {GLOBALS: globals_}, scope)

    def failure(self, value):
        if self.name in vars(value):
            return f"{self.source.name()}.{self.name} is now set on the instance"
        return None


@dataclass(frozen=True)
class HasAttrMatch(Guard):
    """hasattr(source, name) as it was while tracing (getattr with a default, hasattr)."""
    source: Source
    name: str
    present: bool
    priority = 3

    def checks(self, c):
        return [f"hasattr({self.source.expr()}, {py_str(self.name)}) is {self.present}"]

    def failure(self, value):
        now = hasattr(value, self.name)
        return None if now == self.present else f"hasattr({self.source.name()}, {self.name!r}) is now {now}"


@dataclass(frozen=True)
class NotInMatch(Guard):
    """A name absent from a dict while tracing (a global that would shadow a builtin)."""
    source: Source
    key: str
    priority = 3

    def checks(self, c):
        return [f"{key_expr(self.key)} not in {self.source.expr()}"]

    def failure(self, value):
        return f"{self.key!r} is now in {self.source.name()}" if self.key in value else None


@dataclass(frozen=True)
class MemberMatch(Guard):
    """Whether a constant is in a set that came in (`x in s`, `s` guarded an exact set)."""
    source: Source
    value: object  # a hashable constant (hashed and compared by Python's own rules: no user code)
    present: bool
    priority = 3

    def checks(self, c):
        return [f"({c.ref(self.value)} in {self.source.expr()}) is {self.present}"]

    def failure(self, value):
        now = self.value in value
        return None if now == self.present else f"{self.value!r} in {self.source.name()} is now {now}"


@dataclass(frozen=True)
class DefaultDtypeMatch(Guard):
    """torch.get_default_dtype() as it was while tracing (factories, promotion with Python floats)."""
    dtype: torch.dtype
    source: Source = field(default_factory=lambda: _StateSource("torch.get_default_dtype()"))
    priority = 6

    def checks(self, c):
        c.values["___get_default_dtype"] = torch.get_default_dtype
        return [f"___get_default_dtype() is {c.ref(self.dtype)}"]

    def read(self, globals_, scope):
        return torch.get_default_dtype()

    def failure(self, now):
        return None if now is self.dtype else f"default dtype is {now} (traced with {self.dtype})"


def torch_mode_active() -> bool:
    """Whether a TorchFunctionMode or TorchDispatchMode is active (what the tracer refuses)."""
    return torch._C._is_torch_function_mode_enabled() or torch._C._len_torch_dispatch_stack() > 0


@dataclass(frozen=True)
class ModeActiveMatch(Guard):
    """A TorchFunctionMode or TorchDispatchMode is active (`torch.device("meta")`, a
    FlopCounterMode): what the entry that runs such calls eagerly takes -- only those."""
    source: Source = field(default_factory=lambda: _StateSource("a torch function or dispatch mode"))
    priority = 6

    def checks(self, c):
        c.values["___function_mode"] = torch._C._is_torch_function_mode_enabled
        c.values["___dispatch_modes"] = torch._C._len_torch_dispatch_stack
        return ["(___function_mode() or ___dispatch_modes() > 0)"]

    def read(self, globals_, scope):
        return torch_mode_active()

    def failure(self, active):
        return None if active else "no TorchFunctionMode or TorchDispatchMode is active now"


@dataclass(frozen=True)
class NoFunctionModeMatch(Guard):
    """No TorchFunctionMode is active (`torch.set_default_device`, `with torch.device(...)`):
    the trace ran under none (it refuses one), and such a mode changes what torch's calls
    return. (A TorchDispatchMode makes torch's own tensor check miss.)"""
    source: Source = field(default_factory=lambda: _StateSource("a torch function mode"))
    priority = 6

    def checks(self, c):
        c.values["___function_mode"] = torch._C._is_torch_function_mode_enabled
        return ["not ___function_mode()"]

    def read(self, globals_, scope):
        return torch._C._is_torch_function_mode_enabled()

    def failure(self, active):
        return "a TorchFunctionMode is active now (traced under none)" if active else None


@dataclass(frozen=True)
class NoHandledMatch(Guard):
    """No exception was being handled where the function was called (the trace read what
    `sys.exc_info()` says there: a bare `raise`, an exception's `__context__`)."""
    source: Source = field(default_factory=lambda: _StateSource("sys.exc_info()"))
    priority = 6

    def checks(self, c):
        c.values["___exc_info"] = sys.exc_info
        return ["___exc_info()[1] is None"]

    def read(self, globals_, scope):
        return sys.exc_info()[1]

    def failure(self, now):
        return None if now is None else f"called while {type(now).__name__} is handled (traced with none)"


@dataclass(frozen=True)
class NoHooksMatch(Guard):
    """A module called while tracing has no hooks of its own: the dicts named are all empty."""
    source: Source
    names: tuple  # ("_forward_hooks", ...)
    priority = 3

    def checks(self, c):
        e = self.source.expr()
        return [f"not ({' or '.join(f'{e}.{n}' for n in self.names)})"]

    def failure(self, value):
        present = [n.strip("_").replace("_", " ") for n in self.names if getattr(value, n, None)]
        return f"{self.source.name()} now has {', '.join(present)}" if present else None


@dataclass(frozen=True)
class LenMatch(Guard):
    source: Source
    length: int
    priority = 3

    def checks(self, c):
        return [f"len({self.source.expr()}) == {self.length}"]

    def failure(self, value):
        n = len(value)
        return None if n == self.length else f"len({self.source.name()}) == {self.length} (actual {n})"


@dataclass(frozen=True)
class LiteralTupleMatch(Guard):
    """A tuple of ints, bools, strings and Nones seen while tracing (a module's configuration:
    a convolution's stride, padding, dilation): the same tuple, item by item of the same types.
    Three checks where a type, a length and a type and a value per item were 2 + 2n."""
    source: Source
    value: tuple
    priority = 1

    def checks(self, c):
        e = self.source.expr()
        types = [c.ref(type(v)) if v is None else type(v).__name__ for v in self.value]
        types = f"({types[0]},)" if len(types) == 1 else f"({', '.join(types)})"
        return [f"type({e}) is tuple", f"{e} == {c.ref(self.value)}", f"tuple(map(type, {e})) == {types}"]

    def failure(self, value):
        if type(value) is not tuple:
            return f"type({self.source.name()}) is tuple (actual {type(value).__qualname__})"
        if value != self.value or tuple(map(type, value)) != tuple(map(type, self.value)):
            return f"{self.source.name()} == {self.value!r} (actual {value!r})"
        return None


LITERAL_ITEMS = (int, bool, str, type(None))  # (items a LiteralTupleMatch checks: repr is exact, == is)


@dataclass(frozen=True)
class ItemsMatch(Guard):
    """A mapping's items, in order, each key and value the very object seen (a
    `functools.singledispatch` registry: its classes and their implementations)."""
    source: Source
    items: tuple
    priority = 3

    def checks(self, c):
        return [f"tuple({self.source.expr()}.items()) == {c.ref(self.items)}"]

    def failure(self, value):
        items = tuple(value.items())
        if len(items) != len(self.items) or any(a is not x or b is not y for (a, b), (x, y) in zip(items, self.items)):
            return f"the items of {self.source.name()} changed"
        return None


@dataclass(frozen=True)
class KeysMatch(Guard):
    """A dict's keys, in order."""
    source: Source
    keys: tuple
    priority = 3

    def checks(self, c):
        e = self.source.expr()
        out = [f"tuple({e}) == {c.ref(self.keys)}"]
        if any(type(k) is not str for k in self.keys):  # {1: v} == {True: v}: compare key types too
            out.append(f"tuple(map(type, {e})) == {c.ref(tuple(type(k) for k in self.keys))}")
        return out

    def failure(self, value):
        keys = tuple(value)
        if len(keys) != len(self.keys) or not all(is_literal(k) and k == j and type(k) is type(j)
                                                  for k, j in zip(keys, self.keys)):
            actual = keys if all(is_literal(k) for k in keys) else f"{len(keys)} keys, not all literals"
            return f"keys of {self.source.name()} are {self.keys!r} (actual {actual!r})"[:500]
        return None


@dataclass(frozen=True)
class TensorMatch(Guard):
    """Type, dtype, device, sizes, strides and requires_grad of a tensor."""
    source: Source
    type: type
    dtype: torch.dtype
    device: torch.device
    shape: tuple  # None for a dynamic size
    stride: tuple  # None for a stride that follows dynamic sizes
    requires_grad: bool
    dynamic: bool = False  # some sizes are symbols: the tensor must be contiguous
    priority = 4

    @classmethod
    def of(cls, source: Source, t: torch.Tensor, dynamic_dims=()) -> "TensorMatch":
        shape, stride = tuple(t.shape), tuple(t.stride())
        if dynamic_dims:  # contiguous: stride i is the product of the sizes after i
            shape = tuple(None if i in dynamic_dims else s for i, s in enumerate(shape))
            stride = tuple(None if any(j in dynamic_dims for j in range(i + 1, len(shape))) else s
                           for i, s in enumerate(stride))
        # the stride of a size-1 dim steps over nothing (a slice `ids[:, :4]` of a longer row has
        # any there): not part of the layout, not guarded
        stride = tuple(None if n == 1 else s for n, s in zip(shape, stride))
        return cls(source, type(t), t.dtype, t.device, shape, stride, t.requires_grad, bool(dynamic_dims))

    def checks(self, c):
        e = self.source.expr()
        out = [f"type({e}) is {c.ref(self.type)}", f"{e}.dtype is {c.ref(self.dtype)}"]
        if self.dynamic:
            out.append(f"{e}.dim() == {len(self.shape)}")
            out += [f"{e}.shape[{i}] == {s}" for i, s in enumerate(self.shape) if s is not None]
            out.append(f"{e}.is_contiguous()")
        else:
            out.append(f"{e}.shape == {self.shape!r}")
        if self.dynamic:
            pass  # strides: contiguity, checked above
        elif self.stride == _contiguous_strides(self.shape) and all(s > 1 for s in self.shape):
            # with the shape equal and no size-0/1 dim, contiguous <=> these exact strides
            out.append(f"{e}.is_contiguous()")
        elif None not in self.stride:
            out.append(f"{e}.stride() == {self.stride!r}")
        else:  # (size-1 dims: any stride)
            out += [f"{e}.stride({i}) == {s}" for i, s in enumerate(self.stride) if s is not None]
        dev = self.device
        if dev.type == "cpu":
            out.append(f"{e}.is_cpu")
        elif dev.type == "cuda":
            out.append(f"{e}.is_cuda and {e}.get_device() == {dev.index or 0}")
        else:
            out.append(f"{e}.device == {c.ref(dev)}")
        out.append(f"{e}.requires_grad" if self.requires_grad else f"not {e}.requires_grad")
        return out

    def describe(self) -> str:
        grad = ", requires_grad" if self.requires_grad else ""
        shape = [s if s is not None else "?" for s in self.shape]
        stride = [s if s is not None else "?" for s in self.stride]
        return (f"{self.source.name()}: {self.type.__name__} {str(self.dtype).rpartition('.')[2]} {self.device} "
                f"size {shape} stride {stride}{grad}")

    def failure(self, t):
        n = self.source.name()
        if type(t) is not self.type:
            return f"'{n}' is not a {self.type.__name__} (actual {type(t).__qualname__})"
        if t.dtype is not self.dtype:
            return f"tensor '{n}' dtype mismatch: expected {self.dtype}, actual {t.dtype}"
        if t.device != self.device:
            return f"tensor '{n}' device mismatch: expected {self.device}, actual {t.device}"
        if t.dim() != len(self.shape):
            return f"tensor '{n}' rank mismatch: expected {len(self.shape)}, actual {t.dim()}"
        for i, (want, have) in enumerate(zip(self.shape, t.shape)):
            if want is not None and want != have:
                return f"tensor '{n}' size mismatch at index {i}: expected {want}, actual {have}"
        if self.dynamic and not t.is_contiguous():
            return f"tensor '{n}' is not contiguous (traced with dynamic sizes, contiguous)"
        for i, (want, have) in enumerate(zip(self.stride, t.stride())):
            if want is not None and want != have:
                return f"tensor '{n}' stride mismatch at index {i}: expected {want}, actual {have}"
        if t.requires_grad != self.requires_grad:
            return f"tensor '{n}' requires_grad mismatch: expected {self.requires_grad}, actual {t.requires_grad}"
        return None


@dataclass(frozen=True)
class ArrayMatch(Guard):
    """Type, dtype, sizes and strides (in bytes) of a NumPy array that came in, and that it is
    writeable (the tensor the graph reads it as shares its memory: `torch.from_numpy`)."""
    source: Source
    type: type
    dtype: object  # a numpy.dtype (one object per builtin dtype)
    shape: tuple  # None for a dynamic size
    strides: tuple | None  # None: C-contiguous (dynamic sizes)
    priority = 4

    def checks(self, c):
        e = self.source.expr()
        out = [f"type({e}) is {c.ref(self.type)}", f"{e}.dtype is {c.ref(self.dtype)}"]
        if None in self.shape:
            out.append(f"{e}.ndim == {len(self.shape)}")
            out += [f"{e}.shape[{i}] == {s}" for i, s in enumerate(self.shape) if s is not None]
        else:
            out.append(f"{e}.shape == {self.shape!r}")
        out.append(f"{e}.flags.c_contiguous" if self.strides is None else f"{e}.strides == {self.strides!r}")
        out.append(f"{e}.flags.writeable")
        return out

    def describe(self) -> str:
        shape = [s if s is not None else "?" for s in self.shape]
        return f"{self.source.name()}: ndarray {self.dtype} size {shape}"

    def failure(self, a):
        n = self.source.name()
        if type(a) is not self.type:
            return f"'{n}' is not a {self.type.__name__} (actual {type(a).__qualname__})"
        if a.dtype is not self.dtype:
            return f"array '{n}' dtype mismatch: expected {self.dtype}, actual {a.dtype}"
        if a.ndim != len(self.shape):
            return f"array '{n}' rank mismatch: expected {len(self.shape)}, actual {a.ndim}"
        for i, (want, have) in enumerate(zip(self.shape, a.shape)):
            if want is not None and want != have:
                return f"array '{n}' size mismatch at index {i}: expected {want}, actual {have}"
        if self.strides is None and not a.flags.c_contiguous:
            return f"array '{n}' is not contiguous (traced with dynamic sizes, contiguous)"
        if self.strides is not None and a.strides != self.strides:
            return f"array '{n}' strides mismatch: expected {self.strides}, actual {a.strides}"
        if not a.flags.writeable:
            return f"array '{n}' is read-only"
        return None


def _contiguous_strides(shape) -> tuple:
    strides, acc = [], 1
    for size in reversed(shape):
        strides.append(acc)
        acc *= max(size, 1)
    return tuple(reversed(strides))


@dataclass(frozen=True)
class _StateSource(Source):
    """Global state read through a function call (grad mode, default dtype)."""
    what: str

    def expr(self):
        return self.what

    def name(self):
        return self.what


@dataclass(frozen=True)
class GradModeMatch(Guard):
    """Grad mode as it was while tracing."""
    enabled: bool
    source: Source = field(default_factory=lambda: _StateSource("torch.is_grad_enabled()"))
    priority = 6

    def checks(self, c):
        c.values["___grad_enabled"] = torch.is_grad_enabled
        return [f"___grad_enabled() is {self.enabled}"]

    def read(self, globals_, scope):
        return torch.is_grad_enabled()

    def failure(self, now):
        return None if now == self.enabled else f"grad mode is {'on' if now else 'off'} (traced with it {'on' if self.enabled else 'off'})"


def _short(obj) -> str:
    name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None)
    return f"{type(obj).__name__} {name}" if name else f"{type(obj).__name__} at {id(obj):#x}"


@dataclass(frozen=True)
class StateMatch(Guard):
    """A global torch mode as it was while tracing, read by `fn(*args)` (autocast, inference mode)."""
    fn: object
    args: tuple
    value: object
    source: Source = None
    priority = 6

    def __post_init__(self):
        call = f"torch.{self.fn.__name__}({', '.join(map(repr, self.args))})"
        object.__setattr__(self, "source", _StateSource(call))

    def checks(self, c):
        return [f"{c.ref(self.fn)}({', '.join(c.ref(a) for a in self.args)}) == {c.ref(self.value)}"]

    def read(self, globals_, scope):
        return self.fn(*self.args)

    def failure(self, now):
        return None if now == self.value else f"{self.source.expr()} is {now} (traced with {self.value})"


@dataclass(frozen=True)
class ShapeMatch(Guard):
    """A relation between sizes the trace relied on (`s0 > 100`, `s0 == s1`), checked as
    plain Python over the sizes' sources (`x.shape[0] > 100`)."""
    relation: object  # a sympy relational over the symbols below
    symbols: tuple  # ((symbol, the source of its size), ...)
    source: Source = None
    priority = 7

    def __post_init__(self):
        object.__setattr__(self, "source", self.symbols[0][1])

    def sources(self) -> list:
        return [src for _, src in self.symbols]

    whose = ""  # (said after a failure's values)

    def checks(self, c):
        return [self.render({sym: src.expr() for sym, src in self.symbols})]

    def render(self, names: dict) -> str:
        """The relation as Python source, each symbol written as `names[symbol]`."""
        from ..symbolic import to_python  # (deferred: sympy, imported with the first symbolic size)
        return to_python(self.relation, names.__getitem__)

    def read(self, globals_, scope):
        return {sym: eval(src.expr(), {GLOBALS: globals_}, scope) for sym, src in self.symbols}

    def failure(self, values):
        if bool(self.relation.xreplace(values)):
            return None
        now = ", ".join(f"{src.name()} = {values[sym]}" for sym, src in self.symbols)
        return f"{self.render({sym: src.name() for sym, src in self.symbols})} is false ({now}{self.whose})"


@dataclass(frozen=True)
class BackendShapeMatch(ShapeMatch):
    """A relation a backend's own torch ShapeEnv recorded while compiling (Inductor's
    `s0 // 2 <= 4096`, AOTAutograd's divisibility checks), over torch's sympy functions
    (FloorDiv, ModularIndexing, PythonMod, ...): printed by torch's own Python printer."""
    whose = "; the backend's own guard"

    def render(self, names: dict) -> str:
        return _torch_python(self.relation, names)


def _torch_python(expr, names: dict) -> str:
    """`expr` as Python source by torch's printer, each symbol written as `names[symbol]`."""
    import sympy  # (deferred, as torch's printer: only backends with symbolic sizes come here)
    from torch.utils._sympy.printers import PythonPrinter
    return PythonPrinter().doprint(expr.xreplace({s: sympy.Symbol(n, **s.assumptions0) for s, n in names.items()}))
