"""Backend registry and Dynamo's backend contract: (GraphModule, example_inputs) -> callable."""
import pytest
import torch

import rewrite
from rewrite import config, dispatcher_of, jit, list_backends, register_backend

from conftest import CompileCounter, assert_same, eager_copy


def fn(x, y):
    z = x * 2 + y
    return z.relu().sum(dim=-1), z


def test_builtin_backends_are_listed():
    assert {"eager", "python"} <= set(list_backends())


@pytest.mark.parametrize("backend", ["eager", "python"])
def test_builtin_backends_match_eager(backend):
    def f(x, y):
        z = x * 2 + y
        return z.relu().sum(dim=-1), z

    eager = eager_copy(f)
    jit(f, backend=backend)
    for _ in range(2):
        x, y = torch.randn(4, 8), torch.randn(8)
        assert_same(f(x, y), eager(x, y))


def test_dynamo_style_backend_works_unchanged():
    seen = []

    def my_backend(gm, example_inputs):
        seen.append((gm, [t.shape for t in example_inputs]))
        return gm.forward

    eager = eager_copy(fn)
    f = jit(eager_copy(fn), backend=my_backend)
    x, y = torch.randn(2, 3), torch.randn(3)
    assert_same(f(x, y), eager(x, y))
    assert_same(f(x, y), eager(x, y))
    assert len(seen) == 1
    gm, shapes = seen[0]
    assert isinstance(gm, torch.fx.GraphModule)
    assert shapes == [torch.Size([2, 3]), torch.Size([3])]


def test_registered_backend_by_name_and_the_first_call_uses_it():
    @register_backend
    def doubling_backend(gm, example_inputs):
        def run(*args):
            return tuple(o * 2 for o in gm(*args))
        return run

    assert "doubling_backend" in list_backends()

    def f(x):
        return x + 1

    jit(f, backend="doubling_backend")
    x = torch.ones(2)
    assert_same(f(x), (x + 1) * 2)  # the compiled callable runs on the first call too
    assert_same(f(x), (x + 1) * 2)


def test_unknown_backend_name():
    def f(x):
        return x + 1

    with pytest.raises(ValueError, match="unknown backend 'no-such-backend'"):
        jit(f, backend="no-such-backend")


def test_backend_failure_raises_backend_compiler_failed():
    def broken(gm, example_inputs):
        raise NotImplementedError("nope")

    def f(x):
        return x + 1

    jit(f, backend=broken)
    with pytest.raises(rewrite.BackendCompilerFailed, match="backend='broken' raised"):
        f(torch.ones(1))


def test_backend_failure_with_suppress_errors_runs_eagerly(monkeypatch):
    monkeypatch.setattr(config, "suppress_errors", True)

    def broken(gm, example_inputs):
        raise NotImplementedError("nope")

    def f(x):
        return x + 1

    jit(f, backend=broken)
    with pytest.warns(RuntimeWarning, match="running .* eagerly"):
        assert_same(f(torch.ones(1)), torch.full((1,), 2.0))


def test_compile_counter_sees_one_graph_per_entry():
    cnt = CompileCounter()

    def f(x):
        return x.sin().cos()

    jit(f, backend=cnt)
    f(torch.ones(2)), f(torch.ones(2)), f(torch.ones(3))
    assert cnt.frame_count == 2 and cnt.op_count == 4
    assert len(dispatcher_of(f).entries) == 2


def test_python_backend_source_is_straight_line_torch():
    from rewrite.codegen import lookup_backend
    from rewrite.codegen.python import CompiledGraph

    cnt = CompileCounter()

    def f(x):
        return torch.nn.functional.relu(x * 2)

    jit(f, backend=cnt)
    f(torch.ones(2))
    compiled = lookup_backend("python")[1](cnt.graphs[0], [])
    assert isinstance(compiled, CompiledGraph)
    source, _ = compiled.source()
    assert "mul = x * 2" in source and "torch.nn.functional.relu(mul)" in source
    assert_same(compiled(torch.ones(2))[0], torch.full((2,), 2.0))
