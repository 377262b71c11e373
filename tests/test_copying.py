"""`copy.copy`, `copy.deepcopy` and `id()` inside a compiled call (issue 18: T5's forward
deep-copies its config): compared with eager under fullgraph=True, arguments after included."""
import copy
import enum

import pytest
import torch

import rewrite
from breadth import check, rand
from conftest import eager_copy


class Mode(enum.Enum):
    A = 1


class Settings:
    def __init__(self):
        self.size = 3
        self.names = ["a", "b"]
        self.nested = {"k": [1, 2], "mode": Mode.A, "dtype": torch.float32}
        self.shared = self.names  # the memo keeps shared parts shared


def test_deepcopy_of_an_object_that_came_in_is_independent():
    def f(x, s):
        c = copy.deepcopy(s)
        c.names.append("c")
        c.nested["k"][0] = 10
        c.size += 1
        return x * c.size + len(c.shared) + c.nested["k"][0] + (c.nested["mode"] is Mode.A), c
    check(f, lambda seed: (rand(seed, 3), Settings()))


def test_deepcopy_and_copy_of_containers_made_in_the_call():
    def f(x):
        inner = [1, 2]
        d = {"a": inner, "b": (inner, 3)}
        deep, shallow = copy.deepcopy(d), copy.copy(d)
        inner.append(4)
        return x + len(deep["a"]) + len(shallow["a"]) + len(deep["b"][0]), deep, shallow
    check(f, lambda seed: (rand(seed, 3),))


def test_a_change_to_the_original_recompiles():
    def f(x, s):
        return x * copy.deepcopy(s).size
    compiled = rewrite.jit(f, fullgraph=True)
    s = Settings()
    torch.testing.assert_close(compiled(torch.ones(2), s), torch.full((2,), 3.0))
    s.size = 5
    torch.testing.assert_close(compiled(torch.ones(2), s), torch.full((2,), 5.0))
    s.extra = 1  # a new key of its __dict__
    torch.testing.assert_close(compiled(torch.ones(2), s), torch.full((2,), 5.0))
    assert len(rewrite.dispatcher_of(compiled).entries) == 3


def test_id_of_an_input_object_is_its_id():
    def f(x, s, t):
        return x + (id(s) == id(t)), id(s)
    compiled = rewrite.jit(f, fullgraph=True)
    s, t = Settings(), Settings()
    for args in ((s, s), (s, t), (t, t)):  # each object's own id (guarded on identity)
        got, want = compiled(torch.ones(2), *args), f(torch.ones(2), *args)
        torch.testing.assert_close(got[0], want[0])
        assert got[1] == want[1] == id(args[0])


def test_id_of_a_value_made_in_the_call_does_not_leave_it():
    def f(x):
        a, b = [1], [2]
        same = id(a) == id(a) and id(a) != id(b)
        return x + same
    check(f, lambda seed: (rand(seed, 3),))

    def g(x):
        return x, id([x])
    with pytest.raises(rewrite.Unsupported, match="id"):
        rewrite.jit(eager_copy(g), fullgraph=True)(torch.ones(2))
    out = rewrite.jit(eager_copy(g))(torch.ones(2))  # without fullgraph: the call runs eagerly, a real id
    assert out[1] > 0


class Custom:
    def __deepcopy__(self, memo):
        return self


def test_objects_that_customize_copying_break_the_graph():
    def f(x, c):
        return x, copy.deepcopy(c)
    with pytest.raises(rewrite.Unsupported, match="customizes copying"):
        rewrite.jit(f, fullgraph=True)(torch.ones(2), Custom())
