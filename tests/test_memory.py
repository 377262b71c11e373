"""What rewrite compiles for a function is freed with the function (or its module): no table
holds it strongly, and the code object (which the cycle collector cannot see into) reaches
its dispatcher only weakly. Each cycle's compiled calls are compared with eager."""
import contextlib
import gc
import io
import linecache
import sys
import types
import weakref

import torch

import rewrite

from conftest import assert_same

SOURCE = """
def f(x):
    y = x * {k} + 1
    print("", end="")  # a graph break: a resume function, its own dispatcher and entries
    return y.relu()
"""


def define_jit_call(k: int, namespace: dict):
    exec(compile(SOURCE.format(k=k), f"<cell {k}>", "exec"), namespace)
    f = namespace["f"]
    eager = types.FunctionType(f.__code__, namespace, "f")
    rewrite.jit(f)
    for _ in range(2):
        assert_same(f(torch.arange(3.0) - 1), eager(torch.arange(3.0) - 1))
    return weakref.ref(f), weakref.ref(rewrite.dispatcher_of(f))


def test_two_thousand_define_jit_call_del_cycles_stay_flat():
    with contextlib.redirect_stdout(io.StringIO()):
        for k in range(100):  # warm up: caches of torch, fx and rewrite itself
            define_jit_call(k % 7, {"torch": torch})
        gc.collect()
        objects, lines = len(gc.get_objects()), len(linecache.cache)
        refs = [define_jit_call(k % 7, {"torch": torch}) for k in range(2000)]
        gc.collect()
    assert not any(f() or d() for f, d in refs)
    del refs
    gc.collect()
    assert len(gc.get_objects()) - objects < 500  # (a leak would be ~100 objects per cycle)
    assert len(linecache.cache) - lines < 20


def test_redefining_a_function_frees_the_old_one():
    namespace = {"torch": torch}
    with contextlib.redirect_stdout(io.StringIO()):
        first = define_jit_call(2, namespace)
        define_jit_call(3, namespace)  # `def f` again, in the same globals (a notebook cell run twice)
    gc.collect()
    assert first[0]() is None and first[1]() is None


def test_deleting_a_module_frees_what_was_compiled_for_it():
    module = types.ModuleType("rewrite_test_memory_module")
    module.torch = torch
    sys.modules[module.__name__] = module
    with contextlib.redirect_stdout(io.StringIO()):
        f, d = define_jit_call(4, module.__dict__)
    graphs = [weakref.ref(e.graph_module or e.fn) for e in d().entries if e.graph]  # (a loaded entry: its function)
    assert graphs
    del sys.modules[module.__name__], module
    rewrite.persist.flush()  # (a record waiting to be written holds what its entry names: until a quiet moment)
    gc.collect()
    assert f() is None and d() is None and not any(g() for g in graphs)


def test_reset_releases_the_entries():
    def f(x):
        return x * 2 + 1
    eager = types.FunctionType(f.__code__, f.__globals__, "f")
    rewrite.jit(f)
    assert_same(f(torch.ones(2)), eager(torch.ones(2)))
    graphs = [weakref.ref(e.graph_module) for e in rewrite.dispatcher_of(f).entries]
    rewrite.reset()
    gc.collect()
    assert graphs and not any(g() for g in graphs)
    assert_same(f(torch.ones(2)), eager(torch.ones(2)))  # and it compiles again


def test_a_function_made_from_jitted_code_after_the_owner_died_runs_the_original():
    namespace = {"torch": torch}
    with contextlib.redirect_stdout(io.StringIO()):
        define_jit_call(5, namespace)
    code = namespace["f"].__code__
    del namespace["f"]
    gc.collect()
    orphan = types.FunctionType(code, namespace, "f")  # nobody owns the dispatcher any more
    with contextlib.redirect_stdout(io.StringIO()):
        assert_same(orphan(torch.arange(3.0)), (torch.arange(3.0) * 5 + 1).relu())
