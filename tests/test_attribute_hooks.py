"""Classes that look attributes up in Python (issue 18, item 1): `__getattribute__` (a Hugging
Face config's `attribute_map`), `__getattr__`, `__setattr__` / `__delattr__`, `hasattr` and
`getattr` with a default on them, and `obj.__dict__` read and written key by key. Each
compiled with fullgraph=True (no graph break) against eager, arguments compared after."""
import pytest
import torch

import rewrite
from breadth import check, check_each, rand


class Config:
    """As transformers' PretrainedConfig: names mapped through a class-level `attribute_map`."""
    attribute_map = {"hidden_size": "n_embd", "layers": "n_layer"}

    def __init__(self, n_embd=4, n_layer=2, scale=0.5):
        self.n_embd = n_embd
        self.n_layer = n_layer
        self.scale = scale

    def __setattr__(self, key, value):
        if key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        super().__setattr__(key, value)

    def __getattribute__(self, key):
        if key != "attribute_map" and key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        return super().__getattribute__(key)


class Guarded(Config):
    """A second `__getattribute__` over the first, reading the instance dict past both."""

    def __getattribute__(self, key):
        spec = super().__getattribute__("__dict__").get("_spec")
        if spec is not None and key in spec:
            raise AttributeError(f"{key} is per-layer")
        return super().__getattribute__(key)


class Lazy:
    """Attributes made on demand by `__getattr__`; others are missing."""

    def __init__(self):
        self.base = 3

    def __getattr__(self, name):
        if name.startswith("x_"):
            return len(name) + self.base
        raise AttributeError(name)


def with_config(seed):
    return rand(seed, 3), Config()


def test_mapped_names_read_through_a_getattribute_of_the_class():
    def f(x, cfg):
        return x * cfg.scale + cfg.hidden_size * cfg.layers - cfg.n_embd
    check(f, with_config)


def test_mapped_names_written_through_a_setattr_of_the_class():
    def f(x, cfg):
        cfg.hidden_size = cfg.hidden_size + 1  # stored as n_embd, as eager stores it
        cfg.extra = 2.0
        return x * cfg.n_embd + cfg.extra
    check(f, with_config)


def test_deleting_through_the_class_hooks():
    def f(x, cfg):
        del cfg.scale
        return x + cfg.hidden_size + getattr(cfg, "scale", 10)
    check(f, with_config)


def test_a_changed_value_behind_the_getattribute_recompiles():
    def f(x, cfg):
        return x * cfg.hidden_size
    check_each(f, (torch.ones(2), Config(n_embd=4)), (torch.ones(2), Config(n_embd=5)),
               (torch.ones(2), Config(n_embd=4)))


def test_getattribute_over_getattribute_reading_the_instance_dict():
    def f(x, cfg):
        y = x * cfg.hidden_size
        try:
            return y + cfg.layers
        except AttributeError:
            return y - 1

    def args(spec):
        def make(seed):
            cfg = Guarded()
            object.__setattr__(cfg, "_spec", spec)
            return rand(seed, 3), cfg
        return make
    check(f, args(None))
    check(f, args(("n_layer",)))


def test_getattr_fallback_hasattr_and_getattr_with_default():
    def f(x, lz):
        y = x + lz.x_abc + lz.base
        if hasattr(lz, "missing"):
            y = y + 100
        if hasattr(lz, "x_q"):
            y = y * 2
        return y + getattr(lz, "nope", 5) + getattr(lz, "x_zz", 7)
    check(f, lambda seed: (rand(seed, 3), Lazy()))


def test_getattr_fallback_after_the_instance_gains_the_attribute():
    def f(x, lz):
        return x + lz.x_a

    def gained():
        lz = Lazy()
        lz.x_a = 100
        return lz
    check_each(f, (torch.ones(2), Lazy()), (torch.ones(2), gained()))


def test_attribute_error_from_getattribute_reaches_the_except():
    def f(x, cfg):
        try:
            return x + cfg.n_embd
        except AttributeError as e:
            return x - len(str(e))

    def make(seed):
        cfg = Guarded()
        object.__setattr__(cfg, "_spec", ("n_embd",))
        return rand(seed, 3), cfg
    check(f, make)


class State:
    def __init__(self):
        self.steps = 2


def test_instance_dict_read_and_written_key_by_key():
    def f(x, st):
        d = st.__dict__
        y = x * d["steps"] + d.get("missing", 3) + ("steps" in d)
        d["steps"] = 7
        d["new"] = 1
        return y + st.steps + st.new
    check(f, lambda seed: (rand(seed, 3), State()))


def test_instance_dict_key_error_and_delete():
    def f(x, st):
        del st.__dict__["steps"]
        try:
            return x + st.__dict__["steps"]
        except KeyError:
            return x - 1
    check(f, lambda seed: (rand(seed, 3), State()))


def test_whole_instance_dict_breaks_the_graph_and_stays_correct():
    def f(x, st):
        return x * len(st.__dict__)
    check(f, lambda seed: (rand(seed, 3), State()), fullgraph=False)

    def g(x, st):
        return x * len(st.__dict__)
    with pytest.raises(rewrite.Unsupported, match="__dict__"):
        rewrite.jit(g, fullgraph=True)(torch.ones(2), State())


def _strict_setattr(self, key, value):
    if key == "frozen":
        raise AttributeError("frozen is read-only")
    object.__setattr__(self, key, value)


class Strict:
    """A `__setattr__` installed after the class was made (as transformers' strict configs do):
    the function's own name is not the attribute's."""

    def __init__(self):
        self.size = 2


Strict.__setattr__ = _strict_setattr


def test_a_setattr_whose_function_has_another_name_is_guarded_as_the_class_holds_it():
    def f(x, st):
        made = Strict()
        made.size = 5
        st.size = st.size + 1
        return x * st.size + made.size
    check(f, lambda seed: (rand(seed, 3), Strict()))  # (its second call must hit the cache)


class Watched:
    """Records every attribute lookup, as a config with a side effect in `__getattribute__` would."""

    def __init__(self, k, seen):
        object.__setattr__(self, "_seen", seen)
        self.k = k

    def __getattribute__(self, name):
        object.__getattribute__(self, "_seen").append(name)
        return object.__getattribute__(self, name)


def _watched_reads(w, x):
    y = x * w.k
    y = y + getattr(w, "k", 1) + hasattr(w, "nope")
    y = y + (2 if isinstance(w, Watched) else 3) + (type(w) is Watched)
    y = y + len([v.k for v in (w, w) if v is not None])
    try:
        y = y * w.k
    except AttributeError:
        y = y - 1
    with torch.no_grad():
        y = y + w.k
    return y


def test_the_trace_asks_an_object_only_what_the_code_asks():
    """The lookups a class records in `__getattribute__` are eager's, not one more: the trace
    classifies a value by its type (isinstance would ask the object its `__class__`, through
    its `__getattribute__`: a transformers config ran it ~5,000 times in GPT-2's first call)."""
    x = torch.randn(3)
    seen_eager, seen_jit = [], []
    expected = _watched_reads(Watched(2, seen_eager), x)
    compiled = rewrite.jit(_watched_reads)
    got = compiled(Watched(2, seen_jit), x)
    torch.testing.assert_close(got, expected)
    assert seen_jit == seen_eager
    seen_jit.clear(), seen_eager.clear()
    torch.testing.assert_close(compiled(Watched(2, seen_jit), x), _watched_reads(Watched(2, seen_eager), x))
    assert seen_jit == seen_eager  # (the cached call: the entry's reads)
