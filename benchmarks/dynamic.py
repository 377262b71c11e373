"""Dynamic shapes: compiles over a sequence of sizes and the cost of the recompile that makes
a size dynamic, rewrite.jit vs torch.compile(backend="eager"), side by side in one process.

Run: .venv/bin/python benchmarks/dynamic.py

For each case the function is called with 10 different batch sizes (then the first again);
the table shows how many times each compiler compiled, and the wall time of the second call
(the recompile for a new size, where both make the size dynamic) and of the third (a new
size served by the dynamic entry, so: eager's time plus the hit path), medians over several
fresh runs.
"""
from __future__ import annotations

import os
import platform
import statistics
import time
import types

os.environ.setdefault("REWRITE_PERSISTENT_CACHE", "off")  # (first calls traced: warm starts are warm_start.py's)

import torch
import torch._dynamo
import torch.nn.functional as F

import rewrite

# one intra-op thread: on this 2-core machine torch's thread pool costs ~40 ms whenever a new
# size reaches a matmul, which would drown what is compared here
torch.set_num_threads(1)

SIZES = [2, 3, 5, 8, 13, 21, 34, 55, 89, 144]


def mlp(x, w1, w2):
    return F.relu(x @ w1).softmax(-1) @ w2


def attention(x, wq, wk, wv):
    b, t, c = x.shape
    q, k, v = x @ wq, x @ wk, x @ wv
    att = (q @ k.transpose(-2, -1)) / c ** 0.5
    mask = torch.tril(torch.ones(t, t)) == 0
    return att.masked_fill(mask, float("-inf")).softmax(-1) @ v


CASES = [
    ("MLP, batch size varies", mlp, lambda n: (torch.randn(n, 32), torch.randn(32, 64), torch.randn(64, 8))),
    ("attention, sequence varies", attention,
     lambda n: (torch.randn(2, min(n, 64), 16), torch.randn(16, 16), torch.randn(16, 16), torch.randn(16, 16))),
]


def fresh(fn):
    return types.FunctionType(fn.__code__.replace(co_name=f"{fn.__name__}_{time.perf_counter_ns()}"),
                              fn.__globals__, fn.__name__)


class Count:
    def __init__(self):
        self.n = 0

    def __call__(self, gm, example_inputs):
        self.n += 1
        return gm.forward


def timed(fn, args) -> float:
    t0 = time.perf_counter()
    fn(*args)
    return (time.perf_counter() - t0) * 1e3


def run_rewrite(fn, make):
    f = rewrite.jit(fresh(fn))
    times = [timed(f, make(n)) for n in SIZES]
    f(*make(SIZES[0]))
    return rewrite.dispatcher_of(f).compiles, times


def run_dynamo(fn, make):
    torch._dynamo.reset()
    count = Count()
    f = torch.compile(fresh(fn), backend=count)
    times = [timed(f, make(n)) for n in SIZES]
    f(*make(SIZES[0]))
    return count.n, times


def main():
    print(f"dynamic shapes -- {time.strftime('%Y-%m-%d')}, Python {platform.python_version()}, torch {torch.__version__}, "
          f"{platform.machine()}\nsizes: {SIZES}\n")
    print(f"{'case':30} {'compiles':>9} {'dynamo':>7} {'recompile ms':>13} {'dynamo':>8} {'new size ms':>12} {'dynamo':>8}")
    for name, fn, make in CASES:
        ours, theirs = [], []
        for _ in range(5):
            ours.append(run_rewrite(fn, make))
            theirs.append(run_dynamo(fn, make))
        n_ours, n_theirs = ours[0][0], theirs[0][0]
        re_ours = statistics.median(t[1][1] for t in ours)
        re_theirs = statistics.median(t[1][1] for t in theirs)
        hit_ours = statistics.median(t[1][2] for t in ours)
        hit_theirs = statistics.median(t[1][2] for t in theirs)
        print(f"{name:30} {n_ours:>9} {n_theirs:>7} {re_ours:>13.2f} {re_theirs:>8.2f} {hit_ours:>12.3f} "
              f"{hit_theirs:>8.3f}")


if __name__ == "__main__":
    main()
