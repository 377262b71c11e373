"""First-call cost, rewrite beside torch.compile, in one run: trace + compile + run of the first
call after a reset (and the recompile a new shape causes), median of several fresh compiles.

    python benchmarks/first_call.py          # the table
    REWRITE_LOGS=perf_hints python benchmarks/first_call.py   # where rewrite's time went, per compile

torch.compile runs with backend="eager" and rewrite with its python backend, so only the two
front ends are compared (no Inductor). The rows are issue 42's: a 4-op function, a chain of 100
ops, a 6-block GPT (inference), a CNN with BatchNorm in train mode, and the recompile of the GPT
at a new sequence length (16 -> 24). Targets: every row >= 10x torch.compile's, rows up to 100
ops >= 20x, the 100-op chain at <= 30 µs per traced op. The table runs with the persistent cache
off (first calls traced: warm starts are warm_start.py's); a last line shows the chain's first
calls with it on, as users run (the default), one after another.
"""
from __future__ import annotations

import copy
import os
import platform
import statistics
import sys
import tempfile
import time
import types

os.environ.setdefault("REWRITE_PERSISTENT_CACHE", "off")  # (first calls traced: warm starts are warm_start.py's)

import torch
import torch._dynamo

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))

import rewrite  # noqa: E402
from test_models import SmallCNN, TinyGPT  # noqa: E402

ROUNDS = 9


def four_ops(x, y):
    z = x * 2 + y
    return z.relu().sum(dim=-1)


def chain(x):
    for i in range(50):  # 100 ops (two per step)
        x = torch.relu(x) * 1.01 if i % 2 else (x + 0.5) * 0.99
    return x


def _fresh_fn(fn):
    return types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)


def _time(call) -> float:
    t0 = time.perf_counter()
    call()
    return (time.perf_counter() - t0) * 1e3


def _compiled(target, compiler: str):
    """A fresh compile of a copy of `target` (a function or a module), its compiler reset first."""
    made = copy.deepcopy(target) if isinstance(target, torch.nn.Module) else _fresh_fn(target)
    if compiler == "rewrite":
        rewrite.reset()
        return rewrite.jit(made)
    torch._dynamo.reset()
    return torch.compile(made, backend="eager")


def first_call(target, args, compiler: str) -> float:
    """ms of the first call of a fresh compile of `target`."""
    fn = _compiled(target, compiler)
    return _time(lambda: fn(*args))


def recompile(target, args, other, compiler: str) -> float:
    """ms of the call at a new shape, after a first call (a recompile: sizes dynamic from then on)."""
    fn = _compiled(target, compiler)
    fn(*args)
    return _time(lambda: fn(*other))


def median_pair(measure) -> tuple[float, float]:
    """(rewrite, torch.compile) medians over ROUNDS, the two interleaved."""
    r, t = [], []
    for _ in range(ROUNDS):
        r.append(measure("rewrite"))
        t.append(measure("torch"))
    return statistics.median(r), statistics.median(t)


def main() -> None:
    print(f"first calls, rewrite beside torch.compile(backend='eager') -- {time.strftime('%Y-%m-%d')}, "
          f"Python {platform.python_version()}, torch {torch.__version__}, {platform.machine()}, "
          f"median of {ROUNDS}\n")
    torch.manual_seed(0)
    gpt = TinyGPT(vocab=64, block_size=24, d=32, n_head=2, n_layer=6).eval()
    cnn = SmallCNN().train()
    x44, y4 = torch.randn(4, 8), torch.randn(8)
    ids16, ids24 = torch.randint(0, 64, (2, 16)), torch.randint(0, 64, (2, 24))
    rows = [
        ("first call, 4-op function", 4, lambda c: first_call(four_ops, (x44, y4), c)),
        ("first call, 100-op chain", 100, lambda c: first_call(chain, (torch.randn(16, 16),), c)),
        ("first call, 6-block GPT (inference)", None, lambda c: first_call(gpt, (ids16,), c)),
        ("first call, CNN + BatchNorm (train)", None, lambda c: first_call(cnn, (torch.randn(8, 3, 8, 8),), c)),
        ("new-shape recompile (GPT, seq 16 -> 24)", None, lambda c: recompile(gpt, (ids16,), (ids24,), c)),
    ]
    for _, _, measure in rows:  # (warm the imports and torch's caches once)
        measure("rewrite"), measure("torch")
    print(f"{'case':42} {'rewrite ms':>11} {'torch.compile ms':>17} {'ratio':>7}  target")
    for name, ops, measure in rows:
        r, t = median_pair(measure)
        target = 20 if ops is not None and ops <= 100 else 10
        per_op = f"  ({r * 1e3 / ops:.0f} µs per op)" if ops and ops >= 100 else ""
        print(f"{name:42} {r:>11.2f} {t:>17.2f} {t / r:>6.1f}x  >= {target}x{' ok' if t / r >= target else ''}"
              f"{per_op}")
    print("\nthe persistent cache on (the default), rewrite alone: first calls one after another, as a "
          "program's functions compile")
    x = torch.randn(16, 16)
    for mode in ("off", "readwrite"):
        print(f"  {mode:10} 100-op chain: {back_to_back(chain, (x,), mode):.2f} ms")


def back_to_back(target, args, mode: str, rounds: int = 41) -> float:
    """Median ms of `rounds` first calls of fresh compiles in a row, with config.persistent_cache
    = `mode` (into a fresh cache directory): what the writer of the persistent cache costs the
    compiles that follow one another (torch.compile's rounds in between would hide it)."""
    saved = rewrite.config.persistent_cache, rewrite.config.cache_dir
    rewrite.config.persistent_cache, rewrite.config.cache_dir = mode, tempfile.mkdtemp()
    try:
        times = [first_call(target, args, "rewrite") for _ in range(rounds)]
        rewrite.persist.flush()
    finally:
        rewrite.config.persistent_cache, rewrite.config.cache_dir = saved
    return statistics.median(times)


if __name__ == "__main__":
    main()
