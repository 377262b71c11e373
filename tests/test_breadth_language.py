"""Breadth suite, language: comprehensions, builtins over Python values, strings, closures, unpacking."""
import collections
import collections.abc
import functools
import itertools
import math
import operator

import pytest
import torch

import rewrite
from breadth import check, check_each, rand, todo
from conftest import CompileCounter


def x1(seed):
    return (rand(seed, 4),)


def x3(seed):
    return (rand(seed, 3, 4), [1, 2, 3], {"a": 1.5, "b": -2.0})


# comprehensions and generator expressions

def test_list_comprehension_of_tensors():
    def f(x):
        return [x * i for i in range(3)]
    check(f, x1)


def test_list_comprehension_with_condition():
    def f(x, xs, d):
        return [x + v for v in xs if v % 2 == 1]
    check(f, x3)


def test_nested_list_comprehension():
    def f(x, xs, d):
        return [[a * b for b in xs] for a in xs]
    check(f, x3)


def test_dict_comprehension():
    def f(x, xs, d):
        return {k: x * v for k, v in d.items()}
    check(f, x3)


def test_set_comprehension_of_python_values():
    def f(x, xs, d):
        s = {v % 2 for v in xs}
        return x + len(s), s
    check(f, x3)


def test_generator_expression_sum_of_tensors():
    def f(x):
        return sum(x * i for i in range(4))
    check(f, x1)


def test_generator_expression_into_tuple():
    def f(x, xs, d):
        return tuple(x[i] for i in range(len(xs)))
    check(f, x3)


def test_comprehension_over_tensor_rows():
    def f(x, xs, d):
        return [row.sum() for row in x]
    check(f, x3)


def test_comprehension_reads_enclosing_local():
    def f(x):
        scale = 3.0
        return [x * scale + i for i in range(2)]
    check(f, x1)


def test_torch_stack_of_comprehension():
    def f(x):
        return torch.stack([x.roll(i) for i in range(3)])
    check(f, x1)


# builtins over Python values

def test_isinstance_on_python_values():
    def f(x, xs, d):
        if isinstance(xs, list) and isinstance(d, dict) and not isinstance(xs, tuple):
            return x + 1
        return x - 1
    check(f, x3)


def test_isinstance_on_tensor_and_tuple_of_types():
    def f(x, xs, d):
        return x * 2 if isinstance(x, (int, torch.Tensor)) else x
    check(f, x3)


def test_hasattr_on_python_values():
    def f(x, xs, d):
        return x + (1 if hasattr(xs, "append") else 0) + (1 if hasattr(d, "nope") else 0)
    check(f, x3)


def test_type_is_check():
    def f(x, xs, d):
        return x * 2 if type(xs) is list else x
    check(f, x3)


def test_type_eq_check_on_number():
    def f(x, n):
        return x + n if type(n) == int else x - n
    check(f, lambda s: (rand(s, 3), 4))


def test_callable_builtin():
    def f(x):
        return x + 1 if callable(len) else x
    check(f, x1)


def test_functools_partial_of_user_function():
    def f(x):
        def scale(t, k, bias=0.0):
            return t * k + bias
        g = functools.partial(scale, k=3.0, bias=1.0)
        return g(x)
    check(f, x1)


def test_functools_partial_of_torch_function():
    def f(x):
        g = functools.partial(torch.clamp, min=-0.5, max=0.5)
        return g(x)
    check(f, x1)


def test_lambda_assigned_and_called():
    def f(x):
        act = lambda t: t * torch.sigmoid(t)
        return act(x) + act(x + 1)
    check(f, x1)


def test_lambda_as_sort_key():
    def f(x, xs, d):
        keys = sorted(d, key=lambda k: d[k])
        return x + d[keys[0]], keys
    check(f, x3)


def test_enumerate_with_start():
    def f(x, xs, d):
        out = x
        for i, v in enumerate(xs, start=1):
            out = out + i * v
        return out
    check(f, x3)


def test_zip_of_lists():
    def f(x, xs, d):
        return [x * a + b for a, b in zip(xs, [10, 20, 30])]
    check(f, x3)


def test_reversed_list():
    def f(x, xs, d):
        return [x - v for v in reversed(xs)]
    check(f, x3)


def test_sorted_with_reverse():
    def f(x, xs, d):
        order = sorted([3, 1, 2] + xs, reverse=True)
        return x + order[0], order
    check(f, x3)


def test_map_over_list():
    def f(x, xs, d):
        return list(map(lambda v: x * v, xs))
    check(f, x3)


def test_filter_over_list():
    def f(x, xs, d):
        kept = list(filter(lambda v: v > 1, xs))
        return x * len(kept), kept
    check(f, x3)


def test_any_and_all_over_python_values():
    def f(x, xs, d):
        if any(v > 2 for v in xs) and all(v > 0 for v in xs):
            return x + 1
        return x
    check(f, x3)


def test_min_max_with_key():
    def f(x, xs, d):
        k = max(d, key=d.get)
        return x * d[k], min(xs), k
    check(f, x3)


def test_sum_of_python_list_with_start():
    def f(x, xs, d):
        return x + sum(xs, 10)
    check(f, x3)


def test_operator_itemgetter():
    def f(x, xs, d):
        get = operator.itemgetter(0, 2)
        a, b = get(xs)
        return x * a + b
    check(f, x3)


def test_functools_reduce():
    def f(x, xs, d):
        return functools.reduce(lambda acc, v: acc * v, xs, x)
    check(f, x3)


# strings

def test_fstring_builds_dict_key():
    def f(x):
        out = {}
        for i in range(2):
            out[f"layer_{i}"] = x * i
        return out
    check(f, x1)


def test_fstring_with_format_spec_returned():
    def f(x, xs, d):
        return x + 1, f"{d['a']:.2f}/{len(xs):03d}"
    check(f, x3)


def test_str_methods_on_python_values():
    def f(x):
        name = "Encoder.Layer"
        parts = name.lower().split(".")
        return x * len(parts), "_".join(parts).upper(), name.startswith("Enc")
    check(f, x1)


def test_str_format_and_replace():
    def f(x):
        s = "{}-{}".format("a", 3).replace("-", "+")
        return x + len(s), s
    check(f, x1)


def test_string_membership_branch():
    def f(x, mode):
        if "train" in mode:
            return x * 2
        return x
    check(f, lambda s: (rand(s, 3), "pretrain"))


# assert

def test_assert_on_python_values_passes():
    def f(x, xs, d):
        assert len(xs) == 3, "need three"
        assert isinstance(d, dict)
        return x * len(xs)
    check(f, x3)


def test_assert_on_shape():
    def f(x):
        assert x.dim() == 1 and x.shape[0] == 4, f"bad shape {x.shape}"
        return x + 1
    check(f, x1)


# unpacking and calling conventions

def test_tuple_unpacking_with_star():
    def f(x, xs, d):
        first, *rest = xs
        return x * first + sum(rest), rest
    check(f, x3)


def test_nested_tuple_unpacking():
    def f(x):
        (a, b), c = (x, x + 1), x * 2
        return a + b * c
    check(f, x1)


def test_dict_unpacking_merge():
    def f(x, xs, d):
        merged = {**d, "c": 3.0}
        return {k: x * v for k, v in merged.items()}
    check(f, x3)


def test_star_args_helper():
    def total(*ts):
        return sum(ts[1:], ts[0])

    def f(x):
        return total(x, x * 2, x * 3)
    check(f, x1)


def test_star_star_kwargs_helper():
    def affine(t, **kw):
        return t * kw.get("scale", 1.0) + kw.get("shift", 0.0)

    def f(x, xs, d):
        return affine(x, scale=2.0, **{"shift": d["a"]})
    check(f, x3)


def test_call_with_star_unpacking_of_list():
    def f(x, xs, d):
        return torch.zeros(*xs) + x.sum()
    check(f, x3)


def test_keyword_only_arguments():
    def f(x, *, k=2):
        return x * k
    check(f, x1, kwargs=lambda s: {"k": 3})


def test_default_argument_values():
    def f(x, k=2, name="a"):
        return x * k, name
    check(f, x1)


# nested functions and closures

def test_nested_helper_function():
    def f(x):
        def helper(t):
            return t.relu() * 2
        return helper(x) + helper(-x)
    check(f, x1)


def test_closure_reads_outer_variable():
    scale = 2.5

    def f(x):
        return x * scale
    check(f, x1)


def test_closure_reads_outer_tensor():
    w = torch.randn(4)

    def f(x):
        return x * w
    check(f, x1)


def test_inner_closure_reads_function_local():
    def f(x):
        k = x.sum()

        def add(t):
            return t + k
        return add(x)
    check(f, x1)


def test_closure_factory_returns_function():
    def make(power):
        def g(t):
            return t ** power
        return g

    def f(x):
        return make(2)(x) + make(3)(x)
    check(f, x1)


def test_recursive_helper_on_python_depth():
    def depth(t, n):
        return t if n == 0 else depth(t * 2, n - 1)

    def f(x):
        return depth(x, 3)
    check(f, x1)


def test_while_loop_on_python_counter():
    def f(x):
        i = 0
        while i < 3:
            x = x + i
            i += 1
        return x
    check(f, x1)


def test_conditional_expression_on_python_value():
    def f(x, xs, d):
        return x * (2 if len(d) > 1 else 3)
    check(f, x3)


# control flow on Python values

def test_for_else_without_break():
    def f(x):
        for i in range(3):
            if i == 5:
                break
        else:
            x = x + 1
        return x
    check(f, x1)


def test_break_and_continue():
    def f(x, xs, d):
        out = x
        for v in xs + [4, 5]:
            if v == 2:
                continue
            if v == 4:
                break
            out = out + v
        return out
    check(f, x3)


def test_while_else():
    def f(x):
        i = 0
        while i < 2:
            i += 1
        else:
            x = x * 3
        return x
    check(f, x1)


def test_walrus_in_comprehension():
    def f(x, xs, d):
        return [y * x for v in xs if (y := v * 2) > 2]
    check(f, x3)


def test_chained_comparison_guarded():
    def f(x, n):
        return x * (1 if 0 < n <= 3 else 2)
    check_each(f, (rand(0, 3), 2), (rand(0, 3), 5))


def test_truthiness_of_list_argument_guarded():
    def f(x, flags):
        return x if flags else -x
    check_each(f, (rand(0, 3), []), (rand(0, 3), [0]))


def test_is_none_default_guarded():
    def f(x, bias=None):
        return x if bias is None else x + bias
    check_each(f, (rand(0, 3),), (rand(0, 3), rand(1, 3)))


# numbers

def test_int_division_and_modulo_signs():
    def f(x, a, b):
        return x + a // b, a % b, a / b, divmod(a, b), -a // b, a ** -1
    check_each(f, (rand(0, 3), 7, -2), (rand(0, 3), -7, 3))


def test_round_int_floor_abs():
    def f(x, a):
        return x + round(a), round(a, 1), int(a), math.floor(a), abs(a)
    check_each(f, (rand(0, 3), 2.5), (rand(0, 3), -3.55))


def test_bool_int_float_are_told_apart():
    def f(x, n):
        return x * n, n
    check_each(f, (rand(0, 3), True), (rand(0, 3), 1), (rand(0, 3), 1.0))


def test_negative_zero_is_told_apart():
    def f(x, n):
        return x * n, math.copysign(1, n)
    check_each(f, (rand(0, 3), 0.0), (rand(0, 3), -0.0))


def test_nan_argument():
    def f(x, n):
        return x + n, n != n
    check_each(f, (rand(0, 3), float("nan")), (rand(0, 3), float("nan")))


def test_big_python_ints():
    def f(x, n):
        return x, n * n * n * n, 2 ** 100
    check(f, lambda s: (rand(s, 3), 10 ** 10))


def test_math_module_functions():
    def f(x, a):
        return x * math.sqrt(a), math.log(a), math.exp(-a), math.ceil(a), math.pi, math.isclose(a, 2.0)
    check(f, lambda s: (rand(s, 3), 2.5))


def test_int_methods_and_conversions():
    def f(x, n):
        return x, n.bit_length(), int("12") + n, float("1.5"), hex(n), bin(n), chr(65 + n), ord("a")
    check(f, lambda s: (rand(s, 3), 5))


def test_builtin_numeric_functions():
    def f(x):
        return x, len([1, 2]), abs(-3), round(2.567, 2), pow(2, 3), pow(2, 3, 5), divmod(7, 2)
    check(f, x1)


# strings, continued

def test_float_to_string_forms():
    def f(x, a):
        return x, str(a), repr(a), f"{a}", f"{a!r}", "%d-%s" % (3, a)
    check_each(f, (rand(0, 3), 0.1), (rand(0, 3), 1e20))


def test_more_str_methods():
    def f(x, s):
        return x, s.strip().split(",", 1), s.title(), s.zfill(12), s.find("b"), s.count("a"), s[::-1], s * 2
    check(f, lambda s: (rand(s, 3), " a,b,a "))


def test_str_join_of_generator():
    def f(x):
        return x, "-".join(str(i) for i in range(3))
    check(f, x1)


def test_string_argument_guarded():
    def f(x, mode):
        return x * 2 if mode == "a" else x
    check_each(f, (rand(0, 3), "a"), (rand(0, 3), "b"))


# containers

def test_list_methods_on_python_values():
    def f(x, xs, d):
        return x * xs.index(2), xs.count(1), xs + [4], xs * 2, 2 in xs, xs[::-1], list(reversed(xs)), xs.copy()
    check(f, x3)


def test_tuple_methods():
    def f(x, tp):
        return x * tp.index(2), tp.count(1), tp + (4,), tp * 2, 2 in tp, tp[::-1]
    check(f, lambda s: (rand(s, 3), (1, 2, 1)))


def test_dict_methods():
    def f(x, xs, d):
        return x * d.get("z", 2), list(d.items()), dict(zip("ab", [1, 2])), dict(d, c=3), d | {"q": 1}
    check(f, x3)


def test_dict_comprehension_duplicate_keys():
    def f(x):
        return {k % 2: k for k in range(5)}, x
    check(f, x1)


def test_set_from_list_and_set_ops():
    def f(x, xs, d):
        s = set(xs)
        return x * len(s | {9}), sorted(s & {1, 2})
    check(f, x3)


def test_local_list_aliasing():
    def f(x):
        a = [x]
        b = a
        b.append(x + 1)
        return a
    check(f, x1)


def test_local_dict_aliasing_and_copy():
    def f(x):
        a = {}
        b = a
        b["k"] = x
        c = dict(a)
        c["j"] = 1
        return a, c
    check(f, x1)


def test_list_multiplication_shares_inner_lists():
    def f(x):
        a = [[0]] * 2
        a[0].append(1)
        return a, x
    check(f, x1)


def test_copy_of_input_list_mutated_locally():
    def f(x, xs, d):
        ys = xs[:]
        ys[0] = 100
        zs = list(xs)
        zs.append(x)
        return ys, zs, xs
    check(f, x3)


def test_live_dict_view():
    def f(x):
        d = {"a": 1}
        ks = d.keys()
        d["b"] = 2
        return list(ks), x
    check(f, x1)


def test_iterator_exhaustion():
    def f(x, xs, d):
        it = iter(xs)
        a = next(it)
        rest = list(it)
        return x * a, rest, list(it)
    check(f, x3)


def test_zip_stops_at_shortest():
    def f(x, xs, d):
        return [x * i + j for i, j in zip(xs, [4, 5])]
    check(f, x3)


def test_enumerate_over_dict_keys():
    def f(x, xs, d):
        return [(i, k) for i, k in enumerate(d)], x
    check(f, x3)


def test_star_displays():
    def f(x, xs, d):
        return [*xs, x, *range(2)], {**d, "x": x, **{"y": 1}}
    check(f, x3)


def test_sorted_is_stable_with_key():
    def f(x, pairs):
        return sorted(pairs, key=lambda p: p[0]), x
    check(f, lambda s: (rand(s, 3), [(1, "b"), (0, "z"), (1, "a")]))


def test_collections_counter():
    def f(x, xs, d):
        return dict(collections.Counter(xs + [1])), x
    check(f, x3)


def test_ordered_dict_created():
    def f(x):
        return collections.OrderedDict(a=x, b=x * 2)
    check(f, x1)


def test_itertools_product():
    def f(x):
        return [x * i * j for i, j in itertools.product(range(2), range(3))]
    check(f, x1)


def test_itertools_chain():
    def f(x, xs, d):
        return [x * v for v in itertools.chain(xs, [7])]
    check(f, x3)


def test_id_of_argument():
    def f(x, xs, d):
        return x, id(xs) == id(xs)
    check(f, x3)


# generators and closures, continued

def test_generator_runs_lazily():
    def f(x):
        log = []

        def gen():
            for i in range(3):
                log.append(i)
                yield x * i
        first = next(gen())
        return first, list(log)
    check(f, x1)


def test_list_returned_twice_is_one_object():
    def f(x):
        out = [x]
        return out, out

    rewrite.jit(f, fullgraph=True, backend=CompileCounter())
    for seed in (0, 1):
        a, b = f(rand(seed, 3))
        assert a is b


def test_lambdas_bind_loop_variable_late():
    def f(x):
        fs = [lambda: x * i for i in range(3)]
        return [g() for g in fs]
    check(f, x1)


def test_lambdas_bind_loop_variable_by_default():
    def f(x):
        fs = [lambda i=i: x * i for i in range(3)]
        return [g() for g in fs]
    check(f, x1)


def test_closure_sees_cell_rebound_after_creation():
    def f(x):
        k = 1
        g = lambda: x * k
        k = 5
        return g()
    check(f, x1)


def test_inner_function_appends_to_outer_local_list():
    def f(x):
        acc = []

        def add(t):
            acc.append(t)
        add(x)
        add(x * 2)
        return acc
    check(f, x1)


def test_default_evaluated_at_definition():
    def f(x):
        g = lambda k=x.shape[0]: x * k
        return g()
    check(f, x1)


def test_keyword_only_lambda():
    def f(x):
        return (lambda *, k: x * k)(k=3)
    check(f, x1)


def test_kwargs_keep_call_order():
    def names(**kw):
        return list(kw)

    def f(x):
        return names(b=1, a=2), x
    check(f, x1)


def test_dynamic_getattr_on_torch_and_tensor():
    def f(x, fn, method):
        return getattr(torch, fn)(x), getattr(x, method)()
    check(f, lambda s: (rand(s, 3), "sigmoid", "exp"))


# guards on Python values read from outside

G_SCALE = 2
G_LIST = [1, 2]


def test_global_rebound_between_calls():
    def f(x):
        return x * G_SCALE

    def set_scale(v):
        global G_SCALE
        G_SCALE = v
        return (rand(0, 3),)
    try:
        check_each(f, lambda: set_scale(2), lambda: set_scale(5), lambda: set_scale(2.5))
    finally:
        set_scale(2)


def test_global_list_mutated_between_calls():
    def f(x):
        return x * len(G_LIST) + G_LIST[-1]

    def push(v):
        G_LIST.append(v)
        return (rand(0, 3),)
    try:
        check_each(f, (rand(0, 3),), lambda: push(10))
    finally:
        del G_LIST[2:]


def test_closure_cell_rebound_between_calls():
    k = 2

    def f(x):
        return x * k

    def set_k(v):
        nonlocal k
        k = v
        return (rand(0, 3),)
    check_each(f, (rand(0, 3),), lambda: set_k(9))


def test_helper_defaults_changed_between_calls():
    def helper(t, k=2):
        return t * k

    def f(x):
        return helper(x)

    def set_default(v):
        helper.__defaults__ = (v,)
        return (rand(0, 3),)
    check_each(f, (rand(0, 3),), lambda: set_default(5))


def test_function_argument_same_code_other_closure():
    def make_scaler(k):
        return lambda t: t * k

    def f(x, fn):
        return fn(x)
    check_each(f, (rand(0, 3), make_scaler(2)), (rand(0, 3), make_scaler(3)))


# Python values that live across a graph break (fullgraph off)

def test_closure_called_on_both_sides_of_a_break():
    def f(x):
        k = 2

        def g(t):
            return t * k
        y = g(x)
        print(end="")
        return g(y)
    check(f, x1, fullgraph=False)


def test_generator_resumed_after_a_break():
    def f(x):
        g = (x * i for i in range(3))
        a = next(g)
        print(end="")
        return a + next(g)
    check(f, x1, fullgraph=False)


def test_iterator_resumed_after_a_break():
    def f(x):
        it = iter([1, 2, 3])
        a = next(it)
        print(end="")
        return x * a + x * next(it)
    check(f, x1, fullgraph=False)


def test_lambda_over_local_tensor_across_a_break():
    def f(x):
        y = x * 2
        z = (lambda t: t + y)(x)
        print(end="")
        return z + (lambda t: t * y)(x)
    check(f, x1, fullgraph=False)


# the class of an iterator the tracer makes is the one Python makes (a generator is no list
# iterator); where it is not known, asking for it breaks the graph, never guesses

def _gen(x):
    yield x
    yield x + 1


ITERATOR_TYPES = {
    "generator": lambda x: _gen(x),
    "genexp": lambda x: (v for v in [x]),
    "map": lambda x: map(abs, [x]),
    "filter": lambda x: filter(None, [1, 0]),
    "zip": lambda x: zip([x], [1]),
    "enumerate": lambda x: enumerate([x]),
    "list": lambda x: iter([x]),
    "tuple": lambda x: iter((x, 1)),
    "range": lambda x: iter(range(3)),
    "str": lambda x: iter("ab"),
    "dict": lambda x: iter({"a": x}),
    "dict items": lambda x: iter({"a": x}.items()),
    "ordered dict": lambda x: iter(collections.OrderedDict(a=x)),
    "reversed list": lambda x: reversed([x, 1]),
    "reversed tuple": lambda x: reversed((x, 1)),
    "reversed range": lambda x: reversed(range(3)),
    "chain": lambda x: itertools.chain([x], [1]),
    "product": lambda x: itertools.product([1, 2], [3]),
    "islice": lambda x: itertools.islice([x, 1], 1),
}


@pytest.mark.parametrize("kind", sorted(ITERATOR_TYPES))
def test_iterators_have_pythons_classes(kind):
    import inspect
    import types
    make = ITERATOR_TYPES[kind]

    def f(x):
        it = make(x)
        return (x * isinstance(it, types.GeneratorType), type(it).__name__, inspect.isgenerator(it),
                isinstance(it, collections.abc.Iterator), hasattr(it, "send"))
    check(f, x1)


# generators' send / throw / close, as CPython runs them (close() returns the generator's return
# value from 3.13 on: the same code gives each Python's own result)

def _counter(x):
    total = 0
    try:
        while True:
            sent = yield x * total
            total += 1 if sent is None else sent
    except GeneratorExit:
        return total


def _cleanup(x, log):
    try:
        yield x
        yield x + 1
    finally:
        log.append("closed")


def _stubborn(x):
    for _ in range(2):  # (ignores one GeneratorExit: the garbage collector's close then ends it)
        try:
            yield x
        except GeneratorExit:
            pass


def _catches(x):
    try:
        yield x
    except ValueError as e:
        yield x * len(e.args)
    yield x + 2


def _delegates(x):
    yield from _cleanup(x, [])


def _gen_send(x):
    g = _counter(x)
    return next(g), g.send(2), g.send(None), g.close()


def _gen_close_early(x):
    log = []
    g = _cleanup(x, log)
    first = next(g)
    return first, g.close(), list(log), g.close()


def _gen_close_unstarted(x):
    log = []
    g = _cleanup(x, log)
    return g.close(), list(log), next(g, None)


def _gen_close_exhausted(x):
    g = _counter(x)
    next(g)
    g.close()
    return g.close(), next(g, x)


def _gen_ignores_exit(x):
    g = _stubborn(x)
    next(g)
    try:
        g.close()
    except RuntimeError as e:
        return x, str(e)
    return x, None


def _gen_throw_caught(x):
    g = _catches(x)
    next(g)
    return g.throw(ValueError("a", "b")), next(g), next(g, None)


def _gen_throw_uncaught(x):
    g = _catches(x)
    next(g)
    next(g)
    try:
        g.throw(KeyError)
    except KeyError:
        return x, next(g, None)


def _gen_throw_stop_iteration(x):
    g = _cleanup(x, [])
    next(g)
    try:
        g.throw(StopIteration)
    except RuntimeError as e:
        return x, str(e)


def _gen_send_to_new(x):
    g = _counter(x)
    try:
        g.send(1)
    except TypeError as e:
        return x, str(e)


def _gen_returns_to_send(x):
    def two(x):
        yield x
        return 7
    g = two(x)
    next(g)
    try:
        g.send(None)
    except StopIteration as e:
        return x, e.value


@pytest.mark.parametrize("fn", [_gen_send, _gen_close_early, _gen_close_unstarted, _gen_close_exhausted,
                                _gen_ignores_exit, _gen_throw_caught, _gen_throw_uncaught, _gen_throw_stop_iteration,
                                _gen_send_to_new, _gen_returns_to_send], ids=lambda fn: fn.__name__[5:])
def test_generator_send_throw_close(fn):
    check(fn, x1)


def test_generator_closed_inside_yield_from_closes_the_sub_generator_first():
    def f(x):
        g = _delegates(x)
        first = next(g)
        return first, g.close()  # (as CPython's gen_close: the sub-generator, then the generator)
    check(f, x1)
