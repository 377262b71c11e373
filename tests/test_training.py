"""Training steps (issue 19, item 1): `zero_grad()`, `backward()` and `optimizer.step()` in
one jitted step. The step graph breaks at `zero_grad` (torch marks it `_disable_dynamo`) and
at `backward()`; the optimizer's `step` -- its `record_function` block, the `graph_break()`
torch.optim makes for AOTAutograd inside a try/finally, the state dict keyed by parameters --
is one graph. Parameters, losses and optimizer state are compared with an eager twin bit for
bit (the optimizers' eager path is traced, so the arithmetic is eager's)."""
import copy

import pytest
import torch

import rewrite
from conftest import CompileCounter, eager_copy

OPTIMIZERS = {
    "sgd": (torch.optim.SGD, {}),
    "sgd-momentum-nesterov-wd": (torch.optim.SGD, dict(momentum=0.9, nesterov=True, weight_decay=0.01)),
    "sgd-foreach": (torch.optim.SGD, dict(momentum=0.9, foreach=True)),
    "adam": (torch.optim.Adam, {}),
    "adam-foreach": (torch.optim.Adam, dict(foreach=True)),
    "adam-amsgrad": (torch.optim.Adam, dict(amsgrad=True)),
    "adamw": (torch.optim.AdamW, dict(foreach=False)),
    "adamw-foreach": (torch.optim.AdamW, dict(foreach=True)),
    "rmsprop": (torch.optim.RMSprop, {}),
    "adagrad": (torch.optim.Adagrad, {}),
}


def mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


def train_step(model, opt, x, y):
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    return loss


def twins(name):
    cls, kw = OPTIMIZERS[name]
    model = mlp()
    twin = copy.deepcopy(model)
    return (model, cls(model.parameters(), lr=0.01, **kw)), (twin, cls(twin.parameters(), lr=0.01, **kw))


def assert_state_equal(opt, twin_opt):
    a, b = opt.state_dict(), twin_opt.state_dict()
    assert a["param_groups"] == b["param_groups"]
    assert list(a["state"]) == list(b["state"])
    for k in a["state"]:
        assert list(a["state"][k]) == list(b["state"][k])
        for field, value in a["state"][k].items():
            other = b["state"][k][field]
            assert torch.equal(value, other) if isinstance(value, torch.Tensor) else value == other, field


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_training_step_matches_eager_bit_for_bit(name):
    (model, opt), (twin, twin_opt) = twins(name)
    step = rewrite.jit(eager_copy(train_step))
    torch.manual_seed(1)
    for _ in range(4):
        x, y = torch.randn(32, 8), torch.randn(32, 4)
        assert torch.equal(step(model, opt, x, y), train_step(twin, twin_opt, x, y))
        for p, q in zip(model.parameters(), twin.parameters()):
            assert torch.equal(p, q) and torch.equal(p.grad, q.grad)
    assert_state_equal(opt, twin_opt)


@pytest.mark.parametrize("name", ["sgd", "adam-foreach", "adamw"])
def test_training_step_breaks_only_at_zero_grad_and_backward(name):
    (model, opt), _ = twins(name)
    x, y = torch.randn(32, 8), torch.randn(32, 4)
    for _ in range(2):  # the first step makes the optimizer's state, the second reads it
        out = rewrite.explain(train_step)(model, opt, x, y)
        assert out.graph_count == 2 and not out.eager_reasons, out.break_reasons
        assert [r.reason for r in out.break_reasons] == [
            "call to torch.optim.optimizer.Optimizer.zero_grad, marked torch._disable_dynamo",
            "Tensor.backward() (autograd or storage side effect)"]
        forward, update = out.ops_per_graph
        assert "mse_loss" in forward and "_record_function_enter_new.default" in update


def test_training_steps_hit_the_cache_once_the_state_exists():
    (model, opt), (twin, twin_opt) = twins("adam")
    counter = CompileCounter()
    step = rewrite.jit(eager_copy(train_step), backend=counter)
    x, y = torch.randn(32, 8), torch.randn(32, 4)
    for i in range(6):
        step(model, opt, x, y)
        train_step(twin, twin_opt, x, y)
        if i == 1:
            compiled = counter.frame_count
    assert counter.frame_count == compiled  # steps 3..6 compile nothing new
    assert all(torch.equal(p, q) for p, q in zip(model.parameters(), twin.parameters()))


@pytest.mark.parametrize("name", ["sgd-foreach", "adam", "adamw-foreach"])
def test_optimizer_step_is_one_graph_under_fullgraph(name):
    """torch.optim's `graph_break()` calls (hints for AOTAutograd) do not break rewrite's graph."""
    (model, opt), (twin, twin_opt) = twins(name)

    def update(opt):
        opt.step()

    step = rewrite.jit(eager_copy(update), fullgraph=True)
    torch.manual_seed(2)
    for _ in range(3):
        x = torch.randn(4, 8)
        for m, o in ((model, opt), (twin, twin_opt)):
            o.zero_grad()
            m(x).sum().backward()
        step(opt)
        update(twin_opt)
        assert all(torch.equal(p, q) for p, q in zip(model.parameters(), twin.parameters()))
    assert_state_equal(opt, twin_opt)


def test_a_graph_break_the_user_calls_still_breaks_inside_torch_optim_code_paths():
    def f(x):
        y = x * 2
        torch._dynamo.graph_break()
        return y + 1

    out = rewrite.explain(f)(torch.ones(3))
    assert out.graph_count == 2 and out.graph_break_count == 1
    x = torch.randn(3)
    assert torch.equal(rewrite.jit(eager_copy(f))(x), f(x))


def test_lr_change_recompiles_and_steps_as_eager():
    (model, opt), (twin, twin_opt) = twins("sgd")
    step = rewrite.jit(eager_copy(train_step))
    x, y = torch.randn(32, 8), torch.randn(32, 4)
    for lr in (0.01, 0.01, 0.05, 0.05):
        for o in (opt, twin_opt):
            o.param_groups[0]["lr"] = lr
        step(model, opt, x, y)
        train_step(twin, twin_opt, x, y)
        assert all(torch.equal(p, q) for p, q in zip(model.parameters(), twin.parameters()))


def test_clip_grad_norm_in_the_step():
    (model, opt), (twin, twin_opt) = twins("sgd")

    def step(model, opt, x, y):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        opt.step()
        return loss, norm

    compiled = rewrite.jit(eager_copy(step))
    for _ in range(3):
        x, y = torch.randn(32, 8), torch.randn(32, 4)
        a, b = compiled(model, opt, x, y), step(twin, twin_opt, x, y)
        assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
        assert all(torch.equal(p, q) for p, q in zip(model.parameters(), twin.parameters()))


# -- item 2: mixed precision, dropout, requires_grad_, autograd.grad -----------------------------------------
def test_autocast_and_grad_scaler_step_matches_eager():
    def make():
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Dropout(0.1), torch.nn.Linear(8, 2))
        return model, torch.optim.AdamW(model.parameters(), lr=0.01), torch.amp.GradScaler("cpu", init_scale=16.0)

    def step(model, opt, scaler, x):
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = model(x).float().pow(2).mean()
        scaler.scale(loss).backward()
        scaler.step(opt)  # its found-inf test breaks at its branch; the optimizer's step compiles
        scaler.update()
        return loss

    (m1, o1, s1), (m2, o2, s2) = make(), make()
    compiled = rewrite.jit(eager_copy(step))
    for i in range(4):
        x = torch.randn(4, 8)
        torch.manual_seed(10 + i)
        a = compiled(m1, o1, s1, x)
        torch.manual_seed(10 + i)
        b = step(m2, o2, s2, x)
        assert torch.equal(a, b) and s1.get_scale() == s2.get_scale()
        assert all(torch.equal(p, q) for p, q in zip(m1.parameters(), m2.parameters()))
    out = rewrite.explain(eager_copy(step))(m1, o1, s1, torch.randn(4, 8))
    assert not out.eager_reasons, out.eager_reasons


def test_requires_grad_on_inputs_and_intermediates():
    def f(x, w):
        x.requires_grad_()
        y = (x * w).sum()
        z = x.detach().requires_grad_(True)
        return y, y.requires_grad, z.requires_grad, z.is_leaf

    compiled = rewrite.jit(eager_copy(f), fullgraph=True)
    w = torch.randn(3)
    for _ in range(2):
        a, b = torch.randn(3), None
        b = a.clone()
        got, expected = compiled(a, w), f(b, w)
        assert got[1:] == expected[1:] and a.requires_grad and b.requires_grad
        got[0].backward(), expected[0].backward()
        assert torch.equal(a.grad, b.grad)


def test_autograd_grad_in_the_step_breaks_there_only():
    def f(x, w):
        y = ((x * w) ** 2).sum()
        (g,) = torch.autograd.grad(y, w, create_graph=True)
        return (g * g).sum()

    x = torch.randn(4)
    w = torch.randn(4, requires_grad=True)
    out = rewrite.explain(eager_copy(f))(x, w)
    assert out.graph_count == 2 and out.graph_break_count == 1 and not out.eager_reasons
    torch.testing.assert_close(rewrite.jit(eager_copy(f))(x, w), f(x, w))


def test_dropout_in_training_mode_draws_what_eager_draws():
    drop = torch.nn.Dropout(0.5).train()

    def f(x):
        return drop(x) * 2 + drop(x)

    compiled = rewrite.jit(eager_copy(f), fullgraph=True)
    x = torch.randn(64)
    for seed in range(3):
        torch.manual_seed(seed)
        a = compiled(x)
        torch.manual_seed(seed)
        assert torch.equal(a, f(x))


# -- item 3: a transformers training step -------------------------------------------------------------------------
def test_transformers_gpt2_training_step_with_labels_is_bit_equal():
    import os
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=100, n_positions=64)
    model = transformers.GPT2LMHeadModel(cfg).train()  # dropout on
    twin = copy.deepcopy(model)
    opt, twin_opt = (torch.optim.AdamW(m.parameters(), lr=1e-3) for m in (model, twin))

    def step(model, opt, ids):
        opt.zero_grad()
        out = model(input_ids=ids, labels=ids)  # the loss computed by the model (logger.warning_once on the way)
        out.loss.backward()
        opt.step()
        return out.loss

    compiled = rewrite.jit(eager_copy(step))
    for i in range(4):
        ids = torch.randint(0, 100, (2, 16))
        torch.manual_seed(100 + i)
        a = compiled(model, opt, ids)
        torch.manual_seed(100 + i)
        b = step(twin, twin_opt, ids)
        assert torch.equal(a, b)
        for p, q in zip(model.parameters(), twin.parameters()):
            assert torch.equal(p, q) and torch.equal(p.grad, q.grad)
    out = rewrite.explain(eager_copy(step))(model, opt, torch.randint(0, 100, (2, 16)))
    assert out.graph_count == 2 and not out.eager_reasons, out.break_reasons
    assert [r.reason for r in out.break_reasons][1] == "Tensor.backward() (autograd or storage side effect)"
    forward, update = out.ops_per_graph
    assert "cross_entropy" in forward and "embedding" in forward


def test_transformers_gradient_checkpointing_is_traced_as_checkpoint_nodes():
    import os
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=100, n_positions=64)
    model = transformers.GPT2LMHeadModel(cfg).train()
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})  # (a forward hook too)
    twin = copy.deepcopy(model)
    opt, twin_opt = (torch.optim.AdamW(m.parameters(), lr=1e-3) for m in (model, twin))

    def step(model, opt, ids):
        opt.zero_grad()
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        return loss

    compiled = rewrite.jit(eager_copy(step))
    ids = torch.randint(0, 100, (2, 16))
    for i in range(3):
        torch.manual_seed(100 + i)
        a = compiled(model, opt, ids)
        torch.manual_seed(100 + i)
        b = step(twin, twin_opt, ids)
        assert torch.equal(a, b)
        assert all(torch.equal(p, q) for p, q in zip(model.parameters(), twin.parameters()))
    out = rewrite.explain(eager_copy(step))(model, opt, ids)
    assert out.graph_count == 2 and not out.eager_reasons, out.break_reasons
    assert out.ops_per_graph[0].count("checkpoint") == 2  # one per layer
