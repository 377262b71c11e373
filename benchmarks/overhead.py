"""Call overhead of a cache hit and first-call compile latency: rewrite.jit vs torch.compile.

Run: .venv/bin/python benchmarks/overhead.py

Everything is measured side by side in one process. The hit path is timed with `timeit`
on the call itself (best of 15 repeats, the candidates' repeats interleaved); compile latency is the first call after a
reset, the median of several fresh compiles. torch.compile uses backend="eager" so only
Dynamo's own cost is compared (no Inductor).
"""
from __future__ import annotations

import os
import platform
import statistics
import time
import timeit
import types

os.environ.setdefault("REWRITE_PERSISTENT_CACHE", "off")  # (first calls traced: warm starts are warm_start.py's)

import torch
import torch._dynamo

import rewrite
from rewrite import jit


def add_one(x):
    return x + 1


def four_ops(x, y):
    z = x * 2 + y
    return z.relu().sum(dim=-1)


_fresh_count = 0


def fresh(fn):
    """A new function over a new code object (renamed, so no cache or rewrite is shared)."""
    global _fresh_count
    _fresh_count += 1
    code = fn.__code__.replace(co_name=f"{fn.__name__}_{_fresh_count}")
    return types.FunctionType(code, fn.__globals__, code.co_name)


def side_by_side(fns, args, number=100_000, repeat=15, round_robin=False) -> list[float]:
    """µs per call of each of `fns`, their repeats interleaved (a noisy machine drifts: each
    repeat times every candidate once, and each takes its best). `round_robin`: `args` is a
    list of single arguments, called in turn."""
    if round_robin:
        stmt, per = "for x in xs: fn(x)", len(args)
    else:
        stmt, per = "fn(" + ", ".join(f"xs[{i}]" for i in range(len(args))) + ")", 1
    timers = [timeit.Timer(stmt, globals={"fn": fn, "xs": args}) for fn in fns]
    best = [float("inf")] * len(fns)
    for _ in range(repeat):
        for i, t in enumerate(timers):
            best[i] = min(best[i], t.timeit(number))
    return [b / number / per * 1e6 for b in best]


def first_call_ms(make, args, runs=9) -> float:
    times = []
    for _ in range(runs):
        fn = make()
        t0 = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def make_jit(fn):
    def make():
        rewrite.reset()
        return jit(fresh(fn))
    return make


def make_dynamo(fn):
    def make():
        torch._dynamo.reset()
        return torch.compile(fresh(fn), backend="eager")
    return make


def main():
    torch.set_num_threads(1)
    x4 = torch.randn(4, 4)
    x, y = torch.randn(4, 8), torch.randn(8)
    cases = [("x + 1 (4x4)", add_one, (x4,)), ("4-op function", four_ops, (x, y))]
    print(f"rewrite overhead benchmark -- {time.strftime('%Y-%m-%d')}, Python {platform.python_version()}, "
          f"torch {torch.__version__}, {platform.machine()}\n")
    print("hit path (µs per call)")
    print(f"{'case':16} {'direct':>8} {'@jit':>8} {'dynamo':>8} {'jit-direct':>11} {'dynamo-direct':>14} {'ratio':>7}")
    for name, fn, args in cases:
        direct = fresh(fn)
        jitted = jit(fresh(fn))
        dynamo = torch.compile(fresh(fn), backend="eager")
        for f in (jitted, dynamo):
            f(*args), f(*args)
        t_direct, t_jit, t_dyn = side_by_side((direct, jitted, dynamo), args)
        over_jit, over_dyn = t_jit - t_direct, t_dyn - t_direct
        print(f"{name:16} {t_direct:8.3f} {t_jit:8.3f} {t_dyn:8.3f} {over_jit:11.3f} {over_dyn:14.3f} "
              f"{over_dyn / max(over_jit, 1e-9):6.1f}x")
    many_entries_and_arguments()
    print("\nfirst call: trace + compile + run (ms, median of 9)")
    print(f"{'case':16} {'@jit':>8} {'dynamo':>8} {'ratio':>7}")
    for name, fn, args in cases:
        t_jit = first_call_ms(make_jit(fn), args)
        t_dyn = first_call_ms(make_dynamo(fn), args)
        print(f"{name:16} {t_jit:8.2f} {t_dyn:8.2f} {t_dyn / t_jit:6.1f}x")
    t0 = time.perf_counter()
    for _ in range(50):
        jit(fresh(four_ops))
    print(f"\n@jit decoration (bytecode rewrite) of the 4-op function: {(time.perf_counter() - t0) / 50 * 1e3:.2f} ms")
    print("\nwrap + first call in a fresh process, lazy imports included (ms, median of 3 processes)")
    for kind in ("jit", "dynamo"):
        print(f"  {kind:8} {statistics.median(fresh_process_ms(kind) for _ in range(3)):8.1f}")


def twenty(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19):
    """Every argument guarded, no op: the cost measured is the hit path's alone."""
    return (a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19)


def many_entries_and_arguments():
    """A hit on any of 8 entries (calls round robin over 8 sizes, each its own static entry)
    and an entry with 20 tensor arguments, against torch's own batched check of 20 tensors."""
    from torch._C._dynamo.guards import TensorGuards
    torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 16)
    xs = [torch.randn(n) for n in range(2, 10)]
    direct = fresh(add_one)
    jitted = jit(fresh(add_one), dynamic=False)
    dynamo = torch.compile(fresh(add_one), backend="eager", dynamic=False)
    for f in (jitted, dynamo):
        for x in xs:
            f(x), f(x)
    assert len(rewrite.dispatcher_of(jitted).entries) == 8
    t_direct, t_jit, t_dyn = side_by_side((direct, jitted, dynamo), xs, number=20_000, round_robin=True)
    print("\nhit on any of 8 entries, round robin (µs per call)")
    print(f"{'case':16} {'direct':>8} {'@jit':>8} {'dynamo':>8} {'jit-direct':>11} {'dynamo-direct':>14} {'ratio':>7}")
    print(f"{'x + 1, 8 sizes':16} {t_direct:8.3f} {t_jit:8.3f} {t_dyn:8.3f} {t_jit - t_direct:11.3f} "
          f"{t_dyn - t_direct:14.3f} {(t_dyn - t_direct) / max(t_jit - t_direct, 1e-9):6.1f}x")
    args = tuple(torch.randn(4) for _ in range(20))
    direct = fresh(twenty)
    jitted = jit(fresh(twenty))
    dynamo = torch.compile(fresh(twenty), backend="eager")
    for f in (jitted, dynamo):
        f(*args), f(*args)
    checker = TensorGuards(*args, dynamic_dims_sizes=[list(a.shape) for a in args],
                           dynamic_dims_strides=[list(a.stride()) for a in args])
    assert checker.check(*args)
    t_direct, t_jit, t_dyn, t_check = side_by_side((direct, jitted, dynamo, checker.check), args, number=50_000)
    print("\n20 tensor arguments (µs per call; 'batched check' is torch's TensorGuards.check of the 20)")
    print(f"{'case':16} {'direct':>8} {'@jit':>8} {'dynamo':>8} {'jit-direct':>11} {'dynamo-direct':>14} "
          f"{'batched check':>14} {'jit-direct-check':>17}")
    print(f"{'return the 20':16} {t_direct:8.3f} {t_jit:8.3f} {t_dyn:8.3f} {t_jit - t_direct:11.3f} "
          f"{t_dyn - t_direct:14.3f} {t_check:14.3f} {t_jit - t_direct - t_check:17.3f}")


FRESH = """
import time, torch, rewrite
def f(x):
    return x * 2 + 1
x = torch.randn(4)
t0 = time.perf_counter()  # from wrapping the function (torch.compile imports torch._dynamo) to its first result
g = rewrite.jit(f) if KIND == "jit" else torch.compile(f, backend="eager")
g(x)
print((time.perf_counter() - t0) * 1e3)
"""


def fresh_process_ms(kind: str) -> float:
    """What a user's first compiled call costs in a new process (after `import torch, rewrite`)."""
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-c", f"KIND = {kind!r}" + FRESH], capture_output=True, text=True,
                         check=True, cwd=__file__.rsplit("/", 2)[0])
    return float(out.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
