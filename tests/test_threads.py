"""Many threads, one compiled function: the hit path is one load and one call (no lock), the
dispatch holds entries by identity, and compiles take one process-wide lock without waiting
(a call that finds it held runs eagerly). Every call is compared with eager."""
import dis
import sys
import threading
import time
import types
import weakref

import pytest
import torch

import rewrite
from rewrite import jit

from conftest import assert_same, eager_copy


@pytest.fixture
def switch_often():
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    yield
    sys.setswitchinterval(old)


def hammer(fn, cases, expected, threads=8, calls=300):
    """`threads` threads start together and call fn over `cases` round robin."""
    errors = []
    barrier = threading.Barrier(threads)

    def worker(k):
        barrier.wait()
        for i in range(calls):
            v = (k + i) % len(cases)
            try:
                assert_same(fn(*cases[v]()), expected[v])
            except Exception as e:  # noqa: BLE001
                errors.append(f"thread {k} call {i} case {v}: {type(e).__name__}: {e}")
                return
    pool = [threading.Thread(target=worker, args=(k,)) for k in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    assert not errors, errors[:3]


CASES = [lambda: (torch.arange(4.0), 2), lambda: (torch.arange(6.0, dtype=torch.float64), 3),
         lambda: (torch.arange(4, dtype=torch.int64), 2), lambda: (torch.ones(2, 3), 5),
         lambda: (torch.arange(5.0).half(), 2), lambda: (torch.zeros(0), 1)]


def test_eight_threads_shapes_and_dtypes_varying_from_the_first_call(switch_often):
    def f(x, n):
        return (x * n + 1).sum(0), x.dtype
    eager = eager_copy(f)
    expected = [eager(*c()) for c in CASES]
    hammer(jit(f, dynamic=False), CASES, expected)


def test_threads_on_a_function_with_many_entries_and_breaks(switch_often):
    def f(x, n):
        y = x * 2
        if y.sum() > 3:  # a graph break: resume functions compile concurrently too
            y = y + n
        return y
    eager = eager_copy(f)
    expected = [eager(*c()) for c in CASES]
    hammer(jit(f), CASES, expected)


def test_two_functions_compiling_at_once_in_two_threads(switch_often):
    def make(k):
        def f(x):
            return x * k + torch.ones_like(x)
        return f
    fns = [make(k) for k in range(8)]
    eagers = [eager_copy(f) for f in fns]
    jitted = [jit(f) for f in fns]
    errors = []
    barrier = threading.Barrier(len(fns))

    def worker(k):
        barrier.wait()
        for i in range(50):
            x = torch.arange(float(i % 3 + 1))
            try:
                assert_same(jitted[k](x), eagers[k](x))
            except Exception as e:  # noqa: BLE001
                errors.append(f"{k}: {type(e).__name__}: {e}")
    pool = [threading.Thread(target=worker, args=(k,)) for k in range(len(fns))]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    assert not errors, errors[:3]


def blocking_backend():
    """A backend that signals `started` when it compiles and waits for `release`."""
    started, release = threading.Event(), threading.Event()

    def slow(gm, example_inputs):
        started.set()
        release.wait(10)
        return gm.forward
    return slow, started, release


def test_a_call_that_finds_another_thread_compiling_runs_eagerly():
    slow, started, release = blocking_backend()

    def f(x):
        return x.relu() + 1

    def g(x):
        return x * 3
    eager_f, eager_g = eager_copy(f), eager_copy(g)
    jf, jg = jit(f, backend=slow), jit(g)
    result = {}
    t = threading.Thread(target=lambda: result.setdefault("f", jf(torch.arange(-2.0, 2.0))))
    t.start()
    assert started.wait(10)
    x = torch.arange(3.0)
    assert_same(jg(x), eager_g(x))  # the lock is held: g runs eagerly, without waiting for f's compile
    assert rewrite.dispatcher_of(jg).entries == ()
    release.set()
    t.join()
    assert_same(result["f"], eager_f(torch.arange(-2.0, 2.0)))
    assert_same(jg(x), eager_g(x))  # compiled now
    assert len(rewrite.dispatcher_of(jg).entries) == 1


def test_the_hit_path_reads_one_attribute_of_the_slot():
    def f(x):
        return x + 1
    jit(f)
    names = [i.argval for i in dis.get_instructions(f.__code__) if i.opname == "LOAD_ATTR"]
    assert names[:2] == ["ref", "call"] and "guard" not in names


def test_a_dead_entry_reference_takes_the_miss_path():
    """The slot holds its entry weakly; were the reference ever dead (the dispatcher collected
    while a function sharing the code runs), the prologue reads it as 'no entry', not None()."""
    def f(x):
        return x * 3 - 1
    eager = types.FunctionType(f.__code__, f.__globals__, "f")
    jit(f)
    x = torch.arange(4.0)
    assert_same(f(x), eager(x))
    slot = rewrite.dispatcher_of(f).slot

    class Gone:
        pass
    gone = Gone()
    slot.ref = weakref.ref(gone)
    del gone
    assert slot.ref() is None
    assert_same(f(x), eager(x))  # NEXT -> the miss path: an entry's guards hold, it runs


def test_publishing_a_new_entry_is_one_store(switch_often):
    """While one thread keeps compiling new entries, others hitting old ones never see a
    half-made dispatch (the old code paired one entry's guard with another's body)."""
    def f(x):
        return x * 2
    eager = eager_copy(f)
    compiled = jit(f, dynamic=False)
    compiled(torch.ones(1))
    stop = threading.Event()
    errors = []

    def hitter():
        x = torch.ones(1)
        while not stop.is_set():
            try:
                assert_same(compiled(x), eager(x))
            except Exception as e:  # noqa: BLE001
                errors.append(e)
                return
    pool = [threading.Thread(target=hitter) for _ in range(4)]
    for t in pool:
        t.start()
    for n in range(2, 8):
        while len(rewrite.dispatcher_of(compiled).entries) < n:  # compiles now and then lose the race
            compiled(torch.ones(n))
            time.sleep(0)
    stop.set()
    for t in pool:
        t.join()
    assert not errors, errors[:3]


def test_a_compile_leaves_the_random_generator_to_other_threads():
    """The trace draws from its own copy of the generator: a draw another thread makes while a
    compile runs is not rewound, and the compiled call then draws what eager draws."""
    slow, started, release = blocking_backend()

    def f(x):
        return x + torch.rand(3) + torch.randn(3) + torch.randint(0, 9, (3,)) + torch.rand_like(x).bernoulli()
    eager = eager_copy(f)
    torch.manual_seed(0)
    other = torch.rand(1000)
    want = eager(torch.ones(3))
    want_state = torch.random.get_rng_state()

    torch.manual_seed(0)
    compiled = jit(f, backend=slow)
    result = {}
    t = threading.Thread(target=lambda: result.setdefault("f", compiled(torch.ones(3))))
    t.start()
    assert started.wait(10)
    assert_same(torch.rand(1000), other)  # drawn while the other thread compiles
    release.set()
    t.join()
    assert_same(result["f"], want)
    assert torch.equal(torch.random.get_rng_state(), want_state)
