"""A graph break in one block of a timm-like model: per-call time with torch's own frames
routed (nn.Sequential.forward gets a jitted copy of its own, issue 44) and without (as
before: the whole `self.stages(x)` call ran eagerly), beside eager and torch.compile, in one
run.

Run: .venv/bin/python benchmarks/library_frames.py

The model: a stem, `self.stages` (an nn.Sequential of 3 stages, each an nn.Sequential of 3
blocks: Linear, GELU, LayerNorm, a residual), a head; the first block of the second stage
calls `torch._dynamo.graph_break()`. "before" turns the routing of torch's frames off for
that compile (callees._library_copy handing back torch's forward as it is), which is what
rewrite did before. Also printed: how many of the model's ops ran inside graphs
(rewrite.explain).
"""
from __future__ import annotations

import copy
import os
import platform
import time
import warnings

os.environ.setdefault("REWRITE_PERSISTENT_CACHE", "off")

import torch
import torch._dynamo
import torch.nn as nn

import rewrite
from rewrite import callees

warnings.simplefilter("ignore")
torch.set_num_threads(1)
WIDTH, BATCH = 64, 8


class Block(nn.Module):
    def __init__(self, brk=False):
        super().__init__()
        self.fc = nn.Linear(WIDTH, WIDTH)
        self.norm = nn.LayerNorm(WIDTH)
        self.brk = brk

    def forward(self, x):
        y = torch.nn.functional.gelu(self.fc(x))
        if self.brk:
            torch._dynamo.graph_break()
        return x + self.norm(y) * 0.5


class Stage(nn.Module):
    def __init__(self, brk=False):
        super().__init__()
        self.down = nn.Linear(WIDTH, WIDTH)
        self.blocks = nn.Sequential(Block(brk), Block(), Block())

    def forward(self, x):
        return self.blocks(self.down(x).relu())


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Linear(WIDTH, WIDTH)
        self.stages = nn.Sequential(Stage(), Stage(brk=True), Stage())
        self.head = nn.Linear(WIDTH, 10)

    def forward(self, x):
        return self.head(self.stages(self.stem(x)).mean(0))


def per_call(fn, x, reps=300) -> float:
    """Best of 5 rounds, seconds per call (after warm-up calls: compiled by then)."""
    with torch.no_grad():
        for _ in range(5):
            fn(x)
        best = float("inf")
        for _ in range(5):
            t = time.perf_counter()
            for _ in range(reps):
                fn(x)
            best = min(best, (time.perf_counter() - t) / reps)
    return best


def rewrite_model(model, backend, routed: bool):
    made = rewrite.jit(copy.deepcopy(model), backend=backend)
    if routed:
        return made, None
    saved = callees._library_copy
    callees._library_copy = lambda fn, options: fn  # (as before: torch's forward handed back as it is)
    return made, saved


def main() -> None:
    print(f"# {time.strftime('%Y-%m-%d')} {platform.machine()} Python {platform.python_version()} "
          f"torch {torch.__version__}, batch {BATCH}, width {WIDTH}, one thread\n")
    torch.manual_seed(0)
    model = Model().eval()
    x = torch.randn(BATCH, WIDTH)
    eager = per_call(model, x)
    print(f"{'':34} {'per call':>10} {'vs eager':>9}  ops in graphs")
    print(f"{'eager':34} {eager * 1e6:>8.0f} us {1.0:>8.2f}x")
    for backend in ("python", "inductor"):
        for routed in (False, True):
            made, saved = rewrite_model(model, None if backend == "python" else backend, routed)
            try:
                t = per_call(made, x)
                with torch.no_grad():
                    explained = rewrite.explain(copy.deepcopy(model), backend=None if backend == "python"
                                                else backend)(x)
            finally:
                if saved is not None:
                    callees._library_copy = saved
            ops = sum(len(g) for g in explained.ops_per_graph)
            label = f"rewrite ({backend}), {'after' if routed else 'before'}"
            print(f"{label:34} {t * 1e6:>8.0f} us {eager / t:>8.2f}x  {ops}")
    torch._dynamo.reset()
    compiled = torch.compile(copy.deepcopy(model))
    t = per_call(compiled, x)
    print(f"{'torch.compile (inductor)':34} {t * 1e6:>8.0f} us {eager / t:>8.2f}x")


if __name__ == "__main__":
    main()
