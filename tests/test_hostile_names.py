"""Names that come from data reach generated code (guards, entries, side-effect replay,
backends) only as checked identifiers or string literals: a hostile name gives eager's
result, never runs code, never a SyntaxError or an internal error."""
import functools

import pytest
import torch

import rewrite

from conftest import Obj, assert_same, eager_copy, obj, same_calls

PWNED = "__class__ if __import__('os').system('echo PWNED') else x"
HOSTILE = [
    PWNED,
    "a'b", 'a"b', 'x"""y', "a\\b", "line\nbreak", "nul\x00byte", "tab\tx", "emoji🔥", "ﬁeld", "field",
    "class", "None", "{}", "}{", "{0}", "__dict__x", "G", "___o", " lead", "", "1abc", "a.b", "a[0]",
    "#comment", ")", "é",
]
IDS = [repr(n)[:20] for n in HOSTILE]


def no_pwned(capfd):
    out = capfd.readouterr()
    assert "PWNED" not in out.out and "PWNED" not in out.err


@pytest.mark.parametrize("name", HOSTILE, ids=IDS)
def test_getattr_setattr_delattr_on_an_object_passed_in(name, capfd):
    def f(x, o, n):
        before = getattr(o, n, None)
        setattr(o, n, x * 2)
        has = hasattr(o, n)
        value = getattr(o, n) + 1
        setattr(o, n + "2", 3)
        delattr(o, n + "2")
        return value, before is None, has
    same_calls(f, lambda c: (torch.ones(2) * c, obj(keep=1), name))
    no_pwned(capfd)


@pytest.mark.parametrize("name", HOSTILE, ids=IDS)
def test_attributes_of_an_object_that_came_with_them(name, capfd):
    def f(x, o):
        return x + getattr(o, name)

    def args(c):
        o = Obj()
        setattr(o, name, torch.full((2,), float(c)))
        return torch.ones(2), o
    same_calls(f, args)
    no_pwned(capfd)


@pytest.mark.parametrize("name", HOSTILE, ids=IDS)
def test_dict_keys(name, capfd):
    def f(x, d):
        d[name + "!"] = x * 3
        y = d[name] + 1
        del d[name]
        return y, d
    same_calls(f, lambda c: (torch.ones(2), {name: torch.ones(2) * c, "other": 1}))
    no_pwned(capfd)


@pytest.mark.parametrize("name", HOSTILE, ids=IDS)
def test_objects_made_in_the_call_and_returned(name, capfd):
    class Made:
        pass

    def f(x):
        o = Made()
        setattr(o, name, x + 1)
        return o

    eager = eager_copy(f)
    compiled = rewrite.jit(f)
    for _ in range(2):
        got, want = compiled(torch.ones(2)), eager(torch.ones(2))
        assert list(vars(got)) == list(vars(want))
        assert_same(getattr(got, name), getattr(want, name))
    no_pwned(capfd)


def kw_sink(x, **kwargs):
    return x + len(kwargs)


@pytest.mark.parametrize("name", HOSTILE, ids=IDS)
def test_partial_keywords(name, capfd):
    def f(x):
        p = functools.partial(kw_sink, **{name: 1})
        return p(x), p

    eager = eager_copy(f)
    compiled = rewrite.jit(f)
    for _ in range(2):
        (got, gp), (want, wp) = compiled(torch.ones(2)), eager(torch.ones(2))
        assert_same(got, want)
        assert gp.keywords == wp.keywords and gp.func is wp.func
    no_pwned(capfd)


@pytest.mark.parametrize("name", HOSTILE, ids=IDS)
def test_a_function_with_a_hostile_qualname(name, capfd):
    def f(x):
        y = x * 2
        print("", end="")  # a graph break: resume functions and entries are named after it
        return y + 1
    f.__qualname__ = f.__name__ = name
    same_calls(f, lambda c: (torch.ones(2) + c,))
    no_pwned(capfd)


@pytest.mark.parametrize("backend", ["python", "eager"])
def test_hostile_names_under_each_backend(backend, capfd):
    def f(x, o):
        for n in HOSTILE:
            setattr(o, n, getattr(o, n, 0) + x.sum())
        return x + 1
    same_calls(f, lambda c: (torch.ones(2) * c, obj()), backend=backend)
    no_pwned(capfd)


def test_non_ascii_identifiers_are_not_folded_together(capfd):
    """`o.ﬁeld` in source would read `o.field`: the guard on one must not check the other."""
    def f(x, o):
        return x + getattr(o, "ﬁeld") * 10 + getattr(o, "field")

    def args(c):
        o = Obj()
        setattr(o, "ﬁeld", float(c))
        setattr(o, "field", 100.0)
        return torch.ones(2), o
    same_calls(f, args)
    no_pwned(capfd)


def test_keys_without_a_literal_form_give_eagers_result():
    class Key:
        def __repr__(self):
            return PWNED

    k = Key()

    def f(x, d):
        return x + d[k]
    same_calls(f, lambda c: (torch.ones(2), {k: float(c)}))


def test_an_instance_dict_key_without_a_literal_form_gives_eagers_result(capfd):
    """An object's `__dict__` read whole holds a key that is no identifier and has no literal
    form (its repr is code): no source is made of an item with that key (a graph break, eager's
    result), never an internal error where the guards are written, never the repr pasted."""
    class Key:
        def __repr__(self):
            return PWNED

    o = obj(a=1)
    o.__dict__[Key()] = 2.0

    def f(x, o):
        return x + sum(v for v in o.__dict__.values())
    same_calls(f, lambda c: (torch.ones(2) * c, o))
    no_pwned(capfd)
