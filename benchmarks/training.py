"""Training steps under rewrite.jit beside torch.compile (backend="eager") and eager.

Run: .venv/bin/python benchmarks/training.py

One step = `opt.zero_grad(); loss = ...; loss.backward(); opt.step()`, jitted whole. Three
workloads: an MLP with Adam, a small GPT written out (embeddings, two pre-norm blocks with
scaled_dot_product_attention, tied head, cross-entropy) with AdamW, and a transformers GPT-2
with `labels` (the loss computed by the model, dropout on) with AdamW. Printed side by side,
measured in one process: graphs, graph breaks and ops (rewrite.explain / torch._dynamo.explain),
whole-call eager entries, the first step (fresh model and optimizer: it compiles), and the
steady-state step against eager (the three timed in turn, best of several rounds). The last
column says whether rewrite's parameters after the steps are bit-equal to an eager twin's.
"""
from __future__ import annotations

import copy
import os
import platform
import time

os.environ.setdefault("REWRITE_PERSISTENT_CACHE", "off")  # (first calls traced: warm starts are warm_start.py's)

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
import torch._dynamo  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import rewrite  # noqa: E402
from rewrite import dispatch  # noqa: E402


class Block(torch.nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.qkv, self.proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        self.fc, self.out = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class SmallGPT(torch.nn.Module):
    def __init__(self, vocab=128, d=64, heads=4, layers=2, ctx=64):
        super().__init__()
        self.tok, self.pos = torch.nn.Embedding(vocab, d), torch.nn.Embedding(ctx, d)
        self.blocks = torch.nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = torch.nn.LayerNorm(d)

    def forward(self, ids, targets):
        x = self.tok(ids) + self.pos(torch.arange(ids.shape[1], device=ids.device))
        for block in self.blocks:
            x = block(x)
        logits = self.ln(x) @ self.tok.weight.T
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


def mlp_workload():
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256),
                                torch.nn.ReLU(), torch.nn.Linear(256, 10))
    return model, torch.optim.Adam, (torch.randn(64, 64), torch.randint(0, 10, (64,)))


def gpt_workload():
    ids = torch.randint(0, 128, (4, 32))
    return SmallGPT(), torch.optim.AdamW, (ids, ids.roll(-1, 1))


def gpt2_workload():
    import transformers
    transformers.logging.set_verbosity_error()
    cfg = transformers.GPT2Config(n_layer=2, n_head=2, n_embd=64, vocab_size=128, n_positions=64)
    ids = torch.randint(0, 128, (4, 32))
    return transformers.GPT2LMHeadModel(cfg).train(), torch.optim.AdamW, (ids,)


def loss_of(model, batch):
    if len(batch) == 1:  # transformers: the model computes the loss from labels
        return model(input_ids=batch[0], labels=batch[0]).loss
    if isinstance(model, SmallGPT):
        return model(*batch)
    return F.cross_entropy(model(batch[0]), batch[1])


def step(model, opt, batch):
    opt.zero_grad()
    loss = loss_of(model, batch)
    loss.backward()
    opt.step()
    return loss


def fresh(make):
    torch.manual_seed(0)
    model, opt_cls, batch = make()
    return model, opt_cls(model.parameters(), lr=1e-3), batch


def timed_ms(fn, *args) -> float:
    t0 = time.perf_counter()
    fn(*args)
    return (time.perf_counter() - t0) * 1e3


def steady_ms(runs, n=10, rounds=5) -> list:
    """Best time per step (ms) of each (fn, model, opt, batch), timed in turn round after round."""
    best = [float("inf")] * len(runs)
    for _ in range(rounds):
        for i, (fn, model, opt, batch) in enumerate(runs):
            t0 = time.perf_counter()
            for _ in range(n):
                fn(model, opt, batch)
            best[i] = min(best[i], (time.perf_counter() - t0) / n)
    return [t * 1e3 for t in best]


def bit_equal(make, steps=4) -> bool:
    (m1, o1, batch), (m2, o2, _) = fresh(make), fresh(make)
    compiled = rewrite.jit(copy_of(step))
    for i in range(steps):
        torch.manual_seed(100 + i)
        a = compiled(m1, o1, batch)
        torch.manual_seed(100 + i)
        b = step(m2, o2, batch)
        if not torch.equal(a, b):
            return False
    return all(torch.equal(p, q) for p, q in zip(m1.parameters(), m2.parameters()))


def copy_of(fn):
    """A fresh function object over `step`'s code: each workload compiles its own."""
    import types
    return types.FunctionType(fn.__code__, fn.__globals__, fn.__name__)


def warm_up():
    x = torch.ones(2)
    rewrite.jit(lambda t: t * 2 + 1)(x)
    torch.compile(lambda t: t * 2 + 1, backend="eager")(x)
    torch._dynamo.reset()


def main():
    torch.set_num_threads(1)
    print(f"training steps -- {time.strftime('%Y-%m-%d')}, Python {platform.python_version()}, "
          f"torch {torch.__version__}, {platform.machine()}\n")
    print(f"{'workload':10} {'':14} {'graphs':>6} {'breaks':>6} {'ops':>5} {'eager entries':>13} "
          f"{'1st step ms':>11} {'steady ms':>9} {'eager ms':>8} {'bit-equal':>9}")
    warm_up()
    for name, make in (("mlp", mlp_workload), ("small-gpt", gpt_workload), ("gpt2", gpt2_workload)):
        # rewrite: the first step of a fresh model compiles
        model, opt, batch = fresh(make)
        ours = rewrite.jit(copy_of(step))
        seen: list = []
        dispatch.OBSERVERS.append(seen)
        first = timed_ms(ours, model, opt, batch)
        dispatch.OBSERVERS.remove(seen)
        fallbacks = sum(e.reason is not None for _, e in seen)
        ours(model, opt, batch)  # (the second step reads the optimizer state the first made: compiles once more)
        m, o, b = fresh(make)
        out = rewrite.explain(copy_of(step))(m, o, b)
        out = rewrite.explain(copy_of(step))(m, o, b)  # (the steady-state step's graphs)
        # torch.compile
        torch._dynamo.reset()
        their_model, their_opt, _ = fresh(make)
        theirs = torch.compile(copy_of(step), backend="eager")
        their_first = timed_ms(theirs, their_model, their_opt, batch)
        theirs(their_model, their_opt, batch)
        m, o, b = fresh(make)
        ex = torch._dynamo.explain(copy_of(step))(m, o, b)
        eager_model, eager_opt, _ = fresh(make)
        for fn, mm, oo in ((step, eager_model, eager_opt), (theirs, their_model, their_opt), (ours, model, opt)):
            fn(mm, oo, batch)
        t_eager, t_ours, t_theirs = steady_ms([(step, eager_model, eager_opt, batch), (ours, model, opt, batch),
                                               (theirs, their_model, their_opt, batch)])
        same = "yes" if bit_equal(make) else "NO"
        print(f"{name:10} {'rewrite.jit':14} {out.graph_count:6d} {out.graph_break_count:6d} {out.op_count:5d} "
              f"{fallbacks:13d} {first:11.1f} {t_ours:9.2f} {t_eager:8.2f} {same:>9}")
        print(f"{'':10} {'torch.compile':14} {ex.graph_count:6d} {ex.graph_break_count:6d} {ex.op_count:5d} "
              f"{'-':>13} {their_first:11.1f} {t_theirs:9.2f} {t_eager:8.2f} {'':>9}")
        torch._dynamo.reset()


if __name__ == "__main__":
    main()
