"""Every row of `rewrite.ops.fills.FILLS` (how CPython fills a container from an iterable)
against an eager run of the same statement: the container is made, filled by the row's method
from an argument (a generator that reads the container as it grows, the container itself, a
list, a set, an iterator, a generator that raises part-way, pairs with the wrong length, ...),
and returned with an alias made before the call and its repr (order and maxlen). The oracle
is eager, never a hand-written expectation; rows the tracer applies must also compile (no
call run wholly eagerly)."""
import collections
import random

import pytest
import torch

import rewrite
from rewrite.ops.fills import FILLS, INPLACE

from conftest import same_calls

MAKE = {  # how a container of each kind is made in the function
    list: ["[1, 2]"],
    collections.deque: ["collections.deque([1, 2])", "collections.deque([1, 2], maxlen=3)",
                        "collections.deque([1], maxlen=0)"],
    set: ["{1, 2}", "set()"],
    dict: ["{'a': 1}"],
    collections.defaultdict: ["collections.defaultdict(int, a=1)"],
    collections.OrderedDict: ["collections.OrderedDict(a=1)"],
    collections.Counter: ["collections.Counter('ab')"],
    bytearray: ["bytearray(b'ab')"],
}
INTS = {  # arguments for containers of ints
    "reads_len": "(len(y) + i for i in range(3))",
    "reads_items": "(max(y, default=0) * 2 + i for i in range(2))",
    "itself": "y",
    "list": "[3, 1, 3]",
    "set": "{4, 1}",
    "frozenset": "frozenset({2, 7})",
    "keys_view": "dict.fromkeys([2, 5]).keys()",
    "iterator": "iter([5, 6, 5])",
    "raises": "(len(y) // (2 - i) for i in range(4))",
}
PAIRS = {  # arguments for dicts
    "reads_len": "((f'k{len(y)}', len(y)) for i in range(3))",
    "itself": "y",
    "dict": "{'b': 2, 'a': 0}",
    "pairs": "[('b', 2), ['c', 3], 'de']",
    "items_view": "{'q': 1, 'a': 5}.items()",
    "bad_length": "[('b', 2), (1, 2, 3)]",
    "short": "[('b', 2), (1,)]",
    "not_a_pair": "[('b', 2), 5]",
    "raises": "((f'k{i}', len(y) // (2 - i)) for i in range(4))",
    "reads_own_items": "((k + 'x', v) for k, v in y.items())",  # (the dict changes size while iterated)
}
STRS = {  # arguments for Counters
    "reads_len": "(str(len(y)) for i in range(3))",
    "itself": "y",
    "str": "'abca'",
    "dict": "{'a': 2, 'z': 1}",
}
ARGS = {list: INTS, collections.deque: INTS, set: INTS, bytearray: INTS, dict: PAIRS, collections.defaultdict: PAIRS,
        collections.OrderedDict: PAIRS, collections.Counter: STRS}
SYMBOLS = {name: sym for sym, name in INPLACE.items()}


SHOW = {collections.Counter: lambda y: list(y.items())}  # (a Counter's repr sorts through heapq: not traced)


def statement(name: str, arg: str) -> str:
    if name in SYMBOLS:
        return f"y {SYMBOLS[name]} {arg}"
    if name == "__setitem__":
        return f"y[1:] = {arg}"
    return f"y.{name}({arg})"


def heirs(cls, name):
    """`cls` and the kinds above that inherit its method `name` (defaultdict.update is dict's)."""
    return [kind for kind in MAKE if issubclass(kind, cls) and getattr(kind, name) is getattr(cls, name)]


def cases():
    for (cls, name), row in FILLS.items():
        for kind in heirs(cls, name):
            for make in MAKE[kind]:
                for what, arg in ARGS[kind].items():
                    yield pytest.param(kind, name, make, what, statement(name, arg), id=f"{cls.__name__}.{name}-{make}-{what}")
        if row.keywords:
            yield pytest.param(cls, name, MAKE[cls][0], "keywords", f"y.{name}([('b', len(y))], c=len(y))",
                               id=f"{cls.__name__}.{name}-keywords")
        if row.takes == "many":
            yield pytest.param(cls, name, MAKE[cls][0], "several", f"y.{name}([len(y)], (len(y) + i for i in range(3)))",
                               id=f"{cls.__name__}.{name}-several")


def load(make: str, stmt: str, show=repr, out=lambda y: y):
    """f(x): y made, an alias z, the statement; out(y), z is y, and `show` of both (repr: order and maxlen)."""
    source = (f"def f(x):\n    y = {make}\n    z = y\n    try:\n        {stmt}\n"
              f"    except Exception as e:\n        return x + 1, type(e).__name__, str(e), show(y), z is y\n"
              f"    return x + 1, out(y), show(y), z is y, show(z)\n")
    ns = {"collections": collections, "show": show, "out": out}
    exec(compile(source, f"<fill {stmt}>", "exec"), ns)
    return ns["f"]


def row_of(kind, name):
    return next(FILLS[base, name] for base in kind.__mro__ if (base, name) in FILLS)


@pytest.mark.parametrize("kind, name, make, what, stmt", list(cases()))
def test_row_against_eager(kind, name, make, what, stmt):
    show = SHOW.get(kind, repr)
    same_calls(load(make, stmt, show), lambda i: (torch.ones(2),), calls=2)
    row = row_of(kind, name)
    if row.where != "eager" and not (row.sets_only and what not in ("itself", "set", "frozenset")):
        # (`s |= gen` is a TypeError and `s |= d.keys()` a new set: not the row's own fill)
        out = rewrite.explain(load(make, stmt, show))(torch.ones(2))
        assert out.eager_reasons == [] and out.graph_count == 1, (stmt, [str(r) for r in out.break_reasons])


@pytest.mark.parametrize("make", ["[x]", "collections.deque([x], maxlen=2)"])
@pytest.mark.parametrize("stmt", ["y.extend(y[-1] * len(y) for _ in range(3))", "y += (t + 1 for t in y[-1:])",
                                  "y.extend(y)", "y[:1] = (t * 2 for t in y)"])
def test_tensor_items_in_order(make, stmt):
    if "[:1]" in stmt and "deque" in make:
        pytest.skip("deques take no slice assignment (eager's TypeError is checked by the rows)")
    f = load(make, stmt, show=len, out=list)  # (a deque of tensors has no == that assert_same can use)
    same_calls(f, lambda i: (torch.arange(3.0) + i,), calls=2, fullgraph=True)


def test_every_row_is_tested_by_kind():
    """The table and the spellings above stay in step: each row's type has a maker and arguments."""
    assert {cls for cls, _ in FILLS} <= set(MAKE) and set(MAKE) <= set(ARGS)


@pytest.mark.parametrize("make", ["{1, 2}", "set()", "{'a', 'bb', 'c'}", "frozenset({1, 2})"])
@pytest.mark.parametrize("expr", [
    "y.intersection(g())", "y.intersection([2], g())", "y.isdisjoint(g())", "y.issuperset(g())",
    "y.issubset(g())", "y.union(g())", "y.difference(g())", "y.symmetric_difference(g())",
    "y.intersection([True, 1.0, 'c', 'a'])", "y.union(['bb', 'a', 3, 1.0])",
])
def test_set_methods_take_a_generator_as_cpython_does(make, expr):
    """The reading methods too: intersection stops taking once all it keeps was found,
    isdisjoint and issuperset at the first item that decides, issubset takes it whole."""
    source = (f"def f(x):\n    log = []\n    y = {make}\n\n    def g():\n        for v in [2, 1, 'a', 'bb', 5]:\n"
              f"            log.append(v)\n            yield v\n        raise KeyError('past the end')\n\n"
              f"    try:\n        r = {expr}\n    except KeyError as e:\n        r = str(e)\n"
              f"    return x + 1, r, repr(r), log\n")
    ns = {}
    exec(compile(source, f"<set {expr}>", "exec"), ns)
    same_calls(ns["f"], lambda i: (torch.ones(2),), calls=2, fullgraph=True)


@pytest.mark.parametrize("stmt", ["y[1:] = [5]", "del y[1:]", "y[1.0] = 2", "r = y['a']", "y[-1] = 7", "del y[0]"])
def test_deque_indexes_are_integers(stmt):
    source = (f"def f(x):\n    y = collections.deque([1, 2, 3])\n    try:\n        {stmt}\n"
              f"    except TypeError as e:\n        return x + 1, str(e), list(y)\n    return x + 1, list(y)\n")
    ns = {"collections": collections}
    exec(compile(source, f"<deque {stmt}>", "exec"), ns)
    same_calls(ns["f"], lambda i: (torch.ones(2),), calls=2, fullgraph=True)


def test_set_display_keeps_eagers_order_where_hashes_collide():
    """`{'a', 'b', ...}` of constants is `SET_UPDATE` of a frozenset constant: CPython merges
    its table, slot for slot, and strings whose hashes collide near the table's end iterate
    in another order than adding them one by one gives. String hashes are salted per
    process: such strings are looked for in this one."""
    rng = random.Random(0)
    for _ in range(20000):
        words = list(dict.fromkeys("".join(rng.choice("abcdefgh") for _ in range(3)) for _ in range(5)))
        frozen, one_by_one = frozenset(words), set()
        for w in frozen:
            one_by_one.add(w)
        if list(one_by_one) != list(set(frozen)):
            break
    else:
        pytest.skip("no colliding strings found in this process")
    shown = ", ".join(map(repr, words))
    source = (f"def f(x):\n    s = {{{shown}}}\n    t = set(frozenset([{shown}]))\n    u = {{*s}}\n"
              f"    return x + 1, list(s), repr(t), list(u)\n")
    ns = {}
    exec(compile(source, "<set display>", "exec"), ns)
    same_calls(ns["f"], lambda i: (torch.ones(2),), calls=2, fullgraph=True)
