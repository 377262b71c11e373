"""Coverage of the tracer on many small functions.

Every test compares the jitted function against an eager run of the very same code (an
un-jitted copy of the function, made before `jit` rewrites `__code__` in place), on a
first (compiling) call and a second (cached) call. Supported constructs must also compile
into one graph without a fallback entry; unsupported ones must produce a fallback entry
whose `reason` names the construct, still give eager's result, and with `fullgraph=True`
raise `rewrite.Unsupported` naming the file and line.
"""
from __future__ import annotations

import collections
import contextlib
import inspect
import math
import operator
import re
import threading

import pytest
import torch
import torch.nn.functional as F

import rewrite
from conftest import eager_copy
from rewrite import Unsupported, dispatcher_of, jit

# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------

SCALE = 3  # a module-level int read by compiled functions
MUTABLE_GLOBAL = 10  # changed by a test (restored afterwards)
ASSIGNED_GLOBAL = None  # assigned by a compiled function (unsupported)
Point = collections.namedtuple("Point", ["x", "y"])


def helper_double(x):  # a module-level helper function called by compiled functions
    return x * 2


def helper_affine(x, w=2, *, b=1):
    return x * w + b


def clone(obj):
    """Fresh copies of tensors and containers, so each run sees pristine inputs."""
    if isinstance(obj, torch.Tensor):
        return obj.clone()
    if isinstance(obj, list):
        return [clone(o) for o in obj]
    if isinstance(obj, dict):
        return {k: clone(v) for k, v in obj.items()}
    if isinstance(obj, tuple):
        items = [clone(o) for o in obj]
        return type(obj)(*items) if hasattr(type(obj), "_fields") else type(obj)(items)
    return obj


def assert_same(actual, expected, path="result"):
    """Same container structure and types, same Python scalars, close tensors (dtype, device, shape)."""
    assert type(actual) is type(expected), f"{path}: type {type(actual)} != {type(expected)}"
    if isinstance(expected, torch.Tensor):
        assert actual.shape == expected.shape, f"{path}: shape {actual.shape} != {expected.shape}"
        assert actual.requires_grad == expected.requires_grad, f"{path}: requires_grad differs"
        torch.testing.assert_close(actual, expected, equal_nan=True, msg=lambda m: f"{path}: {m}")
    elif isinstance(expected, (list, tuple)):
        assert len(actual) == len(expected), f"{path}: length {len(actual)} != {len(expected)}"
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_same(a, e, f"{path}[{i}]")
    elif isinstance(expected, dict):
        assert list(actual) == list(expected), f"{path}: keys {list(actual)} != {list(expected)}"
        for k in expected:
            assert_same(actual[k], expected[k], f"{path}[{k!r}]")
    elif isinstance(expected, float) and math.isnan(expected):
        assert math.isnan(actual), path
    else:
        assert actual == expected, f"{path}: {actual!r} != {expected!r}"


def _run(fn, args, kwargs, seed):
    args, kwargs = clone(args), clone(kwargs)
    if seed is not None:
        torch.manual_seed(seed)
    return fn(*args, **kwargs)


def check(fn, *args, graph=True, seed=None, kwargs=None, backends=("eager", None)):
    """Jit copies of `fn` and compare two calls each (compile, then cache hit) with eager's result.

    `fn` itself is left un-jitted, so a test may check it again with other arguments. Each
    backend in `backends` gets its own copy (None: the default backend, checked last).
    graph=True: every entry must be a compiled graph (no fallback reason) and the second
    call must hit the cache. Returns the dispatcher of the last copy.
    """
    kwargs = kwargs or {}
    eager = eager_copy(fn)
    expected = _run(eager, args, kwargs, seed)
    for backend in backends:
        jitted = jit(eager_copy(fn), backend=backend)
        first = _run(jitted, args, kwargs, seed)
        n = len(dispatcher_of(jitted).entries)
        second = _run(jitted, args, kwargs, seed)
        where = f"backend={backend or 'default'}"
        assert_same(first, expected, f"first call ({where})")
        assert_same(second, expected, f"second call ({where})")
        d = dispatcher_of(jitted)
        assert len(d.entries) == n, f"{where}: the second call did not hit the cache"
        if graph:
            reasons = [e.eager_reason for e in d.entries]
            assert all(r is None for r in reasons), f"{where}: expected compiled entries, got {reasons}"
    return d


def calls_match_eager(f, arg_lists):
    """Jit `f` (no copy: guards see changes to its closure) and call it on each argument list in turn, comparing with an eager copy."""
    eager = eager_copy(f)
    jit(f)
    for args in arg_lists:
        assert_same(f(*clone(args)), eager(*clone(args)))
    return dispatcher_of(f)


def check_fallback(fn, *args, reason, seed=0):
    """The unsupported part must run eagerly (a fallback entry or a graph break whose reason
    matches) and the call give eager's result."""
    d = check(fn, *args, graph=False, seed=seed, backends=(None,))
    assert d.entries, "no cache entry was made"
    assert d.entries[0].eager_reason is not None, "expected a fallback entry or a graph break"
    assert re.search(reason, d.entries[0].eager_reason), d.entries[0].eager_reason
    return d


def line_of(fn, marker="# BREAK"):
    """The absolute line number of the source line of `fn` holding `marker`."""
    lines, start = inspect.getsourcelines(fn)
    for i, line in enumerate(lines):
        if marker in line:
            return start + i
    raise AssertionError(f"{marker!r} not found in {fn.__name__}")


def check_fullgraph_raises(fn, *args, reason):
    line = line_of(fn)
    jit(fn, fullgraph=True)
    with pytest.raises(Unsupported) as info:
        fn(*clone(args))
    text = str(info.value)
    assert re.search(reason, text), text
    assert f"{fn.__code__.co_filename}:{line}" in text, text


def t(*shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return torch.randn(*shape, generator=g, dtype=dtype)
    return torch.randint(-5, 5, shape, generator=g, dtype=dtype)


# --------------------------------------------------------------------------------------------
# variables: locals, constants, globals, closure cells
# --------------------------------------------------------------------------------------------

def test_locals_and_constants():
    def f(x):
        a = 2
        b = a + 0.5
        y = x * b
        z = y - a
        return z

    check(f, t(3, 4))


def test_global_int_and_global_function():
    def f(x):
        return helper_double(x) + SCALE

    check(f, t(4))


def test_global_change_recompiles():
    global MUTABLE_GLOBAL

    def f(x):
        return x + MUTABLE_GLOBAL

    x = t(3)
    jit(f)
    try:
        assert_same(f(x), x + 10)
        MUTABLE_GLOBAL = 20
        assert_same(f(x), x + 20)
        assert len(dispatcher_of(f).entries) == 2
    finally:
        MUTABLE_GLOBAL = 10


def test_closure_cells():
    k = 4
    w = t(4, seed=1)

    def f(x):
        return x * k + w

    check(f, t(4))


def test_closure_cell_change_is_seen():
    k = 1

    def f(x):
        return x * k

    x = t(3)
    jit(f)
    assert_same(f(x), x * 1)
    k = 5  # noqa: F841  (rebinds the cell f reads)
    assert_same(f(x), x * 5)


def test_local_reassignment_and_deletion():
    def f(x):
        y = x + 1
        y = y * y
        z = y
        del y
        return z

    check(f, t(3))


# --------------------------------------------------------------------------------------------
# operators
# --------------------------------------------------------------------------------------------

def test_binary_operators_on_tensors():
    def f(a, b):
        return a + b, a - b, a * b, a / b, a // b, a % b, a ** 2, a < b, a <= b, a == b, a != b, a > b, a >= b

    check(f, t(3, 4), t(3, 4, seed=1).abs() + 0.5)


def test_tensor_with_python_number_both_sides():
    def f(x):
        return 2 - x, x * 3, 1.5 / (x.abs() + 1), x ** 2, -x, +x

    check(f, t(5))


def test_type_promotion_int_tensor_and_float():
    def f(i):
        return i + 1.5, i * 2, i / 2, i // 2, (i > 0) + 1

    check(f, t(4, dtype=torch.int64))


def test_matmul_and_bitwise_operators_on_intermediates():
    def f(a, b, m, n):
        m, n = m + 0, n + 0
        return a @ b, m & n, m | n, m ^ n, ~m, m << 1, m >> 1

    check(f, t(2, 3), t(3, 4), t(5, dtype=torch.int32), t(5, dtype=torch.int32, seed=1))


def test_bitwise_operators_on_inputs():
    def f(m, n):
        return m & n, m | n, (m > 0) & (n > 0)

    check(f, t(5, dtype=torch.int32), t(5, dtype=torch.int32, seed=1))


def test_python_number_arithmetic():
    def f(x, n, r):
        a = n * 3 + 1
        b = n / 4
        c = n // 3 + n % 3 - n ** 2
        d = r * 2.0 - 1
        e = -n + abs(-r)
        return x * a + b + c + d + e, a, b, c, d, e, n < r, not n

    check(f, t(3), 7, 0.25)


def test_augmented_assignment_on_intermediate():
    def f(x):
        y = x * 2
        y += 1
        y *= x
        n = 3
        n += 2
        return y, n

    check(f, t(4))


def test_operator_module_functions():
    def f(x, n):
        return operator.add(x, n), operator.mul(n, 3), operator.neg(x), operator.getitem(x, 0)

    check(f, t(3, 2), 2)


def test_math_module_on_python_values():
    def f(x):
        scale = math.sqrt(x.shape[0])
        return x / scale, scale, math.floor(2.7), math.pi, math.log(x.shape[1])

    check(f, t(4, 3))


# --------------------------------------------------------------------------------------------
# tensor attributes and metadata
# --------------------------------------------------------------------------------------------

def test_tensor_metadata_attributes():
    def f(x):
        return x.shape, x.dtype, x.device, x.ndim, x.requires_grad, x.is_floating_point()

    check(f, t(2, 3))


def test_tensor_transposes():
    def f(x, b):
        return x.T, x.mT, b.mT

    check(f, t(2, 3), t(4, 2, 3))


def test_size_dim_numel():
    def f(x):
        return x.size(), x.size(0), x.size(-1), x.dim(), x.numel(), len(x)

    check(f, t(5, 2))


def test_size_arithmetic_feeds_ops():
    def f(x):
        n = x.shape[0] * 2
        h, w = x.shape
        return x.new_zeros(n, w) + 1, torch.zeros(h * w), n

    check(f, t(3, 4))


def test_size_slicing_and_conversion():
    def f(x):
        return x.shape[1:], tuple(x.shape) + (1,), list(x.shape), x.shape + (5,)

    check(f, t(2, 3))


def test_shape_equality():
    def f(x, y):
        return x.shape == y.shape, x.shape != (2, 4)

    check(f, t(2, 3), t(2, 3))


def test_shape_passed_to_torch_function():
    def f(x, y):
        return torch.zeros(x.shape, dtype=x.dtype) + x, y.reshape(x.shape), x.new_zeros(x.size())

    check(f, t(2, 3), t(3, 2))


def test_shape_folded_by_python_functions():
    def f(x):
        return x * math.prod(x.shape), f"{x.shape}", max(x.shape), sum(x.shape)

    check(f, t(2, 3))


# --------------------------------------------------------------------------------------------
# tensor methods
# --------------------------------------------------------------------------------------------

TENSOR_METHODS = {
    "view": lambda x: x.view(6, 4),
    "view_neg": lambda x: x.view(-1),
    "reshape": lambda x: x.reshape(4, -1),
    "permute": lambda x: x.permute(2, 0, 1),
    "transpose": lambda x: x.transpose(0, 2),
    "sum_dim_keepdim": lambda x: x.sum(dim=1, keepdim=True),
    "sum_all": lambda x: x.sum(),
    "mean": lambda x: x.mean(-1),
    "softmax": lambda x: x.softmax(dim=-1),
    "matmul": lambda x: x.matmul(x.transpose(1, 2)),
    "relu": lambda x: x.relu(),
    "to_dtype": lambda x: x.to(torch.float64),
    "to_int": lambda x: x.to(dtype=torch.int32),
    "float": lambda x: x.half().float(),
    "unsqueeze": lambda x: x.unsqueeze(1),
    "expand": lambda x: x[:, :1].expand(2, 5, 4),
    "contiguous": lambda x: x.transpose(0, 1).contiguous(),
    "chain": lambda x: x.abs().sqrt().clamp(min=0.1, max=1.0).exp().log(),
    "max_dim": lambda x: x.max(dim=0),
    "split": lambda x: x.split(1, dim=1),
    "chunk": lambda x: x.chunk(2, dim=-1),
    "flatten": lambda x: x.flatten(1),
    "new_ones": lambda x: x.new_ones(2, 2),
    "type_as": lambda x: x.type_as(torch.ones(1, dtype=torch.float64)),
}


@pytest.mark.parametrize("method", TENSOR_METHODS.values(), ids=TENSOR_METHODS.keys())
def test_tensor_method(method):
    def f(x):
        return method(x)

    check(f, t(2, 3, 4))


# --------------------------------------------------------------------------------------------
# torch.* and torch.nn.functional.*
# --------------------------------------------------------------------------------------------

def test_functional_activations_and_norms():
    def f(x, w, b):
        h = F.linear(x, w, b)
        h = F.relu(h)
        h = F.layer_norm(h, (h.shape[-1],))
        return F.softmax(h, dim=-1), F.gelu(h), F.dropout(h, p=0.5, training=False)

    check(f, t(2, 3), t(5, 3, seed=1), t(5, seed=2))


def test_cat_stack_where():
    def f(a, b):
        c = torch.cat([a, b], dim=0)
        s = torch.stack((a, b), dim=1)
        w = torch.where(a > b, a, b)
        w2 = torch.where(a > 0, a, 0.0)
        return c, s, w, w2

    check(f, t(2, 3), t(2, 3, seed=1))


def test_factories():
    def f(x):
        return (torch.zeros(2, 3), torch.ones(x.shape[0], dtype=torch.int64), torch.arange(5),
                torch.arange(1, 7, 2, dtype=torch.float32), torch.full((2, 2), 1.5), torch.zeros_like(x),
                torch.eye(3), torch.tensor(2.0) * x)

    check(f, t(4))


def test_factories_without_inputs():
    def f():
        return torch.ones(3) * 2, torch.arange(4).view(2, 2)

    check(f)


def test_randn_under_manual_seed():
    def f(x):
        noise = torch.randn(x.shape[0])
        return x + noise, torch.rand(2), torch.randint(0, 10, (3,))

    check(f, t(3), seed=123)


def test_torch_reductions_and_max_with_dim():
    def f(x):
        m = torch.max(x, dim=0)
        vals, idx = torch.max(x, 1)
        return m, m.values, m.indices, vals, idx, torch.amax(x), x.argmax(-1), torch.sum(x, (0, 1))

    check(f, t(3, 4))


def test_torch_functions_with_kwargs_and_dtype():
    def f(x):
        return torch.sum(x, dim=-1, dtype=torch.float64), torch.clamp(x, min=-0.5), torch.softmax(x, -1)

    check(f, t(2, 5))


def test_isinstance_tensor_and_torch_is_tensor():
    def f(x, n):
        a = isinstance(x, torch.Tensor)
        b = isinstance(n, torch.Tensor)
        c = torch.is_tensor(x)
        return x + 1 if a and not b and c else x - 1

    check(f, t(3), 2)


# --------------------------------------------------------------------------------------------
# builtins on Python values and containers
# --------------------------------------------------------------------------------------------

def test_len_range_enumerate_zip():
    def f(xs, x):
        out = x
        for i in range(len(xs)):
            out = out + xs[i] * i
        for i, v in enumerate(xs, start=1):
            out = out + v / i
        for a, b in zip(xs, reversed(xs)):
            out = out + a * b
        return out

    check(f, [t(3, seed=i) for i in range(3)], t(3))


def test_min_max_abs_on_python_values():
    def f(x, a, b):
        n = min(a, b)
        m = max(a, b, 4)
        k = max([a, b])
        return x * n + m + abs(a - b) + k, n, m

    check(f, t(3), 2, 7)


def test_tuple_list_dict_construction():
    def f(x, y):
        tup = (x, y, 1)
        lst = [x, y]
        lst.append(x + y)
        d = {"a": x, "b": 2}
        d["c"] = y * 2
        d2 = dict(p=x, q=3)
        return tup, lst, d, d2, list(tup), tuple(lst), dict(zip(["u", "v"], [x, y]))

    check(f, t(2), t(2, seed=1))


def test_indexing_and_slicing_python_containers():
    def f(xs, d):
        return xs[0] + xs[-1], xs[1:], xs[::-1], d["w"] * d["k"], xs[:2]

    check(f, [t(2, seed=i) for i in range(4)], {"w": t(2), "k": 3})


def test_unpacking():
    def f(pair, triple):
        a, b = pair
        (c, d), e = (triple[0], triple[1]), triple[2]
        return a * b + c + d + e

    check(f, (t(2), t(2, seed=1)), [t(2, seed=i) for i in range(3)])


def test_star_unpacking():
    def f(xs):
        first, *middle, last = xs
        head, *tail = (1, 2, 3)
        return first + last, middle, tail, head

    check(f, [t(2, seed=i) for i in range(5)])


def test_getattr_hasattr():
    def f(x):
        shape = getattr(x, "shape")
        has = hasattr(x, "relu"), hasattr(x, "no_such_thing")
        relu = getattr(x, "relu")
        default = getattr(x, "no_such_thing", 5)
        return relu() * default, shape, has

    check(f, t(3))


def test_container_membership_and_methods():
    def f(x, names):
        keys = {"a": 1, "b": 2}
        out = x
        if "a" in keys:
            out = out + keys["a"]
        if "z" not in names:
            out = out * len(names)
        return out, list(keys.items()), list(keys.values()), names.index("q"), keys.get("c", 0)

    check(f, t(3), ["p", "q"])


def test_sum_sorted_any_all_on_python_values():
    def f(xs, ns):
        return sum(xs), sum(ns), sorted(ns), any([n > 2 for n in ns]), all([n > 0 for n in ns])

    check(f, [t(3, seed=i) for i in range(3)], [3, 1, 2])


def test_generator_expressions():
    def f(x, ns):
        return x * sum(n * 2 for n in ns), any(n > 2 for n in ns), [v * 2 for v in (x + k for k in ns)]

    check(f, t(3), [1, 2])


def test_map_filter_with_lambdas():
    def f(xs, ns):
        doubled = list(map(lambda v: v * 2, xs))
        odd = list(filter(lambda n: n % 2, ns))
        return doubled, odd

    check(f, [t(2), t(2, seed=1)], [1, 2, 3, 4])


# --------------------------------------------------------------------------------------------
# control flow on Python values and sizes
# --------------------------------------------------------------------------------------------

def test_for_loops_over_range_list_tuple_unrolled():
    def f(x, ws):
        for _ in range(3):
            x = x * 2
        for w in ws:
            x = x + w
        for k in (1, 2):
            x = x - k
        return x

    d = check(f, t(3), [t(3, seed=1), t(3, seed=2)])
    assert d.entries[0].ops >= 7  # unrolled: every iteration's op is in the graph


def test_while_loop_break_continue():
    def f(x):
        i = 0
        while True:
            i += 1
            if i % 2 == 0:
                continue
            x = x + i
            if i > 5:
                break
        return x, i

    check(f, t(2))


def test_if_else_on_python_value():
    def f(x, flag, mode):
        if flag:
            x = x + 1
        else:
            x = x - 1
        if mode == "double":
            x = x * 2
        elif mode is None:
            x = -x
        return x if flag else x.abs()

    check(f, t(3), True, "double")
    check(f, t(3), False, None)  # a second trace of the same code, other branches


def test_if_on_size_and_recompile_on_new_shape():
    def f(x):
        if x.shape[0] > 2:
            return x.sum(0)
        return x * 2

    eager = eager_copy(f)
    jit(f)
    for shape in [(4, 3), (2, 3), (4, 3)]:
        x = t(*shape)
        assert_same(f(x), eager(x))
    entries = dispatcher_of(f).entries
    assert len(entries) == 2 and all(e.reason is None for e in entries)


def test_python_scalar_argument_change_recompiles():
    def f(x, n):
        return x * n

    eager = eager_copy(f)
    jit(f)
    x = t(3, dtype=torch.int64)
    for n in [2, 3, 2.0, True]:  # 2.0 and True must not reuse the entry for 2
        assert_same(f(x, n), eager(x, n))


def test_is_none_and_optional_argument():
    def f(x, bias=None):
        if bias is not None:
            x = x + bias
        return x * 2

    check(f, t(3))
    check(f, t(3), t(3, seed=1))


def test_boolean_short_circuit_on_python_values():
    def f(x, a, b):
        c = a and b
        d = a or b
        e = (x.ndim == 1) and (x.shape[0] > 1)
        return x + (c or 0) + d, e

    check(f, t(3), 0, 5)


# --------------------------------------------------------------------------------------------
# calls to user functions (inlined)
# --------------------------------------------------------------------------------------------

def test_inline_with_defaults_and_keywords():
    def f(x):
        return helper_affine(x), helper_affine(x, 3), helper_affine(x, w=4, b=0)

    check(f, t(3))


def test_inline_varargs_and_kwargs():
    def g(*args, scale=1, **kwargs):
        return sum(args) * scale + kwargs.get("shift", 0), sorted(kwargs)

    def f(x, y):
        parts = [x, y]
        opts = {"shift": 2, "extra": None}
        return g(x, y), g(*parts, scale=3), g(x, **opts), g(*parts, **opts)

    check(f, t(2), t(2, seed=1))


def test_inline_closure_and_nested_def():
    def f(x, k):
        offset = x.mean()

        def inner(v, s=2):
            return (v - offset) * s * k

        return inner(x), inner(x, s=3)

    check(f, t(4), 5)


def test_nested_def_writing_nonlocal():
    def f(x):
        total = x

        def bump(v):
            nonlocal total
            total = total + v

        bump(x)
        bump(1)
        return total

    check(f, t(3))


def test_lambda_defined_inside():
    def f(x):
        act = lambda v: v.relu() * 2  # noqa: E731
        sq = lambda v, p=2: v ** p  # noqa: E731
        return act(x) + sq(x) + sq(x, p=3)

    check(f, t(3))


def test_closure_factory_inside():
    def f(x):
        def make(scale):
            return lambda v: v * scale

        double, triple = make(2), make(3)
        return double(x) + triple(x)

    check(f, t(3))


def test_recursive_helper_on_python_depth():
    def f(x):
        def apply(v, n):
            return v if n == 0 else apply(v * 2, n - 1)

        return apply(x, 3)

    check(f, t(3))


class Scaler:
    def __init__(self, k):
        self.k = k

    def __call__(self, v):
        return v * self.k

    def shift(self, v):
        return v + self.k

    @property
    def double(self):
        return self.k * 2

    @staticmethod
    def plus_one(v):
        return v + 1

    @classmethod
    def minus_one(cls, v):
        return v - 1


def test_user_object_method_property_staticmethod():
    s = Scaler(3)

    def f(x):
        return s.shift(x), s.k, x * s.double, s.plus_one(x), Scaler.plus_one(x)

    check(f, t(3))


@pytest.mark.parametrize("call", [lambda s, x: s(x), lambda s, x: Scaler.minus_one(x)], ids=["__call__", "classmethod"])
def test_callable_object_and_classmethod_run_eagerly(call):
    # not traced yet (fallback entries), but the result is eager's
    s = Scaler(3)

    def f(x):
        return call(s, x)

    check(f, t(3), graph=False)


def test_nn_module_call_from_closure_is_inlined():
    lin = torch.nn.Linear(3, 2).requires_grad_(False)

    def f(x):
        return lin(x).relu()

    check(f, t(4, 3))


def test_nn_module_passed_as_argument_is_inlined():
    def f(m, x):
        return m(x) * 2

    check(f, torch.nn.ReLU(), t(4, 3))


def test_nn_module_with_a_forward_hook_traces_the_hook():
    lin = torch.nn.Linear(3, 2).requires_grad_(False)
    lin.register_forward_hook(lambda mod, inp, out: out * 10)

    def f(x):
        return lin(x).relu()

    check(f, t(4, 3))


def test_nn_module_with_a_backward_hook_runs_eagerly():
    lin = torch.nn.Linear(3, 2)
    lin.register_full_backward_pre_hook(lambda mod, gout: None)

    def f(x):
        return lin(x).relu()

    check_fallback(f, t(4, 3), reason=r"hook")


def test_nn_functional_called_on_module_parameters():
    lin = torch.nn.Linear(3, 2).requires_grad_(False)

    def f(x):
        return F.linear(x, lin.weight, lin.bias)

    check(f, t(4, 3))


# --------------------------------------------------------------------------------------------
# what a compiled function may return
# --------------------------------------------------------------------------------------------

def test_return_none():
    def f(x):
        x + 1

    check(f, t(3))


def test_return_python_scalars_and_strings():
    def f(x):
        return x.shape[0], 1.5, True, "name", None, x.dtype, (x * 2)

    check(f, t(3))


def test_return_nested_containers():
    def f(x):
        y = x + 1
        return {"a": [x * 2, (y, 3)], "b": {"c": y.sum()}, 7: None}

    check(f, t(3))


def test_return_namedtuple_built_inside_and_passed_in():
    def f(x, p):
        q = Point(x * 2, y=p.y + 1)
        return q, q.x + q.y, p.x, p[1]

    check(f, t(2), Point(t(2, seed=1), 3))


def test_return_input_is_same_object():
    def f(x, y):
        return x, y[0], x.view(-1)

    x, ys = t(2, 2), [t(2)]
    jit(f)
    out = f(x, ys)
    assert out[0] is x and out[1] is ys[0]
    assert out[2].data_ptr() == x.data_ptr()  # a view, as eagerly


def test_return_same_tensor_twice_keeps_identity():
    def f(x):
        y = x + 1
        return y, y

    jit(f)
    a, b = f(t(3))
    assert a is b


def test_return_same_list_twice_keeps_identity():
    def f(x):
        ys = [x + 1]
        zs = ys
        zs.append(x * 2)
        return ys, zs

    check(f, t(3))
    a, b = jit(f)(t(3))
    assert a is b, "eagerly both names are one list"


def test_return_torch_return_type():
    def f(x):
        return x.sort(dim=-1), torch.topk(x, 2), x.min(dim=1)

    check(f, t(3, 4))


# --------------------------------------------------------------------------------------------
# comprehensions and f-strings
# --------------------------------------------------------------------------------------------

def test_list_comprehension():
    def f(xs, x):
        ys = [v * i for i, v in enumerate(xs)]
        zs = [x + k for k in range(3) if k != 1]
        return ys, zs, sum(zs)

    check(f, [t(2, seed=i) for i in range(3)], t(2))


def test_dict_and_nested_comprehension():
    def f(x):
        d = {f"k{i}": x * i for i in range(3)}
        grid = [[i * j for j in range(3)] for i in range(2)]
        return d, grid

    check(f, t(2))


def test_comprehension_over_tensor_rows():
    def f(x):
        return torch.stack([row * 2 for row in x])

    check(f, t(3, 2))


def test_fstrings_on_python_values():
    def f(x, name):
        n = x.shape[0]
        label = f"{name}-{n}:{n / 3:.2f}|{name!r}|{'x'*2}"
        return x * len(label), label

    check(f, t(4), "abc")


# --------------------------------------------------------------------------------------------
# tensor indexing
# --------------------------------------------------------------------------------------------

TENSOR_INDEXING = {
    "int": lambda x, i: x[1],
    "neg_int": lambda x, i: x[-1, 0],
    "slice": lambda x, i: x[1:3],
    "step_slice": lambda x, i: x[::2, 1:],
    "none": lambda x, i: x[None, :, None],
    "ellipsis": lambda x, i: x[..., 0],
    "ellipsis_none": lambda x, i: x[None, ..., 1:],
    "tensor_index": lambda x, i: x[i],
    "tensor_index_dim1": lambda x, i: x[:, i[:2]],
    "list_index": lambda x, i: x[[0, 2]],
    "bool_mask_returned": lambda x, i: x[x > 0],
    "mixed": lambda x, i: x[i, 1:],
}


@pytest.mark.parametrize("name", sorted(TENSOR_INDEXING))
def test_tensor_indexing(name):
    index = TENSOR_INDEXING[name]

    def f(x, i):
        return index(x, i)

    check(f, t(4, 3), torch.tensor([2, 0, 1]))


def test_bool_mask_result_with_different_data():
    def f(x):
        return x[x > 0] * 2

    eager = eager_copy(f)
    jit(f)
    for seed in range(3):  # same shape, different number of positives
        x = t(6, seed=seed)
        assert_same(f(x), eager(x))


# --------------------------------------------------------------------------------------------
# in-place ops on intermediates (supported; inputs are never mutated)
# --------------------------------------------------------------------------------------------

def test_inplace_method_on_intermediate():
    def f(x):
        y = x * 2
        y.add_(1)
        y.mul_(x).relu_()
        return y

    x = t(4)
    x0 = x.clone()
    check(f, x)
    jit(f)(x)
    assert torch.equal(x, x0), "the input must not be mutated"


def test_inplace_through_view_of_intermediate():
    def f(x):
        y = x.clone()
        row = y[0]
        row.zero_()
        return y

    check(f, t(3, 2))


def test_setitem_on_intermediate():
    def f(x):
        y = x.clone()
        y[0] = 0.0
        y[:, 1] = x[:, 0]
        return y

    check(f, t(3, 2))


def test_inplace_functional_relu_on_intermediate():
    def f(x):
        y = x - 0.5
        F.relu(y, inplace=True)
        return y

    check(f, t(5))


# --------------------------------------------------------------------------------------------
# the jitted function's own signature
# --------------------------------------------------------------------------------------------

def test_parameter_names_that_clash_with_generated_code():
    def f(G, L_x, ___y, add):
        return G + L_x + ___y + add, G * 2, add + 1

    check(f, t(2), t(2, seed=1), t(2, seed=2), t(2, seed=3))


def test_jit_on_bound_method_with_two_instances():
    class A:
        def __init__(self, k):
            self.k = k

        def m(self, x):
            return x * self.k

    a, b = A(2), A(5)
    jit(a.m)
    x = t(3)
    assert_same(a.m(x), x * 2)
    assert_same(b.m(x), x * 5)  # the code object is shared: a guard on self.k tells them apart
    assert [e.reason for e in dispatcher_of(a.m).entries] == [None, None]


def test_nested_jitted_functions_inline_into_one_graph():
    def inner(x):
        return x * 3

    def outer(x):
        return inner(x) + 1

    jit(inner)
    check(outer, t(3))


def test_jitted_signature_defaults_kwonly_and_keywords():
    def f(x, scale=2, *, shift=1):
        return x * scale + shift

    check(f, t(3))
    check(f, t(3), kwargs={"scale": 3, "shift": 0})


def test_jitted_star_args_and_kwargs():
    def f(*xs, **opts):
        out = sum(xs)
        return out * opts.get("scale", 1), len(xs), sorted(opts)

    check(f, t(2), t(2, seed=1), kwargs={"scale": 3})


def test_jitted_list_and_dict_of_tensors_arguments():
    def f(layers, cfg):
        x = cfg["input"]
        for w in layers:
            x = torch.tanh(x @ w)
        return x * cfg["scale"]

    check(f, [t(3, 3, seed=i) for i in range(2)], {"input": t(2, 3), "scale": 0.5})


def test_decorator_forms():
    @jit
    def f(x):
        return x + 1

    @jit(backend="eager", fullgraph=True)
    def g(x):
        return x * 2

    def h(x):
        return x - 1

    jit(h, backend=lambda gm, inputs: gm.forward)
    x = t(3)
    assert_same(f(x), x + 1)
    assert_same(g(x), x * 2)
    assert_same(h(x), x - 1)
    for fn in (f, g, h):
        assert [e.reason for e in dispatcher_of(fn).entries] == [None]


def test_graph_module_records_the_ops():
    def f(x):
        return torch.relu(x) + 1

    d = check(f, t(3))
    gm = d.entries[0].graph_module
    assert isinstance(gm, torch.fx.GraphModule)
    assert d.entries[0].ops == 2
    assert_same(gm(t(3))[0], f(t(3)))


def test_pure_python_function_has_empty_graph():
    def f(n):
        return n * 2, [n] * 2

    d = check(f, 4)
    assert d.entries[0].graph_module is None


# --------------------------------------------------------------------------------------------
# guards: what a cached entry must re-check; autograd and grad mode
# --------------------------------------------------------------------------------------------

def test_tensor_identity_between_arguments_is_guarded():
    def f(x, y):
        return x + 1 if x is y else x - 1

    a, b = t(2), t(2, seed=1)
    eager = eager_copy(f)
    jit(f)
    assert_same(f(a, a), eager(a, a))
    assert_same(f(a, b), eager(a, b))


def test_object_attribute_change_recompiles():
    class Cfg:
        k = 2

    cfg = Cfg()

    def f(x):
        return x * cfg.k

    x = t(3)
    eager = eager_copy(f)
    jit(f)
    assert_same(f(x), eager(x))
    cfg.k = 5
    assert_same(f(x), eager(x))


def test_stride_change_recompiles():
    def f(x):
        return x.is_contiguous(), x.stride(), x.view(-1) if x.is_contiguous() else x.reshape(-1)

    m = t(3, 3)
    d = calls_match_eager(f, [(m,), (m.T,), (m,)])
    assert len(d.entries) == 2


def test_grad_mode_is_guarded():
    def f(x):
        return x * 2 if torch.is_grad_enabled() else x * 3

    eager = eager_copy(f)
    jit(f)
    x = t(3)
    assert_same(f(x), eager(x))
    with torch.no_grad():
        assert_same(f(x), eager(x))


def test_autograd_through_compiled_graph():
    def f(x, w):
        return (x @ w).relu().sum()

    x, w0 = t(2, 3), t(3, 4, seed=1)
    eager = eager_copy(f)
    w = w0.clone().requires_grad_()
    eager(x, w).backward()
    expected = w.grad
    jit(f)
    for _ in range(2):
        w = w0.clone().requires_grad_()
        out = f(x, w)
        assert out.requires_grad
        out.backward()
        assert_same(w.grad, expected)


def test_parameter_input():
    def f(p, x):
        return p * x, p.requires_grad

    p = torch.nn.Parameter(t(3))
    x = t(3, seed=1)
    eager = eager_copy(f)
    jit(f)
    for _ in range(2):
        assert_same(f(p, x), eager(p, x))


def test_inlined_helper_with_tensor_default():
    w = t(3, seed=1)

    def helper(v, weight=w):
        return v * weight

    def f(x):
        return helper(x), helper(x, 2)

    check(f, t(3))


def test_try_except_not_taken_and_taken():
    def f(x, d):
        try:
            return x * d["a"]
        except KeyError:
            return x

    calls_match_eager(f, [(t(2), {"a": 2}), (t(2), {"b": 2}), (t(2), {"a": 2}), (t(2), {"b": 2})])


def test_assert_statement():
    def f(x, n):
        assert n > 0, "n must be positive"
        return x * n

    eager = eager_copy(f)
    jit(f)
    assert_same(f(t(2), 2), eager(t(2), 2))
    for _ in range(2):
        with pytest.raises(AssertionError, match="n must be positive"):
            f(t(2), -1)


def test_runtime_error_inside_graph_matches_eager():
    def f(x, i):
        return x[i] * 2

    jit(f)
    assert_same(f(t(3), torch.tensor([0, 2])), t(3)[torch.tensor([0, 2])] * 2)
    with pytest.raises(IndexError):  # the same entry; the graph itself raises, as eagerly
        f(t(3), torch.tensor([0, 5]))


def test_late_binding_closures_in_loop():
    def f(x):
        fs = []
        for i in range(3):
            fs.append(lambda: x * i)
        late = [g() for g in fs]  # all see i == 2, as eagerly
        bound = [(lambda v, k=i: v * k)(x) for i in range(3)]
        return late, bound

    check(f, t(2))


def test_returning_a_function_runs_eagerly():
    def f(k):
        def add(v):
            return v + k
        return add

    eager = eager_copy(f)
    jit(f)
    assert f(3)(t(2)).equal(eager(3)(t(2)))


# --------------------------------------------------------------------------------------------
# wrong results once: bugs this file found, fixed (each test fails if rewrite differs from eager)
# --------------------------------------------------------------------------------------------

def test_signed_zero_scalar_argument():
    def f(x, n):
        return 1 / (x * n)

    calls_match_eager(f, [(torch.ones(2), 0.0), (torch.ones(2), -0.0)])


def test_list_identity_between_arguments():
    def f(xs, ys):
        return len(xs) if xs is ys else -1

    one, other = [1], [1]
    eager = eager_copy(f)
    jit(f)
    assert f(one, one) == eager(one, one)
    assert f(one, other) == eager(one, other)


def _mutates_input_once(f, x0):
    """Each call (compiling and cached) must mutate its input exactly as the eager call does."""
    eager = eager_copy(f)
    xe = x0.clone()
    expected = eager(xe)
    jit(f)
    for _ in range(2):
        x = x0.clone()
        assert_same(f(x), expected)
        assert_same(x, xe)


def test_positional_inplace_flag_on_input():
    def f(x):
        return F.leaky_relu(x, 0.5, True)

    _mutates_input_once(f, torch.tensor([-4.0, 2.0]))


def test_positional_inplace_flag_then_graph_break():
    def f(x):
        y = F.leaky_relu(x, 0.5, True)
        return y * y.sum().item()

    _mutates_input_once(f, torch.tensor([-4.0, 2.0]))


def test_dunder_inplace_method_on_input():
    def f(x):
        x.__iadd__(1)
        return x * 2

    _mutates_input_once(f, torch.zeros(2))


def test_monkeypatched_method_is_seen():
    class S:
        def act(self, v):
            return v * 2

    s = S()

    def f(x):
        return s.act(x)

    eager = eager_copy(f)
    jit(f)
    x = t(2)
    assert_same(f(x), eager(x))
    S.act = lambda self, v: v * 3
    assert_same(f(x), eager(x))


def test_instance_attribute_shadowing_method_is_seen():
    class S:
        def act(self, v):
            return v * 2

    s = S()

    def f(x):
        return s.act(x)

    eager = eager_copy(f)
    jit(f)
    x = t(2)
    assert_same(f(x), eager(x))
    s.act = lambda v: v * 100
    assert_same(f(x), eager(x))


def test_data_dependent_split_count_not_baked():
    def f(x):
        return len(x[x > 0].split(1))

    calls_match_eager(f, [(torch.tensor([1.0, -1.0, 2.0, -3.0]),), (torch.tensor([1.0, 1.0, 2.0, 3.0]),)])


def test_data_dependent_unbind_not_baked():
    def f(x):
        return [row * 2 for row in x[x > 0].unbind(0)]

    calls_match_eager(f, [(torch.tensor([1.0, -1.0, 2.0, -3.0]),), (torch.tensor([1.0, 1.0, 2.0, 3.0]),)])


SHAPE_FROM_VALUES = {
    "one_hot_without_num_classes": lambda x: F.one_hot(x).shape[-1],
    "arange_of_tensor": lambda x: torch.arange(x.max()).shape[0],
    "zeros_of_tensor": lambda x: torch.zeros(x.max()).shape,
}


@pytest.mark.parametrize("fn", SHAPE_FROM_VALUES.values(), ids=SHAPE_FROM_VALUES.keys())
def test_shape_from_tensor_values_not_baked(fn):
    def f(x):
        return fn(x)

    calls_match_eager(f, [(torch.tensor([0, 2]),), (torch.tensor([1, 4]),)])


def test_generator_argument():
    def f(x, g):
        return x + torch.randn(3, generator=g)

    eager = eager_copy(f)
    jit(f)
    for seed in (0, 0, 1):
        got = f(torch.zeros(3), torch.Generator().manual_seed(seed))
        assert_same(got, eager(torch.zeros(3), torch.Generator().manual_seed(seed)))


GENERATOR = torch.Generator()


def test_module_level_generator():
    def f(x):
        return x + torch.rand(2, generator=GENERATOR)

    eager = eager_copy(f)
    jit(f)
    for _ in range(2):
        GENERATOR.manual_seed(0)
        got = f(torch.zeros(2))
        GENERATOR.manual_seed(0)
        assert_same(got, eager(torch.zeros(2)))


# --------------------------------------------------------------------------------------------
# unsupported: fallback to eager (same result), fullgraph=True raises naming the line
# --------------------------------------------------------------------------------------------

def make_data_dependent_if():
    def f(x):
        if x.sum() > 0:  # BREAK
            return x * 2
        return x - 1
    return f


def make_item():
    def f(x):
        s = x.sum().item()  # BREAK
        return x * s
    return f


def make_print():
    def f(x):
        y = x + 1
        print("y is", y)  # BREAK
        return y
    return f


def make_global_assignment():
    def f(x):
        global ASSIGNED_GLOBAL
        ASSIGNED_GLOBAL = x.shape[0]  # BREAK
        return x + 1
    return f


LOCK = threading.Lock()


def make_with_block():
    def f(x):
        with LOCK:  # BREAK
            return x * 2
    return f


def make_inplace_on_input():
    def f(x):
        x.add_(1)
        return x * 2
    return f


def make_append_to_input_list():
    def f(xs):
        xs.append(xs[0] * 2)  # BREAK
        return len(xs)
    return f


def make_data_dependent_shape():
    def f(x):
        y = x[x > 0]
        n = y.shape[0]  # BREAK
        return y * n, n
    return f


def make_break_in_inlined_helper():
    def f(x):
        def helper(v):
            return v.tolist()  # BREAK
        return helper(x + 1)
    return f


def make_randn_then_break():
    def f(x):
        noise = torch.randn(3)
        if noise.sum() > x.sum():  # BREAK
            return noise
        return x
    return f


UNSUPPORTED = {
    # name: (factory, args, reason regex)
    "data_dependent_if": (make_data_dependent_if, lambda: (t(4),), r"data-dependent"),
    "item": (make_item, lambda: (t(4),), r"item"),
    "print": (make_print, lambda: (t(2),), r"print"),
    "with_block": (make_with_block, lambda: (t(2),), r"with|no_grad"),
    "data_dependent_shape": (make_data_dependent_shape, lambda: (t(6),), r"depends on data"),
    "break_in_inlined_helper": (make_break_in_inlined_helper, lambda: (t(2),), r"tolist"),
    "randn_then_break": (make_randn_then_break, lambda: (t(3),), r"data-dependent"),
}


@pytest.mark.parametrize("name", sorted(UNSUPPORTED))
def test_unsupported_falls_back_with_eager_result(name, capsys):
    factory, args, reason = UNSUPPORTED[name]
    fn = factory()
    check_fallback(fn, *args(), reason=reason)


@pytest.mark.parametrize("name", sorted(UNSUPPORTED))
def test_unsupported_fullgraph_raises_naming_the_line(name, capsys):
    factory, args, reason = UNSUPPORTED[name]
    check_fullgraph_raises(factory(), *args(), reason=reason)


def test_fallback_print_prints_once_per_call(capsys):
    fn = jit(make_print())
    fn(torch.ones(2))
    fn(torch.ones(2))
    assert capsys.readouterr().out.count("y is") == 2


def test_fallback_global_assignment_happens():
    global ASSIGNED_GLOBAL
    fn = jit(make_global_assignment())
    ASSIGNED_GLOBAL = None
    fn(t(5))
    assert ASSIGNED_GLOBAL == 5


def test_inplace_on_input_is_in_the_graph_and_mutates_exactly_once():
    fn = jit(make_inplace_on_input())
    x0 = t(3)
    for _ in range(2):  # compiling call and cached call
        x = x0.clone()
        out = fn(x)
        assert_same(x, x0 + 1)
        assert_same(out, (x0 + 1) * 2)
    assert dispatcher_of(fn).entries[0].eager_reason is None


def test_inplace_on_view_of_input_is_in_the_graph_and_mutates_once():
    def f(x):
        v = x[0]
        v.mul_(2)
        return x.sum()

    x0 = t(2, 3)
    eager = eager_copy(f)
    xe = x0.clone()
    expected = eager(xe)
    jit(f)
    x = x0.clone()
    assert_same(f(x), expected)
    assert_same(x, xe)
    assert dispatcher_of(f).entries[0].eager_reason is None


def test_fallback_append_mutates_input_list_exactly_once():
    fn = jit(make_append_to_input_list())
    xs = [t(2)]
    assert fn(xs) == 2 and len(xs) == 2
    assert fn(xs) == 3 and len(xs) == 3


def test_inplace_operator_on_input_is_in_the_graph():
    def f(x):
        x += 1
        return x

    x0 = t(3)
    jit(f)
    x = x0.clone()
    out = f(x)
    assert out is x
    assert_same(x, x0 + 1)
    assert dispatcher_of(f).entries[0].eager_reason is None


def test_setitem_on_input_is_in_the_graph():
    def f(x):
        x[0] = 5.0
        return x + 1

    x0 = t(3)
    jit(f)
    x = x0.clone()
    f(x)
    expected = x0.clone()
    expected[0] = 5.0
    assert_same(x, expected)
    assert dispatcher_of(f).entries[0].eager_reason is None


def test_data_dependent_shape_not_baked():
    fn = make_data_dependent_shape()
    eager = eager_copy(fn)
    jit(fn)
    for seed in range(4):  # same input shape, different number of positives
        x = t(6, seed=seed)
        assert_same(fn(x), eager(x))


def make_raise():
    def f(x, n):
        if n < 0:
            raise ValueError("negative")
        return x * n
    return f


def test_raise_on_python_condition():
    f = make_raise()
    eager = eager_copy(f)
    jit(f)
    assert_same(f(t(2), 2), eager(t(2), 2))
    for _ in range(2):
        with pytest.raises(ValueError, match="negative"):
            f(t(2), -1)
    reasons = [e.eager_reason for e in dispatcher_of(f).entries]
    assert None in reasons  # n >= 0 compiled
    assert any(r and re.search("raise|ValueError", r) for r in reasons)  # n < 0 runs eagerly


def test_uncaught_raise_under_fullgraph_is_the_users_error_from_their_line():
    f = jit(make_raise(), fullgraph=True)
    with pytest.raises(ValueError, match="negative") as info:
        f(t(2), -1)
    assert info.traceback[-1].name == "f"


@pytest.mark.parametrize("fullgraph", [False, True])
def test_shape_mismatch_raises_runtime_error_like_eager(fullgraph):
    def f(x, w):
        return (x @ w).relu()

    with pytest.raises(RuntimeError) as eager_err:
        eager_copy(f)(t(2, 3), t(4, 5))
    jit(f, fullgraph=fullgraph)
    for _ in range(2):
        with pytest.raises(RuntimeError) as err:
            f(t(2, 3), t(4, 5))
        assert type(err.value) is type(eager_err.value)
        assert not isinstance(err.value, rewrite.RewriteError)
    assert_same(f(t(2, 3), t(3, 5)), eager_copy(f)(t(2, 3), t(3, 5)))


def test_python_error_in_traced_code_raises_like_eager():
    def f(x, d):
        return x * d["missing"]

    jit(f)
    with pytest.raises(KeyError):
        f(t(2), {"present": 1})


def test_fallback_entry_is_guarded_and_reused():
    fn = make_item()
    eager = eager_copy(fn)
    jit(fn)
    x = t(4)
    for _ in range(3):
        assert_same(fn(x), eager(x))
    d = dispatcher_of(fn)
    assert len(d.entries) == 1 and d.entries[0].eager_reason is not None
