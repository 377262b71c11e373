"""Generated Triton kernels vs eager vs torch.compile (Inductor): GB/s and % of peak bandwidth.

    python benchmarks/kernels.py                 # CUDA if present, else the CPU-interpreter check
    python benchmarks/kernels.py --peak-gbs 4800 # H200: 4.8 TB/s

Cases (issue 7): a 4-op pointwise chain over 256M fp32 elements, softmax and layer_norm over
rows of 4096 and 8192, bias + GELU. Bytes are what each op must move at least (inputs read
once, outputs written once); GB/s = bytes / median time.

Without a GPU the same cases run at small sizes under Triton's interpreter and the script
checks each result against eager and reports the kernels used; GPU rows say "not measured".
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import rewrite  # noqa: E402


def chain(x, y):
    return ((x * y + 1.0).relu() * 0.5).sigmoid()


def softmax(x):
    return torch.softmax(x, -1)


def layer_norm(x, w, b):
    return F.layer_norm(x, (x.shape[-1],), w, b)


def bias_gelu(x, b):
    return F.gelu(x + b)


def cases(device: str, small: bool):
    """(name, fn, inputs, bytes moved)."""
    f32 = dict(device=device, dtype=torch.float32)
    n = 1 << 12 if small else 1 << 28
    rows = 8 if small else 4096 * 4
    out = []
    x, y = torch.randn(n, **f32), torch.randn(n, **f32)
    out.append((f"pointwise chain, {n:,} fp32", chain, (x, y), 3 * n * 4))
    for cols in (4096, 8192):
        r = max(1, rows * 4096 // cols) if not small else rows
        x = torch.randn(r, cols, **f32)
        out.append((f"softmax {r}x{cols}", softmax, (x,), 2 * x.numel() * 4))
        w, b = torch.randn(cols, **f32), torch.randn(cols, **f32)
        out.append((f"layer_norm {r}x{cols}", layer_norm, (x, w, b), 2 * x.numel() * 4))
    x, b = torch.randn(rows * 2, 4096 if not small else 512, **f32), torch.randn(4096 if not small else 512, **f32)
    out.append((f"bias+GELU {x.shape[0]}x{x.shape[1]}", bias_gelu, (x, b), 2 * x.numel() * 4))
    return out


def bench_gpu(fn, args, reps=50) -> float:
    """Median seconds per call (CUDA events)."""
    for _ in range(5):
        fn(*args)
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(*args)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return statistics.median(times)


class Recorder:
    """The triton backend, keeping what it built (to count kernels)."""
    rewrite_native = True  # (a wrapper of rewrite's own: it takes the graph as traced)

    def __init__(self):
        self.built = []

    def __call__(self, gm, example_inputs):
        import rewrite.codegen.triton_backend as tb
        fn = tb.triton(gm, example_inputs)
        self.built.append(fn)
        return fn

    def kernels(self) -> int:
        return sum(getattr(fn, "kernel_source", "").count("\ndef kernel_") for fn in self.built)


def run_gpu(peak: float) -> None:
    print(f"device: {torch.cuda.get_device_name()}, peak {peak:.0f} GB/s")
    print(f"{'case':34} {'kernels':>7} {'eager GB/s':>11} {'jit GB/s':>9} {'inductor':>9} {'jit %peak':>9} "
          f"{'jit/eager':>9} {'jit/ind.':>8}")
    for name, fn, args, nbytes in cases("cuda", small=False):
        rec = Recorder()
        jitted = rewrite.jit(_copy(fn), backend=rec)
        compiled = torch.compile(_copy(fn))
        expected = fn(*args)
        for other in (jitted, compiled):
            torch.testing.assert_close(other(*args), expected, rtol=1e-4, atol=1e-4)
        t_e, t_j, t_c = (bench_gpu(f, args) for f in (fn, jitted, compiled))
        gbs = [nbytes / t / 1e9 for t in (t_e, t_j, t_c)]
        print(f"{name:34} {rec.kernels():7d} {gbs[0]:11.0f} {gbs[1]:9.0f} {gbs[2]:9.0f} {100 * gbs[1] / peak:8.1f}% "
              f"{t_e / t_j:8.2f}x {t_c / t_j:7.2f}x")


def run_interpreter() -> None:
    os.environ.setdefault("TRITON_INTERPRET", "1")
    print("no CUDA device: correctness under Triton's interpreter (small sizes); GPU rows: not measured")
    print(f"{'case':30} {'kernels':>7} {'max |jit - eager|':>18} {'first call ms':>14} {'interpreted ms':>15}")
    for name, fn, args, _ in cases("cpu", small=True):
        rec = Recorder()
        jitted = rewrite.jit(_copy(fn), backend=rec)
        t0 = time.perf_counter()
        got = jitted(*args)
        first = (time.perf_counter() - t0) * 1e3
        expected = fn(*args)
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
        err = (got - expected).abs().max().item()
        t0 = time.perf_counter()
        jitted(*args)
        again = (time.perf_counter() - t0) * 1e3
        print(f"{name:30} {rec.kernels():7d} {err:18.2e} {first:14.1f} {again:15.1f}")


def _copy(fn):
    import types
    return types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peak-gbs", type=float, default=4800.0, help="the GPU's memory bandwidth (H200: 4800)")
    args = parser.parse_args()
    if torch.cuda.is_available():
        run_gpu(args.peak_gbs)
    else:
        run_interpreter()


if __name__ == "__main__":
    main()
