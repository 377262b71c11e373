"""Modules made in the call, torch's decorators and context managers (issue 19, item 5),
einops and recurrent layers (item 6): each one graph under fullgraph=True where torch.compile
gets one, against eager (outputs and gradients)."""
import copy

import pytest
import torch

import rewrite
from conftest import assert_same, eager_copy

LIN = torch.nn.Linear(4, 4)


@torch.no_grad()
def no_grad_helper(x):
    return LIN(x) * 2


@torch.enable_grad()
def enable_grad_helper(x):
    return LIN(x) * 2


@torch.inference_mode()
def inference_helper(x):
    return x * 2


def saved_hooks_disabled(x):
    with torch.autograd.graph.disable_saved_tensors_hooks("no hooks here"):
        return (x * 2).sin()


def sdpa_math(q):
    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH):
        return torch.nn.functional.scaled_dot_product_attention(q, q, q)


def save_on_cpu(x):
    with torch.autograd.graph.save_on_cpu():
        return (x * x).sum()


CASES = {
    "softmax_made_in_the_call": lambda x: torch.nn.Softmax(dim=-1)(x),
    "sequential_made_in_the_call": lambda x: torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Tanh())(x) + 1,
    "no_grad_decorator": lambda x: no_grad_helper(x.flatten()[:4]) + x.sum(),
    "enable_grad_decorator": lambda x: enable_grad_helper(x.flatten()[:4]) + x.sum(),
    "inference_mode_decorator": lambda x: inference_helper(x.detach()).clone(),
    "disable_saved_tensors_hooks": saved_hooks_disabled,
    "sdpa_kernel": sdpa_math,
    "save_on_cpu": save_on_cpu,
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_modules_decorators_and_torch_context_managers(name):
    fn = CASES[name]
    compiled = rewrite.jit(eager_copy(fn), fullgraph=True)
    for _ in range(2):
        x = torch.randn(1, 2, 3, 4, requires_grad=True)
        x2 = x.detach().clone().requires_grad_()
        got, expected = compiled(x), fn(x2)
        assert_same(got, expected)
        assert got.requires_grad == expected.requires_grad
        if got.requires_grad:
            got.sum().backward(), expected.sum().backward()
            torch.testing.assert_close(x.grad, x2.grad)


def test_a_module_with_weights_made_in_the_call_breaks_the_graph():
    def f(x):
        return torch.nn.Linear(4, 2)(x)

    torch.manual_seed(0)
    expected = f(torch.ones(1, 4))
    torch.manual_seed(0)
    assert_same(rewrite.jit(eager_copy(f))(torch.ones(1, 4)), expected)


def test_a_break_inside_a_torch_context_manager_keeps_its_block_whole():
    """A generic torch context (fork_rng restores at exit what its enter saw) is not split in
    two at a break: the call runs as eager runs it."""
    def f(x):
        with torch.autograd.graph.disable_saved_tensors_hooks("inside"):
            y = x * 2
            print("", end="")
            z = y + torch._C._autograd._saved_tensors_hooks_get_disabled_error_message().__len__()
        return z, torch._C._autograd._saved_tensors_hooks_get_disabled_error_message()

    compiled = rewrite.jit(eager_copy(f))
    x = torch.randn(3)
    assert_same(compiled(x), f(x))


einops = pytest.importorskip("einops")


EINOPS = {
    "rearrange": lambda x: einops.rearrange(x, "b c h w -> b (h w) c"),
    "reduce": lambda x: einops.reduce(x, "b c (h h2) w -> b c h", "max", h2=2),
    "repeat": lambda x: einops.repeat(x, "b c h w -> b c h w r", r=2),
    "pack_like": lambda x: einops.rearrange([x, x + 1], "n b c h w -> b n c h w").sum(1),
}


@pytest.mark.parametrize("name", sorted(EINOPS))
def test_einops_is_traced_into_one_graph(name):
    fn = EINOPS[name]
    x = torch.randn(2, 3, 4, 5)
    fn(x)  # (einops finds its torch backend on a first eager call, as a program's first call would)
    compiled = rewrite.jit(eager_copy(fn), fullgraph=True)
    for shape in ((2, 3, 4, 5), (2, 3, 4, 5), (3, 3, 6, 2)):
        x = torch.randn(shape)
        assert_same(compiled(x), fn(x))


def test_einops_allowed_in_graph_is_one_node():
    def op(x):
        return einops.rearrange(x, "a b -> b a")

    rewrite.allow_in_graph(op)
    out = rewrite.explain(lambda x: op(x) + 1)(torch.randn(2, 3))
    assert out.graph_count == 1 and out.ops_per_graph[0][0] == "op"
    x = torch.randn(2, 3)
    assert_same(rewrite.jit(lambda t: op(t) + 1, fullgraph=True)(x), op(x) + 1)


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
def test_recurrent_layers_forward_and_backward(kind):
    torch.manual_seed(0)
    layer = getattr(torch.nn, kind)(4, 8, num_layers=2, batch_first=True, bidirectional=kind == "GRU")
    twin = copy.deepcopy(layer)

    def f(layer, x):
        out, _ = layer(x)
        return out.sum()

    compiled = rewrite.jit(eager_copy(f), fullgraph=True)
    for _ in range(2):
        x = torch.randn(3, 5, 4)
        a, b = compiled(layer, x), f(twin, x)
        torch.testing.assert_close(a, b)
        a.backward(), b.backward()
        for p, q in zip(layer.parameters(), twin.parameters()):
            torch.testing.assert_close(p.grad, q.grad)
