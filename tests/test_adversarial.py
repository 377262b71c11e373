"""Adversarial tests: what a trace-time assumption could bake in without a guard.

Every test runs the jitted function next to an eager run of the very same code (an
un-jitted copy made before `jit` rewrites `__code__`), calling the jitted function at
least twice and again after each mutation of the state it reads. The rule: a jitted
function never gives a different result from eager (values, dtypes, shapes, container
types, Python scalars, identity, mutation of inputs, exceptions raised).

Tests that pass are regression tests. Tests marked `xfail(strict=True, reason="BUG: ...")`
show a bug in rewrite that is not fixed yet; they start failing (XPASS) once it is.
"""
from __future__ import annotations

import collections
import enum
import types
import typing

import pytest
import torch
import torch.nn.functional as F

import rewrite
from rewrite import dispatcher_of, jit
from rewrite.errors import InternalError

from conftest import assert_same, eager_copy


def bug(reason):
    return pytest.mark.xfail(strict=True, reason=f"BUG: {reason}")


def limitation(reason):
    """Known and documented: rewrite behaves as Dynamo does here, not as eager."""
    return pytest.mark.xfail(strict=True, reason=f"LIMITATION (as in Dynamo): {reason}")


def clone(obj):
    """Fresh lists and dicts for each run; tensors are passed as they are (layout, offset and
    identity matter here; tests that mutate inputs make their own copies)."""
    if isinstance(obj, list):
        return [clone(o) for o in obj]
    if isinstance(obj, dict):
        return {k: clone(v) for k, v in obj.items()}
    if type(obj) is tuple:
        return tuple(clone(o) for o in obj)
    return obj


def outcome(fn, *args, **kwargs):
    """('ok', result) or ('raises', exception type) -- what a call did."""
    try:
        return "ok", fn(*args, **kwargs)
    except Exception as e:  # noqa: BLE001  (the exception type is what is compared)
        return "raises", type(e)


def assert_same_outcome(actual, expected):
    assert actual[0] == expected[0], (actual, expected)
    if expected[0] == "raises":
        assert actual[1] is expected[1], (actual[1], expected[1])
    else:
        assert_same(actual[1], expected[1])


class Twin:
    """A jitted function and its eager copy, called side by side on fresh copies of the args."""

    def __init__(self, fn, **options):
        self.eager = eager_copy(fn)
        self.fn = jit(fn, **options)

    def check(self, *args, **kwargs):
        expected = outcome(self.eager, *clone(args), **clone(kwargs))
        actual = outcome(self.fn, *clone(args), **clone(kwargs))
        assert_same_outcome(actual, expected)
        return actual

    def check_twice(self, *args, **kwargs):
        self.check(*args, **kwargs)
        return self.check(*args, **kwargs)


def ones(*shape, dtype=torch.float32):
    return torch.ones(*shape, dtype=dtype)


def t(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


# module-level state read (and mutated between calls) by the tests below
SCALES = [2, 3]
NESTED = {"a": {"k": [1, 2]}, "b": (1, 2)}
CFG_MODULE = types.ModuleType("cfg_module")
CFG_MODULE.scale = 2


# --------------------------------------------------------------------------------------------
# mutable state read through globals, attributes, items, closures and defaults
# --------------------------------------------------------------------------------------------

def test_global_list_item_and_length_mutated():
    def f(x):
        return x * SCALES[0] + len(SCALES)

    tw = Twin(f)
    tw.check_twice(ones(2))
    SCALES[0] = 5
    tw.check_twice(ones(2))
    SCALES.append(7)
    tw.check_twice(ones(2))
    del SCALES[2:]
    SCALES[0] = 2
    tw.check(ones(2))


def test_nested_global_container_mutated():
    def f(x):
        return x * NESTED["a"]["k"][1] + NESTED["b"][0]

    tw = Twin(f)
    tw.check_twice(ones(2))
    NESTED["a"]["k"][1] = 10
    tw.check_twice(ones(2))
    NESTED["a"] = {"k": [0, -1]}
    tw.check_twice(ones(2))
    NESTED["b"] = (True, 2)  # equal to (1, 2) but a bool: x + True is still x + 1 for floats
    tw.check_twice(ones(2))
    NESTED["a"], NESTED["b"] = {"k": [1, 2]}, (1, 2)


def test_instance_class_and_inherited_attributes_mutated():
    class Base:
        k = 2

    class Sub(Base):
        pass

    obj = Sub()

    def f(x):
        return x * obj.k + Sub.k

    tw = Twin(f)
    tw.check_twice(ones(2))
    Base.k = 3  # inherited class attribute
    tw.check_twice(ones(2))
    obj.k = 10  # now shadowed on the instance
    tw.check_twice(ones(2))
    Sub.k = 100  # shadowed on the subclass
    tw.check_twice(ones(2))
    del obj.k
    tw.check_twice(ones(2))


def test_user_module_attribute_mutated():
    def f(x):
        return x * CFG_MODULE.scale

    tw = Twin(f)
    tw.check_twice(ones(2))
    CFG_MODULE.scale = 2.5
    tw.check_twice(ones(2))
    CFG_MODULE.scale = 2


def test_inlined_helper_mutable_default_mutated_between_calls():
    def helper(v, weights=[1.0, 2.0], *, bias={"b": 0.5}):
        return v * weights[1] + bias["b"]

    def f(x):
        return helper(x)

    tw = Twin(f)
    tw.check_twice(ones(2))
    helper.__defaults__[0][1] = -3.0
    tw.check_twice(ones(2))
    helper.__kwdefaults__["bias"]["b"] = 7
    tw.check_twice(ones(2))
    helper.__defaults__ = ([0.0, 4.0],)
    tw.check_twice(ones(2))


def test_closure_over_mutable_containers():
    state = {"scale": [2.0], "on": True}

    def f(x):
        return x * state["scale"][0] if state["on"] else x

    tw = Twin(f)
    tw.check_twice(ones(2))
    state["scale"][0] = 4.0
    tw.check_twice(ones(2))
    state["on"] = 1  # equal to True, different type: still truthy
    tw.check_twice(ones(2))
    state["on"] = False
    tw.check_twice(ones(2))


def test_method_and_property_of_user_class():
    class Scaler:
        def __init__(self, k):
            self.k = k

        @property
        def double(self):
            return self.k * 2

        def apply(self, x):
            return x * self.double + self.k

    a, b = Scaler(1), Scaler(3)

    def f(s, x):
        return s.apply(x)

    tw = Twin(f)
    for s in (a, b, a):
        tw.check_twice(s, ones(2))
    a.k = 5
    tw.check_twice(a, ones(2))


def test_getattr_default_and_hasattr_see_new_attributes():
    class Cfg:
        pass

    cfg = Cfg()

    def f(x):
        return x * getattr(cfg, "scale", 1), hasattr(cfg, "scale")

    tw = Twin(f)
    tw.check_twice(ones(2))
    cfg.scale = 5
    tw.check_twice(ones(2))  # jit: (x * 1, False); eager: (x * 5, True)


def test_class_attribute_through_type_of_instance():
    class Cfg:
        k = 2

    cfg = Cfg()

    def f(x):
        return x * type(cfg).k

    tw = Twin(f)
    tw.check_twice(ones(2))
    Cfg.k = 7
    tw.check_twice(ones(2))  # jit: x * 2


def test_append_to_class_level_list_through_type():
    class Registry:
        items = []

    reg = Registry()

    def f(x):
        type(reg).items.append(1)
        return x * len(type(reg).items)

    jit(f)
    assert_same(f(ones(2)), ones(2) * 1)
    assert_same(f(ones(2)), ones(2) * 2)  # jit: x * 1
    assert Registry.items == [1, 1]


def test_property_replaced_on_class():
    class P:
        @property
        def s(self):
            return 2

    p = P()

    def f(x):
        return x * p.s

    tw = Twin(f)
    tw.check_twice(ones(2))
    P.s = property(lambda self: 9)
    tw.check_twice(ones(2))  # jit: x * 2


def test_property_getter_closure_mutated():
    def make():
        scale = [2]

        class Q:
            @property
            def s(self):
                return scale[0]
        return Q(), scale

    q, scale = make()

    def f(x):
        return x * q.s

    tw = Twin(f)
    tw.check_twice(ones(2))
    scale[0] = 9
    tw.check_twice(ones(2))  # jit: x * 2


def test_staticmethod_with_mutable_default():
    class S:
        @staticmethod
        def count(x, seen=[]):
            seen.append(1)
            return x * len(seen)

    s = S()

    def f(x):
        return s.count(x)

    jit(f)
    assert_same(f(ones(2)), ones(2) * 1)
    assert_same(f(ones(2)), ones(2) * 2)  # jit: x * 1 again
    assert S.count.__defaults__ == ([1, 1],)


def test_custom_getattribute_is_respected():
    class Weird:
        def __init__(self):
            self.k = 2

        def __getattribute__(self, name):
            if name == "k":
                return 10
            return object.__getattribute__(self, name)

    w = Weird()

    def f(x):
        return x * w.k

    Twin(f).check_twice(ones(2))  # jit: x * 2, eager: x * 10


def test_builtin_shadowed_by_a_module_global_later():
    def f(x):
        return x * abs(-2)

    tw = Twin(f)
    tw.check_twice(ones(2))
    globals()["abs"] = lambda v: 10
    try:
        tw.check_twice(ones(2))  # jit still calls the builtin
    finally:
        del globals()["abs"]


@limitation("attributes of torch modules are trusted constants: a torch function monkeypatched while "
     "tracing (then restored) stays baked into the graph")
def test_torch_function_patched_during_first_call_then_restored():
    def f(x):
        return F.relu(x)

    original = F.relu
    tw = Twin(f)
    F.relu = lambda v, inplace=False: v * 7
    try:
        tw.check_twice(-ones(2))
    finally:
        F.relu = original
    tw.check_twice(-ones(2))  # jit: -7, eager: 0


def test_torch_backends_flag_changed_between_calls():  # (guarded: markers.STATE)
    def f(x):
        return x * 2 if torch.backends.cudnn.deterministic else x * 3

    old = torch.backends.cudnn.deterministic
    tw = Twin(f)
    try:
        tw.check_twice(ones(2))
        torch.backends.cudnn.deterministic = not old
        tw.check_twice(ones(2))
    finally:
        torch.backends.cudnn.deterministic = old


def test_default_dtype_changed_between_calls():
    def f(x):
        y = torch.ones(2)
        z = x + 1.5  # int tensor + float: the default dtype
        return y.dtype, z.dtype, torch.zeros(1, dtype=z.dtype)

    tw = Twin(f)
    x = ones(2, dtype=torch.int32)
    tw.check_twice(x)
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        tw.check_twice(x)  # jit: float32s
    finally:
        torch.set_default_dtype(old)


@pytest.mark.parametrize("op", [lambda x, y: x * 1.5, lambda x, y: 2.5 - x, lambda x, y: x + 1j,
                                lambda x, y: torch.add(x, 0.5), lambda x, y: torch.where(x > 0, 0.5, x),
                                lambda x, y: x == 16777217.5, lambda x, y: x / 2, lambda x, y: torch.true_divide(x, x),
                                lambda x, y: x.sqrt(), lambda x, y: torch.exp(x), lambda x, y: torch.tensor([1.5]) + x,
                                lambda x, y: (y * 0.5, x + y), lambda x, y: (x.float(), x.to(torch.float64))],
                         ids=["tensor-float", "float-tensor", "complex", "function", "where", "comparison",
                              "true-division", "true_divide", "sqrt", "exp", "factory", "float-tensors", "casts"])
def test_the_default_dtype_shapes_a_result_of_integer_tensors(op):
    """A float or complex scalar meeting an integer tensor, either side of an operator (a
    comparison too: 16777217 is not a float32), or a floating result of integer tensors alone
    (true division, `sqrt`, `exp`) is the default dtype's -- one op alone, no factory call to
    guard it otherwise, its dtype read by the trace; a float tensor beside it, or a cast that
    names its dtype, does not read it."""
    def f(x, y):
        r = op(x, y)
        return r, [t.dtype for t in (r if isinstance(r, tuple) else (r,))]  # (a dtype the trace reads: a constant)

    tw = Twin(f)
    x, y = torch.tensor([1, 4, 16777217], dtype=torch.int32), torch.ones(3, dtype=torch.float64)
    tw.check_twice(x, y)
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        tw.check_twice(x, y)
    finally:
        torch.set_default_dtype(old)


def test_constants_loaded_again_in_a_loop_are_eagers():
    """A constant loaded by one instruction in every iteration (the tracer makes its Var once per
    instruction) compares, folds and breaks as eager's does."""
    def f(x):
        seen = []
        for i in range(4):
            k = 2
            if i is not None and k == 2:
                seen.append(k + i)
            if i == 3:
                print("break")  # (a graph break after the constant's loads: the resume reads it)
            x = x * k
        return x, seen, 2 in seen

    tw = Twin(f)
    tw.check_twice(torch.ones(2))


def test_a_call_under_a_mode_leaves_later_calls_compiled():
    """A call made under a TorchDispatchMode (FlopCounterMode) runs eagerly, the mode seeing
    eager's ops; the entry that runs it takes only calls under a mode -- before, it took every
    call after it, and the function ran eagerly from then on."""
    from torch.utils.flop_counter import FlopCounterMode

    def f(x, w):
        return (x @ w).relu() * 2

    tw = Twin(f)
    x, w = t(4, 8), t(8, 3, seed=1)
    tw.check_twice(x, w)
    counted = []
    for fn in (tw.fn, tw.eager):
        with FlopCounterMode(display=False) as flops:
            assert_same(fn(x, w), tw.eager(x, w))
        counted.append(flops.get_total_flops())
    assert counted[0] == counted[1] > 0
    tw.check_twice(x, w)
    entries = rewrite.dispatcher_of(tw.fn).entries
    taking = [e for e in entries if e.guard.fn(x, w)]
    assert taking and taking[0].reason is None and taking[0].graph, [e.reason for e in entries]


def test_a_function_mode_around_a_later_call_is_eagers():
    """`with torch.device("meta"):` (a TorchFunctionMode) around a call of a function compiled
    without one: eager's factories make meta tensors, and what the function reads of them is
    meta's -- the compiled entry must not answer with the device its trace read."""
    def f(x):
        z = torch.zeros(2)
        return z.device.type, z.shape, x.device.type

    tw = Twin(f)
    x = t(3)
    tw.check_twice(x)
    with torch.device("meta"):
        assert tw.fn(x) == tw.eager(x) == ("meta", torch.Size([2]), "cpu")
    tw.check_twice(x)
    entries = rewrite.dispatcher_of(tw.fn).entries
    taking = [e for e in entries if e.guard.fn(x)]
    assert taking[0].reason is None and taking[0].graph, [e.reason for e in entries]  # (later calls: compiled)


def test_storage_offset_of_views():
    def f(x):
        return x.storage_offset(), x * 2

    base = torch.arange(10.0)
    tw = Twin(f)
    tw.check_twice(base[1:5])
    tw.check_twice(base[2:6])  # same size and stride, other offset: jit returns 1


# --------------------------------------------------------------------------------------------
# values that compare equal but differ in type, identity or meaning
# --------------------------------------------------------------------------------------------

def test_scalars_equal_but_of_other_types_inside_containers():
    def f(x, t, d):
        return x * t[0], [type(v).__name__ for v in t], d["k"], type(d["k"])

    tw = Twin(f)
    for t_ in [(1, 2), (True, 2), (1.0, 2), (1, 2.0), (1, 2)]:
        for k in (1, True, 1.0):
            tw.check(ones(2), t_, {"k": k})


def test_signed_zero_and_nan_inside_containers():
    def f(x, t):
        return x / t[0], t[1] != t[1]

    tw = Twin(f)
    for t_ in [(0.0, 1.0), (-0.0, 1.0), (0.0, float("nan")), (-0.0, float("nan"))]:
        tw.check_twice(ones(2), t_)


def test_dict_key_true_versus_1():
    def f(x, d):
        return x, list(d)

    tw = Twin(f)
    tw.check_twice(ones(1), {1: "a"})
    tw.check_twice(ones(1), {True: "a"})  # jit: [1], eager: [True]


def test_range_arguments_equal_as_sequences():
    def f(x, r):
        return x * r.stop, len(r)

    tw = Twin(f)
    tw.check_twice(ones(2), range(0, 4, 2))
    tw.check_twice(ones(2), range(0, 3, 2))  # jit: x * 4


class Level(enum.IntEnum):
    ONE = 1
    TWO = 2
    FOUR = 4


class MyFloat(float):
    pass


NUMBER_LIKE = {
    # objects that are not plain int/float get only a type guard, but their value goes into the graph
    "numpy_float64": lambda v: pytest.importorskip("numpy").float64(v),
    "int_enum": Level,
    "float_subclass": MyFloat,
}


@pytest.mark.parametrize("kind", sorted(NUMBER_LIKE))
def test_number_like_argument_value_is_not_baked(kind):
    make = NUMBER_LIKE[kind]

    def f(x, s):
        return x * s

    tw = Twin(f)
    tw.check_twice(ones(2), make(2))
    tw.check_twice(ones(2), make(4))  # jit: x * 2


def test_memory_format_argument():
    def f(x, fmt):
        return x.contiguous(memory_format=fmt).stride()

    x = ones(2, 3, 4, 5)
    tw = Twin(f)
    tw.check_twice(x, torch.channels_last)
    tw.check_twice(x, torch.contiguous_format)  # jit: channels_last strides


def test_int_enum_identity():
    class Level(enum.IntEnum):
        A = 1
        B = 2

    def f(x, m):
        return x * 2 if m is Level.A else x * 3

    tw = Twin(f)
    tw.check_twice(ones(2), Level.A)
    tw.check_twice(ones(2), Level.B)  # jit: x * 2


def test_is_between_equal_ints():
    def f(x, a, b):
        return x * (2 if a is b else 3)

    big = 10 ** 6
    other = int(str(big))  # equal, another object
    tw = Twin(f)
    tw.check_twice(ones(1), big, big)
    tw.check_twice(ones(1), big, other)  # jit: x * 2


def test_enum_identity_and_is_between_inputs():
    class Color(enum.Enum):
        R = 1
        G = 2

    def f(x, c, a, b):
        return x * (2 if c is Color.R else 3) + (10 if a is b else 0) + (a == b)

    tw = Twin(f)
    one, other = [1], [1]
    for args in [(Color.R, one, one), (Color.G, one, other), (Color.R, one, other), (Color.G, one, one)]:
        tw.fn(ones(1), *args)  # no clone: identity between the lists matters
        assert_same(tw.fn(ones(1), *args), tw.eager(ones(1), *args))


# --------------------------------------------------------------------------------------------
# Python semantics the tracer reimplements
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("which", ["max_iterable", "min_args"])
def test_min_max_with_key(which):
    def f(x, xs):
        if which == "max_iterable":
            return x * len(max(xs, key=len))
        return x * min(xs[0], xs[1], key=len).count("a")

    Twin(f).check_twice(ones(2), ["a", "bbb", "cc"] if which == "max_iterable" else ["b", "aa"])


def test_list_sort_with_key_and_reverse():
    def f(x, names):
        names = list(names)
        names.sort(key=len)
        nums = [3, 1, 2]
        nums.sort(reverse=True)
        return x * nums[0], names, nums

    Twin(f).check_twice(ones(2), ["zz", "a", "yyy"])


def test_min_max_sum_sorted_defaults():
    def f(x, xs):
        return x * max(xs, default=0) + min([], default=3) + sum(xs, 10), sorted(xs, reverse=True)

    tw = Twin(f)
    tw.check_twice(ones(2), [5, 2])
    tw.check_twice(ones(2), [])


@pytest.mark.parametrize("what", ["returned", "live", "mutated_while_iterating"])
def test_dict_views(what):
    def f(x):
        d = {"a": x}
        if what == "returned":
            return d.keys(), d.values(), d.items()
        if what == "live":
            keys = d.keys()
            d["b"] = x
            return x * len(keys)
        for k, v in d.items():  # eagerly: RuntimeError, dictionary changed size during iteration
            d["b"] = v
        return x * len(d)

    Twin(f).check_twice(ones(2))


def test_for_loop_sees_appends_and_dict_size_change_raises():
    def grow(x):
        xs = [1]
        for a in xs:
            if len(xs) < 4:
                xs.append(a + 1)
        return x * len(xs), xs

    def shrink(x):
        d = {"a": 1, "b": 2}
        for k in d:
            d.pop("b", None)
        return x

    Twin(grow).check_twice(ones(2))
    Twin(shrink).check_twice(ones(2))


def test_enumerate_over_a_list_growing_in_the_loop():
    def f(x):
        xs = [1]
        seen = []
        for i, a in enumerate(xs):
            if len(xs) < 3:
                xs.append(a + 1)
            seen.append(i)
        return x * len(seen)

    Twin(f).check_twice(ones(2))  # jit: x * 1, eager: x * 3


def test_generator_interleaved_with_its_consumer():
    def sizes(lst):
        for _ in range(3):
            yield len(lst)

    def f(x):
        lst = []
        for n in sizes(lst):
            lst.append(n)
        return x * sum(lst)

    Twin(f).check_twice(ones(2))  # jit: x * 0, eager: x * 3


def test_generator_expression_late_binding():
    def f(x):
        n = 1
        g = (x * n for _ in range(2))
        n = 10
        return sum(g)

    Twin(f).check_twice(ones(2))  # jit: 2x, eager: 20x


@pytest.mark.parametrize("call", ["duplicate", "unknown"])
def test_namedtuple_construction_errors(call):
    P = collections.namedtuple("P", "x y")

    def f(x):
        if call == "duplicate":
            return P(1, 2, x=3)
        return P(x=1, y=2, z=3)

    Twin(f).check_twice(ones(2))  # jit returns a P; eager raises TypeError


def test_torch_size_arithmetic_keeps_type():
    def f(x, t):
        return t + x.shape, (1,) + x.shape, x.shape * 2

    Twin(f).check_twice(ones(2, 3), (5,))


def test_torch_size_slicing_and_concat():
    def f(x):
        return x.shape[1:], x.shape + (1,), x.shape + x.shape, 2 * x.shape, x.view(*x.shape[:1], -1)

    Twin(f).check_twice(ones(2, 3, 4))


def test_list_and_dict_aliasing_inside():
    def f(x):
        a = []
        b = a
        b += [x]
        d = {"l": a}
        d["l"].append(x * 2)
        return a, d, a is d["l"]

    tw = Twin(f)
    tw.check_twice(ones(2))
    out = tw.fn(ones(2))
    assert out[0] is out[1]["l"]


def test_nested_function_with_nonlocal_state():
    def f(x):
        count = 0

        def bump(v):
            nonlocal count
            count += 1
            return v * count

        return bump(x) + bump(x), count

    Twin(f).check_twice(ones(2))


def test_recursion():
    def depth(v, n):
        return v if n == 0 else depth(v * 2, n - 1)

    def f(x, n):
        return depth(x, n)

    tw = Twin(f)
    for n in (0, 3, 5, 3, 40):  # 40: deeper than max_inline_depth, runs eagerly
        tw.check_twice(ones(2), n)


def test_jitted_recursive_function():
    def f(x, n):
        return x if n <= 0 else f(x + 1, n - 1) * 2

    def expected(x, n):  # the eager copy would recurse into the jitted f: compare with plain Python
        return x if n <= 0 else expected(x + 1, n - 1) * 2

    jit(f)
    for n in (1, 4, 1, 40):
        for _ in range(2):
            assert_same(f(ones(2), n), expected(ones(2), n))


def test_returned_inputs_and_nested_structures_keep_identity():
    def f(x, xs, d):
        inner = [x * 2, xs]
        return x, xs, d, xs[0], d["t"], {"inner": inner, "again": inner}, (x, [xs, d])

    jit_f, e = Twin(f).fn, eager_copy(f)
    for _ in range(2):
        x, xs, d = ones(2), [ones(1), 3], {"t": ones(3), "n": 1.5}
        got, exp = jit_f(x, xs, d), e(x, xs, d)
        assert_same(got, exp)
        assert got[0] is x and got[1] is xs and got[2] is d and got[3] is xs[0] and got[4] is d["t"]
        assert got[5]["inner"] is got[5]["again"] and got[6][1][0] is xs and got[6][1][1] is d
        assert xs == [xs[0], 3] and list(d) == ["t", "n"]  # inputs not mutated


def test_call_shapes_varargs_kwonly_kwargs():
    def f(x, *args, scale=1, **kw):
        return x * scale + sum(args) + sum(kw.values()), sorted(kw)

    tw = Twin(f)
    tw.check_twice(ones(2))
    tw.check_twice(ones(2), 1, 2)
    tw.check_twice(ones(2), scale=3)
    tw.check_twice(ones(2), 1, scale=True, b=2, a=1)
    tw.check_twice(ones(2), 1, scale=3, a=1, b=2)  # the same keys in another order
    tw.check_twice(x=ones(2))


def test_factory_made_closures_share_one_dispatcher():
    def make(k):
        def f(x):
            return x * k[0]
        return f

    f2, f3 = make([2]), make([3])
    e2, e3 = eager_copy(f2), eager_copy(f3)
    jit(f2), jit(f3)
    for _ in range(2):
        assert_same(f2(ones(1)), e2(ones(1)))
        assert_same(f3(ones(1)), e3(ones(1)))


def test_many_argument_kinds_recompile_and_lru_order():
    def f(x, n=1):
        return x.sum(0) * x.shape[0] + n

    tw = Twin(f)
    kinds = [(ones(i % 5 + 1, 2), n) for i in range(12) for n in (1, 2.5, True)]
    for args in kinds + kinds[::-1]:
        tw.check(*args)
    assert len(dispatcher_of(f).entries) <= rewrite.config.recompile_limit


# --------------------------------------------------------------------------------------------
# exceptions: same type as eager, on the first and later calls, never InternalError
# --------------------------------------------------------------------------------------------

def test_errors_raised_on_first_and_later_calls():
    def f(x, w, d, n):
        return (x @ w) * d["k"] * (10 // n)

    tw = Twin(f)
    good = (ones(2, 3), ones(3, 3), {"k": 1}, 2)
    bad = [(ones(2, 3), ones(2, 3), {"k": 1}, 2), (ones(2, 3), ones(3, 3), {"j": 1}, 2),
           (ones(2, 3), ones(3, 3), {"k": 1}, 0)]
    for args in [*bad, good, *bad, good]:
        tw.check_twice(*args)


@pytest.mark.parametrize("case", ["index", "cholesky"])
def test_except_clause_around_data_dependent_failure(case):
    def f(x, i):
        try:
            if case == "index":
                return x[i]
            return torch.linalg.cholesky(x)
        except (IndexError, RuntimeError):
            return torch.zeros(1)

    tw = Twin(f)
    if case == "index":
        tw.check_twice(torch.arange(3.0), torch.tensor([1]))
        tw.check_twice(torch.arange(3.0), torch.tensor([5]))  # jit raises IndexError
    else:
        tw.check_twice(torch.eye(2), None)
        tw.check_twice(-torch.eye(2), None)  # jit raises LinAlgError


def _index_missing(x, v):
    return x * [1, 2].index(v)


def _tuple_index_missing(x, v):
    return x * (1, 2).index(v)


def _pop_out_of_range(x, v):
    xs = [1, 2]
    return x * xs.pop(v)


def _int_in_str(x, v):
    return x if v in "abc" else -x


def _unhashable_key(x, v):
    d = {}
    d[(1, [v])] = x
    return d


def _isinstance_bad_class(x, v):
    return isinstance(x, (int, "not a class"))


ERRORS = {
    "list_index_missing": _index_missing,
    "tuple_index_missing": _tuple_index_missing,
    "list_pop_out_of_range": _pop_out_of_range,
    "int_in_str": _int_in_str,
    "unhashable_tuple_key": _unhashable_key,
    "isinstance_bad_class": _isinstance_bad_class,
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_user_error_while_tracing_raises_like_eager(name):
    fn = ERRORS[name]

    def f(x, v):
        return fn(x, v)

    tw = Twin(f)
    for _ in range(2):
        with pytest.raises(Exception) as err:
            tw.fn(ones(2), 5)
        assert not isinstance(err.value, InternalError), err.value
    tw.check_twice(ones(2), 5)


def test_slice_assignment_on_local_list():
    def f(x):
        xs = [1, 2, 3]
        xs[1:] = [9]
        return x * len(xs), xs

    Twin(f).check_twice(ones(2))


def test_slice_argument():
    def f(x, s):
        return x[s], s.start

    tw = Twin(f)
    tw.check_twice(torch.arange(4.0), slice(1, 3))
    tw.check_twice(torch.arange(4.0), slice(0, 2))


def test_isinstance_runtime_checkable_protocol():
    @typing.runtime_checkable
    class HasScale(typing.Protocol):
        scale: float

    class Obj:
        def __init__(self):
            self.scale = 2.0

    def f(x, o):
        return x * 2 if isinstance(o, HasScale) else x

    Twin(f).check_twice(ones(2), Obj())


@pytest.mark.parametrize("which", ["existing_output", "missing_output"])
def test_string_constant_that_looks_like_a_graph_output(which):
    if which == "existing_output":
        def f(x):
            return x + 1, "___o[0]"  # jit returns 'add', the graph output's name
    else:
        def f(x):
            return x + 1, "___o[3]"  # jit raises InternalError (IndexError)

    Twin(f).check_twice(ones(2))


@pytest.mark.parametrize("param", ["torch", "float"])
def test_parameter_named_like_a_name_the_generated_code_uses(param):
    import torch as th
    if param == "torch":
        def f(x, torch):
            return x.to(th.float64) * torch
    else:
        def f(x, float):
            return x.masked_fill(x > 0, th.inf) * float

    Twin(f).check_twice(ones(2), 3)


# --------------------------------------------------------------------------------------------
# tensors: aliasing, layouts, autograd, grad mode, RNG, dtypes
# --------------------------------------------------------------------------------------------

def test_ops_returning_their_input_keep_identity():
    def f(x):
        return x.contiguous(), x.to(x.dtype), x.float(), x.type_as(x), x

    jit_f, e = Twin(f).fn, eager_copy(f)
    for _ in range(2):
        x = ones(3)
        assert [o is x for o in jit_f(x)] == [o is x for o in e(x)]


def test_tensor_passed_twice_and_aliasing_views():
    def f(a, b):
        return a + b, a is b, (a * 2).add_(b)

    tw = Twin(f)
    base = t(4, 4)
    x = t(4, 4, seed=1)
    for args in [(x, x), (x, base), (base, base.T), (base, base[0]), (x, x)]:
        exp = tw.eager(*args)
        assert_same(tw.fn(*args), exp)
        assert_same(tw.fn(*args), exp)


@pytest.mark.parametrize("make", [
    lambda: t(3, 4).T,                      # non-contiguous
    lambda: t(1, 4).expand(3, 4),           # stride 0
    lambda: torch.empty(0, 4),              # zero-size
    lambda: torch.tensor(2.5),              # 0-dim
    lambda: t(2, 8)[:, ::2],                # strided view
    lambda: t(1, 4),                        # size-1 dim
], ids=["transposed", "expanded", "zero_size", "zero_dim", "strided", "size_one"])
def test_unusual_layouts(make):
    def f(x):
        y = x * 2 + 1
        return y.sum(), y.reshape(-1), x.is_contiguous(), x.stride(), x.numel(), (y - x).contiguous()

    tw = Twin(f)
    tw.check_twice(make())
    tw.check_twice(make().clone())


def test_inplace_metadata_op_on_zero_size_input():
    def f(x):
        x.unsqueeze_(0)
        return x.shape

    jit_f, e = Twin(f).fn, eager_copy(f)
    x, xe = torch.empty(0), torch.empty(0)
    assert_same(jit_f(x), e(xe))
    assert x.shape == xe.shape  # jit: [1, 1, 0], eager: [1, 0]


def test_inplace_on_values_of_sparse_input():
    def f(x):
        x.values().mul_(2)
        return x.to_dense()

    def sparse():
        return torch.sparse_coo_tensor(torch.tensor([[0, 1], [1, 0]]), torch.tensor([1.0, 2.0]), (2, 2)).coalesce()

    jit_f, e = Twin(f).fn, eager_copy(f)
    for _ in range(2):
        x, xe = sparse(), sparse()
        assert_same(jit_f(x), e(xe))
        assert_same(x.values(), xe.values())  # first call: values multiplied by 4


def test_backward_through_inplace_ops_on_intermediate_views():
    def f(x, w):
        y = x * w
        y[0].mul_(3)
        z = y.view(-1)
        z.add_(1)
        return (y * y).sum(), y.T.contiguous()

    e = eager_copy(f)
    jit(f)
    x0, w0 = t(2, 3), t(2, 3, seed=1)

    def grads(fn):
        x, w = x0.clone().requires_grad_(), w0.clone().requires_grad_()
        loss, other = fn(x, w)
        (loss + other.sum()).backward()
        return loss.detach(), x.grad, w.grad, other.requires_grad

    expected = grads(e)
    for _ in range(2):
        assert_same(grads(f), expected)


def test_grad_mode_and_inference_mode_around_calls():
    def f(x):
        y = x * 2
        return y, y.requires_grad

    tw = Twin(f)
    x = t(3).requires_grad_()
    for mode in (torch.no_grad, torch.enable_grad, torch.inference_mode, torch.no_grad, torch.enable_grad):
        with mode():
            got, exp = tw.fn(x), tw.eager(x)
        assert got[0].requires_grad == exp[0].requires_grad and got[1] == exp[1]
        assert_same(got[0].detach(), exp[0].detach())
    out, _ = tw.fn(x)
    out.sum().backward()
    assert_same(x.grad, torch.full((3,), 2.0))


def test_tensor_subclass_and_parameter_inputs():
    class Sub(torch.Tensor):
        pass

    def f(x):
        y = x + 1
        return y, type(y), isinstance(x, Sub), isinstance(x, torch.nn.Parameter)

    tw = Twin(f)
    for x in (ones(2).as_subclass(Sub), ones(2), torch.nn.Parameter(ones(2)), ones(2).as_subclass(Sub)):
        got, exp = tw.fn(x), tw.eager(x)
        assert type(got[0]) is type(exp[0]) and got[1:] == exp[1:]
        assert_same(got[0].as_subclass(torch.Tensor).detach(), exp[0].as_subclass(torch.Tensor).detach())


def test_conjugate_bit_is_guarded():
    def f(z):
        return torch.view_as_real(z)

    z = torch.randn(3, dtype=torch.cfloat, generator=torch.Generator().manual_seed(0))
    tw = Twin(f)
    for arg in (z, z.conj(), z, z.conj().resolve_conj()):
        tw.check_twice(arg)


@pytest.mark.parametrize("dtype", [torch.int8, torch.int32, torch.int64, torch.bool, torch.float16])
def test_dtype_promotion_with_python_scalars(dtype):
    def f(x, i, fl, b):
        return x + i, x * fl, x / 2, x // 3 if dtype != torch.bool else x, x + b, (x > 0) * 2.5, x - (2 ** 31)

    tw = Twin(f)
    x = torch.tensor([-3, 0, 5]).to(dtype)
    tw.check_twice(x, 2, 1.5, True)
    tw.check_twice(x, 200, -0.5, False)


def test_integer_overflow_wraps_like_eager():
    def f(x, n):
        return x * n, x + 2 ** 31, (x + 120).to(torch.int8)

    tw = Twin(f)
    tw.check_twice(ones(2, dtype=torch.int32), 2 ** 40)
    tw.check_twice(ones(2, dtype=torch.int64), 2 ** 62)


def test_nan_handling():
    def f(x, v):
        return torch.where(x > 0, x, v), v != v, max(v, 1.0), x.nan_to_num(), torch.nanmean(x), x.max()

    tw = Twin(f)
    x = torch.tensor([1.0, float("nan"), -1.0])
    for v in (float("nan"), 2.0, float("inf"), float("nan")):
        tw.check_twice(x, v)


def test_rng_matches_eager_under_manual_seed():
    def f(x):
        _ = torch.rand(2)  # unused, still consumes the generator
        y = F.dropout(x, 0.5, True)
        return y + torch.randn_like(x), torch.randint(0, 10, (3,))

    e = eager_copy(f)
    jit(f)
    for _ in range(3):
        torch.manual_seed(0)
        got = f(ones(8))
        after = torch.rand(1)
        torch.manual_seed(0)
        assert_same(got, e(ones(8)))
        assert_same(after, torch.rand(1))  # the same RNG consumption


def test_autocast_is_guarded():
    def f(x, w):
        y = x @ w
        return y.dtype, torch.zeros(2, dtype=y.dtype), y

    tw = Twin(f)
    x, w = t(2, 2), t(2, 2, seed=1)
    tw.check_twice(x, w)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        tw.check_twice(x, w)
    tw.check_twice(x, w)


def test_user_dispatch_mode_sees_each_op_once():
    from torch.utils.flop_counter import FlopCounterMode

    def f(x, w):
        return x @ w

    tw = Twin(f)
    x = t(4, 4)
    for _ in range(2):
        counts = []
        for fn in (tw.fn, tw.eager):
            with FlopCounterMode(display=False) as counter:
                fn(x, x)
            counts.append(counter.get_total_flops())
        assert counts[0] == counts[1], counts
