"""Instrument a module's code objects at import; decide at each function's first call.

`instrument(code)` walks a module's code object and splices the dispatcher prologue
(`rewrite/bytecode/fastsplice.py`, raw bytes, ~30 µs a function) into every function,
method, lambda and nested function it defines. Comprehensions are left alone (they are part
of their function); generators, coroutines and async generators are left untouched on
purpose (the prologue cannot return a compiled result from them; their nested functions
are instrumented). Nothing else happens at import: no dispatcher, no tracing.

Each spliced code object gets a `Lazy` as its prologue's `slot.call`. At the function's
first call it looks at what the function touches -- its arguments, the closure cells it
holds, and the globals its code names (nested code included); containers and plain objects
are looked into one level deep -- and decides:

  * tensors, modules or torch itself: a `Dispatcher` takes over the slot and compiles the
    call, exactly as `@jit` would (later calls hit its cache) -- unless that first compile
    captures no op at all (no graph, no graph break: Dynamo skips such frames too), or it
    needs more than RECOMPILE_LIMIT entries, after which the function is treated as below;
  * nothing of torch: `slot.off` is set, so the prologue's first three instructions jump to
    the original code, and the functions already made from this code object (module-level
    functions, methods, their `functools.wraps` wrappers' `__wrapped__`) get their original
    code back -- they cost nothing from then on. If the function that defines it (a closure's
    or lambda's outer function) was decided the same way, that one's code gets this one's
    original in its constants, so closures made from then on carry no prologue either.
"""
from __future__ import annotations

import sys
import types
import weakref

from ..bytecode import compat
from ..bytecode.fastsplice import fast_splice
from ..bytecode.splice import _ORIGINALS, argument_names, splice_prologue
from ..slot import MISS, NEXT_REF, Options, Slot

CO_FUNCTION = 0x1 | 0x2  # CO_OPTIMIZED | CO_NEWLOCALS: a function body (not a module or class body)

# every Lazy made since the hook was installed (the --report reads them)
LAZIES: list["Lazy"] = []
PLAIN = ("plain", "no graph", "unstable")  # decisions after which a function runs its original code
# entries a function compiled under the hook may have; the next miss gives it its original code
# back instead of warning (a whole program has generic tensor helpers called with ever-new values)
RECOMPILE_LIMIT = 4


def instrument(code: types.CodeType, options: Options) -> types.CodeType:
    """`code` with every function it defines (at any depth) spliced."""
    return _walk(code, options)[0]


def _walk(code: types.CodeType, options: Options):
    """(code with its functions spliced, the Lazy made for `code` itself or None)."""
    consts = code.co_consts
    new, children = None, []
    for i, c in enumerate(consts):
        if isinstance(c, types.CodeType):
            d, lazy = _walk(c, options)
            if lazy is not None:
                children.append((i, lazy))
            if d is not c:
                if new is None:
                    new = list(consts)
                new[i] = d
    if new is not None:
        code = code.replace(co_consts=tuple(new))
    if not _wants(code):
        return code, None
    lazy = Lazy(code, options, children)
    return lazy.spliced, lazy


def _wants(code: types.CodeType) -> bool:
    flags = code.co_flags
    if flags & CO_FUNCTION != CO_FUNCTION or flags & compat.CO_GENERATOR_LIKE:
        return False
    return not code.co_name.startswith("<") or code.co_name == "<lambda>"


class Lazy:
    """The first-call decision for one instrumented code object."""

    __slots__ = ("base", "original", "spliced", "slot", "options", "dispatcher", "decided", "parent", "children",
                 "restored", "__weakref__")

    def __init__(self, code: types.CodeType, options: Options, children=()):
        self.base = self.original = code  # base: as spliced; original: with plain children's own code
        self.options, self.dispatcher, self.decided, self.parent = options, None, None, None
        self.children, self.restored = list(children), []  # (const index, Lazy); weakrefs to functions
        for _, child in self.children:
            child.parent = self
        slot = self.slot = Slot()
        slot.ref, slot.call, slot.name = NEXT_REF, self.first_call, code.co_qualname
        try:
            self.spliced = fast_splice(code, slot, MISS, argument_names(code))
        except (NotImplementedError, ValueError):  # another Python, or a jump the raw splice cannot encode
            self.spliced = splice_prologue(code, slot, MISS)
        _ORIGINALS[self.spliced] = code  # what the tracer reads when it inlines a call to it
        LAZIES.append(self)

    def first_call(self, *args):
        """slot.call until the decision: the arguments and the function's cells, as the prologue passes them."""
        frame = sys._getframe(1)
        globals_ = frame.f_globals
        if touches_torch(self.original, args, globals_):
            self.decided = "compiled"
            from .. import api  # imports torch (and the compiler): only once a function touches it
            d = self.dispatcher = api.Dispatcher(self.original, globals_, self.options, self.original.co_qualname,
                                                 slot=self.slot)
            d.recompile_limit, d.on_limit = RECOMPILE_LIMIT, lambda: self._unstable(globals_)
            result = d.miss(*args)
            if d.entries and all(not e.graph and e.graph_break is None for e in d.entries):
                # it touched torch but captured no op (or could not be traced): like Dynamo's
                # frames without tensor ops, it runs as it is from now on
                self.decided = "no graph"
                self._give_back(globals_)
            return result
        self.decided = "plain"
        self._give_back(globals_)
        return MISS

    def _unstable(self, globals_: dict) -> None:
        """Its calls keep missing the cache (new Python values, types, ...): give up on it."""
        self.decided = "unstable"
        self._give_back(globals_)

    def _give_back(self, globals_: dict) -> None:
        """From now on the function runs its original code (bypass, then the code itself)."""
        self.slot.off = True
        self.slot.call = _miss
        self.original = self._current()
        self.restored += restore(self.spliced, self.original, globals_)
        if self.parent is not None and self.parent.decided in PLAIN:
            self.parent._refresh()

    def _current(self) -> types.CodeType:
        """The base code with the code of children decided plain in place of their spliced code:
        closures made from it from now on carry no prologue at all."""
        consts = None
        for i, child in self.children:
            if child.decided in PLAIN:
                if consts is None:
                    consts = list(self.base.co_consts)
                consts[i] = child.original
        return self.base if consts is None else self.base.replace(co_consts=tuple(consts))

    def _refresh(self) -> None:
        old, self.original = self.original, self._current()
        _ORIGINALS[self.spliced] = self.original
        for ref in self.restored:
            fn = ref()
            if fn is not None and fn.__code__ is old:
                fn.__code__ = self.original
        if self.parent is not None and self.parent.decided in PLAIN:
            self.parent._refresh()


def _miss(*args):
    return MISS


# -- what a function touches --------------------------------------------------------------------

_PLAIN = (int, float, str, bytes, bool, type(None), complex, range, slice)


def _torchy(v, torch) -> bool:
    t = type(v)
    if t in _PLAIN:
        return False
    if isinstance(v, (torch.Tensor, torch.nn.Module)):
        return True
    if t is types.ModuleType:
        return v.__name__ == "torch" or v.__name__.startswith("torch.")
    if t in (list, tuple) and v:
        return any(isinstance(x, (torch.Tensor, torch.nn.Module)) for x in v[:16])
    if t is dict and v:
        return any(isinstance(x, (torch.Tensor, torch.nn.Module)) for x in list(v.values())[:16])
    if isinstance(v, type):
        return issubclass(v, (torch.Tensor, torch.nn.Module))
    module = getattr(v, "__module__", None)
    if isinstance(module, str) and (module == "torch" or module.startswith("torch.")):
        return True
    fields = getattr(v, "__dict__", None)  # a plain object holding tensors (a dataclass, a state)
    if type(fields) is dict and t not in (types.FunctionType, types.MethodType) and fields:
        return any(isinstance(x, (torch.Tensor, torch.nn.Module)) for x in list(fields.values())[:16])
    return False


_NAMES: "weakref.WeakKeyDictionary[types.CodeType, tuple]" = weakref.WeakKeyDictionary()


def _global_names(code: types.CodeType) -> tuple:
    """Names the code (and the code nested in it) may read as globals."""
    names = _NAMES.get(code)
    if names is None:
        found = set(code.co_names)
        for c in code.co_consts:
            if isinstance(c, types.CodeType):
                found.update(_global_names(c))
        names = _NAMES[code] = tuple(found)
    return names


def touches_torch(code: types.CodeType, args: tuple, globals_: dict) -> bool:
    torch = sys.modules.get("torch")
    if torch is None or not hasattr(torch, "nn"):  # not imported (or half-way): nothing is torch's yet
        return False
    for a in args:
        if type(a) is types.CellType:
            try:
                a = a.cell_contents
            except ValueError:
                continue
        if _torchy(a, torch):
            return True
    get = globals_.get
    return any(_torchy(get(name), torch) for name in _global_names(code))


# -- giving functions their original code back -----------------------------------------------------

_INDEX: dict[int, tuple[int, dict]] = {}  # id(module globals) -> (len when indexed, code -> functions)


def restore(spliced: types.CodeType, original: types.CodeType, globals_: dict) -> list:
    """Functions of this module whose code is `spliced` get `original` back (weakrefs to them)."""
    key = id(globals_)
    seen = _INDEX.get(key)
    if seen is None or seen[0] != len(globals_):
        seen = _INDEX[key] = (len(globals_), _functions_by_code(globals_))
    done = []
    for fn in seen[1].pop(spliced, ()):
        if fn.__code__ is spliced:
            fn.__code__ = original
            done.append(weakref.ref(fn))
    return done


def _functions_by_code(globals_: dict) -> dict:
    out: dict = {}
    seen: set = set()

    def add(fn, depth=0):
        while isinstance(fn, (staticmethod, classmethod)):
            fn = fn.__func__
        if isinstance(fn, property):
            for f in (fn.fget, fn.fset, fn.fdel):
                add(f, depth)
            return
        if isinstance(fn, types.FunctionType) and id(fn) not in seen:
            seen.add(id(fn))
            out.setdefault(fn.__code__, []).append(fn)
            wrapped = getattr(fn, "__wrapped__", None)
            if wrapped is not None:
                add(wrapped, depth)
        elif isinstance(fn, type) and depth < 4 and id(fn) not in seen and fn.__module__ == globals_.get("__name__"):
            seen.add(id(fn))
            for v in list(vars(fn).values()):
                add(v, depth + 1)

    for v in list(globals_.values()):
        add(v)
    return out
