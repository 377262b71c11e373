"""Breadth suite, autograd: inputs that require grad; gradients after backward() equal eager's."""
import torch
import torch.nn as nn
import torch.nn.functional as F

import rewrite
from breadth import check, rand, todo
from conftest import CompileCounter, assert_same, eager_copy


def g1(seed):
    return (rand(seed, 3, 4, requires_grad=True),)


def g2(seed):
    return (rand(seed, 3, 4, requires_grad=True), rand(seed + 1, 4, 2, requires_grad=True))


def g_mixed(seed):
    return (rand(seed, 3, 4, requires_grad=True), rand(seed + 1, 4, 2))


def grad_check(fn, make_args, **kw):
    return check(fn, make_args, backward=True, **kw)


def test_pointwise_grad():
    grad_check(lambda x: (x.sin() * x.exp()).tanh(), g1)


def test_matmul_grad_both_inputs():
    grad_check(lambda x, w: x @ w, g2)


def test_matmul_grad_one_input():
    grad_check(lambda x, w: (x @ w).relu(), g_mixed)


def test_reduction_grad():
    grad_check(lambda x: x.mean(0) + x.amax(1).sum() + x.norm(), g1)


def test_softmax_and_log_softmax_grad():
    grad_check(lambda x: x.softmax(-1) * F.log_softmax(x, 0), g1)


def test_mse_loss_grad():
    def f(x, w, target):
        return F.mse_loss(x @ w, target)
    grad_check(f, lambda s: g2(s) + (rand(s + 2, 3, 2),))


def test_cross_entropy_grad():
    def f(logits, labels):
        return F.cross_entropy(logits, labels)
    grad_check(f, lambda s: (rand(s, 3, 4, requires_grad=True), torch.tensor([0, 3, 1])))


def test_input_used_twice_accumulates():
    grad_check(lambda x: x * x + x.sum(), g1)


def test_indexing_grad():
    grad_check(lambda x: x[1:, ::2].sum() + x[0, 1] * 3 + x[[0, 2]].pow(2).sum(), g1)


def test_view_and_transpose_grad():
    grad_check(lambda x: x.view(4, 3).t().reshape(-1).cumsum(0), g1)


def test_cat_stack_split_grad():
    def f(x):
        a, b = x.split(2, dim=1)
        return torch.cat([b, a * 2], 1) + torch.stack([a, b]).sum(0).repeat(1, 2)
    grad_check(f, g1)


def test_where_and_clamp_grad():
    grad_check(lambda x: torch.where(x > 0, x * 2, x.clamp(min=-0.1)), g1)


def test_gather_grad():
    def f(x, idx):
        return x.gather(1, idx).sum()
    grad_check(f, lambda s: (rand(s, 3, 4, requires_grad=True), torch.tensor([[0], [3], [1]])))


def test_detach_stops_grad():
    grad_check(lambda x: x * x.detach() + x.detach().sum(), g1)


def test_python_loop_of_ops_grad():
    def f(x, w):
        for _ in range(3):
            x = torch.tanh(x @ w @ w.t())
        return x
    grad_check(f, g2)


def test_multiple_outputs_grad():
    def f(x, w):
        h = x @ w
        return h.relu(), h.sigmoid(), {"s": h.sum()}
    grad_check(f, g2)


def test_non_tensor_outputs_with_grad():
    def f(x):
        return x.exp(), x.shape[0], x.requires_grad
    grad_check(f, g1)


def test_double_precision_grad():
    grad_check(lambda x: (x * x).log1p(), lambda s: (rand(s, 5, dtype=torch.float64, requires_grad=True),))


def test_helper_function_grad():
    def norm(t, eps=1e-5):
        return (t - t.mean(-1, keepdim=True)) / (t.var(-1, keepdim=True) + eps).sqrt()

    def f(x):
        return norm(x) * 2
    grad_check(f, g1)


def test_layer_norm_and_gelu_functional_grad():
    def f(x, w, b):
        return F.gelu(F.layer_norm(x, (4,), w, b))
    grad_check(f, lambda s: (rand(s, 3, 4, requires_grad=True), rand(s + 1, 4, requires_grad=True),
                             rand(s + 2, 4, requires_grad=True)))


def test_attention_grad():
    def f(q, k, v):
        n = q.shape[-2]
        mask = torch.ones(n, n, dtype=torch.bool).tril()
        att = (q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5).masked_fill(~mask, float("-inf"))
        return att.softmax(-1) @ v
    grad_check(f, lambda s: tuple(rand(s + i, 2, 3, 4, requires_grad=True) for i in range(3)))


def test_no_grad_part_excluded_from_grad():
    def f(x):
        with torch.no_grad():
            s = x.abs().sum()
        return x * s
    grad_check(f, g1)


def test_custom_autograd_function():
    class Square(torch.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            ctx.save_for_backward(t)
            return t * t

        @staticmethod
        def backward(ctx, g):
            (t,) = ctx.saved_tensors
            return 2 * t * g

    grad_check(lambda x: Square.apply(x) + 1, g1)


def test_read_grad_of_input():
    def f(x):
        return x * 2 + x.grad

    def make(seed):
        x = rand(seed, 3, requires_grad=True)
        x.grad = rand(seed + 4, 3)
        return (x,)
    check(f, make)


def test_module_parameter_grads():
    def f(x, m):
        return m(x).pow(2).mean()

    def make(seed):
        torch.manual_seed(0)
        return (rand(seed, 2, 4), nn.Linear(4, 3))
    grad_check(f, make)


def test_jit_module_parameter_grads():
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 1))
    grad_check(m, lambda s: (rand(s, 2, 4),))


# requires_grad and grad mode are guarded

def test_requires_grad_flip_between_calls():
    def f(x):
        return x * 2

    eager, cnt = eager_copy(f), CompileCounter()
    rewrite.jit(f, fullgraph=True, backend=cnt)
    for rg in (False, True, False):
        x = rand(0, 3, requires_grad=rg)
        out, ref = f(x), eager(x)
        assert_same(out, ref)
        assert out.requires_grad == ref.requires_grad == rg
    assert cnt.frame_count == 2


def test_called_under_no_grad_after_compiling_with_grad():
    def f(x):
        return x.sin()

    rewrite.jit(f, fullgraph=True, backend=CompileCounter())
    x = rand(0, 3, requires_grad=True)
    assert f(x).requires_grad
    with torch.no_grad():
        assert not f(x).requires_grad
    assert f(x).requires_grad


def test_training_step_matches_eager_step_by_step():
    def loss_fn(model, x, y):
        return F.mse_loss(model(x), y)

    torch.manual_seed(0)
    model_c = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    model_e = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    model_e.load_state_dict(model_c.state_dict())
    eager = eager_copy(loss_fn)
    cnt = CompileCounter()
    rewrite.jit(loss_fn, fullgraph=True, backend=cnt)
    opt_c = torch.optim.SGD(model_c.parameters(), lr=0.1)
    opt_e = torch.optim.SGD(model_e.parameters(), lr=0.1)
    for step in range(3):
        x, y = rand(step, 5, 4), rand(step + 10, 5, 1)
        for model, opt, fn in ((model_c, opt_c, loss_fn), (model_e, opt_e, eager)):
            opt.zero_grad()
            loss = fn(model, x, y)
            loss.backward()
            opt.step()
            model.last = loss.detach()
        assert_same(model_c.last, model_e.last)
        for pc, pe in zip(model_c.parameters(), model_e.parameters()):
            assert_same(pc, pe)
    assert cnt.frame_count == 1


def test_train_step_of_plain_tensors_with_manual_update():
    def step(w, x, y):
        loss = ((x @ w - y) ** 2).mean()
        return loss

    eager, cnt = eager_copy(step), CompileCounter()
    rewrite.jit(step, fullgraph=True, backend=cnt)
    w_c = rand(0, 4, 1, requires_grad=True)
    w_e = w_c.detach().clone().requires_grad_()
    for i in range(3):
        x, y = rand(i, 6, 4), rand(i + 20, 6, 1)
        for w, fn in ((w_c, step), (w_e, eager)):
            fn(w, x, y).backward()
            with torch.no_grad():
                w -= 0.1 * w.grad
                w.grad = None
        assert_same(w_c.detach(), w_e.detach())
    assert cnt.frame_count == 1


def test_inplace_on_intermediate_grad():
    def f(x):
        y = x * 2
        y.add_(1)
        return y.sum()
    grad_check(f, g1)


def test_relu_inplace_on_intermediate_grad():
    def f(x):
        y = x * 3
        F.relu(y, inplace=True)
        return y
    grad_check(f, g1)


def test_setitem_into_local_zeros_grad():
    def f(x):
        y = torch.zeros(4, 4)
        y[1:] = x
        return y * 2
    grad_check(f, g1)


def test_parameter_input_grad():
    grad_check(lambda x: (x * 2).sum(), lambda s: (nn.Parameter(rand(s, 3)),))


def test_closure_tensor_requires_grad_flipped_between_calls():
    w = rand(0, 3)

    def f(x):
        return x * w

    eager = eager_copy(f)
    rewrite.jit(f, fullgraph=True, backend=CompileCounter())
    x = rand(1, 3)
    assert not f(x).requires_grad
    w.requires_grad_(True)
    out, ref = f(x), eager(x)
    assert out.requires_grad and ref.requires_grad
    assert_same(out, ref)


def test_grad_of_integer_indexed_embedding_table():
    def f(table, ids):
        return table[ids].sum(1).tanh()
    grad_check(f, lambda s: (rand(s, 6, 3, requires_grad=True), torch.tensor([[0, 5], [2, 2]])))


def test_grad_through_python_list_of_tensors():
    def f(xs):
        return torch.stack([t * i for i, t in enumerate(xs)]).sum()
    grad_check(f, lambda s: ([rand(s + i, 3, requires_grad=True) for i in range(3)],))


def test_grad_through_dict_of_tensors():
    def f(d):
        return {k: v.exp() for k, v in d.items()}
    grad_check(f, lambda s: ({"a": rand(s, 3, requires_grad=True), "b": rand(s + 1, 2, requires_grad=True)},))


def test_requires_grad_inside_function_on_local():
    def f(x):
        w = torch.ones(3).requires_grad_()
        return (x * w).sum(), w.requires_grad
    check(f, lambda s: (rand(s, 3),), fullgraph=False)  # a graph break in Dynamo too


def test_torch_autograd_grad_inside():
    def f(x):
        y = (x ** 3).sum()
        (g,) = torch.autograd.grad(y, x, create_graph=True)
        return g
    grad_check(f, lambda s: (rand(s, 3, requires_grad=True),), fullgraph=False)  # a graph break in Dynamo too
