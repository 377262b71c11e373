"""Small NumPy functions under fullgraph=True: what torch.compile captures, what rewrite captures,
and whether each result equals eager's (values, dtypes, the types of results).

    python benchmarks/numpy_suite.py          # a line per case, then the totals
    python benchmarks/numpy_suite.py --json out.json

The cases are the kinds of NumPy code issue 41 lists -- `x.numpy()` then `np.sum`, `np.where`,
`arr.T @ arr`, `np.float32(...)`, `np.arange`, `np.random` -- and what code around tensors
writes: arrays passed in, arrays written in place, NumPy scalars meeting tensors. torch.compile
runs with backend="eager" (its capture is the question, not its kernels); rewrite with its
default backend. A case is "captured" when fullgraph=True compiles it and the result equals
eager's (np.testing's tolerance for floats). Each case runs in a fresh compile (both compilers
reset first).
"""
from __future__ import annotations

import argparse
import json
import time
import warnings

import numpy as np
import torch

import rewrite


def _x():
    return torch.randn(4, 3, generator=torch.Generator().manual_seed(0))


def _a():
    return np.random.default_rng(0).standard_normal((4, 3))


CASES = {
    "numpy_sum": (lambda x: torch.from_numpy(np.sum(x.numpy(), axis=0)), _x),
    "numpy_where": (lambda x: torch.from_numpy(np.where(x.numpy() > 0, x.numpy(), 0.0)), _x),
    "gram_matmul": (lambda x: torch.from_numpy(x.numpy().T @ x.numpy()), _x),
    "scalar_type": (lambda x: x * np.float32(2.5), _x),
    "arange_add": (lambda x: x + torch.from_numpy(np.arange(3)), _x),
    "random_rand": (lambda x: x + torch.from_numpy(np.random.rand(3)), _x),
    "mean_std": (lambda x: (np.mean(x.numpy(), axis=1), np.std(x.numpy())), _x),
    "exp_log": (lambda x: torch.from_numpy(np.log(np.exp(x.numpy()) + 1.0)), _x),
    "concatenate": (lambda x: np.concatenate([x.numpy(), x.numpy() * 2], axis=1), _x),
    "clip": (lambda x: torch.from_numpy(np.clip(x.numpy(), -0.5, 0.5)), _x),
    "linalg_norm": (lambda x: np.linalg.norm(x.numpy(), axis=1), _x),
    "reshape_transpose": (lambda x: x.numpy().reshape(3, 4).transpose(), _x),
    "maximum_relu": (lambda x: torch.from_numpy(np.maximum(x.numpy(), 0)), _x),
    "argmax": (lambda x: np.argmax(x.numpy(), axis=1), _x),
    "cumsum": (lambda x: np.cumsum(x.numpy(), axis=0), _x),
    "einsum": (lambda x: np.einsum("ij,ij->i", x.numpy(), x.numpy()), _x),
    "zeros_like_write": (lambda x: (lambda z: (z.__setitem__(0, 1.0), z)[1])(np.zeros_like(x.numpy())), _x),
    "linspace": (lambda x: x + torch.from_numpy(np.linspace(0, 1, 3)).float(), _x),
    "arrays_in_out": (lambda a: (a - a.mean(axis=0)) / (a.std(axis=0) + 1e-6), _a),
    "array_in_place": (lambda a: (a.__iadd__(1), a.sum())[1], _a),
    "tensor_from_array": (lambda a: torch.tensor(a) * 2, _a),
    "sort": (lambda x: np.sort(x.numpy(), axis=1), _x),
    "allclose": (lambda x: np.allclose(x.numpy(), x.numpy() + 1e-9), _x),
    "constants": (lambda x: x * np.pi + np.e, _x),
    "int_true_division": (lambda x: (x.numpy() > 0).astype(np.int64) / 2, _x),
    "astype_float32": (lambda a: torch.from_numpy(a.astype(np.float32)) + 1, _a),
    "stack": (lambda x: np.stack([x.numpy(), -x.numpy()], axis=-1), _x),
    "numpy_scalar_to_tensor": (lambda x: x - x.numpy().mean(), _x),
    "finfo": (lambda x: x + np.finfo(np.float32).eps, _x),
    "unique": (lambda x: np.unique(x.numpy().round()), _x),
    "tolist": (lambda x: x.numpy().tolist(), _x),
}


def same(a, b) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, torch.Tensor):
        return a.dtype == b.dtype and a.shape == b.shape and torch.allclose(a, b, equal_nan=True)
    if isinstance(a, (np.ndarray, np.generic)):
        return a.dtype == b.dtype and a.shape == b.shape and np.allclose(a, b, equal_nan=True)
    return a == b


def attempt(compile_fn, fn, make) -> str:
    np.random.seed(0)
    want = fn(make())
    try:
        compiled = compile_fn(fn)
        np.random.seed(0)
        got = compiled(make())
    except Exception as e:  # noqa: BLE001 (a refusal, or a failure: either way not captured)
        return f"refused: {type(e).__name__}: {str(e).splitlines()[0][:90]}"
    return "captured" if same(got, want) else "wrong result"


def torch_compile(fn):
    import torch._dynamo  # (deferred: its import is what this column measures, not rewrite's)
    torch._dynamo.reset()
    return torch.compile(fn, fullgraph=True, backend="eager")


def rewrite_jit(fn):
    rewrite.reset()
    copy = type(fn)(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    return rewrite.jit(copy, fullgraph=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", help="write every case's row to this file")
    args = p.parse_args()
    warnings.simplefilter("ignore")
    print(f"NumPy cases under fullgraph=True -- {time.strftime('%Y-%m-%d')}, torch {torch.__version__}, "
          f"NumPy {np.__version__}")
    rows, totals = [], {"torch.compile": 0, "rewrite": 0}
    for name, (fn, make) in CASES.items():
        row = {"case": name, "torch.compile": attempt(torch_compile, fn, make), "rewrite": attempt(rewrite_jit, fn, make)}
        rows.append(row)
        for k in totals:
            totals[k] += row[k] == "captured"
        print(f"{name:24s} torch.compile: {row['torch.compile'][:60]:60s} rewrite: {row['rewrite'][:70]}")
    both = sum(r["torch.compile"] == "captured" and r["rewrite"] == "captured" for r in rows)
    only_torch = [r["case"] for r in rows if r["torch.compile"] == "captured" and r["rewrite"] != "captured"]
    print(f"\ncaptured with eager's result: torch.compile {totals['torch.compile']}/{len(rows)}, rewrite "
          f"{totals['rewrite']}/{len(rows)}; of torch.compile's, rewrite captures {both}"
          + (f" (not: {', '.join(only_torch)})" if only_torch else ""))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
