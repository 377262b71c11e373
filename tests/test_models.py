"""Small real models under `jit`, each against an eager copy: outputs, module state (parameters,
buffers, grads, Python attributes), one graph with no break, and no recompile on a second call
with new values of the same shapes."""
import copy
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import rewrite
from rewrite import jit

from breadth import compiles
from conftest import CompileCounter, assert_same, eager_copy


# ---------------------------------------------------------------- helpers


def rand(seed, *shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def tokens(seed, *shape, vocab):
    return torch.randint(vocab, shape, generator=torch.Generator().manual_seed(100 + seed))


def leaf_pair(t):
    """Two equal, distinct leaves that require grad: one per side."""
    return t.clone().requires_grad_(), t.clone().requires_grad_()


def assert_module_state(actual, expected):
    """Same mode, state_dict (tensors and their .grad) and plain Python attributes of every submodule."""
    assert actual.training == expected.training
    a, e = actual.state_dict(keep_vars=True), expected.state_dict(keep_vars=True)
    assert list(a) == list(e)
    for k in e:
        assert_same(a[k].detach(), e[k].detach())
        assert (a[k].grad is None) == (e[k].grad is None), k
        if e[k].grad is not None:
            assert_same(a[k].grad, e[k].grad)

    def plain(m):  # jit(module) binds the compiled forward on the instance: not state
        return {k: v for k, v in vars(m).items() if not k.startswith("_") and k != "forward"}

    for am, em in zip(actual.modules(), expected.modules()):
        assert_same(plain(am), plain(em))


def assert_one_graph(fn, *args):
    """rewrite.explain: one graph, no break. The call runs: give it a copy that may change."""
    out = rewrite.explain(fn)(*args)
    assert (out.graph_count, out.graph_break_count) == (1, 0), [str(r) for r in out.break_reasons]


class Snapshot:
    """Compiles so far (the counter's graphs and every dispatcher's entries)."""

    def __init__(self, cnt):
        self.cnt, self.frames, self.per_code = cnt, cnt.frame_count, compiles()

    def assert_no_recompile(self):
        again = {d.qualname: n for d, n in compiles().items() if n != self.per_code.get(d, 0)}
        assert self.cnt.frame_count == self.frames and not again, f"recompiled: {again}"


def seeded(seed, fn, *args):
    torch.manual_seed(seed)  # dropout: both sides draw the same mask
    return fn(*args)


# ---------------------------------------------------------------- 1. MLP


class MLP(nn.Module):
    def __init__(self, d_in=16, d_hidden=32, d_out=4, p=0.2):
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_hidden)
        self.ln = nn.LayerNorm(d_hidden)
        self.act = nn.GELU()
        self.drop = nn.Dropout(p)
        self.fc2 = nn.Linear(d_hidden, d_out)

    def forward(self, x):
        return self.fc2(self.drop(self.act(self.ln(self.fc1(x)))))


@pytest.mark.parametrize("mode", ["train", "eval"])
def test_mlp_layernorm_gelu_dropout(mode):
    torch.manual_seed(0)
    model = getattr(MLP(), mode)()
    ref, probe = copy.deepcopy(model), copy.deepcopy(model)
    cnt = CompileCounter()
    jit(model, backend=cnt)
    for seed in (0, 1):
        x, x_ref = leaf_pair(rand(seed, 8, 16))
        out, expected = seeded(seed, model, x), seeded(seed, ref, x_ref)
        assert_same(out, expected)
        out.pow(2).sum().backward()
        expected.pow(2).sum().backward()
        assert_same(x.grad, x_ref.grad)
        assert_module_state(model, ref)
        if seed == 0:
            assert cnt.frame_count == 1
            first = Snapshot(cnt)
    first.assert_no_recompile()
    assert_one_graph(probe.forward, rand(0, 8, 16))


# ---------------------------------------------------------------- 2. CNN with BatchNorm


class SmallCNN(nn.Module):
    def __init__(self, n_classes=5):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(16)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(16 * 2 * 2, n_classes)

    def forward(self, x):
        x = self.pool(F.relu(self.bn1(self.conv1(x))))
        x = self.pool(torch.relu(self.bn2(self.conv2(x))))
        return self.fc(torch.flatten(x, 1))


@pytest.mark.parametrize("mode", ["train", "eval"])
def test_cnn_batchnorm(mode):
    torch.manual_seed(0)
    model = getattr(SmallCNN(), mode)()
    ref, probe = copy.deepcopy(model), copy.deepcopy(model)
    cnt = CompileCounter()
    jit(model, backend=cnt)
    for seed in (0, 1):
        x = rand(seed, 4, 3, 8, 8)
        out, expected = model(x), ref(x)
        assert_same(out, expected)
        F.cross_entropy(out, torch.arange(4)).backward()
        F.cross_entropy(expected, torch.arange(4)).backward()
        assert_module_state(model, ref)  # train: running_mean/var, num_batches_tracked updated in place
        if seed == 0:
            assert cnt.frame_count == 1
            first = Snapshot(cnt)
    first.assert_no_recompile()
    if mode == "train":
        assert model.bn1.num_batches_tracked.item() == 2
    assert_one_graph(probe.forward, rand(0, 4, 3, 8, 8))


# ---------------------------------------------------------------- 3. GPT block


class CausalSelfAttention(nn.Module):
    def __init__(self, d, n_head, p):
        super().__init__()
        self.n_head = n_head
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.attn_drop = nn.Dropout(p)

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.qkv(x).split(C, dim=2)
        hs = C // self.n_head
        q = q.view(B, T, self.n_head, hs).transpose(1, 2)
        k = k.view(B, T, self.n_head, hs).transpose(1, 2)
        v = v.view(B, T, self.n_head, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        mask = torch.tril(torch.ones(T, T, device=x.device))
        att = att.masked_fill(mask.view(1, 1, T, T) == 0, float("-inf"))
        att = self.attn_drop(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.proj(y)


class GPTBlock(nn.Module):
    def __init__(self, d, n_head, p):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = CausalSelfAttention(d, n_head, p)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(approximate="tanh"), nn.Linear(4 * d, d), nn.Dropout(p))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    def __init__(self, vocab=32, block_size=8, d=16, n_head=2, n_layer=2, p=0.1):
        super().__init__()
        self.block_size = block_size
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(block_size, d)
        self.drop = nn.Dropout(p)
        self.layers = nn.ModuleList([GPTBlock(d, n_head, p) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.lm_head.weight = self.wte.weight  # tied

    def forward(self, idx, targets=None):
        B, T = idx.shape
        assert T <= self.block_size
        pos = torch.arange(0, T, dtype=torch.long, device=idx.device)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        for layer in self.layers:
            x = layer(x)
        logits = self.lm_head(self.ln_f(x))
        if targets is None:
            return logits, None
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss


@pytest.mark.parametrize("mode", ["train", "eval"])
def test_gpt_causal_attention_tied_weights(mode):
    torch.manual_seed(0)
    model = getattr(TinyGPT(), mode)()
    ref, probe = copy.deepcopy(model), copy.deepcopy(model)
    assert ref.lm_head.weight is ref.wte.weight  # deepcopy keeps the tie
    cnt = CompileCounter()
    jit(model, backend=cnt)
    for seed in (0, 1):
        idx, targets = tokens(seed, 2, 8, vocab=32), tokens(seed + 10, 2, 8, vocab=32)
        (logits, loss), (e_logits, e_loss) = seeded(seed, model, idx, targets), seeded(seed, ref, idx, targets)
        assert_same(logits, e_logits)
        assert_same(loss, e_loss)
        loss.backward()
        e_loss.backward()
        assert_module_state(model, ref)  # the tied weight's grad sums both uses
        if seed == 0:
            assert cnt.frame_count == 1
            first = Snapshot(cnt)
    first.assert_no_recompile()
    assert model.lm_head.weight is model.wte.weight
    # the causal mask: logits at position t do not depend on tokens after t
    model.eval(), ref.eval()
    idx = tokens(2, 1, 8, vocab=32)
    changed = idx.clone()
    changed[0, 5:] = (changed[0, 5:] + 1) % 32
    with torch.no_grad():
        a, b = model(idx)[0], model(changed)[0]
        assert_same(a, ref(idx)[0])
    torch.testing.assert_close(a[:, :5], b[:, :5])
    torch.manual_seed(0)
    assert_one_graph(probe.forward, tokens(0, 2, 8, vocab=32), tokens(10, 2, 8, vocab=32))


# ---------------------------------------------------------------- 4. top-k / top-p filtering


def filter_logits(logits, top_k, top_p, temperature):
    logits = logits / temperature
    kth = torch.topk(logits, top_k, dim=-1).values[..., -1:]
    logits = logits.masked_fill(logits < kth, float("-inf"))
    sorted_logits, sorted_idx = torch.sort(logits, dim=-1, descending=True)
    cum = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
    # drop a token once the mass before it reaches top_p; the best token always stays
    drop_sorted = (cum - sorted_logits.softmax(dim=-1)) > top_p
    drop = torch.zeros_like(drop_sorted).scatter(-1, sorted_idx, drop_sorted)
    filtered = torch.where(drop, torch.full_like(logits, float("-inf")), logits)
    probs = filtered.softmax(dim=-1)
    return filtered, probs, probs.argmax(dim=-1)


def test_top_k_top_p_filtering_function():
    eager = eager_copy(filter_logits)
    cnt = CompileCounter()
    jit(filter_logits, backend=cnt)
    for seed in (0, 1):
        logits = rand(seed, 3, 20) * 3
        out, expected = filter_logits(logits, 8, 0.8, 0.7), eager(logits, 8, 0.8, 0.7)
        assert_same(out, expected)
        kept = torch.isfinite(out[0]).sum(-1)
        assert (kept >= 1).all() and (kept <= 8).all()
        if seed == 0:
            assert cnt.frame_count == 1
            first = Snapshot(cnt)
    first.assert_no_recompile()
    assert_one_graph(eager, rand(0, 3, 20), 8, 0.8, 0.7)


# ---------------------------------------------------------------- 5. in-place buffer updates


class RunningNorm(nn.Module):
    def __init__(self, d, momentum=0.1, count=True):
        super().__init__()
        self.momentum, self.count = momentum, count
        self.register_buffer("mean", torch.zeros(d))
        self.register_buffer("var", torch.ones(d))
        self.steps = 0
        self.scale = nn.Parameter(torch.ones(d))

    def forward(self, x):
        if self.training:
            m = self.momentum
            with torch.no_grad():
                self.mean.mul_(1 - m).add_(x.mean(0), alpha=m)
                self.var.mul_(1 - m).add_(x.var(0, unbiased=False), alpha=m)
            if self.count:
                self.steps += 1
        return (x - self.mean) * torch.rsqrt(self.var + 1e-5) * self.scale


@pytest.mark.parametrize("count", [False, True], ids=["buffers", "buffers_and_counter"])
def test_stateful_running_stats_and_counter(count):
    torch.manual_seed(0)
    model = RunningNorm(6, count=count)
    ref, probe = copy.deepcopy(model), copy.deepcopy(model)
    cnt = CompileCounter()
    jit(model, backend=cnt)
    for seed in (0, 1, 2):
        x, x_ref = leaf_pair(rand(seed, 5, 6) + seed)
        out, expected = model(x), ref(x_ref)
        assert_same(out, expected)
        out.sum().backward()
        expected.sum().backward()
        assert_same(x.grad, x_ref.grad)
        assert_module_state(model, ref)  # mean, var updated in place; steps counted
        if seed == 0:
            assert cnt.frame_count == 1
            first = Snapshot(cnt)
    assert model.steps == ref.steps == (3 if count else 0)
    if count:
        # as in Dynamo (torch.compile gives one frame per call here too): an int attribute of
        # a module is specialized, so each new `self.steps` value fails the guard and compiles once
        assert cnt.frame_count == 3
        guards = [e.guard.source for e in rewrite.dispatcher_of(model.forward).entries]
        assert all("steps" in g for g in guards)
    else:
        first.assert_no_recompile()
    assert_one_graph(probe.forward, rand(0, 5, 6))


# ---------------------------------------------------------------- 6. training loop


def _train(model, ref, make_opt, batches, loss_fn):
    cnt = CompileCounter()
    jit(model, backend=cnt)
    opt, opt_ref = make_opt(model.parameters()), make_opt(ref.parameters())
    for step, (x, y) in enumerate(batches):
        losses = []
        for m, o in ((model, opt), (ref, opt_ref)):
            o.zero_grad()
            torch.manual_seed(step)
            loss = loss_fn(m, x, y)
            loss.backward()
            o.step()
            losses.append(loss)
        assert_same(losses[0], losses[1])
        assert_module_state(model, ref)  # parameters after the step, grads, buffers
        if step == 0:
            assert cnt.frame_count == 1
            first = Snapshot(cnt)
    first.assert_no_recompile()
    assert_same(opt.state_dict(), opt_ref.state_dict())


def test_training_steps_gpt_adamw():
    torch.manual_seed(0)
    model = TinyGPT().train()
    ref = copy.deepcopy(model)
    batches = [(tokens(s, 2, 8, vocab=32), tokens(s + 10, 2, 8, vocab=32)) for s in range(3)]
    _train(model, ref, lambda ps: torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.1), batches,
           lambda m, x, y: m(x, y)[1])


def test_training_steps_cnn_sgd_momentum():
    torch.manual_seed(0)
    model = SmallCNN().train()
    ref = copy.deepcopy(model)
    batches = [(rand(s, 4, 3, 8, 8), (torch.tensor([0, 1, 2, 3]) + s) % 5) for s in range(3)]
    _train(model, ref, lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9), batches,
           lambda m, x, y: F.cross_entropy(m(x), y))
