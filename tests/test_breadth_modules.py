"""Breadth suite, modules: nn.Modules called from jitted functions, and jit(module) itself."""
import copy

import pytest

import torch
import torch.nn as nn
import torch.nn.functional as F

import rewrite
from breadth import check, rand, todo
from conftest import CompileCounter, assert_same


def seeded(make):
    """A module built from a fixed seed: both sides (and both calls) start from the same weights."""
    torch.manual_seed(0)
    return make()


class MLP(nn.Module):
    def __init__(self, d=4, h=8):
        super().__init__()
        self.fc1 = nn.Linear(d, h)
        self.norm = nn.LayerNorm(h)
        self.fc2 = nn.Linear(h, d)

    def forward(self, x):
        return self.fc2(F.gelu(self.norm(self.fc1(x))))


class Residual(nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        return x + self.inner(x)


class TrainFlag(nn.Module):
    def forward(self, x):
        if self.training:
            return x * 2
        return x - 1


class Counter(nn.Module):
    def __init__(self):
        super().__init__()
        self.steps = 0
        self.register_buffer("seen", torch.zeros(4))

    def forward(self, x):
        self.steps += 1
        self.seen += x.detach().mean(0)
        return x * self.steps


class Stack(nn.Module):
    def __init__(self, n=3):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(n)])
        self.heads = nn.ModuleDict({"a": nn.Linear(4, 2), "b": nn.Linear(4, 3)})

    def forward(self, x, head="a"):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return self.heads[head](x)


class WithHelpers(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self.scale = 0.5

    def _act(self, x):
        return torch.tanh(x) * self.scale

    def forward(self, x):
        return self._act(self.proj(x))


def x4(seed):
    return (rand(seed, 2, 4),)


def with_module(make):
    return lambda seed: (rand(seed, 2, 4), seeded(make))


# modules called from a jitted function

def test_call_linear_argument():
    check(lambda x, m: m(x), with_module(lambda: nn.Linear(4, 3)))


def test_call_layernorm_argument():
    check(lambda x, m: m(x), with_module(lambda: nn.LayerNorm(4)))


def test_call_sequential_argument():
    check(lambda x, m: m(x), with_module(lambda: nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))))


def test_call_user_module_with_submodules():
    check(lambda x, m: m(x), with_module(MLP))


def test_call_nested_user_modules():
    check(lambda x, m: m(x), with_module(lambda: Residual(MLP())))


def test_module_from_closure():
    m = seeded(MLP)

    def f(x):
        return m(x) * 2
    check(f, x4)


def test_iterate_sequential():
    def f(x, seq):
        for layer in seq:
            x = layer(x)
        return x
    check(f, with_module(lambda: nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 4))))


def test_index_and_len_of_sequential():
    def f(x, seq):
        return seq[len(seq) - 1](seq[0](x))
    check(f, with_module(lambda: nn.Sequential(nn.Linear(4, 5), nn.Linear(5, 3))))


def test_module_list_and_dict():
    check(lambda x, m: m(x, "b"), with_module(Stack))


def test_module_list_enumerate_and_slice():
    def f(x, m):
        for i, layer in enumerate(m.layers[1:]):
            x = layer(x) * (i + 1)
        return x
    check(f, with_module(Stack))


def test_module_dict_items():
    def f(x, m):
        return {k: head(x) for k, head in m.heads.items()}
    check(f, with_module(Stack))


def test_read_parameters_directly():
    def f(x, lin):
        return x @ lin.weight.t() + lin.bias
    check(f, with_module(lambda: nn.Linear(4, 3)))


def test_parameters_iteration():
    def f(x, m):
        return x.sum() + sum(p.pow(2).sum() for p in m.parameters())
    check(f, with_module(MLP))


def test_named_parameters_names():
    def f(x, m):
        names = [n for n, _ in m.named_parameters()]
        return x * len(names), names
    check(f, with_module(MLP))


def test_module_attribute_python_value():
    check(lambda x, m: m(x) + m.scale, with_module(WithHelpers))


def test_module_training_branch_eval():
    def make():
        return TrainFlag().eval()
    check(lambda x, m: m(x), with_module(make))


def test_training_flag_read_in_function():
    def f(x, m):
        return F.dropout(x, 0.5, training=m.training)
    check(f, with_module(lambda: nn.Linear(4, 4).eval()))


def test_dropout_module_in_eval():
    check(lambda x, m: m(x), with_module(lambda: nn.Dropout(0.3).eval()))


def test_batchnorm_train_updates_buffers():
    check(lambda x, m: m(x), with_module(lambda: nn.BatchNorm1d(4)))


def test_batchnorm_eval():
    check(lambda x, m: m(x), with_module(lambda: nn.BatchNorm1d(4).eval()))


def test_conv2d_and_pool():
    def f(x, conv):
        return F.max_pool2d(torch.relu(conv(x)), 2)
    check(f, lambda s: (rand(s, 1, 2, 6, 6), seeded(lambda: nn.Conv2d(2, 3, 3, padding=1))))


def test_embedding_lookup():
    def f(ids, emb):
        return emb(ids).mean(1)
    check(f, lambda s: (torch.tensor([[1, 2, 3], [4, 5, 6]]) + s, seeded(lambda: nn.Embedding(10, 4))))


def test_module_state_counter_from_function():
    check(lambda x, m: m(x), with_module(Counter))


def test_isinstance_module_check():
    def f(x, m):
        return m(x) if isinstance(m, nn.Linear) else x
    check(f, with_module(lambda: nn.Linear(4, 4)))


@todo("opcode GET_YIELD_FROM_ITER is not supported")
def test_functional_call_on_parameters_dict():
    def f(x, m):
        params = dict(m.named_parameters())
        return torch.func.functional_call(m, params, (x,))
    check(f, with_module(lambda: nn.Linear(4, 2)))


# jit(module)

def test_jit_linear_module():
    check(seeded(lambda: nn.Linear(4, 3)), x4)


def test_jit_user_mlp():
    check(seeded(MLP), x4)


def test_jit_sequential():
    check(seeded(lambda: nn.Sequential(nn.Linear(4, 4), nn.GELU(), nn.LayerNorm(4))), x4)


def test_jit_module_with_module_list():
    check(seeded(Stack), x4)


def test_jit_module_forward_keyword_argument():
    check(seeded(Stack), x4, kwargs=lambda s: {"head": "b"})


def test_jit_module_in_eval_mode():
    check(seeded(TrainFlag).eval(), x4)


def test_jit_module_updates_python_counter_and_buffer():
    # the counter is read, so each new value may recompile: compare three calls, not the cache
    m = seeded(Counter)
    eager = copy.deepcopy(m)
    compiled = rewrite.jit(m, fullgraph=True, backend=CompileCounter())
    for seed in range(3):
        x = rand(seed, 2, 4)
        assert_same(compiled(x), eager(x))
        assert m.steps == eager.steps == seed + 1
        assert_same(m.seen, eager.seen)


def test_jit_batchnorm_train():
    check(seeded(lambda: nn.BatchNorm1d(4)), x4)


def test_jit_module_train_eval_switch_follows_eager():
    cnt = CompileCounter()
    m = TrainFlag()
    compiled = rewrite.jit(m, fullgraph=True, backend=cnt)
    x = rand(0, 3)
    assert_same(compiled(x), x * 2)
    m.eval()
    assert_same(compiled(x), x - 1)  # the training flag is guarded
    m.train()
    assert_same(compiled(x), x * 2)
    assert cnt.frame_count == 2


def test_jit_module_keeps_state_dict_and_parameters():
    m = seeded(MLP)
    before = {k: v.clone() for k, v in m.state_dict().items()}
    compiled = rewrite.jit(m, fullgraph=True, backend=CompileCounter())
    compiled(rand(0, 2, 4))
    assert isinstance(compiled, nn.Module)
    assert list(compiled.state_dict()) == list(before)
    assert_same(dict(compiled.state_dict()), before)
    assert all(a is b for a, b in zip(compiled.parameters(), m.parameters(), strict=True))


def test_jit_module_sees_weight_updates():
    m = seeded(lambda: nn.Linear(4, 2))
    cnt = CompileCounter()
    compiled = rewrite.jit(m, fullgraph=True, backend=cnt)
    x = rand(0, 1, 4)
    compiled(x)
    with torch.no_grad():
        m.weight.add_(1.0)
    assert_same(compiled(x), F.linear(x, m.weight, m.bias))
    assert cnt.frame_count == 1


def test_jit_two_instances_share_a_graph():
    cnt = CompileCounter()
    a, b = seeded(MLP), MLP()
    ca = rewrite.jit(a, fullgraph=True, backend=cnt)
    cb = rewrite.jit(b, fullgraph=True, backend=cnt)
    x = rand(0, 2, 4)
    with torch.no_grad():
        assert_same(ca(x), a.forward(x))
        assert_same(cb(x), b.forward(x))
    assert cnt.frame_count == 1


def test_jit_module_forward_hook_runs():
    m = seeded(lambda: nn.Linear(4, 4))
    m.register_forward_hook(lambda mod, inp, out: out * 10)
    check(m, x4)


def test_jit_module_forward_pre_hook_runs():
    m = seeded(lambda: nn.Linear(4, 4))
    m.register_forward_pre_hook(lambda mod, inp: (inp[0] + 1,))
    check(m, x4)


# -- forward as an instance attribute (accelerate's hooks, adapters) -----------------------------
class _Lin(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)

    def forward(self, x):
        return torch.relu(self.lin(x))


def _accelerate_style(module):
    """What accelerate's add_hook_to_module does: forward = partial(new_forward, module)."""
    import functools
    module._old_forward = module.forward

    def new_forward(module, *args, **kwargs):
        args = tuple(a * 2 for a in args)  # a pre-forward hook
        with torch.no_grad():
            out = module._old_forward(*args, **kwargs)
        return out + 1  # a post-forward hook
    module.forward = functools.update_wrapper(functools.partial(new_forward, module), module._old_forward)
    return module


def _closure_style(module):
    old = module.forward

    def forward(x):
        return old(x) - 0.5
    module.forward = forward
    return module


class _Other:
    def __init__(self, base):
        self.base = base

    def forward(self, x):
        return self.base.lin(x).sigmoid()


def _other_object_style(module):
    module.forward = _Other(module).forward
    return module


@pytest.mark.parametrize("wrap", [_accelerate_style, _closure_style, _other_object_style])
def test_jit_module_compiles_an_instance_attribute_forward(wrap):
    import copy
    torch.manual_seed(0)
    model = wrap(_Lin())
    eager = copy.deepcopy(model)
    before = model.forward
    assert rewrite.jit(model) is model and model.forward is not before
    x = torch.randn(2, 4)
    for _ in range(2):
        assert_same(model(x), eager(x))
    assert rewrite.jit(model).forward is model.forward  # jitting again changes nothing
    out = rewrite.explain(model)(x)
    assert out.graph_count >= 1 and out.op_count >= 2


def test_jit_module_refuses_a_forward_it_cannot_compile():
    model = _Lin()
    model.forward = torch.relu  # a C function
    with pytest.raises(TypeError, match="instance attribute of type builtin_function_or_method"):
        rewrite.jit(model)
