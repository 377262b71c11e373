"""What libraries ask of modules and of sets that came in, under `fullgraph=True` (issue 45):
`hasattr(module, name)` and `getattr(module, name, default)` through nn.Module's own
`__getattr__` and through a subclass's (diffusers' ModelMixin reads its config first); the
truth, `len()`, `in` and iteration of sets and frozensets read from globals, dict values and
attributes. Each compiled run is compared with an eager run; the guards are checked by
changing what was read between calls."""
import pytest
import torch
import torch.nn as nn

import rewrite

from conftest import assert_same, eager_copy

NAMES = ("lin", "buf", "weight", "scale", "cfg_key", "training", "missing", "_diffusers_hook", "forward")


class ConfigMixin(nn.Module):
    """diffusers' ModelMixin's lookup: a config key, then nn.Module's own."""

    def __getattr__(self, name):
        config = self.__dict__.get("_internal_dict")
        if config is not None and name in config and name not in self.__dict__:
            return config[name]
        return super().__getattr__(name)


class Plain(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.weight = nn.Parameter(torch.ones(4))
        self.register_buffer("buf", torch.full((4,), 2.0))
        self.scale = 3


class Configured(ConfigMixin, Plain):
    def __init__(self):
        super().__init__()
        self._internal_dict = {"cfg_key": 5}


def probe(module, x):
    out = x
    for i, name in enumerate(NAMES):
        if hasattr(module, name):
            out = out + (i + 1)
    for sub in module.modules():
        if hasattr(sub, "_diffusers_hook"):
            out = out * 2
    return out * getattr(module, "cfg_key", 1) + getattr(module, "missing", 7) + getattr(module, "scale", 0)


@pytest.mark.parametrize("cls", [Plain, Configured])
def test_hasattr_and_getattr_with_a_default_on_modules(cls):
    module, x = cls(), torch.randn(4)
    compiled = rewrite.jit(eager_copy(probe), fullgraph=True)
    assert_same(compiled(module, x), probe(module, x))
    module.missing = 11  # (present now: the guards see it)
    module.lin._diffusers_hook = object()
    assert_same(compiled(module, x), probe(module, x))
    del module.missing
    if cls is Configured:
        module._internal_dict["missing"] = 13  # (a config key now: found through the subclass's __getattr__)
    assert_same(compiled(module, x), probe(module, x))


def test_getattr_of_a_missing_attribute_raises_as_eager():
    module = Configured()

    def f(m, x):
        return x * m.nothere

    with pytest.raises(AttributeError, match="'Configured' object has no attribute 'nothere'"):
        rewrite.jit(f)(module, torch.randn(2))


FROZEN = frozenset({"mps", "npu"})
EMPTY = frozenset()
NAMES_SET = {"a", "b"}
BY_DTYPE = {torch.float64: frozenset({"mps"}), torch.int64: frozenset(), "cpu": {"cpu", "meta"}}


class Holder:
    def __init__(self):
        self.frozen = frozenset({"cpu"})
        self.names = {"x"}


HOLDER = Holder()


def read_sets(x):
    out = x
    if FROZEN:
        out = out + len(FROZEN)
    if not EMPTY:
        out = out - 1
    if "mps" in FROZEN and "cuda" not in FROZEN:
        out = out * 2
    if NAMES_SET and "a" in NAMES_SET:
        out = out + len(NAMES_SET)
    unsupported = BY_DTYPE.get(torch.float64)  # (diffusers' maybe_adjust_dtype_for_device)
    if unsupported and x.device.type in unsupported:
        out = out * 100
    if BY_DTYPE.get(torch.int64) or BY_DTYPE.get(torch.float32):
        out = out * 1000
    if "cpu" in BY_DTYPE["cpu"] and len(BY_DTYPE["cpu"]) == 2:
        out = out + 0.5
    if HOLDER.frozen and "cpu" in HOLDER.frozen:
        out = out * 3
    out = out + len(HOLDER.names) + sum(len(s) for s in sorted(FROZEN))
    return out


def test_truth_len_in_and_iteration_of_sets_that_came_in():
    global FROZEN
    x = torch.randn(3)
    compiled = rewrite.jit(eager_copy(read_sets), fullgraph=True)
    assert_same(compiled(x), read_sets(x))
    NAMES_SET.add("c")  # a set changed between calls: its length guarded
    HOLDER.names.clear()
    BY_DTYPE["cpu"].discard("meta")
    assert_same(compiled(x), read_sets(x))
    saved, FROZEN = FROZEN, frozenset({"npu"})  # another frozenset: guarded by identity
    try:
        assert_same(compiled(x), read_sets(x))
    finally:
        FROZEN = saved
    BY_DTYPE[torch.int64] = frozenset({"cuda"})
    assert_same(compiled(x), read_sets(x))


def test_a_set_the_call_changes_is_not_taken_by_its_length():
    seen = {"a"}

    def f(x):
        seen.add("b")
        return x * len(seen)

    expected = eager_copy(f)(torch.ones(2))
    seen.discard("b")
    assert_same(rewrite.jit(f)(torch.ones(2)), expected)
