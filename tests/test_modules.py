"""nn.Module: `jit(module)`, submodules inlined, containers iterated and indexed, hooks,
train/eval, gradients and side effects on modules -- every result against an eager copy."""
import copy

import pytest
import torch
from torch import nn

import rewrite
from rewrite import dispatcher_of, jit

from conftest import CompileCounter, assert_same, eager_copy


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        h = self.mlp(self.ln(x))
        if self.training:
            h = self.drop(h)
        return x + h


class Net(nn.Module):
    def __init__(self, d=8, n=3):
        super().__init__()
        self.blocks = nn.ModuleList([Block(d) for _ in range(n)])
        self.heads = nn.ModuleDict({"a": nn.Linear(d, 2), "b": nn.Linear(d, 3)})
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        for block in self.blocks:
            x = block(x)
        x = self.blocks[-1].ln(x)
        return {k: head(x) for k, head in self.heads.items()}, len(self.blocks)


def pair(seed=0):
    torch.manual_seed(seed)
    net = Net()
    return net, copy.deepcopy(net)


def test_jit_module_returns_the_module_and_matches_eager():
    net, ref = pair()
    cnt = CompileCounter()
    assert jit(net, backend=cnt, fullgraph=True) is net
    x = torch.randn(4, 8)
    for mode in ("eval", "train"):
        getattr(net, mode)()
        getattr(ref, mode)()
        for _ in range(2):
            torch.manual_seed(1)
            out = net(x)
            torch.manual_seed(1)
            assert_same(out, ref(x))
    assert net.calls == ref.calls == 4
    assert cnt.frame_count >= 2  # training flag is guarded: eval and train compile apart
    assert set(net.state_dict()) == set(ref.state_dict())


def test_gradients_match_eager():
    net, ref = pair()
    jit(net, fullgraph=True)
    x = torch.randn(4, 8)
    torch.manual_seed(5)  # dropout draws the same mask in both
    out, _ = net(x)
    torch.manual_seed(5)
    expected, _ = ref(x)
    (out["a"].sum() + out["b"].pow(2).sum()).backward()
    (expected["a"].sum() + expected["b"].pow(2).sum()).backward()
    for (name, p), q in zip(net.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad, msg=name)


def test_a_training_step_matches_eager_step_by_step():
    net, ref = pair()
    net.train(), ref.train()
    for b in (*net.blocks, *ref.blocks):
        b.drop.p = 0.0
    jit(net)
    opt, opt_ref = torch.optim.SGD(net.parameters(), lr=0.1), torch.optim.SGD(ref.parameters(), lr=0.1)
    torch.manual_seed(3)
    data = [(torch.randn(4, 8), torch.randn(4, 2)) for _ in range(3)]
    for x, y in data:
        for model, o in ((net, opt), (ref, opt_ref)):
            o.zero_grad()
            out, _ = model(x)
            loss = (out["a"] - y).pow(2).mean()
            loss.backward()
            o.step()
        for p, q in zip(net.parameters(), ref.parameters()):
            torch.testing.assert_close(p, q)


def test_instances_of_one_class_share_compiled_code():
    cnt = CompileCounter()
    a, b = nn.Linear(4, 4), nn.Linear(4, 4)

    def f(m, x):
        return m(x).relu()

    jit(f, backend=cnt, fullgraph=True)
    x = torch.randn(2, 4)
    assert_same(f(a, x), a(x).relu())
    assert_same(f(b, x), b(x).relu())
    assert cnt.frame_count == 1  # parameters are graph inputs, not constants


def test_forward_hooks_and_pre_hooks_are_traced_into_the_graph():
    lin = nn.Linear(3, 3)
    ref = copy.deepcopy(lin)
    for m in (lin, ref):
        m.register_forward_pre_hook(lambda mod, inp: (inp[0] * 2,))
        m.register_forward_pre_hook(lambda mod, args, kwargs: ((args[0] + 1,), kwargs), with_kwargs=True)
        m.register_forward_hook(lambda mod, inp, out: out * 10)
        m.register_forward_hook(lambda mod, inp, out: None)  # (None: the output stays)
        m.register_forward_hook(lambda mod, args, kwargs, out: out + args[0].sum(), with_kwargs=True)

    def f(x):
        return lin(x).relu() + 1

    def g(x):
        return ref(x).relu() + 1

    compiled = jit(eager_copy(f), fullgraph=True)
    x = torch.randn(2, 3)
    for _ in range(2):
        assert_same(compiled(x), g(x))
    handle = lin.register_forward_hook(lambda mod, inp, out: out - 5)  # a new hook: the guard sees it
    ref.register_forward_hook(lambda mod, inp, out: out - 5)
    assert_same(compiled(x), g(x))
    handle.remove()


def test_fullgraph_names_the_hook():
    lin = nn.Linear(3, 3)
    lin.register_full_backward_hook(lambda mod, gin, gout: None)
    jit_fn = jit(lambda m, x: m(x), fullgraph=True)
    with pytest.raises(rewrite.Unsupported, match="hook"):
        jit_fn(lin, torch.randn(2, 3))


def test_backward_hooks_break_the_graph_and_still_run():
    lin = nn.Linear(3, 3)
    ref = copy.deepcopy(lin)
    seen = []
    for m in (lin, ref):
        m.register_full_backward_hook(lambda mod, gin, gout: seen.append(1))

    def f(x):
        return lin(x).relu().sum()

    compiled = jit(eager_copy(f))
    x = torch.randn(2, 3)
    compiled(x).backward()
    ref(x).relu().sum().backward()
    assert seen == [1, 1]
    assert any("hook" in (e.eager_reason or "") for e in dispatcher_of(compiled).entries)


def test_sequential_indexing_and_len():
    seq = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))

    def f(x):
        for i in range(len(seq) - 1):
            x = seq[i](x)
        return seq[-1](x)

    jit(f, fullgraph=True)
    x = torch.randn(3, 4)
    assert_same(f(x), seq(x))


def test_module_buffer_and_counter_updates_are_replayed():
    class Counter(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("total", torch.zeros(3))
            self.seen = 0

        def forward(self, x):
            self.total = self.total + x.sum(0)
            self.seen = self.seen + x.shape[0]
            return x * 2

    m, ref = Counter(), Counter()
    jit(m, fullgraph=True)
    for n in (2, 2, 4):
        x = torch.ones(n, 3)
        assert_same(m(x), ref(x))
        assert_same(m.total, ref.total)
        assert m.seen == ref.seen
    assert "total" in dict(m.named_buffers())
