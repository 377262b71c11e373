"""What a graph break hands on and what the entry rebuilds, against eager: context manager
objects held in locals, `with` blocks over the user's own context managers with a break
inside, module attributes written in the call, and objects made in the call whose __init__
read state the entry's end sees otherwise."""
import contextlib
import io
import sys
import types

import pytest
import torch

from rewrite import dispatcher_of, jit

from conftest import CompileCounter, assert_same, eager_copy


def compare(fn, *args, grad=True, backend=None, graphs=None):
    """fn jitted and an eager copy, each run under grad mode `grad`: results, requires_grad of
    tensors, and the grad mode each leaves behind equal; with `graphs`, the graphs compiled."""
    eager = eager_copy(fn)
    counter = CompileCounter()
    jit(fn, backend=counter)
    outcomes = []
    for f in (eager, fn):
        with torch.set_grad_enabled(grad):
            out = f(*args)
            outcomes.append((out, torch.is_grad_enabled()))
    (got, mode), (want, eager_mode) = outcomes[1], outcomes[0]
    assert_same(_plain(got), _plain(want))
    flat = lambda o: o if isinstance(o, tuple) else (o,)  # noqa: E731
    assert [t.requires_grad for t in flat(got) if isinstance(t, torch.Tensor)] == \
        [t.requires_grad for t in flat(want) if isinstance(t, torch.Tensor)]
    assert mode == eager_mode
    if graphs is not None:
        assert counter.frame_count == graphs
    return got, want


def _plain(o):
    """Objects as (type, their attributes); the rest as it is."""
    if isinstance(o, tuple):
        return tuple(_plain(i) for i in o)
    if isinstance(o, (torch.Tensor, int, float, str, bool, type(None), dict, list)):
        return o
    return type(o), vars(o)


# -- grad-mode objects held in locals across a break -------------------------------------------------
@pytest.mark.parametrize("grad", [False, True])
def test_set_grad_enabled_object_held_across_a_break(grad):
    def f(x):
        x = x + 1
        ctx = torch.set_grad_enabled(True)  # switches now; its block puts back the mode before it
        torch._dynamo.graph_break()
        with ctx:
            x = x * 2
        return x, torch.is_grad_enabled()
    compare(f, torch.ones(3, requires_grad=True), grad=grad, graphs=2)


@pytest.mark.parametrize("grad", [False, True])
def test_no_grad_and_enable_grad_objects_held_across_a_break(grad):
    def f(x):
        a, b = torch.no_grad(), torch.enable_grad()
        with a:
            y = x * 2
        print("break", file=io.StringIO())
        with a:
            with b:
                z = x * 3
        return y, z, a, b
    compare(f, torch.ones(2, requires_grad=True), grad=grad, graphs=2)


# -- a break inside the user's own context manager ------------------------------------------------------
class SetGrad:
    def __init__(self, mode):
        self.prev = torch.is_grad_enabled()  # (read when made: calling the class again at the
        self.mode = mode  # entry's end would read the mode the graph left)

    def __enter__(self):
        torch._C._set_grad_enabled(self.mode)

    def __exit__(self, *exc):
        torch._C._set_grad_enabled(self.prev)


class Swallow:
    def __init__(self):
        self.n = 0

    def __enter__(self):
        self.n += 1
        return self

    def __exit__(self, *exc):
        self.n += 10
        return True  # swallows what the block raises


@pytest.mark.parametrize("grad", [False, True])
def test_break_inside_a_user_context_manager_that_sets_grad_mode(grad):
    def f(x):
        with SetGrad(True):
            x = x + 1
            if torch.is_grad_enabled():
                x = x * 2
            torch._dynamo.graph_break()
            x = torch.relu(x)
        return x - 1, torch.is_grad_enabled()
    compare(f, torch.rand(2, 3, requires_grad=True), grad=grad)
    assert dispatcher_of(f).compiles == 1  # (the part before the break is a graph)


def ok(y):
    return None


def boom(y):
    raise ValueError("from the eager step")


@pytest.mark.parametrize("step", [ok, boom])
def test_break_inside_a_user_context_manager_whose_exit_swallows(step):
    """The eager step's exception meets the user's __exit__, which swallows it, as eagerly."""
    def f(x, step):
        s = Swallow()
        with s as t:
            y = x + 1
            step(y)
            y = y * 2
        return y, s.n, t is s
    compare(f, torch.ones(2), step, graphs=1)


# -- module attributes written in the call ---------------------------------------------------------------
def test_module_attributes_written_read_back_deleted_and_replayed():
    mod = types.ModuleType("flags_for_test")
    mod.FLAG, mod.count = False, 0

    def f(x, m):
        m.FLAG = True
        m.count = m.count + 1
        y = x * m.count
        m.FLAG = False  # back to what it held: no write
        del m.count
        m.count = 5
        return y, m.FLAG

    eager_mod = types.ModuleType("flags_for_test")
    eager_mod.FLAG, eager_mod.count = False, 0
    eager = eager_copy(f)
    jit(f, fullgraph=True)
    x = torch.ones(2)
    assert_same(f(x, mod), eager(x, eager_mod))
    assert vars(mod).keys() == vars(eager_mod).keys() and (mod.FLAG, mod.count) == (eager_mod.FLAG, eager_mod.count)


def test_redirect_stderr_and_suppress_one_graph():
    def f(x, buf):
        with contextlib.suppress(NameError):
            with contextlib.redirect_stderr(buf):
                y = x.sin()
                inside = sys.stderr is buf
        return y, inside, sys.stderr is buf
    before = sys.stderr
    compare(f, torch.ones(2), io.StringIO(), graphs=1)
    assert sys.stderr is before


def test_a_torch_module_attribute_is_not_written_while_tracing():
    def f(x):
        torch.rewrite_test_flag = True  # (torch's modules are taken as constants: a break there)
        return x + 1
    try:
        compare(f, torch.ones(2), graphs=1)
        assert torch.rewrite_test_flag is True
    finally:
        del torch.rewrite_test_flag


# -- objects made in the call, rebuilt at the entry's end ---------------------------------------------------
G = 1


class ReadsG:
    def __init__(self):
        self.n = G


def test_an_object_whose_init_read_a_global_the_call_wrote():
    def f(x):
        global G
        G = 5
        o = ReadsG()
        return x + 1, o.n, o.__dict__
    try:
        eager = eager_copy(f)
        want = eager(torch.ones(1))
        globals()["G"] = 1
        got = jit(f)(torch.ones(1))
        assert_same(got, want)
        assert G == 5
    finally:
        globals()["G"] = 1


@pytest.mark.parametrize("grad", [False, True])
def test_an_object_whose_init_read_grad_mode_returned(grad):
    def f(x):
        with torch.enable_grad():
            o = SetGrad(False)
        y = x * 2
        return y, o
    compare(f, torch.ones(2), grad=grad, graphs=1)


# -- profiler blocks ------------------------------------------------------------------------------------------
def test_profiler_block_without_as_is_one_graph():
    def f(x):
        y = x ** 2
        with torch.profiler.profile():
            y = y + 2
            with torch.profiler.record_function("my_function"):
                z = y ** 3 + 1
        return z
    compare(f, torch.randn(2, 2), graphs=1)


# -- generators the call ran (part of), returned or held across a break ---------------------------------------
LOG = []


def counted(t):
    try:
        for j in range(4):
            got = yield t + j
            if got is not None:
                LOG.append(("got", got.tolist()))
    except ValueError:
        LOG.append("caught")
        yield t * 100
    finally:
        LOG.append("finally")


def sub(t):
    yield t + 1
    yield t + 2
    return "sub done"


def delegating(t):
    r = yield from sub(t)
    LOG.append(r)
    yield t + 3


def one(t):
    yield t + 1


def drive(gen_fn, steps):
    def f(t):
        g = gen_fn(t)
        for _ in range(steps):
            next(g, None)
        return g, t.sin()
    return f


@pytest.mark.parametrize("then", ["list", "send", "throw", "close"])
@pytest.mark.parametrize("gen_fn, steps", [(counted, 1), (counted, 2), (delegating, 1), (delegating, 2), (one, 1),
                                           (one, 2)])
def test_a_generator_the_call_advanced_is_returned_where_it_stands(gen_fn, steps, then):
    """The generator returned stands at the yield the trace stopped at: what is consumed next,
    sent, thrown or closed there acts as on eager's (its handlers, finally blocks and `yield from`)."""
    f = drive(gen_fn, steps)
    eager = eager_copy(f)
    jit(f, fullgraph=True)
    t = torch.tensor([1.0, 2.0])
    outcomes, kept = [], []
    for run in (eager, f):
        LOG.clear()
        g, s = run(t)
        kept.append(g)  # (the first one's finally must not run into the second one's log)
        assert type(g) is types.GeneratorType and g.__name__ == gen_fn.__name__
        try:
            if then == "list":
                out = list(g)
            elif then == "send":
                out = g.send(torch.tensor([7.0]))
            elif then == "throw":
                out = g.throw(ValueError("in"))
            else:
                out = g.close()
        except (StopIteration, ValueError, RuntimeError) as e:
            out = (type(e), str(e))
        outcomes.append((out, s, list(LOG)))
    assert_same(outcomes[1], outcomes[0])


def test_zip_and_enumerate_over_generators_returned():
    def f(t):
        z = zip(range(3), one(t), counted(t))
        e = enumerate(counted(t), 5)
        next(e)
        zs = zip([1, 2, 3], counted(t), strict=True)
        next(zs)
        return z, e, zs

    eager = eager_copy(f)
    jit(f, fullgraph=True)
    t = torch.ones(2)
    outcomes, kept = [], []
    for run in (eager, f):
        LOG.clear()
        z, e, zs = run(t)
        kept.append((z, e, zs))
        outcomes.append(([type(z), type(e), type(zs)], list(z), list(e)))
        try:
            list(zs)
        except ValueError as err:
            outcomes[-1] += (str(err), list(LOG))
    assert_same(outcomes[1], outcomes[0])


def test_a_generator_held_across_a_break():
    def f(t):
        g = counted(t)
        a = next(g)
        torch._dynamo.graph_break()
        b = next(g)
        return a + b, list(LOG)
    LOG.clear()
    eager = eager_copy(f)
    want = eager(torch.ones(2))
    LOG.clear()
    got = jit(f)(torch.ones(2))
    assert_same(got, want)


# -- the trace lets go of the call's values once the entry is built ---------------------------------------------
@pytest.mark.parametrize("breaks", [False, True])
def test_the_first_call_does_not_keep_its_inputs(breaks):
    """Without waiting for the garbage collector (the trace's objects refer to each other): the
    compiling call's tensors go when the caller lets go of them, as torch.compile's do."""
    import gc
    import weakref

    def f(x):
        y = x * 2
        if breaks:
            torch._dynamo.graph_break()
        return y.sum()
    jit(f)
    gc.disable()
    try:
        x = torch.randn(64, 64)
        alive = weakref.ref(x)
        f(x)
        del x
        assert alive() is None
    finally:
        gc.enable()


def test_a_context_manager_generator_with_a_break_inside():
    """`@contextmanager` whose block breaks: its generator is made again where it stands, so
    the block's rest compiles and the generator's handlers run as eagerly."""
    @contextlib.contextmanager
    def scope(log):
        log.append("enter")
        try:
            yield len(log)
        except ValueError as e:
            log.append(("caught", str(e)))
        finally:
            log.append("exit")

    def f(x, step, log):
        with scope(log) as n:
            y = x + n
            step(y)
            y = y * 2
        return y + 1

    def fail(y):
        raise ValueError("from the step")
    eager = eager_copy(f)
    counter = CompileCounter()
    jit(f, backend=counter)
    for step in (ok, fail, ok):
        got_log, want_log = [], []
        assert_same(f(torch.ones(2), step, got_log), eager(torch.ones(2), step, want_log))
        assert got_log == want_log
    assert counter.frame_count >= 2  # (the part before the break, and after it)
