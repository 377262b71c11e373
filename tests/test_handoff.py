"""Inductor and AOT backends over changing sizes (issue 31): the graph handed over as Dynamo
hands it (a torch ShapeEnv, fake inputs with SymInt sizes, meta under the fake mode), and the
backend's own guards on sizes folded into the entry's. Every result is compared with eager's."""
import pytest
import torch
import torch.nn.functional as F

import rewrite
from rewrite import dispatcher_of, jit
from rewrite.guards.guard import BackendShapeMatch

from conftest import eager_copy

SIZES = (8, 9, 10, 11, 12, 13, 14, 15)


def _close(a, b):
    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def _pointwise():
    def f(x):
        return (x.sin() * 2 + x.cos()).relu()
    return f


class Counting:
    """A backend by name, counted: what torch.compile and rewrite each compiled."""

    def __init__(self, name):
        from torch._dynamo import lookup_backend
        self.backend, self.count = lookup_backend(name), 0

    def __call__(self, gm, example_inputs):
        self.count += 1
        return self.backend(gm, example_inputs)


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_over_eight_sizes_compiles_as_often_as_torch_compile(backend):
    compiles = {}
    for side in ("torch", "rewrite"):
        torch._dynamo.reset()
        f = _pointwise()
        eager = eager_copy(f)
        counting = Counting(backend)
        compiled = torch.compile(f, backend=counting) if side == "torch" else jit(f, backend=counting)
        for n in SIZES:
            x = torch.randn(n, 16)
            _close(compiled(x), eager(x))
        compiles[side] = counting.count
    assert compiles["rewrite"] == compiles["torch"] == 2
    entries = dispatcher_of(f).entries
    assert len(entries) == 2 and all(e.reason is None for e in entries)


def test_a_symbolic_int_argument_reaches_inductor_as_a_symint():
    def f(x, n):
        return (x * n).sum(0) + n
    eager = eager_copy(f)
    counting = Counting("inductor")
    jit(f, backend=counting, dynamic=True)
    for n in (3, 4, 5):
        x = torch.randn(n + 4, 8)
        _close(f(x, n), eager(x, n))
    assert counting.count == 1


def test_inductors_own_guard_excludes_a_size_which_then_compiles_again():
    """Inductor reduces a small tensor one way and guards `numel <= 4096` for it: a larger
    one misses that entry and compiles again (never runs code made for small ones)."""
    def f(x):
        return x.mean() * 2
    eager = eager_copy(f)
    jit(f, backend="inductor", dynamic=True)
    x = torch.randn(8, 16)
    _close(f(x), eager(x))
    first = dispatcher_of(f).entries[0]
    assert any(isinstance(g, BackendShapeMatch) for g in first.guard.guards) and "<= 4096" in first.guard.source
    big = torch.randn(100, 100)
    assert "the backend's own guard" in first.guard.failures((big,))[0]
    _close(f(big), eager(big))
    assert len(dispatcher_of(f).entries) == 2
    _close(f(x), eager(x))  # (the first entry still takes small ones)
    assert len(dispatcher_of(f).entries) == 2


def test_a_dynamo_style_backend_gets_real_inputs_and_fake_meta_as_from_dynamo():
    seen = {}

    def backend(gm, example_inputs):
        seen["inputs"] = list(example_inputs)
        seen["vals"] = [n.meta.get("val") for n in gm.graph.nodes if n.op != "output"]
        from torch._guards import TracingContext
        seen["context"] = TracingContext.try_get()
        return gm.forward

    def f(x, n):
        return x.sum(0) * n
    eager = eager_copy(f)
    jit(f, backend=backend, dynamic=True)
    x = torch.randn(6, 4)
    _close(f(x, 3), eager(x, 3))
    real, n, *sizes = seen["inputs"]  # (then each symbol of the sizes, as Dynamo's graphs take them)
    assert type(real) is torch.Tensor and real.shape == (6, 4) and isinstance(n, torch.SymInt)
    assert [s.node.hint for s in sizes] == [6, 4] and all(isinstance(s, torch.SymInt) for s in sizes)
    from torch._subclasses.fake_tensor import FakeTensor
    fake = seen["vals"][0]
    assert isinstance(fake, FakeTensor) and all(isinstance(s, torch.SymInt) for s in fake.shape)
    assert seen["context"] is not None and seen["context"].fake_mode is fake.fake_mode


def test_native_backends_keep_the_graph_as_traced():
    """rewrite's own backends (registered native) read sizes from real inputs: no fake meta."""
    seen = []

    @rewrite.register_backend(native=True)
    def plain_check(gm, example_inputs):
        seen.append([n.meta.get("val") for n in gm.graph.nodes])
        return gm.forward

    def f(x):
        return x * 2
    jit(f, backend="plain_check", dynamic=True)
    x = torch.randn(5, 3)
    _close(f(x), x * 2)
    assert seen and all(v is None for v in seen[0])


def test_a_graph_holding_nonzero_reaches_aot_with_a_shape_env():
    """Static graphs get the hand-off too: faking `nonzero` needs a ShapeEnv (Dynamo always has one)."""
    def f(x):
        i = x.nonzero()
        return (i * 2).sum(), x.sin()
    eager = eager_copy(f)
    jit(f, backend="aot_eager")
    for x in (torch.tensor([0.0, 1.0, 2.0, 0.0, 3.0]), torch.tensor([1.0, 0.0, 2.0, 5.0, 3.0])):
        got, want = f(x), eager(x)
        _close(got[0], want[0]), _close(got[1], want[1])
    assert all(e.reason is None for e in dispatcher_of(f).entries)


def test_the_graphs_mode_switches_do_not_leak_out_of_the_hand_off():
    def f(x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = x @ x.t()
        with torch.no_grad():
            z = y.float() * 2
        return z.relu()
    eager = eager_copy(f)
    jit(f, backend="aot_eager")
    for n in (3, 4, 5):
        x = torch.randn(n, 8)
        torch.testing.assert_close(f(x), eager(x), rtol=1e-2, atol=1e-2)
        assert torch.is_grad_enabled() and not torch.is_autocast_enabled("cpu")
    assert dispatcher_of(f).compiles == 2


def _deciding(decide):
    """A backend that decides on the first input's size (as a backend choosing code by size
    does) and makes code valid only for that decision: it returns the decision."""
    def backend(gm, example_inputs):
        val = next(n.meta["val"] for n in gm.graph.nodes if n.op == "placeholder")
        made = decide(val.shape[0])

        def run(*args):
            return tuple(torch.full_like(o, made) for o in gm.forward(*args))
        return run
    return backend


@pytest.mark.parametrize("decide, sizes", [
    (lambda n: int(n), (8, 9)),  # specializes the size: torch replaces the symbol by 8
    (lambda n: 1 if n <= 100 else 2, (8, 200)),  # a range: torch narrows the symbol's range
])
def test_what_a_backend_decides_on_a_size_guards_the_entry(decide, sizes):
    """Decisions that torch's ShapeEnv keeps as a replacement or a narrowed range (not in its
    guard list once made) still guard the entry: another size compiles again."""
    def f(x):
        return x + 1
    jit(f, backend=_deciding(decide), dynamic=True)
    for n in sizes:
        assert f(torch.zeros(n))[0].item() == decide(n)  # (what code made for n returns)
    assert dispatcher_of(f).compiles == 2


def _fake_meta(gm, example_inputs):
    """A Dynamo-style backend that reads the fake meta (as any checks the graph's sizes)."""
    assert all("val" in n.meta for n in gm.graph.nodes if n.op != "output")
    return gm.forward


@pytest.mark.parametrize("backend", ["aot_eager", "inductor", _fake_meta])
def test_interpolate_by_a_float_scale_over_symbolic_sizes(backend):
    """Issue 38: the sizes the trace pins (no symbolic rule for interpolate) are constants in
    the torch ShapeEnv too, and the graph is faked under the Python dispatcher, as Dynamo's."""
    def f(x):
        return F.interpolate(x[None], scale_factor=1.87, recompute_scale_factor=True, mode="bilinear")
    eager = eager_copy(f)
    jit(f, backend=backend, dynamic=True)
    for n in (8, 11):
        x = torch.randn(3, n, n + 2)
        _close(f(x), eager(x))


@pytest.mark.parametrize("op", [
    lambda x: F.interpolate(x[None], size=(x.shape[-2] * 2, int(x.shape[-1] * 1.5)), mode="bilinear"),
    lambda x: F.interpolate(x[None], scale_factor=1.3, mode="nearest", recompute_scale_factor=True),
    lambda x: F.pad(x, (0, 16 - x.shape[-1], 1, x.shape[-2] // 2)),
    lambda x: F.adaptive_avg_pool2d(x, (x.shape[-2] // 2, x.shape[-1] // 3)),
], ids=["interpolate_to", "nearest", "pad_to", "adaptive_pool_to"])
def test_ops_given_sizes_computed_from_symbolic_sizes(op):
    def f(x):
        return op(x) * 2
    eager = eager_copy(f)
    jit(f, backend="aot_eager", dynamic=True)
    for n in (8, 11):
        x = torch.randn(3, n, n + 2)
        _close(f(x), eager(x))


def test_a_pinned_int_argument_is_a_constant_for_inductor():
    """Inductor cannot lower adaptive pooling to symbolic sizes (torch.compile fails there too):
    the trace pins them, an int argument's as a tensor's, and Inductor gets them constant."""
    def f(x, n):
        return F.adaptive_avg_pool2d(x * n, (n // 2, x.shape[-1] // 2))
    eager = eager_copy(f)
    jit(f, backend="inductor", dynamic=True)
    for n in (5, 6):
        x = torch.randn(3, n + 3, 8)
        _close(f(x, n), eager(x, n))
