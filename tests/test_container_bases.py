"""Built-in methods of container bases (issue 18, items 3 and 5): a dict or list subclass that
came in, read through `super().get(...)`, `dict.get(self, ...)` and inherited `len` / `[]` /
`in`; and ModelOutput-style containers -- an OrderedDict subclass and dataclass with its own
`__post_init__`, `__setattr__`, `__setitem__` and a custom metaclass -- made in the call and
returned (rebuilt by calling the class again). Compiled with fullgraph=True against eager."""
import collections
import dataclasses
import functools

import torch

import rewrite
from breadth import check, check_each, rand


class Registry(dict):
    """As transformers' `_CanRecordRegistry`: keys by their str, a default for missing ones."""

    def __setitem__(self, key, value):
        super().__setitem__(str(key), value)

    def get(self, key):
        return super().get(str(key)) or {}

    def __getitem__(self, key):
        return super().__getitem__(str(key))


class Stack(list):
    def top_plus_len(self):
        return list.__getitem__(self, -1) + len(self)


def registry(**items):
    r = Registry()
    for k, v in items.items():
        r[k] = v
    return r


def test_dict_methods_through_super_and_the_builtin_on_a_subclass_that_came_in():
    def f(x, reg, st):
        d = reg.get(1)
        y = x * d["a"] + len(reg.get(5)) + st.top_plus_len()
        return y + dict.get(reg, "zz", 3) + ("1" in reg) + len(reg)
    check(f, lambda seed: (rand(seed, 3), registry(**{"1": {"a": 2}}), Stack([4, 5])))


def test_the_builtin_part_is_guarded_past_the_subclass():
    def f(x, reg):
        return x * reg.get("k").get("a", 0)
    check_each(f, (torch.ones(2), registry(k={"a": 2})), (torch.ones(2), registry(k={"a": 5})),
               (torch.ones(2), registry()))


class _RenameKwargs(type):
    """A metaclass wrapping the `__init__` that @dataclass sets (as transformers' _BCCacheNameMeta)."""

    def __setattr__(cls, name, value):
        if name == "__init__":
            init = value

            @functools.wraps(init)
            def __init__(self, *args, **kwargs):
                if "old_cache" in kwargs:
                    kwargs["cache"] = kwargs.pop("old_cache")
                init(self, *args, **kwargs)
            value = __init__
        super().__setattr__(name, value)


class Output(collections.OrderedDict, metaclass=_RenameKwargs):
    """ModelOutput's protocol: fields that are not None are also items, in field order."""

    def __post_init__(self):
        for field in dataclasses.fields(self):
            v = self.__dict__.get(field.name)
            if v is not None:
                self[field.name] = v

    def __setattr__(self, name, value):
        if name in {f.name for f in dataclasses.fields(self)} and value is not None:
            super().__setitem__(name, value)
        super().__setattr__(name, value)

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        super().__setattr__(key, value)

    def __getitem__(self, k):
        if isinstance(k, str):
            return dict(self.items())[k]
        return self.to_tuple()[k]

    def to_tuple(self):
        return tuple(self[k] for k in self.keys())


@dataclasses.dataclass
class LMOutput(Output):
    logits: torch.Tensor = None
    loss: torch.Tensor = None
    cache: tuple = None


def test_model_output_made_in_the_call_and_returned():
    def f(x):
        out = LMOutput(logits=x * 2, old_cache=(x + 1,))
        y = out.logits + out[0] + out["logits"] + len(out) + out.to_tuple()[1][0]
        return LMOutput(logits=y, cache=out.cache), "loss" in out, list(out.keys()), out.get("loss"), bool(out)
    check(f, lambda seed: (rand(seed, 3),))


def test_model_output_changed_after_it_was_made_keeps_the_change():
    def f(x):
        out = LMOutput(logits=x)
        out.loss = x.sum()  # its own __setattr__: an item too
        out["extra"] = x - 1
        out.move_to_end("logits")
        return out
    check(f, lambda seed: (rand(seed, 3),))


def test_model_output_returned_is_rebuilt_by_calling_the_class():
    calls = []

    @dataclasses.dataclass
    class Counted(Output):
        logits: torch.Tensor = None

        def __post_init__(self):
            calls.append(1)  # (a list of the test's own: traced as a side effect, so the object is copied)
            super().__post_init__()

    def f(x):
        return LMOutput(logits=x + 1)
    compiled = rewrite.jit(f, fullgraph=True)
    out = compiled(torch.ones(2))
    assert type(out) is LMOutput and list(out.keys()) == ["logits"] and out.loss is None
    torch.testing.assert_close(out["logits"], f(torch.ones(2))["logits"])
    src = "\n".join(e.source for e in rewrite.dispatcher_of(compiled).entries)
    assert "new_instance" not in src  # the class itself makes the object, as eager makes it

    def g(x):
        return Counted(logits=x)
    compiled = rewrite.jit(g, fullgraph=True)
    out, expected = compiled(torch.ones(2)), g(torch.ones(2))
    assert len(calls) == 2 and list(out.keys()) == list(expected.keys()) == ["logits"]


def test_empty_dict_subclass_made_in_the_call_is_false():
    class Bag(dict):
        pass

    def f(x):
        b = Bag()
        y = x if b else -x
        b["k"] = 1
        return (y + 1 if b else y), b
    check(f, lambda seed: (rand(seed, 3),))


class Layer:
    def __init__(self):
        self.keys = None

    def update(self, k):
        self.keys = k if self.keys is None else torch.cat([self.keys, k])
        return self.keys


class Cache:
    """As transformers' DynamicCache: made with nothing, its layers (made by __init__) filled later."""

    def __init__(self, n=2):
        self.layers = [Layer() for _ in range(n)]


def test_object_whose_own_parts_change_after_it_was_made_keeps_them():
    def f(x):
        cache = Cache()
        for layer in cache.layers:
            layer.update(x)
        cache.layers[0].update(x + 1)
        return cache
    check(f, lambda seed: (rand(seed, 3),))


class Tracked(list):
    def push(self, item):
        super().append(item)
        return len(self)


def test_builtin_methods_that_change_a_subclass_object_that_came_in():
    def f(x, reg, st):
        reg[2] = {"a": 3}  # Registry.__setitem__ -> super().__setitem__(str(key), ...)
        dict.__setitem__(reg, "raw", 1)
        dict.pop(reg, "1")
        n = st.push(5)
        st.append(6)
        list.insert(st, 0, -1)
        return x * n + len(reg) + sum(v for v in st) + len(list(iter(reg)))
    check(f, lambda seed: (rand(seed, 3), registry(**{"1": {"a": 2}}), Tracked([4])))


def test_list_subclass_made_in_the_call_and_returned():
    def f(x):
        st = Tracked([x])
        st.push(x + 1)
        st.append(x * 2)
        st.extend([x - 1])
        first = st[0] + st[-1] + len(st)
        return first, st, bool(Tracked()), Tracked([1, 2])
    check(f, lambda seed: (rand(seed, 3),))


def test_model_output_that_came_in_read_by_key_position_and_in_order():
    def loss(out):
        return out["logits"].sum() + out[1][0].sum() + len(out.to_tuple()) + len(list(out.keys())) + ("loss" in out)

    def make(seed):
        return (LMOutput(logits=rand(seed, 3), cache=(rand(seed, 2),)),)
    check(loss, make)


class Ordered(collections.OrderedDict):
    def __setitem__(self, key, value):
        super().__setitem__(key.lower(), value)


def test_ordered_dict_subclass_that_came_in_changed_in_order():
    def f(x, od):
        od["B"] = x.sum()
        od.move_to_end("a")
        collections.OrderedDict.__delitem__(od, "c")
        return x * len(od), list(od)

    def make(seed):
        od = Ordered()
        for k in "acd":
            od[k] = k
        return rand(seed, 3), od
    check(f, make)


class Traced(dict):
    def __getattribute__(self, key):
        return super().__getattribute__(key)  # (dict's slot: the generic lookup, not a dict method)


def test_getattribute_of_a_dict_subclass_through_super():
    def f(x, d):
        return x * d.scale + len(d)

    def make(seed):
        d = Traced(a=1)
        d.scale = 3
        return rand(seed, 3), d
    check(f, make)
