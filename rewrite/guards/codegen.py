"""Turn a cache entry's guards into generated Python: checks inlined at the top of the entry
function (a failing check returns NEXT), and the same checks as a closure of their own.

The text is what runs (and what `REWRITE_LOGS=guards` prints): `and`-ed checks, cheapest
and most discriminating first, inside a `try` so that a source that cannot be read (a
deleted global, a missing attribute) counts as a failed guard. A value read through more
than once (`self.fc1` in `self.fc1.weight`, `self.fc1._forward_hooks`, ...) is read once,
into a local, just before the first check that needs it:

    def guard(self, x):
        try:
            if not (type(self) is ___Net and len(self._modules) == 2):
                return False
            ___s0 = self._modules['fc1']
            if not (len(___s0._forward_hooks) == 0 and ...):
                return False
            return True
        except Exception:
            return False
"""
from __future__ import annotations

import collections
import heapq
import itertools

import torch

from .. import codeload
from .guard import Consts, DistinctMatch, Guard, TensorMatch, TypeMatch, UnaliasedMatch
from .source import (GLOBALS, AttrSource, LocalSource, Source, TypeSource, comment, param_name, raw_expr,
                     shared_names)

try:  # torch's batched tensor check (dtype, device, dispatch keys, sizes, strides, requires_grad)
    from torch._C._dynamo.guards import TensorGuards
except ImportError:  # pragma: no cover - other torch builds
    TensorGuards = None


class GuardSet:
    """Guards collected while tracing, deduplicated, in insertion order."""

    def __init__(self):
        self._guards: dict[Guard, None] = {}
        self.examples: dict[Guard, torch.Tensor] = {}  # the traced tensor of each TensorMatch

    def add(self, guard: Guard, example: torch.Tensor | None = None) -> None:
        self._guards.setdefault(guard, None)
        if example is not None:
            self.examples.setdefault(guard, example)

    def __iter__(self):
        return iter(self._guards)

    def __len__(self):
        return len(self._guards)

    def ordered(self) -> list[Guard]:
        """Sources before the sources read through them; cheap kinds before costly ones."""
        return _drop_implied(sorted(_merge_distinct(list(self._guards)), key=lambda g: (g.depth(), g.priority)))


def _drop_implied(guards: list[Guard]) -> list[Guard]:
    """`guards` less each one that a guard before it implies through a class: for an `x` whose
    type a TypeMatch pins to K, `x.__class__.attr` (or `type(x).attr`) is `K.attr` -- the same
    object for every instance of K the call used (each Conv2d's `_conv_forward`, each module's
    `forward.__code__`): of the guards that read the same thing of the same class, only the
    first is checked (x's own TypeMatch, kept, makes the others hold). A class whose instances
    may answer `x.__class__` otherwise than `type(x)` (a `__class__` property, its own
    `__getattribute__`) is pinned for `type(x)` only."""
    pinned = {}  # source -> (its class, whether `source.__class__` is that class too)
    for g in guards:
        if type(g) is TypeMatch:
            pinned[g.source] = (g.type, _plain_class_read(g.type))
    if len(pinned) < 2:
        return guards
    seen, out, memo = set(), [], {}
    for g in guards:
        key = _through_class(g, pinned, memo)
        if key is not None:
            if key in seen:
                continue
            seen.add(key)
        out.append(g)
    return out


_OBJECT_CLASS = object.__dict__["__class__"]


def _plain_class_read(cls: type) -> bool:
    """Whether `x.__class__` is `type(x)` for every instance x of `cls` (object's own lookup)."""
    if cls.__getattribute__ is not object.__getattribute__:
        return False
    return next((c.__dict__["__class__"] for c in cls.__mro__ if "__class__" in c.__dict__), None) is _OBJECT_CLASS


def _through_class(g: Guard, pinned: dict, memo: dict):
    """What `g` checks, as a key equal for the guards that check the same of a pinned class
    (the class, the path read from it, the guard's kind and fields), or None where its source
    reads through no such class (or `g` is a kind not merged: a TypeMatch, a tensor's, a guard
    on two sources)."""
    kind = type(g)
    merged = _MERGED.get(kind)
    if merged is None:
        fields = getattr(kind, "__dataclass_fields__", {})
        merged = _MERGED[kind] = kind not in (TypeMatch, TensorMatch) and "source" in fields and \
            "other" not in fields and not hasattr(kind, "sources")
    if not merged:
        return None
    source = g.source
    found = _class_read(source, pinned, memo) if isinstance(source, Source) else None
    if found is None:
        return None  # (no class read on the way: most guards)
    return kind, found[0], found[1], _fields_key(g, "source")


_MERGED: dict = {}  # guard kind -> whether _drop_implied may merge its guards (one source of its own)


def _class_read(source: Source, pinned: dict, memo: dict):
    """(The pinned class `source` reads through, the path read from it), or None: the nearest
    `x.__class__` / `type(x)` part with x pinned (see _drop_implied), the parts above it as
    nested (kind, fields, the path below) tuples. `memo`: id(source) -> its answer (sources
    share their bases: each is walked once)."""
    key = id(source)
    if key in memo:
        return memo[key]
    base = getattr(source, "base", None)
    found = None
    if isinstance(base, Source):
        t = type(source)
        pin = pinned.get(base) if t is TypeSource or t is AttrSource and source.attr == "__class__" else None
        if pin is not None and (t is TypeSource or pin[1]):
            found = (pin[0], ())
        else:
            inner = _class_read(base, pinned, memo)
            if inner is not None:
                found = (inner[0], (t, _fields_key(source, "base"), inner[1]))
    memo[key] = found
    return found


def _fields_key(obj, skip: str) -> tuple:
    """`obj`'s fields but `skip` (and what source_kind caches), objects by identity, literals by
    type and value."""
    out = []
    for k, v in obj.__dict__.items():
        if k != skip and k[0] != "_":
            out.append((k, (type(v), v) if v is None or type(v) in _LITERALS else id(v)))
    return tuple(out)


_LITERALS = (int, float, bool, str, bytes)


def _merge_distinct(guards: list[Guard]) -> list[Guard]:
    """`guards` with each group of sources that DistinctMatch pairs say are all different from
    one another (a clique: `m not in memo` asked for every module `named_modules()` walks --
    n(n-1)/2 pairs) checked by one UnaliasedMatch, `len({id(a), id(b), ...}) == n`: the same
    pairs, not one more, in n reads instead of n(n-1) per call. Greedy, in the order the
    sources were first met: a source joins the first group each of whose members it was
    asked to differ from."""
    pairs = [g for g in guards if type(g) is DistinctMatch]
    if len(pairs) < 3:
        return guards
    apart = collections.defaultdict(set)
    for g in pairs:
        apart[g.source].add(g.other)
        apart[g.other].add(g.source)
    groups: list[list] = []
    for s in dict.fromkeys(s for g in pairs for s in (g.source, g.other)):
        for group in groups:
            if apart[s].issuperset(group):
                group.append(s)
                break
        else:
            groups.append([s])
    merged = [group for group in groups if len(group) >= 3]
    if not merged:
        return guards
    inside = {s: i for i, group in enumerate(merged) for s in group}
    kept = [g for g in guards if type(g) is not DistinctMatch
            or inside.get(g.source, -1) != inside.get(g.other, -2)]
    return kept + [UnaliasedMatch(group[0], tuple(group[1:])) for group in merged]


class GuardFunction:
    """The generated closure plus what is needed to print and explain it. `fn` may be given as a
    function of no arguments that makes it: it is then made when first used (the entry inlines
    its checks; this closure on its own serves misses, `explain` and recompile reasons, and a
    first compile never needs it: its source need not be compiled on the first call)."""

    source = codeload.LazyText()  # (a loaded entry's: read from the persistent cache when first asked for)

    def __init__(self, fn, source, guards, params: tuple[str, ...], globals_: dict, lazy: bool = False):
        self._fn, self._make = (None, fn) if lazy else (fn, None)
        self.source = source
        self._guards = guards  # (a list, or a function making it: an entry loaded from the persistent cache)
        self.params = params
        self.globals = globals_

    @property
    def guards(self) -> list[Guard]:
        if callable(self._guards):
            self._guards = self._guards()
        return self._guards

    @property
    def fn(self):
        if self._fn is None:
            self._fn = self._make()
            self._make = None
        return self._fn

    def __call__(self, *args) -> bool:
        return self.fn(*args)

    def failures(self, args) -> list[str]:
        """Every failing guard, in user terms (slow path: recompile reasons, explain)."""
        scope = dict(zip((param_name(p) for p in self.params), args))
        out = []
        for g in self.guards:
            try:
                why = g.failure(g.read(self.globals, scope))
            except Exception as e:  # the source itself cannot be read any more
                why = f"{g.source.name()} cannot be read: {type(e).__name__}: {e}"
            if why:
                out.append(why)
        return out


def _tensor_checker(tensors: list[TensorMatch], guards: GuardSet):
    """torch's C++ checker of all the tensor guards at once, or None (the per-attribute Python
    checks are used) when it is unavailable."""
    if TensorGuards is None or not tensors or any(g not in guards.examples for g in tensors):
        return None
    try:
        return TensorGuards(*(guards.examples[g] for g in tensors),
                             dynamic_dims_sizes=[list(g.shape) for g in tensors],
                             dynamic_dims_strides=[list(g.stride) for g in tensors])
    except Exception:
        return None


def tensor_facts(t, shape: tuple, stride: tuple) -> tuple:
    """What the persistent cache records of a tensor the checker checks (and compares on load,
    before it makes the checker from the call's tensors): its type, the sizes and strides the
    guard pins (`shape`, `stride`: None for any), dtype, device, requires_grad, dispatch keys."""
    if not isinstance(t, torch.Tensor) or len(shape) != t.dim() or len(stride) != t.dim():
        return ()
    sizes = tuple(None if s is None else n for s, n in zip(shape, t.shape))
    strides = tuple(None if s is None else n for s, n in zip(stride, t.stride()))
    return (_fact_name(type(t)), sizes, strides, _fact_name(t.dtype), _fact_name(t.device), t.requires_grad,
            torch._C._dispatch_keys(t).raw_repr())


def has_facts(t, fact: tuple) -> bool:
    """Whether `tensor_facts(t, ...)` would be `fact` (what a load compares, dozens of tensors
    at once: without building the facts of each)."""
    if not isinstance(t, torch.Tensor) or len(fact) != 7:
        return False
    name, sizes, strides, dtype, device, grad, keys = fact
    if _fact_name(type(t)) != name or t.requires_grad is not grad or t.dim() != len(sizes) or \
            _fact_name(t.dtype) != dtype or _fact_name(t.device) != device:
        return False
    if not _pinned_equal(sizes, t.shape) or not _pinned_equal(strides, t.stride()):
        return False
    return torch._C._dispatch_keys(t).raw_repr() == keys


def _pinned_equal(pinned: tuple, actual) -> bool:
    """Whether `actual` has the values `pinned` pins (None: any)."""
    if None not in pinned:
        return actual == pinned
    return all(p is None or p == n for p, n in zip(pinned, actual))


def _fact_name(obj) -> str:
    """A tensor type's, dtype's or device's name in tensor_facts (a load compares dozens of
    tensors: each name made once)."""
    name = _NAMES.get(obj)
    if name is None:
        name = _NAMES[obj] = f"{obj.__module__}.{obj.__qualname__}" if isinstance(obj, type) else str(obj)
    return name


_NAMES: dict = {}  # (types, dtypes and devices never compare equal to one another)


def _batched_tensor_checks(tensors: list[TensorMatch], checker, consts: Consts) -> list[str]:
    """All tensor guards as one call of `checker`. It compares each argument's exact type
    with its example's before reading it as a tensor (anything else, a subclass included, is
    False), and it is False when two arguments are the same object: sources that were
    aliases while tracing are one TensorMatch (and an `is` check)."""
    consts.values["___check_tensors"] = checker.check
    args = ", ".join(g.source.expr() for g in tensors)
    out = [f"___check_tensors({args})"]
    out += [f"{g.source.expr()}.is_contiguous()" for g in tensors if g.dynamic]  # strides follow the sizes
    out += [f"# {comment(g.describe())}" for g in tensors]
    return out


def _sources_of(g: Guard) -> list[Source]:
    if hasattr(g, "sources"):
        return g.sources()
    return [s for s in (getattr(g, "source", None), getattr(g, "other", None)) if isinstance(s, Source)]


_END = 1 << 62  # the step of what the entry reads after the checks: a local it reads is never reused


def _shared_sources(emitted: list[Guard], steps: list[int], also=(),
                    reuse: bool = True) -> tuple[dict, dict, dict, dict]:
    """Sources read (themselves or as the base of another) by more than one check, or by a
    check and the entry (`also`: the sources the entry reads its graph inputs from): named.
    Counted by object first (a hash of an int, in C), then by equality once per object (a
    source's hash is Python code: GPT-2's guards read 30,000 source parts).

    `emitted`: the guards in the order their checks are written, `steps[i]` the statement
    group of guard i. With `reuse`, a local is reused once every check that may read its source
    (a guard's sources and their bases) is behind (`_allocate`): a frame of a few dozen locals,
    not hundreds, and fewer names for a new process to intern when it loads the entry. Returns
    (source -> its local, id(source) -> its local or None for every source object counted,
    source -> (first, last) step that may read it, id(source) -> the same for the sources
    named)."""
    parts: list = []  # (each check's sources and their bases, each once per check, in step order)
    where: list = []
    for g, step in zip(emitted, steps):
        sources = _sources_of(g)
        if len(sources) == 1:  # (a source and its bases are distinct: each counted once)
            chunk = (sources[0], *sources[0].bases())
        else:
            chunk = {part for s in sources for part in (s, *s.bases())}
        parts += chunk
        where += [step] * len(chunk)
    for s in also:
        chunk = (s, *s.bases())
        parts += chunk
        where += [_END] * len(chunk)
    ids = list(map(id, parts))
    by_id = collections.Counter(ids)  # id(part) -> how many checks read it (counted in C)
    objects = dict(zip(ids, parts))
    first, last = dict(zip(reversed(ids), reversed(where))), dict(zip(ids, where))  # (steps never decrease)
    total = collections.Counter()
    for key, n in by_id.items():
        total[objects[key]] += n
    shared = [s for s, n in total.items() if n > 1 and not isinstance(s, LocalSource) and s.bases()]
    index = {s: i for i, s in enumerate(shared)}
    spans = [[_END, 0] for _ in shared]
    of_id = {}
    for key, part in objects.items():
        i = index.get(part)
        if i is not None:
            of_id[key] = i
            span = spans[i]
            span[0], span[1] = min(span[0], first[key]), max(span[1], last[key])
    local = _allocate(spans) if reuse else [f"___s{i}" for i in range(len(shared))]
    names = {s: local[i] for i, s in enumerate(shared)}
    by_source = {s: tuple(spans[i]) for i, s in enumerate(shared)}
    return names, {key: local[of_id[key]] if key in of_id else None for key in objects}, by_source, \
        {key: by_source[shared[i]] for key, i in of_id.items()}


def _allocate(spans: list) -> list[str]:
    """A local name for each [first, last] span of steps: the lowest free one, freed after its
    last step (linear scan: no two spans that share a step share a name). Spans that start at
    _END (read by the entry only, never by a check) get names of their own."""
    names = [""] * len(spans)
    free: list = []  # (numbers of names free again, lowest first)
    busy: list = []  # (last step, number) of the names in use
    count = 0
    for i in sorted(range(len(spans)), key=lambda i: spans[i][0]):
        start, stop = spans[i]
        while busy and busy[0][0] < start:
            heapq.heappush(free, heapq.heappop(busy)[1])
        number = heapq.heappop(free) if free and start < _END else count
        if number == count:
            count += 1
        heapq.heappush(busy, (stop, number))
        names[i] = f"___s{number}"
    return names


class _Reread(Exception):
    """A check read a named source outside the steps _shared_sources counted for it: render
    again with a local of its own for each (see render_guards)."""


def _body(groups: list[tuple[list[str], list[str]]], fail: str) -> list[str]:
    """(bindings, checks) groups -> statements that run `fail` as soon as a check fails."""
    lines = []
    for bindings, checks in groups:
        lines += bindings
        if any(not c.startswith("#") for c in checks):
            chain = [f"    {'' if i == 0 or c.startswith('#') else 'and '}{c}" for i, c in enumerate(checks)]
            lines += ["if not (", *chain, "):", f"    {fail}"]
    return lines


class GuardCode:
    """A guard set rendered once: the statements of its check (each failing check runs
    `fail`) and the constants they name, to put in the guard closure and in the entry."""

    def __init__(self, groups, consts: Consts, ordered: list[Guard], name: str, checked=(), bound=None):
        self.groups, self.consts, self.ordered, self.name = groups, consts, ordered, name
        self.checked = checked  # (TensorMatch, example) of each tensor torch's checker checks
        self.bound = bound or {}  # source -> the local the checks bound it to

    def expr(self, source: Source) -> str:
        """`source` as the entry reads it after the checks passed: through their locals."""
        with shared_names(self.bound):
            return source.expr()

    def tensor_record(self) -> tuple:
        """For the persistent cache: the facts of each tensor the checker checks, in the order
        it takes them (see persist.FirstTensorCheck)."""
        return tuple(tensor_facts(t, g.shape, g.stride) for g, t in self.checked)

    def lines(self, fail: str) -> list[str]:
        return _body(self.groups, fail)

    def closure_source(self, params) -> str:
        """Source defining `___make_guard(G, <consts>)`: the guard alone, True or False."""
        body = "".join(f"            {line}\n" for line in [*self.lines("return False"), "return True"])
        return (f"# guards of {comment(self.name)}: {len(self.ordered)} guard(s)\n"
                f"def ___make_guard({', '.join([GLOBALS, *self.consts.values])}):\n"
                f"    def guard({', '.join(param_name(p) for p in params)}):\n"
                f"        try:\n{body}"
                f"        except Exception:\n"
                f"            return False\n"
                f"    return guard\n")


def render_guards(guards: GuardSet, name: str, consts: Consts | None = None, reads=()) -> GuardCode:
    """Render `guards` (constants go to `consts`, shared with the entry that inlines them;
    `reads`: sources the entry reads after the checks, bound to locals by them where a check
    reads them too -- a parameter's module path is walked once per call, not twice)."""
    ordered = guards.ordered()
    consts = consts if consts is not None else Consts()
    tensors = [g for g in ordered if isinstance(g, TensorMatch)]
    checker = _tensor_checker(tensors, guards)
    plain = [g for g in ordered if not isinstance(g, TensorMatch)]
    steps = list(range(len(plain))) + [len(plain) + (0 if checker is not None else i) for i in range(len(tensors))]
    try:
        return _render(guards, ordered, name, consts, reads, plain, tensors, checker, steps, reuse=True)
    except _Reread:  # (never seen: a check that reads a source beyond its guard's own)
        return _render(guards, ordered, name, consts, reads, plain, tensors, checker, steps, reuse=False)


def _render(guards, ordered, name, consts, reads, plain, tensors, checker, steps, reuse) -> GuardCode:
    names, ids, spans, spans_by_id = _shared_sources(plain + tensors, steps, reads, reuse)
    groups: list[tuple[list[str], list[str]]] = []
    bound: set = set()

    def named(s) -> bool:
        key = id(s)
        return ids[key] is not None if key in ids else s in names

    above: dict = {}  # id(source) -> its named bases, for the sources counted (alive all along)

    named_ids = {key for key, local in ids.items() if local is not None}

    def named_bases(s) -> tuple:
        key = id(s)
        found = above.get(key)
        if found is None:
            bases = s.bases()
            if key in ids:  # counted, and so were its bases: by id, in C (not one a check made: its
                found = above[key] = tuple(itertools.compress(  # id may be another's once it is gone)
                    bases, map(named_ids.__contains__, map(id, bases))))
            else:
                found = tuple(b for b in bases if named(b))
        return found

    def emit(step: int, checks_of, used: set):
        """Render one guard's checks; bind the named values they read first (bases first)."""
        used.clear()
        checks = checks_of()
        bindings = []
        for s in list(used):  # bases first
            used.update(named_bases(s))
        if reuse:  # (each local read within the steps its source was counted for: it holds that source)
            for s in used:
                first, last = spans_by_id.get(id(s)) or spans[s]
                if not first <= step <= last:
                    raise _Reread(s)
        for s in sorted(used - bound, key=lambda s: len(s.bases())):
            bindings.append(f"{names[s]} = {raw_expr(s)}")  # its named bases are bound above
            bound.add(s)
        if bindings or not groups:
            groups.append((bindings, checks))
        else:
            groups[-1][1].extend(checks)

    with shared_names(names, ids) as used:  # (one context for all: `used` is each guard's, cleared first)
        for step, g in enumerate(plain):
            emit(step, lambda g=g: g.checks(consts), used)
        checked = [(g, guards.examples[g]) for g in tensors] if checker is not None else []
        if checker is not None:
            emit(len(plain), lambda: _batched_tensor_checks(tensors, checker, consts), used)
        else:
            for step, g in enumerate(tensors, len(plain)):
                emit(step, lambda g=g: g.checks(consts), used)
    held = {s: names[s] for s in bound if not reuse or spans[s][1] == _END}  # (the entry's: locals never reused)
    return GuardCode(groups, consts, ordered, name, checked, held)
