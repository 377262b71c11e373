"""Thread mode: several threads call one compiled function at once.

    python -m rewrite.fuzz --threads 8 --calls 10000 --examples 20 --seed 0

For each generated program, the eager result of every input variant -- other sizes, the
other float dtype, other values -- is computed first, one call at a time. Then `threads`
threads start together and call the compiled function over the variants round robin (each
call on fresh inputs), with `sys.setswitchinterval(1e-5)` so that threads switch inside
the prologue, the dispatch, the guards and the compiles. Every result, exception and input
afterwards must be eager's. The first calls compile concurrently: a thread that finds
another compiling runs eagerly, which must give eager's result too.

Programs that draw random numbers are left out (the order of draws between threads is not
eager's to give), and what programs print goes nowhere.
"""
from __future__ import annotations

import contextlib
import dataclasses
import io
import sys
import threading

import torch

import rewrite

from .inputs import TensorSpec, make_args
from .oracle import STATS, Divergence, compare, compare_exceptions, count_entries

RANDOM = ("rand", "dropout", "bernoulli", "normal", "multinomial", "seed")


def other_dtype(specs: list) -> list:
    """The specs with float32 tensors made float64 and float64 ones float32."""
    swap = {"float32": "float64", "float64": "float32"}
    return [dataclasses.replace(s, dtype=swap[s.dtype]) if isinstance(s, TensorSpec) and s.dtype in swap else s
            for s in specs]


def variants(program, dim_sets: list[dict], seed: int) -> list[tuple]:
    """(specs, dims, seed) for each input variant of a thread run."""
    out = []
    for i, dims in enumerate(dim_sets):
        out.append((program.inputs, dims, seed + i))
        out.append((other_dtype(program.inputs), dims, seed + 50 + i))
    return out


def _call(fn, args):
    try:
        return "ok", fn(*args)
    except Exception as e:  # noqa: BLE001  (the user's exception, compared by type and args)
        return "raised", e


def run_threads(program, dim_sets: list[dict], threads: int = 8, calls: int = 1000, backend="python",
                seed: int = 0) -> int:
    """Run one program's thread test; raises Divergence at the first difference. The calls made."""
    if any(word in program.source() for word in RANDOM):
        return 0
    eager_ns, jit_ns = program.load(), program.load()
    compiled = rewrite.jit(jit_ns["f"], backend=backend)
    cases = variants(program, dim_sets, seed)
    expected = []
    with contextlib.redirect_stdout(io.StringIO()):
        for specs, dims, s in cases:
            args = make_args(specs, dims, s, eager_ns)
            expected.append((_call(eager_ns["f"], args), args))
    failures: list[str] = []
    barrier = threading.Barrier(threads)
    per_thread = max(1, calls // threads)

    def worker(k: int) -> None:
        barrier.wait()
        for i in range(per_thread):
            if failures:
                return
            v = (k + i) % len(cases)
            specs, dims, s = cases[v]
            args = make_args(specs, dims, s, jit_ns)
            (e_kind, e_val), e_args = expected[v]
            kind, val = _call(compiled, args)
            label = f"thread {k} call {i} (variant {v}: {dims}, {[getattr(x, 'dtype', '') for x in specs]})"
            try:
                if kind != e_kind:
                    what = f"{type(val).__name__}: {val}" if kind == "raised" else "a result"
                    raise Divergence(f"{label}: @jit gave {what}, eager {e_kind}")
                if kind == "raised":
                    compare_exceptions(val, e_val, label)
                else:
                    compare(val, e_val, f"{label} result")
                for j, (a, e) in enumerate(zip(args, e_args)):
                    if isinstance(e, torch.Tensor):
                        compare(a, e, f"{label}: input {j} afterwards")
            except Divergence as d:
                failures.append(str(d))
            except Exception as e:  # noqa: BLE001  (a comparison that cannot be made is a difference)
                failures.append(f"{label}: {type(e).__name__}: {e}")

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            pool = [threading.Thread(target=worker, args=(k,)) for k in range(threads)]
            for t in pool:
                t.start()
            for t in pool:
                t.join()
    finally:
        sys.setswitchinterval(old)
    STATS.programs += 1
    STATS.calls += per_thread * threads
    count_entries(compiled)
    if failures:
        raise Divergence(f"{failures[0]}\n\nprogram:\n{program.source()}")
    return per_thread * threads
