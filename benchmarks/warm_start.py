"""Warm start: the first call in a fresh process, with the persistent cache cold and warm,
beside torch.compile's (backend="eager", `caching_precompile` on where it works).

Run: .venv/bin/python benchmarks/warm_start.py [--runs 9] [--quick] [--torch-precompile eager|inductor]

Every number is a fresh Python process (this script runs itself as the child), which imports
torch, rewrite (and transformers), builds the model with a fixed seed, then times its first
compiled call; after it, an eager copy made before the call checks the result. Cold: an empty
cache directory per process. Warm: a directory one earlier process filled. The processes of
the two columns run interleaved, `--runs` of each (median printed). "eager 1st" is the first
eager call in a fresh process: what any first call costs (kernels' first runs, allocations)
before a compiler adds its own. Models: those of benchmarks/models.py, and tiny random-init
transformers models (GPT-2, Llama, BERT, T5; no download) with the `python` backend.

Then the misses: an edited source file, a changed global and a changed option, each with a
warm cache for the code as it was: the call must trace again (not load) and give eager's result.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = ["MLP + LayerNorm + GELU", "CNN + BatchNorm (train)", "GPT blocks (causal, tied)", "top-k/top-p filtering",
          "buffers updated in place"]
TRANSFORMERS = ["gpt2", "llama", "bert", "t5"]


# -- the child: one process, one first call ------------------------------------------------------
def build(case: str):
    """(callable, args, eager copy) for `case`, seeded."""
    import copy

    import torch
    torch.manual_seed(0)
    if case in TRANSFORMERS:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        sys.path.insert(0, HERE)
        import transformers_models as tm
        model = getattr(tm, case)()
        ids = torch.randint(0, 100, (1, 8))
        kwargs = {"input_ids": ids, "decoder_input_ids": ids[:, :4]} if case == "t5" else {"input_ids": ids}
        return model, (), kwargs, copy.deepcopy(model)
    sys.path.insert(0, HERE)
    sys.path.insert(0, os.path.join(HERE, "..", "tests"))
    from models import cases
    for name, model, args in cases():
        if name == case:
            eager = copy.deepcopy(model) if isinstance(model, torch.nn.Module) else model
            return model, args, {}, eager
    raise SystemExit(f"no case {case!r}")


def same(a, b) -> bool:
    import torch
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.shape == b.shape and a.dtype == b.dtype and \
            torch.allclose(a, b, rtol=1e-4, atol=1e-5, equal_nan=True)
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if hasattr(a, "to_tuple"):  # transformers' ModelOutput
        return same(a.to_tuple(), b.to_tuple())
    if hasattr(a, "layers") or type(a).__name__.endswith("Cache"):  # a KV cache: its tensors
        return type(a) is type(b) and same([list(vars(layer).values()) for layer in getattr(a, "layers", [])],
                                           [list(vars(layer).values()) for layer in getattr(b, "layers", [])])
    return type(a) is type(b) and (a == b) is True


def child(case: str, compiler: str) -> dict:
    import torch
    model, args, kwargs, eager = build(case)
    if compiler == "eager":
        fn = model
    elif compiler == "rewrite":
        import rewrite
        fn = rewrite.jit(model)
    else:
        import torch._dynamo
        fn = torch.compile(model, backend=compiler.partition(":")[2] or "eager")
    torch.manual_seed(1)
    t0 = time.perf_counter()
    with torch.no_grad() if case in TRANSFORMERS else _nothing():
        out = fn(*args, **kwargs)
    first_ms = (time.perf_counter() - t0) * 1e3
    torch.manual_seed(1)
    with torch.no_grad() if case in TRANSFORMERS else _nothing():
        expected = eager(*args, **kwargs)
    loaded = None
    if compiler == "rewrite":
        from rewrite import persist
        from rewrite.dispatch import _ALL
        entries = [e for d in list(_ALL) for e in d.entries]
        loaded = [sum(e.loaded for e in entries), len(entries)]
        persist.flush()
    return {"ms": first_ms, "same": same(out, expected), "loaded": loaded}


class _nothing:
    def __enter__(self):
        pass

    def __exit__(self, *exc):
        pass


# -- the driver ----------------------------------------------------------------------------------
def spawn(case: str, compiler: str, cache: str, env_extra: dict | None = None, script: str | None = None) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "REWRITE_CACHE_DIR": cache, "REWRITE_PERSISTENT_CACHE": "readwrite",
           **(env_extra or {})}  # (models.py, imported for its models, turns the cache off for its own runs)
    if compiler.startswith("torch"):
        env["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(cache, "inductor")
    argv = [sys.executable, script or os.path.abspath(__file__), "--child", case, compiler]
    out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        return {"error": (out.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def median_ms(results: list) -> float:
    return statistics.median(r["ms"] for r in results)


def measure(case: str, runs: int, root: str, torch_precompile: str | None) -> dict:
    warm_dir = tempfile.mkdtemp(dir=root)
    spawn(case, "rewrite", warm_dir)  # fills the warm cache
    rows = {"cold": [], "warm": [], "eager": [], "tc_cold": [], "tc_warm": []}
    tc_dir = tempfile.mkdtemp(dir=root)
    precompile = {"TORCH_CACHING_PRECOMPILE": "1"} if torch_precompile else {}
    torch_compiler = f"torch:{torch_precompile}"
    if torch_precompile:
        spawn(case, torch_compiler, tc_dir, precompile)
    for _ in range(runs):
        cold_dir = tempfile.mkdtemp(dir=root)
        rows["cold"].append(spawn(case, "rewrite", cold_dir))
        shutil.rmtree(cold_dir, ignore_errors=True)
        rows["warm"].append(spawn(case, "rewrite", warm_dir))
        rows["eager"].append(spawn(case, "eager", warm_dir))
        if torch_precompile:
            cold_dir = tempfile.mkdtemp(dir=root)
            rows["tc_cold"].append(spawn(case, torch_compiler, cold_dir, precompile))
            shutil.rmtree(cold_dir, ignore_errors=True)
            rows["tc_warm"].append(spawn(case, torch_compiler, tc_dir, precompile))
    return rows


EDITED = '''
import torch

SCALE = float(__import__("os").environ.get("WARM_SCALE", "2.0"))


def helper(x):
    return torch.tanh(x) * SCALE


def fn(x):
    return helper(x @ x.T).softmax(-1) + x.sum()
'''

EDIT_CHILD = '''
import json, os, sys, torch
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rewrite
import edited
from rewrite import persist
from rewrite.dispatch import _ALL
x = torch.randn(6, 6)
expected = edited.fn(x)  # (eager: before jit rewrites the function)
out = rewrite.jit(edited.fn, fullgraph=os.environ.get("WARM_FULLGRAPH") == "1")(x)
entries = [e for d in list(_ALL) for e in d.entries]
persist.flush()
loaded = [sum(e.loaded for e in entries), len(entries)]
print(json.dumps({"same": bool(torch.allclose(out, expected)), "loaded": loaded}))
'''


def misses(root: str) -> list[tuple[str, dict]]:
    """An edited source file, a changed global and a changed option, each after a warm-up of
    the code as it was: (what changed, the child's report)."""
    folder = tempfile.mkdtemp(dir=root)
    cache = os.path.join(folder, "cache")
    with open(os.path.join(folder, "edited.py"), "w") as f:
        f.write(EDITED)
    script = os.path.join(folder, "child.py")
    with open(script, "w") as f:
        f.write(EDIT_CHILD)

    def run(env=None):
        out = subprocess.run([sys.executable, script], env={**os.environ, "REWRITE_CACHE_DIR": cache,
                                                            "REWRITE_PERSISTENT_CACHE": "readwrite",
                                                            "OMP_NUM_THREADS": "1", **(env or {})},
                             capture_output=True, text=True, timeout=300)
        return json.loads(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 else {"error": out.stderr[-300:]}
    out = [("cold", run()), ("warm, unchanged", run())]
    out.append(("a changed global (SCALE)", run({"WARM_SCALE": "3.0"})))
    out.append(("a changed option (fullgraph=True)", run({"WARM_FULLGRAPH": "1"})))
    with open(os.path.join(folder, "edited.py"), "w") as f:
        f.write(EDITED.replace("torch.tanh(x)", "torch.sigmoid(x)"))
    out.append(("an edited source file (helper's body)", run()))
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--quick", action="store_true", help="the models of models.py only")
    parser.add_argument("--child", nargs=2)
    parser.add_argument("--torch-precompile", choices=["eager", "inductor"],
                        help="also torch.compile(backend=...) with TORCH_CACHING_PRECOMPILE=1 (and Inductor's "
                             "caches in the same directory), cold and warm")
    ns = parser.parse_args()
    if ns.child:
        print(json.dumps(child(*ns.child)))
        return
    import torch
    print(f"warm start -- {time.strftime('%Y-%m-%d')}, Python {platform.python_version()}, torch {torch.__version__}, "
          f"{platform.machine()}, {os.cpu_count()} cores, OMP_NUM_THREADS=1; median of {ns.runs} fresh processes\n")
    head = f"{'model':28} {'cold ms':>8} {'warm ms':>8} {'warm/cold':>9} {'eager 1st':>9} {'over eager':>10} " \
           f"{'loaded':>7} {'same':>5}"
    if ns.torch_precompile:
        head += f" {'tc cold':>8} {'tc warm':>8}"
    print(head)
    root = tempfile.mkdtemp(prefix="rewrite-warm-")
    try:
        for case in MODELS + ([] if ns.quick else TRANSFORMERS):
            rows = measure(case, ns.runs, root, ns.torch_precompile)
            bad = [r for k in ("cold", "warm", "eager") for r in rows[k] if "error" in r]
            if bad:
                print(f"{case:28} failed: {bad[0]['error']}")
                continue
            cold, warm, eager = (median_ms(rows[k]) for k in ("cold", "warm", "eager"))
            loaded = rows["warm"][0]["loaded"]
            ok = all(r["same"] for k in ("cold", "warm") for r in rows[k])
            over = (warm - eager) / (cold - eager) if cold > eager else float("nan")
            line = (f"{case:28} {cold:8.2f} {warm:8.2f} {warm / cold:8.1%} {eager:9.2f} {over:9.1%} "
                    f"{loaded[0]:>3}/{loaded[1]:<3} {'yes' if ok else 'NO':>5}")
            if ns.torch_precompile:
                tc = [r for k in ("tc_cold", "tc_warm") for r in rows[k] if "error" in r]
                line += " failed: " + tc[0]["error"][:60] if tc else \
                    f" {median_ms(rows['tc_cold']):8.2f} {median_ms(rows['tc_warm']):8.2f}"
            print(line, flush=True)
        print("\nmisses (each after a warm-up of the code as it was; must trace again, with eager's result):")
        for what, report in misses(root):
            if "error" in report:
                print(f"  {what:40} failed: {report['error']}")
                continue
            print(f"  {what:40} loaded {report['loaded'][0]}/{report['loaded'][1]}, "
                  f"eager's result: {'yes' if report['same'] else 'NO'}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
