"""Every fact a cache entry assumed is guarded: changing it recompiles, never a stale result."""
import logging

import pytest
import torch

import rewrite
from rewrite import dispatcher_of, jit, logs

from conftest import CompileCounter, assert_same, eager_copy

SCALE = 2
OFFSET = 1.0


def helper(x):
    return x + 1


def run_all(f, *arg_lists):
    """Call jitted f and an eager copy on each argument list; compare; return the entry count."""
    eager = eager_copy(f)
    jit(f)
    for args in arg_lists:
        assert_same(f(*args), eager(*args))
    return len(dispatcher_of(f).entries)


def add_one(x):
    return x + 1


@pytest.mark.parametrize("second, reason", [
    (torch.ones(4, 4, dtype=torch.float64), "tensor 'x' dtype mismatch: expected torch.float32, actual torch.float64"),
    (torch.ones(5, 4), "tensor 'x' size mismatch at index 0: expected 4, actual 5"),
    (torch.ones(4), "tensor 'x' rank mismatch: expected 2, actual 1"),
    (torch.ones(4, 4).t().contiguous().t(), "tensor 'x' stride mismatch at index 0: expected 4, actual 1"),
    (torch.ones(4, 4, requires_grad=True), "tensor 'x' requires_grad mismatch: expected False, actual True"),
    (torch.ones(4, 4, device="meta"), "tensor 'x' device mismatch: expected cpu, actual meta"),
    (torch.nn.Parameter(torch.ones(4, 4)), "'x' is not a Tensor (actual Parameter)"),
])
def test_tensor_property_change_recompiles(second, reason):
    def f(x):
        return x * 2

    eager = eager_copy(f)
    jit(f)
    first = torch.ones(4, 4)
    assert_same(f(first), eager(first))
    assert dispatcher_of(f).entries[0].guard.failures((second,)) == [reason]
    out = f(second)
    assert out.shape == second.shape and out.dtype == second.dtype and out.device == second.device
    if second.device.type != "meta":
        assert_same(out, eager(second))
    assert out.requires_grad == second.requires_grad
    assert len(dispatcher_of(f).entries) == 2


class Sub(torch.Tensor):
    pass


def test_anything_but_the_traced_tensor_type_fails_the_batched_tensor_check():
    """One call of torch's batched checker guards the tensors: it compares exact types before
    reading a tensor, so a non-tensor, a subclass or the same tensor passed twice fails it."""
    def f(x, y):
        return x * 2 + y

    eager = eager_copy(f)
    jit(f)
    a, b = torch.ones(3), torch.arange(3.0)
    assert_same(f(a, b), eager(a, b))
    guard = dispatcher_of(f).entries[0].guard
    for x in (3, 2.5, None, "s", [a], (a,), torch.nn.Parameter(a.clone()), a.as_subclass(Sub), torch.Tensor, object()):
        assert not guard.fn(x, b) and not guard.fn(b, x)
    assert not guard.fn(a, a)  # aliased now, distinct while traced
    assert_same(f(a, a), eager(a, a))
    assert_same(f(a, 5), eager(a, 5))
    assert "type(x) is" not in guard.source  # (the checker's own type check is the only one)


def test_same_properties_hit_the_cache():
    assert run_all(add_one, (torch.randn(3, 3),), (torch.randn(3, 3),), (torch.zeros(3, 3),)) == 1


def test_global_int_change_recompiles():
    global SCALE

    def f(x):
        return x * SCALE

    eager = eager_copy(f)
    jit(f)
    x = torch.ones(2)
    assert_same(f(x), eager(x))
    SCALE = 3
    try:
        assert_same(f(x), eager(x))
        assert len(dispatcher_of(f).entries) == 2
        assert "SCALE == 2 (actual 3)" in dispatcher_of(f).entries[1].guard.failures((x,))
    finally:
        SCALE = 2


def test_global_float_and_helper_function_change_recompile():
    global OFFSET, helper
    original = helper

    def f(x):
        return helper(x) + OFFSET

    eager = eager_copy(f)
    jit(f)
    x = torch.ones(2)
    assert_same(f(x), eager(x))
    try:
        OFFSET = 0.5
        assert_same(f(x), eager(x))
        helper = lambda x: x - 1  # noqa: E731
        assert_same(f(x), eager(x))
        assert len(dispatcher_of(f).entries) == 3
    finally:
        OFFSET, helper = 1.0, original


def test_closure_value_change_recompiles():
    k = 1

    def f(x):
        return x + k

    eager = eager_copy(f)
    jit(f)
    x = torch.zeros(2)
    assert_same(f(x), eager(x))
    k = 10
    assert_same(f(x), eager(x))
    assert len(dispatcher_of(f).entries) == 2
    assert dispatcher_of(f).entries[1].guard.failures((x, f.__closure__[0])) == ["k == 1 (actual 10)"]


@pytest.mark.parametrize("first, second", [
    (3, 4), (3, 3.0), (True, 1), (2.5, 3.5), ("sum", "mean"), (None, 1), (float("nan"), 1.0),
])
def test_python_scalar_arguments_are_guarded_by_type_and_value(first, second):
    def f(x, v):
        if v is None:
            return x
        if isinstance(v, str):
            return getattr(x, v)()
        return x * v

    assert run_all(f, (torch.ones(2), first), (torch.ones(2), first), (torch.ones(2), second)) == 2


def test_tuple_and_list_arguments_are_guarded_by_length_and_items():
    def f(xs):
        out = xs[0]
        for t in xs[1:]:
            out = out + t
        return out

    a = torch.ones(2)
    assert run_all(f, ((a, a),), ((a, a),), ((a, a, a),), ([a, a],)) == 3


def test_dict_argument_keys_are_guarded():
    def f(d):
        return d["a"] * d.get("b", 1)

    a = torch.ones(2)
    assert run_all(f, ({"a": a},), ({"a": a},), ({"a": a, "b": 3},)) == 2


def test_grad_mode_is_guarded_when_read():
    def f(x):
        if torch.is_grad_enabled():
            return x + 1
        return x - 1

    eager = eager_copy(f)
    jit(f)
    x = torch.ones(2)
    assert_same(f(x), eager(x))
    with torch.no_grad():
        assert_same(f(x), eager(x))
    assert len(dispatcher_of(f).entries) == 2


def test_guard_source_is_one_readable_closure():
    def f(x, n):
        return x + n

    jit(f)
    f(torch.ones(2, 3), 4)
    src = dispatcher_of(f).entries[0].guard.source
    assert src.count("def guard(") == 1
    assert "type(n) is int" in src and "n == 4" in src
    assert "# x: Tensor float32 cpu size [2, 3] stride [3, 1]" in src
    compile(src, "<guard>", "exec")  # it is plain Python


def test_guard_file_is_real_and_in_linecache():
    import linecache

    def f(x):
        return x + 1

    jit(f)
    f(torch.ones(1))
    guard = dispatcher_of(f).entries[0].guard.fn
    path = guard.__code__.co_filename
    assert path.endswith(".py")
    assert "def guard(" in "".join(linecache.getlines(path))
    rewrite.codeload.flush()  # (generated files are written at a quiet moment: now)
    with open(path) as fh:
        assert "def guard(" in fh.read()


def logged(caplog, categories, run) -> str:
    """What `run()` logs with REWRITE_LOGS=categories."""
    logs.set_logs(categories)
    try:
        with caplog.at_level(logging.DEBUG, logger="rewrite"):
            rewrite.logs._root.propagate = True
            run()
    finally:
        logs.set_logs("")
        rewrite.logs._root.propagate = False
    return caplog.text


def test_recompiles_log_names_the_failed_guard(caplog):
    def f(x):
        return x.sum()

    jit(f)
    text = logged(caplog, "recompiles", lambda: (f(torch.ones(4)), f(torch.ones(5))))
    assert "Recompiling function" in text
    assert "tensor 'x' size mismatch at index 0: expected 4, actual 5" in text


def test_guards_log_prints_the_guard_source(caplog):
    def f(x):
        return x.neg()

    jit(f)
    assert "def guard(x):" in logged(caplog, "guards", lambda: f(torch.ones(2)))


def test_unknown_log_category_is_an_error():
    with pytest.raises(ValueError, match="unknown REWRITE_LOGS category"):
        logs.set_logs("nope")


def test_the_stride_of_a_size_one_dim_is_not_guarded():
    """`ids[:, :4]` of rows 8 and 11 long: the same layout (the row stride steps over nothing)."""
    cnt = CompileCounter()

    def f(x):
        return x.float().cumsum(-1) * 2

    compiled = rewrite.jit(eager_copy(f), backend=cnt)
    for width in (8, 11, 8):
        ids = torch.arange(width * 1.0).reshape(1, width)[:, :4]
        torch.testing.assert_close(compiled(ids), f(ids))
    assert cnt.frame_count == 1
    other = torch.arange(16.0).reshape(4, 4)[:, :2]  # (a stride that matters: a new entry)
    torch.testing.assert_close(compiled(other), f(other))
    assert cnt.frame_count == 2


def test_numbers_whose_eq_is_python_code_are_not_guarded_by_value():
    """A Fraction (any Number whose class defines `__eq__` in Python) is an object, not a
    constant: a value guard `b == <Fraction>` would run `Fraction.__eq__` on each call -- the
    jitted one itself when it is jitted, without end (tests/test_bytecode.py hung so on 3.12)."""
    import fractions
    import importlib.util
    import numbers
    import types

    def fresh():
        spec = importlib.util.find_spec("fractions")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    mine, other = fresh(), fresh()
    for attr in vars(mine.Fraction).values():
        fn = getattr(attr, "__func__", attr)
        if isinstance(fn, types.FunctionType):
            rewrite.jit(fn)
    for _ in range(3):
        assert (mine.Fraction(3, 4) == other.Fraction(3, 4)) is True
        assert (mine.Fraction(3, 4) == fractions.Fraction(1, 4)) is False

    class Money(numbers.Number):  # a Number whose == is Python code
        def __init__(self, cents):
            self.cents = cents

        def __eq__(self, other):
            return isinstance(other, Money) and self.cents == other.cents

        __hash__ = None

    rewrite.jit(Money.__eq__)
    for _ in range(3):
        assert (Money(3) == Money(3)) is True and (Money(3) == Money(4)) is False
    sources = [e.guard.source for e in rewrite.dispatcher_of(Money.__eq__).entries]
    assert sources and not any(" == ___c" in s for s in sources), sources

    def scale(x, q):
        return x * float(q), q + 1

    eager = eager_copy(scale)
    rewrite.jit(scale)
    for q in (fractions.Fraction(1, 2), fractions.Fraction(3, 2)):
        assert_same(scale(torch.ones(2), q), eager(torch.ones(2), q))


# -- functions passed in: guarded by code, globals and (empty) __dict__, not by identity --------------
def make_adder(k):
    def add(y):
        return y + k
    return add


def test_a_closure_made_per_call_compiles_once_its_int_dynamic():
    """`h(x, make_adder(i))`: a new function object each call, the same code; the cell's int
    becomes a symbol as an int argument does (0 and 1 stay constants), so 10 calls make 3 entries."""
    def h(x, g):
        return g(x)
    eager = eager_copy(h)
    jit(h)
    for i in range(10):
        x = torch.randn(5)
        assert_same(h(x, make_adder(i)), eager(x, make_adder(i)))
    assert dispatcher_of(h).compiles == 3


def test_a_lambda_made_per_call_compiles_once():
    def h(x, g):
        return g(x) * 2
    eager = eager_copy(h)
    jit(h)
    for _ in range(4):
        x = torch.randn(3)
        assert_same(h(x, lambda y: y - 1), eager(x, lambda y: y - 1))
    assert dispatcher_of(h).compiles == 1
    assert_same(h(x, lambda y: y + 1), eager(x, lambda y: y + 1))  # other code: a new entry
    assert dispatcher_of(h).compiles == 2


@pytest.mark.parametrize("pairs", [
    lambda: [(make_adder(3), make_adder(3)), (make_adder(3),) * 2, (make_adder(3), make_adder(3))],
    lambda: [(make_adder(3),) * 2, (make_adder(3), make_adder(3)), (make_adder(3),) * 2],
])
def test_identity_of_functions_passed_in_is_guarded(pairs):
    """`is`, `==`, `in` between two functions of the same code: the answer is guarded."""
    def k(x, fs):
        return fs[0](x) + fs[1](x), fs[0] is fs[1], fs[0] == fs[1], fs[1] in [fs[0]], fs[0] != fs[1]
    assert run_all(k, *[(torch.randn(2), list(pair)) for pair in pairs()]) == 2


def test_identity_of_objects_passed_in_is_guarded_by_eq_and_in():
    """`a == b` for objects compared by identity (no __eq__ of their own) and `a in [b]` depend on
    whether the two arguments are one object: guarded (this once reused the first answer)."""
    class O:
        pass

    def f(x, a, b):
        return x + 1 if a == b else x - 1, a in [b], a != b
    o1, o2 = O(), O()
    assert run_all(f, (torch.zeros(1), o1, o2), (torch.zeros(1), o1, o1), (torch.zeros(1), o2, o1)) == 2


def test_a_function_passed_in_with_its_own_attributes_is_guarded_by_identity():
    def h(x, g):
        return g(x) + g.scale
    eager = eager_copy(h)
    jit(h)
    for scale in (1, 2):
        g = make_adder(3)
        g.scale = scale
        x = torch.randn(2)
        assert_same(h(x, g), eager(x, g))
    assert dispatcher_of(h).compiles == 2


def test_a_function_passed_in_is_returned_and_called_as_itself():
    """What the entry returns, stores or rebuilds from a function passed in is that call's object."""
    def gen_of(k):
        def gen(y):
            yield y + k
        return gen

    def h(x, g, sink):
        sink.append(g)
        return g, g(x)  # (a generator never run: the entry calls the function passed in)
    eager = eager_copy(h)
    jit(h)
    for i in (5, 6, 7):
        x, g, s1, s2 = torch.randn(2), gen_of(i), [], []
        out, ref = h(x, g, s1), eager(x, g, s2)
        assert out[0] is g and s1[0] is g
        assert_same(list(out[1]), list(ref[1]))


# -- objects the call changes, passed once as two arguments ---------------------------------------------
class Counter:
    def __init__(self):
        self.n = 1


@pytest.mark.parametrize("make, change", [
    (Counter, lambda a, b: (setattr(a, "n", a.n + 1), setattr(b, "n", b.n + 2))),
    (list, lambda a, b: (a.append(1), b.append(2))),
    (dict, lambda a, b: (a.__setitem__("k", len(a)), b.__setitem__("j", len(b)))),
])
def test_objects_changed_by_the_call_then_passed_as_one(make, change):
    """An entry traced with two different objects replays a write to each; the same object
    passed twice must not run it (it would lose one write): a guard tells them apart."""
    def f(x, a, b):
        change(a, b)
        return x + 1
    eager = eager_copy(f)
    jit(f)
    for same in (False, True, False, True):
        a1 = make()
        b1 = a1 if same else make()
        a2 = make()
        b2 = a2 if same else make()
        assert_same(f(torch.ones(1), a1, b1), eager(torch.ones(1), a2, b2))
        assert vars(a1) == vars(a2) if make is Counter else a1 == a2
    assert dispatcher_of(f).compiles == 2


def test_an_object_changed_and_another_of_its_class_read():
    def f(x, a, b):
        a.n += 1
        return x * b.n
    eager = eager_copy(f)
    jit(f)
    for same in (False, True):
        runs = []
        for fn in (f, eager):
            a = Counter()
            runs.append((fn(torch.ones(1), a, a if same else Counter()), a.n))
        assert_same(*runs)
    assert dispatcher_of(f).compiles == 2


def test_a_function_passed_in_as_a_dict_key_and_set_member_is_guarded_by_identity():
    """Where its identity decides (a dict key, a set member), a function guarded by its code is
    guarded by its identity too: a new closure of the same code is another key."""
    def f(x, g, registry, seen):
        return x + registry.get(g, 0) + (g in seen) + (g in [k for k in registry])
    first = make_adder(1)
    registry, seen = {first: 10}, {first}
    eager = eager_copy(f)
    jit(f)
    for g in (first, make_adder(1), first, make_adder(1)):
        assert_same(f(torch.zeros(1), g, registry, seen), eager(torch.zeros(1), g, registry, seen))


def test_the_distinct_pairs_of_a_walk_over_modules_are_one_check():
    """`module.modules()` asks `sub not in memo` of every module it meets: each pair of modules
    must stay different objects -- n(n-1)/2 pairs, checked as one `len({id(...), ...}) == n`
    (guards/codegen.py, _merge_distinct). The same module in two places later: eager's count
    changes, and so does the compiled one's."""
    from rewrite.guards.guard import DistinctMatch, UnaliasedMatch

    model = torch.nn.Sequential(*[torch.nn.Linear(2, 2) for _ in range(8)])

    def f(m, x):
        n = 0
        for _ in m.modules():
            n += 1
        return x * n

    x = torch.randn(2)
    compiled = jit(eager_copy(f))
    assert_same(compiled(model, x), f(model, x))
    guards = dispatcher_of(compiled).entries[0].guard.guards
    assert not [g for g in guards if type(g) is DistinctMatch]
    assert [g for g in guards if type(g) is UnaliasedMatch and len(g.others) >= 8]
    model[3] = model[2]
    assert_same(compiled(model, x), f(model, x))


class _Scaled(torch.nn.Module):
    def __init__(self, k):
        super().__init__()
        self.k = k

    def helper(self, x):
        return x * self.k

    def forward(self, x):
        return self.helper(x) + 1


class _OtherScaled(_Scaled):
    def helper(self, x):
        return x - self.k


class _ClassProperty(_Scaled):
    """Instances that answer `x.__class__` themselves: no merging through it."""
    @property
    def __class__(self):
        return _Scaled


def _class_reads(guards, name):
    """The guards reading `<instance>.__class__.<name>`, and those reading its `__code__`."""
    reads = [g.source.expr() for g in guards]
    return [e for e in reads if e.endswith(f"__class__.{name}")], \
        [e for e in reads if e.endswith(f"__class__.{name}.__code__")]


def _call_model(m, x):
    return m(x)


def _compiled_over(model):
    """(A jitted call of `model`, compiled on an input and checked against eager, that input,
    how many of its guards read `helper` and its code through the instances' classes)."""
    x = torch.randn(3)
    compiled = jit(eager_copy(_call_model))
    assert_same(compiled(model, x), _call_model(model, x))
    guards = dispatcher_of(compiled).entries[0].guard.guards
    return compiled, x, [len(reads) for reads in _class_reads(guards, "helper")]


_SCALED_HELPER_CODE = _Scaled.helper.__code__


@pytest.mark.parametrize("change", ["method", "code", "instance class"])
def test_a_method_read_on_the_class_of_many_instances_is_one_check(change):
    """Each module's `self.helper` is a read of its class's attribute: with every instance's type
    pinned, one check of `_Scaled.helper` (and of its code) stands for all of them
    (guards/codegen.py, _drop_implied). Changing the class's method, its code, or one
    instance's class still recompiles, to eager's result."""
    model = torch.nn.Sequential(*[_Scaled(k) for k in range(1, 6)])
    compiled, x, reads = _compiled_over(model)
    assert reads == [1, 1]
    saved = _Scaled.helper
    try:
        if change == "method":
            _Scaled.helper = lambda self, x: x + self.k
        elif change == "code":
            _Scaled.helper.__code__ = _OtherScaled.helper.__code__
        else:
            model[3].__class__ = _OtherScaled
        assert_same(compiled(model, x), _call_model(model, x))
        assert len(dispatcher_of(compiled).entries) == 2
    finally:
        _Scaled.helper = saved
        saved.__code__ = _SCALED_HELPER_CODE


def test_instances_that_answer_their_class_themselves_are_checked_one_by_one():
    """A `__class__` property: `x.__class__.helper` is not known to be the pinned class's, so
    each instance's read stays a check of its own."""
    _, _, reads = _compiled_over(torch.nn.Sequential(*[_ClassProperty(k) for k in range(1, 4)]))
    assert reads == [3, 3]


class _Part:
    def __init__(self, scale, child=None):
        self.scale, self.child = scale, child


def _through_parts(x, cfg):
    for part in (cfg.a, cfg.b, cfg.c):  # (checked near the top: their locals are free again below)
        x = x * part.scale + part.scale
    for part in (cfg.d, cfg.e):
        x = x + part.child.child.scale * part.child.child.scale
    return x


def _parts():
    from types import SimpleNamespace
    shallow = {k: _Part(i + 1.0) for i, k in enumerate("abc")}
    return SimpleNamespace(**shallow, **{k: _Part(0.0, _Part(i + 0.5, _Part(i + 0.25))) for i, k in enumerate("de")})


def test_a_local_the_checks_are_done_with_is_reused_and_every_change_recompiles():
    """The guard code binds a value read by more than one check to a local; once the checks
    that may read it are behind, its name holds the next one (a frame of a few locals, fewer
    names to intern) -- and every guard still reads what it checks."""
    import re
    cfg, x = _parts(), torch.randn(3)
    eager = eager_copy(_through_parts)
    jit(_through_parts)
    assert_same(_through_parts(x, cfg), eager(x, cfg))
    src = dispatcher_of(_through_parts).entries[0].guard.source
    bound = re.findall(r"(___s\d+) = ", src)
    assert len(set(bound)) < len(bound), src  # (a name bound again: reused)
    for change in (lambda c: setattr(c.e.child.child, "scale", 7.0), lambda c: setattr(c.d, "child", _Part(3.0, c.e)),
                   lambda c: setattr(c, "b", _Part(9.0)), lambda c: setattr(c.a, "scale", -1.0)):
        change(cfg)
        assert_same(_through_parts(x, cfg), eager(x, cfg))
        entries = dispatcher_of(_through_parts).entries  # (each guard reads what it checks: only the first
        assert sum(bool(e.guard.fn(x, _parts())) for e in entries) == 1  # entry's accepts the parts as they were)
    fresh = _parts()
    assert_same(_through_parts(x, fresh), eager(x, fresh))  # (the first entry again: a hit)


def test_a_check_that_reads_beyond_its_guards_sources_gets_locals_of_its_own(monkeypatch):
    """The safety net under the reuse: where a check reads a named value outside the steps its
    guard's sources were counted for (here: sources hidden from the count), the guards are
    rendered again with a local per value, never with one another value may hold."""
    from rewrite.guards import codegen
    real = codegen._sources_of
    monkeypatch.setattr(codegen, "_sources_of", lambda g: real(g)[:0] if "'scale'" in repr(g) else real(g))
    renders = []
    render = codegen._render
    monkeypatch.setattr(codegen, "_render", lambda *a, **k: renders.append(k["reuse"]) or render(*a, **k))
    cfg, x = _parts(), torch.randn(3)
    eager = eager_copy(_through_parts)
    jit(_through_parts)
    assert_same(_through_parts(x, cfg), eager(x, cfg))
    assert renders == [True, False]
    cfg.d.child.child.scale = 5.0
    assert_same(_through_parts(x, cfg), eager(x, cfg))
