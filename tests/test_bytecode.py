"""The prologue splice on real code: every function of a few stdlib modules, rewritten, must
behave exactly as before -- with a dispatcher that always misses, and under @jit itself."""
import importlib.util
import types

import pytest

from rewrite import jit
from rewrite.bytecode import original_code, splice_prologue
from rewrite.dispatch import MISS, Slot

CALLS = {
    "statistics": [("mean", ([1, 2, 3, 4],)), ("median", ([3, 1, 2],)), ("stdev", ([1.0, 2.0, 4.0],)),
                   ("mode", ([1, 1, 2],)), ("harmonic_mean", ([1, 2, 4],)), ("variance", ([1, 2, 3, 4],)),
                   ("quantiles", ([1, 2, 3, 4, 5, 6, 7, 8],)), ("geometric_mean", ([1, 2, 4],)),
                   ("median_low", ([1, 2, 3, 4],)), ("fmean", ([1, 2, 3],))],
    "textwrap": [("wrap", ("The quick brown fox jumps over the lazy dog " * 3, 20)),
                 ("fill", ("hello world " * 10, 30)), ("dedent", ("    a\n      b\n",)),
                 ("indent", ("a\nb\n", "> ")), ("shorten", ("Hello  world!  How are you?", 12))],
    "colorsys": [("rgb_to_hsv", (0.2, 0.4, 0.6)), ("hls_to_rgb", (0.5, 0.5, 0.5)), ("rgb_to_yiq", (0.1, 0.2, 0.3))],
    "fractions": [("Fraction", (3, 4))],
}


def fresh_module(name):
    spec = importlib.util.find_spec(name)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def functions_of(module):
    for obj in vars(module).values():
        if isinstance(obj, types.FunctionType) and obj.__module__ == module.__name__:
            yield obj
        elif isinstance(obj, type) and obj.__module__ == module.__name__:
            for attr in vars(obj).values():
                fn = getattr(attr, "__func__", attr)
                if isinstance(fn, types.FunctionType):
                    yield fn


@pytest.mark.parametrize("modname", sorted(CALLS))
def test_spliced_stdlib_functions_behave_the_same(modname):
    reference, patched = fresh_module(modname), fresh_module(modname)
    slot = Slot()
    slot.call = lambda *a: MISS  # (slot.entry: NEXT, no entries)
    count = 0
    for fn in functions_of(patched):
        if fn.__code__.co_flags & (0x20 | 0x80 | 0x100 | 0x200):
            continue
        fn.__code__ = splice_prologue(fn.__code__, slot, MISS)
        assert original_code(fn.__code__) is not fn.__code__
        count += 1
    assert count > 3
    for name, args in CALLS[modname]:
        assert getattr(patched, name)(*args) == getattr(reference, name)(*args), name


@pytest.mark.parametrize("modname", sorted(CALLS))
def test_jit_on_stdlib_functions_gives_eager_results(modname):
    reference, patched = fresh_module(modname), fresh_module(modname)
    for fn in functions_of(patched):
        jit(fn)
    for name, args in CALLS[modname]:
        for _ in range(2):
            assert getattr(patched, name)(*args) == getattr(reference, name)(*args), name


def test_exception_handling_inside_a_rewritten_function():
    def f(x):
        try:
            return 1 / x
        except ZeroDivisionError:
            return "inf"
        finally:
            pass

    slot = Slot()
    slot.call = lambda *a: MISS  # (slot.entry: NEXT, no entries)
    f.__code__ = splice_prologue(f.__code__, slot, MISS)
    assert f(2) == 0.5 and f(0) == "inf"


def test_long_function_with_extended_args():
    src = "def f(x):\n" + "".join(f"    if x == {i}:\n        return {i} * 2\n" for i in range(300)) + "    return -1\n"
    ns = {}
    exec(src, ns)
    f = ns["f"]
    jit(f)
    assert [f(i) for i in (0, 150, 299, 1000)] == [0, 300, 598, -1]
    assert [f(i) for i in (0, 150, 299, 1000)] == [0, 300, 598, -1]


def test_cell_arguments_and_free_variables():
    def outer(a):
        b = 10

        def f(x, *rest, k=1, **kw):
            def g():
                return x + b
            return g() + len(rest) + k + len(kw) + a
        return f

    f = outer(5)
    expected = f(1, 2, 3, k=4, z=0)
    jit(f)
    assert f(1, 2, 3, k=4, z=0) == expected
    assert f(1, 2, 3, k=4, z=0) == expected
