"""What routing costs, and what it buys, when a jitted function's own frame runs eagerly.

Run: .venv/bin/python benchmarks/routed_calls.py

A fallback entry runs the function's original bytecode with each call's callable passed
through the dispatcher's router (rewrite/bytecode/route.py), so user functions it calls
compile on their own. Two workloads, each timed side by side with eager in one run:

* Python-heavy: a frame that cannot compile and makes ~200 cheap calls (builtins, list
  methods, a tiny Python helper). This is the router's pure cost: nothing to gain.
* torch-heavy: the same kind of frame calling a pointwise helper that compiles.
  torch.compile gets the same split (the frame breaks, the helper compiles): it is timed
  too.
"""
from __future__ import annotations

import os
import platform
import time
import warnings

os.environ.setdefault("REWRITE_PERSISTENT_CACHE", "off")  # (first calls traced: warm starts are warm_start.py's)

import torch

import rewrite

warnings.simplefilter("ignore")
torch.set_num_threads(1)


def small(v):
    return v + 1


def python_heavy(x, n):
    try:
        if x.sum() > 0:  # a tensor's value decides a jump inside a try: the frame runs eagerly
            x = x + 1
    except ValueError:
        pass
    acc = []
    for i in range(n):
        acc.append(small(i))
        acc.append(len(acc) + abs(-i))
    return x, max(acc)


def chain(x):
    for _ in range(8):
        x = torch.sin(x) * 1.01 + 0.5
    return x


def torch_heavy(x):
    try:
        if x.sum() > 0:
            x = x + 1
    except ValueError:
        pass
    return chain(chain(x))


def bench(fn, *args, reps=200):
    for _ in range(5):
        fn(*args)
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(reps):
            fn(*args)
        best = min(best, (time.perf_counter() - t) / reps)
    return best


def copy(fn):
    import types
    return types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)


def main():
    print(f"# {time.strftime('%Y-%m-%d')} {platform.machine()} {platform.python_version()} torch {torch.__version__}")
    x = torch.randn(64)
    eager = bench(python_heavy, x, 50)
    jitted = bench(rewrite.jit(copy(python_heavy)), x, 50)
    print(f"python-heavy fallback frame (~200 calls): eager {eager * 1e6:.1f} us, rewrite {jitted * 1e6:.1f} us, "
          f"ratio {jitted / eager:.2f}x")
    x = torch.randn(100_000)
    eager = bench(torch_heavy, x, reps=50)
    jitted = bench(rewrite.jit(copy(torch_heavy)), x, reps=50)
    tc = bench(torch.compile(copy(torch_heavy)), x, reps=50)
    print(f"torch-heavy fallback frame (its helper compiled): eager {eager * 1e6:.0f} us, rewrite {jitted * 1e6:.0f} "
          f"us ({eager / jitted:.2f}x eager's speed), torch.compile {tc * 1e6:.0f} us ({eager / tc:.2f}x)")
    route = rewrite.dispatcher_of(rewrite.jit(copy(small))).route
    for what, value in (("a builtin", len), ("a user function", small), ("a bound method", [].append)):
        route(value)
        t = time.perf_counter()
        for _ in range(100_000):
            route(value)
        print(f"router, {what}: {(time.perf_counter() - t) / 100_000 * 1e9:.0f} ns a call")


if __name__ == "__main__":
    main()
