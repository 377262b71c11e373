"""torch._dynamo.config's knobs and torch._dynamo.reset(), followed as torch.compile follows them
(issue 30, item 4): each test runs the same code under torch.compile and under rewrite, with
the same knob, and compares what each compiled -- and every result with eager's."""
import subprocess
import sys
import warnings

import pytest
import torch
import torch._dynamo
import torch._dynamo.config as dynamo_config

import rewrite
from rewrite import config, dispatcher_of, jit
from rewrite.guards.guard import TensorMatch

from conftest import CompileCounter, assert_same, eager_copy


def _side_by_side(make, calls, *, dynamic=None, **knobs):
    """(frames, ops) compiled by torch.compile and by rewrite for `calls` of `make()`, with
    torch._dynamo.config patched by `knobs`; every result compared with eager's."""
    counts = {}
    for side in ("torch", "rewrite"):
        torch._dynamo.reset()  # (rewrite's caches too)
        fn = make()
        eager = eager_copy(fn)
        cnt = CompileCounter()
        with dynamo_config.patch(**knobs), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (each side's recompile-limit warning)
            compiled = torch.compile(fn, backend=cnt, dynamic=dynamic) if side == "torch" else \
                jit(fn, backend=cnt, dynamic=dynamic)
            for args in calls:
                assert_same(compiled(*args), eager(*args))
        counts[side] = cnt.frame_count, cnt.op_count
    return counts


def _affine():
    def f(x):
        return x * 2 + 1
    return f


DTYPES = [(torch.ones(3, dtype=d),) for d in (torch.float32, torch.float64, torch.float16, torch.bfloat16,
                                                torch.complex64)]
SIZES = [(torch.randn(n),) for n in (3, 4, 5, 6, 7)]


@pytest.mark.parametrize("knobs, compiles", [
    ({}, 5),
    ({"cache_size_limit": 2}, 2),  # torch's alias of recompile_limit
    ({"recompile_limit": 3}, 3),
    ({"accumulated_cache_size_limit": 2}, 2),  # alias of accumulated_recompile_limit
    ({"accumulated_recompile_limit": 4, "recompile_limit": 100}, 4),
])
def test_recompile_limits_as_torch_compile(knobs, compiles):
    counts = _side_by_side(_affine, DTYPES, **knobs)
    assert counts["rewrite"] == counts["torch"] and counts["torch"][0] == compiles, counts


@pytest.mark.parametrize("knobs, compiles", [
    ({}, 2),  # static, then one dynamic entry
    ({"automatic_dynamic_shapes": False}, 5),  # each size compiles again
    ({"assume_static_by_default": False}, 1),  # dynamic from the first compile
])
def test_dynamic_shape_knobs_as_torch_compile(knobs, compiles):
    counts = _side_by_side(_affine, SIZES, **knobs)
    assert counts["rewrite"] == counts["torch"] and counts["torch"][0] == compiles, counts


@pytest.mark.parametrize("dynamic", [True, False])
def test_jits_dynamic_keyword_wins_over_the_knobs_as_torch_compiles(dynamic):
    counts = _side_by_side(_affine, SIZES, dynamic=dynamic, automatic_dynamic_shapes=not dynamic,
                           assume_static_by_default=dynamic)
    assert counts["rewrite"] == counts["torch"] and counts["torch"][0] == (1 if dynamic else 5), counts


def test_capture_scalar_outputs_as_torch_compile():
    def make():
        def f(x):
            return x * x.sum().item()
        return f
    off = _side_by_side(make, SIZES[:1])
    on = _side_by_side(make, SIZES[:1], capture_scalar_outputs=True)
    assert off["rewrite"] == off["torch"] == (2, 2)  # a break at .item(): two graphs
    assert on["rewrite"] == on["torch"] == (1, 3)  # one graph, item() in it


def _nonzero():
    def f(x):
        i = x.nonzero()
        return (i * 2).sum(), x.sin()
    return f


def test_capture_dynamic_output_shape_ops_off_breaks_before_the_op_as_torch_compile(monkeypatch):
    x = torch.tensor([0.0, 1.0, 2.0, 0.0, 3.0])
    monkeypatch.setattr(config, "capture_dynamic_output_shape_ops", False)  # torch's default
    counts = _side_by_side(_nonzero, [(x,)])
    assert counts["rewrite"] == counts["torch"] == (1, 3)  # nonzero runs eagerly, the rest in one graph


def test_capture_dynamic_output_shape_ops_on_records_the_op():
    """rewrite's default; torch's with the knob set (torch's graph also holds its size ops)."""
    x = torch.tensor([0.0, 1.0, 2.0, 0.0, 3.0])
    assert config.capture_dynamic_output_shape_ops
    counts = _side_by_side(_nonzero, [(x,)], capture_dynamic_output_shape_ops=True)
    assert counts["rewrite"][0] == counts["torch"][0] == 1
    cnt = CompileCounter()
    f = jit(_nonzero(), backend=cnt)
    f(x)
    assert "nonzero" in str(cnt.graphs[0].code)


def _symbolic_params(compile_, fn, args):
    """Which inputs of the graph the backend got have symbolic sizes, parameters by name."""
    seen = {}

    def backend(gm, example_inputs):
        for node in gm.graph.nodes:
            value = node.meta.get("example_value")
            if node.op == "placeholder" and isinstance(value, torch.Tensor):
                hints = tuple(s.node.hint if isinstance(s, torch.SymInt) else s for s in value.shape)
                seen[hints] = any(isinstance(s, torch.SymInt) for s in value.shape)
        return gm.forward
    compile_(fn, backend)(*args)
    return seen


@pytest.mark.parametrize("knobs", [{}, {"force_parameter_static_shapes": False}])
def test_force_parameter_static_shapes_as_torch_compile(knobs):
    w = torch.nn.Parameter(torch.randn(4, 3))
    x = torch.randn(5, 4)

    def f(x, w):
        return x @ w
    eager = eager_copy(f)
    symbolic = {}
    with dynamo_config.patch(**knobs):
        torch._dynamo.reset()
        symbolic["torch"] = _symbolic_params(lambda fn, be: torch.compile(fn, backend=be, dynamic=True), f, (x, w))
        assert_same(jit(f, dynamic=True)(x, w), eager(x, w))
    guards = [g for g in dispatcher_of(f).entries[0].guard.guards if isinstance(g, TensorMatch)]
    rewrite_w = next(g for g in guards if g.source.name() == "w")
    assert symbolic["torch"][(4, 3)] == (None in rewrite_w.shape) == bool(knobs)
    assert symbolic["torch"][(5, 4)] and None in next(g for g in guards if g.source.name() == "x").shape


@pytest.mark.parametrize("knobs", [{}, {"force_parameter_static_shapes": False}])
def test_a_modules_parameters_stay_static_as_torch_compile(knobs):
    m = torch.nn.Linear(4, 3)

    def f(x):
        return m(x).relu()
    eager = eager_copy(f)
    x = torch.randn(5, 4)
    with dynamo_config.patch(**knobs):
        torch._dynamo.reset()
        symbolic = _symbolic_params(lambda fn, be: torch.compile(fn, backend=be, dynamic=True), f, (x,))
        assert_same(jit(f, dynamic=True)(x), eager(x))
    shapes = {g.source.name(): g.shape for g in dispatcher_of(f).entries[0].guard.guards if isinstance(g, TensorMatch)}
    assert not symbolic[(3, 4)] and not symbolic[(3,)] and symbolic[(5, 4)]  # (force_nn_module_property_...)
    assert shapes == {"x": (None, None), "m.weight": (3, 4), "m.bias": (3,)}


def test_suppress_errors_as_torch_compile():
    def broken(gm, example_inputs):
        raise NotImplementedError("nope")

    for compile_ in (lambda fn: torch.compile(fn, backend=broken), lambda fn: jit(fn, backend=broken)):
        torch._dynamo.reset()
        f = _affine()
        with pytest.raises(Exception, match="nope"):  # each its BackendCompilerFailed
            compile_(f)(torch.ones(2))
        g = _affine()
        with dynamo_config.patch(suppress_errors=True), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert_same(compile_(g)(torch.ones(2)), torch.full((2,), 3.0))


def test_knobs_are_read_at_each_compile_not_at_jit_time():
    cnt = CompileCounter()
    f = jit(_affine(), backend=cnt)
    f(*DTYPES[0])
    with dynamo_config.patch(recompile_limit=2), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for args in DTYPES:
            assert_same(f(*args), args[0] * 2 + 1)
    assert cnt.frame_count == 2
    f(*DTYPES[3])  # the limit back at 8: the next miss compiles
    assert cnt.frame_count == 3


def test_a_torch_knob_at_its_default_leaves_rewrites_setting(monkeypatch):
    monkeypatch.setattr(config, "recompile_limit", 1)
    assert dynamo_config.recompile_limit == 8 and config.get("recompile_limit") == 1
    with dynamo_config.patch(recompile_limit=3):
        assert config.get("recompile_limit") == 3


@pytest.mark.parametrize("reset", ["torch._dynamo.reset", "torch.compiler.reset"])
def test_torch_reset_resets_rewrites_caches_too(reset):
    counts = {}
    for side in ("torch", "rewrite"):
        torch._dynamo.reset()
        cnt = CompileCounter()
        f = torch.compile(_affine(), backend=cnt) if side == "torch" else jit(_affine(), backend=cnt)
        f(torch.ones(3))
        f(torch.ones(3))
        (torch._dynamo.reset if reset == "torch._dynamo.reset" else torch.compiler.reset)()
        assert_same(f(torch.ones(3)), torch.full((3,), 3.0))
        counts[side] = cnt.frame_count
    assert counts["rewrite"] == counts["torch"] == 2


def test_torch_dynamo_imported_after_rewrite_is_followed_from_its_import():
    """Stance, reset and knobs set through torch._dynamo imported after rewrite (and after the
    first compile): followed at once, hits included."""
    code = """if True:
        import sys, torch, rewrite
        calls = []
        def counting(gm, example_inputs):
            def run(*args):
                calls.append(1)
                return gm.forward(*args)
            return run
        counting.rewrite_native = True  # (takes the graph as traced: no torch fake tensors, no torch._dynamo)
        @rewrite.jit(backend=counting)
        def f(x):
            return x * 2 + 1
        x = torch.ones(3)
        f(x); f(x)
        assert "torch._dynamo" not in sys.modules and len(calls) == 2
        import torch._dynamo
        torch._dynamo.set_stance("force_eager")  # torch's own, not torch.compiler's
        assert torch.equal(f(x), x * 2 + 1) and len(calls) == 2  # the hit ran eagerly
        torch._dynamo.set_stance("default")
        f(x)
        assert len(calls) == 3
        torch._dynamo.reset()
        assert rewrite.dispatcher_of(f).entries == ()
        torch._dynamo.config.cache_size_limit = 1
        f(x); f(torch.ones(2, dtype=torch.float64))
        assert len(rewrite.dispatcher_of(f).entries) == 1
        print("ok")
    """
    out = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stdout + out.stderr
