"""Inductor through rewrite beside torch.compile's Inductor, over changing sizes.

Run: .venv/bin/python benchmarks/backends.py [case ...]

For a pointwise function, the models of benchmarks/models.py and four tiny transformers
models, `rewrite.jit(m, backend="inductor")` and `torch.compile(m, backend="inductor")`, each
called at 8 sizes (batch or sequence length), measured in one run:

* compiles over the 8 sizes (Inductor calls, counted) and the largest difference from eager;
* first call (trace + Inductor's codegen + run), each side in a process of its own with a
  fresh TORCHINDUCTOR_CACHE_DIR, after the same warm-up (one tiny unrelated compile), so
  neither reuses the other's kernels nor pays the other's imports;
* steady state at each size: median of interleaved rounds (rewrite, torch.compile, eager in
  turn), with the spread (min-max of the rounds); the table shows the worst size's ratio.
"""
from __future__ import annotations

import copy
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import types

os.environ.setdefault("REWRITE_PERSISTENT_CACHE", "off")  # (first calls traced: warm starts are warm_start.py's)

os.environ.setdefault("HF_HUB_OFFLINE", "1")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
sys.path.insert(0, HERE)

import torch  # noqa: E402


def pointwise(x):
    return (x.sin() * 2 + x.cos()).relu() * x.sigmoid()


def _cases():
    """name -> (make(): a fresh module or function, args(size), sizes, what to compare)."""
    from test_models import MLP, RunningNorm, SmallCNN, TinyGPT, filter_logits
    out = {
        "pointwise": (lambda: pointwise, lambda n: (torch.randn(n, 64),), range(64, 72)),
        "MLP + LayerNorm + GELU": (lambda: MLP().eval(), lambda n: (torch.randn(n, 16),), range(32, 40)),
        "CNN + BatchNorm (eval)": (lambda: SmallCNN().eval(), lambda n: (torch.randn(n, 3, 8, 8),), range(8, 16)),
        "GPT blocks (causal, tied)": (lambda: TinyGPT().eval(), lambda n: (torch.randint(0, 32, (n, 8)),),
                                      range(2, 10)),
        "top-k/top-p filtering": (lambda: filter_logits, lambda n: (torch.randn(n, 50), 10, 0.9, 0.8), range(8, 16)),
        "buffers updated in place": (lambda: RunningNorm(8, count=False).train(), lambda n: (torch.randn(n, 8),),
                                     range(16, 24)),
    }
    try:
        import transformers_models as tm
    except ImportError:  # (the test extra)
        return out
    for name in ("gpt2", "llama", "bert", "t5"):
        def args(n, t5=name == "t5"):
            ids = torch.randint(0, 100, (1, n))
            return (ids, ids[:, :4]) if t5 else (ids,)
        out[name] = (getattr(tm, name), args, range(8, 16))
    return out


def _fresh(obj):
    """A fresh copy: a module deep-copied, a function re-made from its code (jit rewrites one in place)."""
    if isinstance(obj, torch.nn.Module):
        return copy.deepcopy(obj)
    return types.FunctionType(obj.__code__, obj.__globals__, obj.__name__, obj.__defaults__, obj.__closure__)


def _call(fn, args):
    if hasattr(fn, "config"):  # a transformers model: token ids (and T5's decoder ids) by keyword
        return fn(input_ids=args[0], **({"decoder_input_ids": args[1]} if len(args) == 2 else {}))
    return fn(*args)


def _tensor(out):
    for attr in ("logits", "last_hidden_state"):
        if hasattr(out, attr):
            return getattr(out, attr)
    return out[0] if isinstance(out, tuple) else out


class Counting:
    """torch's Inductor by name, its calls counted."""

    def __init__(self):
        from torch._dynamo import lookup_backend
        self.backend, self.count = lookup_backend("inductor"), 0

    def __call__(self, gm, example_inputs):
        self.count += 1
        return self.backend(gm, example_inputs)


def compiled(side: str, model, backend):
    import rewrite
    if side == "rewrite":
        return rewrite.jit(model, backend=backend)
    return torch.compile(model, backend=backend)


def _warm_up(side: str) -> None:
    """Each side's imports and Inductor's one-time set-up (its hash of triton's files, taken at
    the first matmul it tunes: ~0.4 s), on a function unlike any case."""
    import rewrite  # noqa: F401
    import torch._dynamo
    import torch._inductor.compile_fx  # noqa: F401
    f = compiled(side, lambda t: (t @ t).exp() - 1, "inductor")
    f(torch.ones(3, 3))
    torch._dynamo.reset()


def first_call(name: str, side: str) -> dict:
    """(In a process of its own.) First-call ms, then compiles over the 8 sizes and the largest
    difference from eager."""
    make, args, sizes = _cases()[name]
    _warm_up(side)
    torch.manual_seed(0)
    model = make()
    twin = _fresh(model)  # eager, called in lockstep (a module whose buffers move moves alike)
    counting = Counting()
    fn = compiled(side, _fresh(model), counting)
    torch.manual_seed(1)
    inputs = [args(n) for n in sizes]
    worst = 0.0
    with torch.no_grad():
        for i, a in enumerate(inputs):
            t0 = time.perf_counter()
            got = _tensor(_call(fn, a))
            if i == 0:
                first = (time.perf_counter() - t0) * 1e3
            want = _tensor(_call(twin, a))
            worst = max(worst, (got.float() - want.float()).abs().max().item())
    return {"first_ms": first, "compiles": counting.count, "max_diff": worst}


def steady(name: str, rounds: int = 15) -> dict:
    """Per size: median us per call of rewrite, torch.compile and eager, in interleaved rounds."""
    import rewrite
    make, args, sizes = _cases()[name]
    torch.manual_seed(0)
    model = make()
    fns = {"rewrite": compiled("rewrite", _fresh(model), "inductor"),
           "torch": compiled("torch", _fresh(model), "inductor"), "eager": _fresh(model)}
    out = {}
    with torch.no_grad():
        for n in sizes:
            a = args(n)
            for fn in fns.values():
                _call(fn, a), _call(fn, a)
            number = max(1, int(0.02 / max(_time(fns["eager"], a, 3), 1e-6)))
            times = {k: [] for k in fns}
            for _ in range(rounds):
                for k, fn in fns.items():
                    times[k].append(_time(fn, a, number) * 1e6)
            out[n] = {k: (statistics.median(v), min(v), max(v)) for k, v in times.items()}
    rewrite.reset()
    torch._dynamo.reset()
    return out


def _time(fn, args, number: int) -> float:
    t0 = time.perf_counter()
    for _ in range(number):
        _call(fn, args)
    return (time.perf_counter() - t0) / number


def _in_subprocess(name: str, side: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="inductor-") as cache:
        env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache}
        done = subprocess.run([sys.executable, __file__, "--first", name, side], env=env, capture_output=True,
                              text=True, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(f"{name} ({side}): {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(names: list[str]) -> None:
    import torch._inductor.compile_fx  # noqa: F401  (imports, before any timing)
    cases = _cases()
    names = names or list(cases)
    print(f"Inductor through rewrite beside torch.compile -- {time.strftime('%Y-%m-%d')}, Python "
          f"{platform.python_version()}, torch {torch.__version__}, {platform.machine()}, "
          f"{os.cpu_count()} CPUs, {torch.get_num_threads()} threads\n")
    print(f"{'case':27} {'compiles':>9} {'max diff':>9} {'1st call s':>11} {'1st ratio':>9} "
          f"{'eager us':>9} {'rewrite us':>11} {'torch us':>9} {'r/t worst':>9} {'r/t med':>8} {'r/eager':>8}")
    for name in names:
        first = {side: _in_subprocess(name, side) for side in ("rewrite", "torch")}
        per_size = steady(name)
        ratios = [s["rewrite"][0] / s["torch"][0] for s in per_size.values()]
        vs_eager = [s["rewrite"][0] / s["eager"][0] for s in per_size.values()]
        worst_n = max(per_size, key=lambda n: per_size[n]["rewrite"][0] / per_size[n]["torch"][0])
        w = per_size[worst_n]
        spread = lambda t: f"{t[0]:.0f}({t[1]:.0f}-{t[2]:.0f})"  # noqa: E731
        r, t = first["rewrite"], first["torch"]
        print(f"{name:27} {r['compiles']:>4}/{t['compiles']:<4} {max(r['max_diff'], t['max_diff']):>9.1e} "
              f"{r['first_ms'] / 1e3:>5.1f}/{t['first_ms'] / 1e3:<5.1f} {r['first_ms'] / t['first_ms']:>9.2f} "
              f"{spread(w['eager']):>9} {spread(w['rewrite']):>11} {spread(w['torch']):>9} {max(ratios):>9.3f} "
              f"{statistics.median(ratios):>8.3f} {max(vs_eager):>8.3f}", flush=True)
    print("\ncompiles: rewrite/torch.compile over the 8 sizes; 1st call s: rewrite/torch.compile; us: median "
          "(min-max) of the rounds at the size where rewrite/torch is worst; r/t: rewrite / torch.compile per "
          "size (worst, median); r/eager: worst size.")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--first"]:
        print(json.dumps(first_call(sys.argv[2], sys.argv[3])))
    else:
        main(sys.argv[1:])
