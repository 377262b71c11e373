"""Higher-order ops (issue 19, items 2 and 7): `torch.utils.checkpoint.checkpoint` and
`torch.cond` take a function; it is traced into a graph of its own and the outer graph holds
one node that runs it as torch does (checkpoint recomputes it in backward; cond runs the
branch its predicate picks). Outputs and gradients are compared with eager."""
import copy

import pytest
import torch
import torch.utils.checkpoint as cp

import rewrite
from conftest import CompileCounter, assert_same, eager_copy


def grads_of(*tensors):
    return [None if t.grad is None else t.grad.clone() for t in tensors]


def layer():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU(), torch.nn.Dropout(0.2), torch.nn.Linear(8, 8))


@pytest.mark.parametrize("reentrant", [False, True])
def test_checkpoint_is_one_node_and_gradients_match(reentrant):
    def f(model, x, scale):
        h = x * scale  # read by the checkpointed function through its closure
        y = cp.checkpoint(lambda t: model(t + h).relu(), x, use_reentrant=reentrant)
        return (y * y).sum()

    model, twin = layer(), layer()
    compiled = rewrite.jit(eager_copy(f), fullgraph=True)
    for seed in range(3):
        x = torch.randn(4, 8, requires_grad=True)
        x2 = x.detach().clone().requires_grad_()
        torch.manual_seed(seed)
        a = compiled(model, x, 2.0)
        a.backward()
        torch.manual_seed(seed)
        b = f(twin, x2, 2.0)
        b.backward()
        assert torch.equal(a, b)
        assert torch.equal(x.grad, x2.grad)
        for p, q in zip(model.parameters(), twin.parameters()):
            assert torch.equal(p.grad, q.grad)
    out = rewrite.explain(eager_copy(f))(model, torch.randn(4, 8, requires_grad=True), 2.0)
    assert out.graph_count == 1 and "checkpoint" in out.ops_per_graph[0]
    assert "linear" not in out.ops_per_graph[0]  # (the layer is inside the checkpoint's own graph)


def test_reentrant_checkpoint_over_inputs_without_grad_gives_eager_gradients():
    """Eager's reentrant checkpoint gives no gradient to weights the function reads when no
    input requires grad: the weights the body reads stay the function's closure, not inputs."""
    def f(model, x):
        return cp.checkpoint(model, x, use_reentrant=True).sum()

    model, twin = layer(), layer()
    compiled = rewrite.jit(eager_copy(f))
    x = torch.randn(4, 8)
    torch.manual_seed(5)
    a = compiled(model, x)
    torch.manual_seed(5)
    b = f(twin, x)
    assert torch.equal(a, b) and a.requires_grad == b.requires_grad


def test_checkpoint_of_a_module_call_with_keywords_as_transformers_calls_it():
    import functools
    checkpointed = functools.partial(cp.checkpoint, use_reentrant=False)

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(8, 8)

        def forward(self, x, scale=1.0):
            return self.lin(x).tanh() * scale

    def f(blocks, x):
        for block in blocks:
            x = checkpointed(block.__call__, x, scale=0.5)
        return x.sum()

    torch.manual_seed(0)
    blocks = torch.nn.ModuleList([Block(), Block()])
    twin = copy.deepcopy(blocks)
    x = torch.randn(2, 8, requires_grad=True)
    x2 = x.detach().clone().requires_grad_()
    a = rewrite.jit(eager_copy(f), fullgraph=True)(blocks, x)
    b = f(twin, x2)
    a.backward(), b.backward()
    assert torch.equal(a, b) and torch.equal(x.grad, x2.grad)
    assert all(torch.equal(p.grad, q.grad) for p, q in zip(blocks.parameters(), twin.parameters()))


def test_a_checkpointed_function_with_side_effects_runs_as_it_is():
    seen = []

    def body(t):
        seen.append(1)  # a side effect: the checkpoint call breaks the graph and runs eagerly,
        return t.sin()  # its function jitted (its own graph: the side effect replayed after it)

    def f(x):
        return cp.checkpoint(body, x * 2, use_reentrant=False) + 1

    x = torch.randn(3, requires_grad=True)
    expected = f(x)
    out = rewrite.explain(eager_copy(f))(x)
    assert out.graph_count == 3 and not out.eager_reasons and ["sin"] in out.ops_per_graph
    seen.clear()
    assert_same(rewrite.jit(eager_copy(f))(x), expected)
    assert seen == [1]


def test_cond_traces_both_branches_into_one_graph():
    def f(x, w):
        return torch.cond(x.sum() > 0, lambda t: (t @ w).relu(), lambda t: (t - w).sin(), (x,))

    counter = CompileCounter()
    compiled = rewrite.jit(eager_copy(f), backend=counter, fullgraph=True)
    w = torch.randn(3, 3)
    for sign in (1, -1, 1, -1):
        x = torch.rand(3, 3) * sign
        assert_same(compiled(x, w), f(x, w))
    assert counter.frame_count == 1  # the predicate is data: no recompile between branches
    assert "cond" in rewrite.explain(eager_copy(f))(torch.rand(3, 3), w).ops_per_graph[0]


def test_cond_gradients_flow_through_the_branch_taken():
    def f(x, w):
        out = torch.cond(x.mean() > 0, lambda t: t * w, lambda t: t + w, [x])
        return out.sum()

    compiled = rewrite.jit(eager_copy(f), fullgraph=True)
    for sign in (1, -1):
        w = torch.randn(4, requires_grad=True)
        w2 = w.detach().clone().requires_grad_()
        x = torch.rand(4) * sign
        a, b = compiled(x, w), f(x, w2)
        a.backward(), b.backward()
        assert torch.equal(a, b) and torch.equal(w.grad, w2.grad)


def test_cond_on_a_python_predicate_takes_the_branch_while_tracing():
    def f(x, flag):
        return torch.cond(flag, lambda t: t + 1, lambda t: t - 1, (x,))

    compiled = rewrite.jit(eager_copy(f), fullgraph=True)
    x = torch.randn(3)
    assert_same(compiled(x, True), x + 1)
    assert_same(compiled(x, False), x - 1)


def test_cond_runs_under_the_triton_backend():
    pytest.importorskip("triton")

    def f(x, w):
        y = x * 2
        return torch.cond(y.sum() > 0, lambda t: t.exp() * w, lambda t: t.neg() + w, (y,)) + 1

    compiled = rewrite.jit(eager_copy(f), backend="triton", fullgraph=True)
    w = torch.randn(16)
    for sign in (1, -1):
        x = torch.rand(16) * sign
        torch.testing.assert_close(compiled(x, w), f(x, w))


def keep_and_checkpoint(x):
    saved = []

    def body(t):
        y = t.sin()
        saved.append(y)  # changes a list made before the body: the checkpoint call runs as it is
        return y * 2
    return cp.checkpoint(body, x, use_reentrant=False) + saved[0]


def test_a_checkpointed_body_that_changes_what_it_did_not_make_runs_as_eager():
    def f(x):
        return keep_and_checkpoint(x)

    x = torch.randn(3, requires_grad=True)
    assert_same(rewrite.jit(eager_copy(f))(x), f(x))

    def g(x):
        t = None

        def body(u):
            nonlocal t
            t = u.cos()
            return u * 2
        return cp.checkpoint(body, x, use_reentrant=False) + t

    assert_same(rewrite.jit(eager_copy(g))(x), g(x))
