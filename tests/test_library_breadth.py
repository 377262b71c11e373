"""Library breadth (issue 19, item 4): collections (OrderedDict, defaultdict, deque,
`fromkeys`), itertools (combinations, permutations, zip_longest, islice, `chain.from_iterable`,
accumulate), calls through `functools.lru_cache`, dict views compared, `int * list`, tensors
and parameters as dict keys, methods and properties of `typing.NamedTuple` classes,
`x.__class__.__name__` -- each under fullgraph=True against eager, containers passed in
compared after the call."""
import collections
import functools
import itertools
import typing

import pytest
import torch

import rewrite
from conftest import eager_copy


class Pair(typing.NamedTuple):
    a: torch.Tensor
    b: int = 2

    def scaled(self):
        return self.a * self.b

    @property
    def twice(self):
        return self.b * 2


@functools.lru_cache(None)
def tripled(n):
    return n * 3


def plain(v):
    """A comparable form: containers as (type name, items), tensors as lists."""
    if isinstance(v, torch.Tensor):
        return ("tensor", v.dtype, v.tolist())
    if isinstance(v, dict):
        return (type(v).__name__, [(plain(k), plain(x)) for k, x in v.items()],
                getattr(v, "default_factory", None))
    if isinstance(v, (list, tuple, collections.deque)):
        return (type(v).__name__, [plain(x) for x in v], getattr(v, "maxlen", None))
    if isinstance(v, (set, frozenset)):
        return (type(v).__name__, sorted(map(repr, v)))
    return v


CASES = {
    "defaultdict": lambda x: (lambda d: (d["a"].append(x), d["b"].append(x * 2), d["a"].append(1), d)[-1])(
        collections.defaultdict(list)),
    "ordered_dict": lambda x: (lambda o: (o.__setitem__("z", x), o.move_to_end("a"), o.popitem(last=False), o)[-1])(
        collections.OrderedDict(a=x, b=x + 1)),
    "deque": lambda x: (lambda d: (d.append(x), d.appendleft(x * 2), d.extend([x + 1, x + 2]), d.pop(),
                                    d.rotate(1), d.popleft(), d)[-1])(collections.deque([x], maxlen=3)),
    "fromkeys": lambda x: (dict.fromkeys(["a", "b"], x), collections.OrderedDict.fromkeys([1, 2]),
                           collections.defaultdict.fromkeys("ab", 0)),
    "combinations": lambda x: [a + b for a, b in itertools.combinations([x, x * 2, x * 3], 2)],
    "permutations": lambda x: [a - b for a, b in itertools.permutations([x, x * 2])],
    "zip_longest": lambda x: list(itertools.zip_longest([x, x + 1], [1], fillvalue=0)),
    "islice": lambda x: list(itertools.islice([x, x + 1, x + 2, x + 3, x + 4], 1, None, 2))
    + list(itertools.islice(iter([x, x]), 1)),
    "chain_from_iterable": lambda x: list(itertools.chain.from_iterable([[x], (x + 1, x + 2)])),
    "accumulate": lambda x: list(itertools.accumulate([x, x, x]))
    + list(itertools.accumulate([1, 2, 3], lambda a, b: a * b, initial=2)),
    "lru_cache": lambda x: x * tripled(4),
    "dict_views": lambda x: ({"a": x}.keys() == {"a"}, {"a": 1, "b": 2}.keys() & {"b", "c"},
                             {"a": 1}.items() == {("a", 1)}, sorted({"a": 1}.keys() | {"c"})),
    "int_times_list": lambda x: 2 * [x] + [1] * 2,
    "tensor_keys": lambda x: (lambda d: (d[x], len(d), x in d, [k is x for k in d]))({x: 1, "k": 2}),
    "named_tuple": lambda x: (Pair(x).scaled(), Pair(x, 3).twice, Pair(x)._replace(b=5).scaled(), Pair._fields),
    "class_name": lambda x: (x.__class__.__name__, [].__class__.__name__, Pair(x).__class__.__name__,
                             {}.__class__.__name__, collections.deque().__class__.__name__),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_library_breadth_under_fullgraph(name):
    fn = CASES[name]
    compiled = rewrite.jit(eager_copy(fn), fullgraph=True)
    for _ in range(2):
        x = torch.randn(3)
        assert plain(compiled(x)) == plain(fn(x))


def test_containers_passed_in_are_changed_as_eager_changes_them():
    def f(state, params, queue, x):
        for p in params:
            entry = state[p]  # a defaultdict keyed by parameters, as torch.optim's state
            entry["n"] = entry.get("n", 0) + 1
            entry["sum"] = p * 0 + x if "sum" not in entry else entry["sum"] + x
        queue.append(x.sum())
        return len(state), len(queue)

    params = [torch.nn.Parameter(torch.ones(2)), torch.nn.Parameter(torch.zeros(2))]
    compiled = rewrite.jit(eager_copy(f))
    states = [collections.defaultdict(dict) for _ in range(2)]
    queues = [collections.deque(maxlen=2) for _ in range(2)]
    for _ in range(3):
        x = torch.randn(2)
        assert compiled(states[0], params, queues[0], x) == f(states[1], params, queues[1], x)
        assert list(states[0]) == list(states[1]) == params
        for p in params:
            assert states[0][p]["n"] == states[1][p]["n"]
            assert torch.equal(states[0][p]["sum"], states[1][p]["sum"])
        assert [t.item() for t in queues[0]] == [t.item() for t in queues[1]]


def test_a_dict_keyed_by_a_tensor_that_is_not_the_same_object_next_call_recompiles():
    def f(d, x):
        return d.get(x, 0)

    compiled = rewrite.jit(eager_copy(f))
    a, b = torch.ones(1), torch.ones(1)
    assert compiled({a: 1}, a) == 1
    assert compiled({a: 1}, b) == 0  # equal values, not the key itself
    assert compiled({b: 2}, b) == 2


def test_dict_keys_with_their_own_hash_are_not_baked_in():
    import dataclasses

    @dataclasses.dataclass(frozen=True)
    class Point:
        a: int

    def f(d, k, x):
        return x + d[k] if k in d else x - 100

    compiled = rewrite.jit(eager_copy(f))
    table = {Point(1): 1, Point(2): 2}
    for k in (Point(1), Point(3), Point(2)):
        assert torch.equal(compiled(table, k, torch.ones(1)), f(table, k, torch.ones(1)))


def test_an_object_key_missing_at_trace_time_is_guarded_distinct():
    class Key:
        pass

    k1 = Key()

    def f(d, k, x):
        return (x + d[k] if k in d else x - 100), d.get(k, 7)

    compiled = rewrite.jit(eager_copy(f))
    for k in (Key(), k1, Key(), k1):
        got, want = compiled({k1: 1}, k, torch.ones(1)), f({k1: 1}, k, torch.ones(1))
        assert torch.equal(got[0], want[0]) and got[1] == want[1]


registry_calls = []


@functools.lru_cache(None)
def registry():
    registry_calls.append(1)
    return {}


def test_lru_cache_with_a_mutable_result_or_side_effects_is_what_eager_does():
    def f(x):
        r = registry()
        r["n"] = r.get("n", 0) + 1
        return x + r["n"]

    compiled = rewrite.jit(eager_copy(f))
    got = [compiled(torch.ones(1)).item() for _ in range(3)]
    registry.cache_clear()
    registry_calls.clear()
    want = [f(torch.ones(1)).item() for _ in range(3)]
    assert got == want == [2.0, 3.0, 4.0] and registry_calls == [1]
