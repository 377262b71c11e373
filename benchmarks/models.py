"""Real models through rewrite.jit and torch.compile, side by side: graphs, breaks, compile
time and steady-state time per call.

Run: .venv/bin/python benchmarks/models.py

The models are those of tests/test_models.py (an MLP with LayerNorm and GELU, a small CNN
with BatchNorm in train mode, a GPT-style block stack with causal attention and tied
weights, top-k/top-p logits filtering, a module updating buffers in place). Graph and break
counts come from `rewrite.explain` and `torch._dynamo.explain`; first-call time is trace +
compile + run after a reset; steady-state time is the best of several timed runs. Both
compilers use a pass-through backend (rewrite: `python`, the default on CPU;
torch.compile: `backend="eager"`), so the times compare the two front ends' costs, not
kernels.
"""
from __future__ import annotations

import copy
import os
import platform
import sys
import time
import timeit

os.environ.setdefault("REWRITE_PERSISTENT_CACHE", "off")  # (first calls traced: warm starts are warm_start.py's)

import torch
import torch._dynamo

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))

import rewrite  # noqa: E402
from test_models import MLP, RunningNorm, SmallCNN, TinyGPT, filter_logits  # noqa: E402


def cases():
    torch.manual_seed(0)
    gpt = TinyGPT()
    return [
        ("MLP + LayerNorm + GELU", MLP().eval(), (torch.randn(32, 16),)),
        ("CNN + BatchNorm (train)", SmallCNN().train(), (torch.randn(8, 3, 8, 8),)),
        ("GPT blocks (causal, tied)", gpt.eval(), (torch.randint(0, 32, (4, 8)),)),
        ("top-k/top-p filtering", filter_logits, (torch.randn(8, 50), 10, 0.9, 0.8)),
        ("buffers updated in place", RunningNorm(8, count=False).train(), (torch.randn(16, 8),)),
    ]


def steady_us(fn, args, number=200, repeat=5) -> float:
    fn(*args)
    return min(timeit.repeat(lambda: fn(*args), number=number, repeat=repeat)) / number * 1e6


def first_ms(make, args) -> float:
    fn = make()
    t0 = time.perf_counter()
    fn(*args)
    return (time.perf_counter() - t0) * 1e3


def main():
    print(f"rewrite on real models -- {time.strftime('%Y-%m-%d')}, Python {platform.python_version()}, "
          f"torch {torch.__version__}, {platform.machine()}\n")
    head = f"{'model':28} {'graphs':>7} {'breaks':>7} {'dyn g/b':>8} {'1st ms':>8} {'dyn 1st':>8} " \
           f"{'eager us':>9} {'jit us':>8} {'dyn us':>8}"
    print(head)
    for name, model, args in cases():
        report = rewrite.explain(copy.deepcopy(model) if isinstance(model, torch.nn.Module) else model)(*args)
        torch._dynamo.reset()
        dyn = torch._dynamo.explain(copy.deepcopy(model) if isinstance(model, torch.nn.Module) else model)(*args)

        def make_jit():
            rewrite.reset()
            m = copy.deepcopy(model) if isinstance(model, torch.nn.Module) else model
            return rewrite.jit(m) if isinstance(m, torch.nn.Module) else rewrite.jit(_copy_fn(m))

        def make_dyn():
            torch._dynamo.reset()
            m = copy.deepcopy(model) if isinstance(model, torch.nn.Module) else model
            return torch.compile(m, backend="eager")

        t_first, d_first = first_ms(make_jit, args), first_ms(make_dyn, args)
        eager = copy.deepcopy(model) if isinstance(model, torch.nn.Module) else model
        jitted, compiled = make_jit(), make_dyn()
        t_eager, t_jit, t_dyn = steady_us(eager, args), steady_us(jitted, args), steady_us(compiled, args)
        print(f"{name:28} {report.graph_count:>7} {report.graph_break_count:>7} "
              f"{f'{dyn.graph_count}/{dyn.graph_break_count}':>8} {t_first:>8.1f} {d_first:>8.1f} "
              f"{t_eager:>9.1f} {t_jit:>8.1f} {t_dyn:>8.1f}")


def _copy_fn(fn):
    import types
    return types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)


if __name__ == "__main__":
    main()
