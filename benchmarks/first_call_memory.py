"""First-call peak memory: rewrite.jit (trace + compile + run) against eager and torch.compile.

Run: .venv/bin/python benchmarks/first_call_memory.py

Each figure is measured in a fresh process (Linux): the peak resident set size (VmHWM, reset
just before the call) grown during the first call, above what the process held just before
it (inputs and weights made, each kind's imports paid on a warm-up function), with glibc's
mmap threshold fixed so that freed tensors leave the RSS.
"""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time

os.environ.setdefault("REWRITE_PERSISTENT_CACHE", "off")  # (first calls traced: warm starts are warm_start.py's)

CASES = {
    "40-op pointwise chain, 40 MB input": """
x = torch.randn(10_000_000)
def fn(x):
    for i in range(40):
        x = x * 1.01 + 0.5 if i % 2 else torch.sin(x)
    return x
args = (x,)
""",
    "12-layer MLP stack, batch 4096": """
torch.manual_seed(0)
layers = torch.nn.Sequential(*[m for _ in range(12) for m in (torch.nn.Linear(512, 512), torch.nn.ReLU())]).eval()
def fn(x):
    with torch.no_grad():
        return layers(x)
args = (torch.randn(4096, 512),)
""",
}

RUN = """
import sys, json, torch
import rewrite
torch.set_num_threads(1)


def rss(field):
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return int(line.split()[1]) / 1024


kind = sys.argv[1]
warm = lambda t: torch.sin(t) * 2  # imports and first-use caches of each kind, paid before measuring
if kind == "jit":
    rewrite.jit(warm)(torch.ones(2))
elif kind == "torch.compile":
    torch.compile(warm, backend="eager")(torch.ones(2))
{setup}
if kind == "jit":
    fn = rewrite.jit(fn)
elif kind == "torch.compile":
    fn = torch.compile(fn, backend="eager")
import gc; gc.collect()
open("/proc/self/clear_refs", "w").write("5")  # the peak (VmHWM) starts again from here
before = rss("VmRSS")
out = fn(*args)
print(json.dumps(rss("VmHWM") - before))
"""


def measure(setup: str, kind: str) -> float:
    # big blocks always from mmap, given back when freed: otherwise glibc raises its mmap threshold
    # after the first big free and keeps later blocks in its heap, and the RSS says what the
    # allocator cached, not what was alive (the same case measured 84-180 MB from run to run)
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"}
    out = subprocess.run([sys.executable, "-c", RUN.format(setup=setup), kind], capture_output=True, text=True,
                         check=True, cwd=__file__.rsplit("/", 2)[0], env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    import torch
    print(f"first-call peak memory -- {time.strftime('%Y-%m-%d')}, Python {platform.python_version()}, "
          f"torch {torch.__version__}, {platform.machine()}\n")
    print(f"{'case':38} {'eager MB':>9} {'@jit MB':>9} {'dynamo MB':>10} {'jit/eager':>10}")
    for name, setup in CASES.items():
        eager, jitted, dynamo = (measure(setup, k) for k in ("eager", "jit", "torch.compile"))
        print(f"{name:38} {eager:9.0f} {jitted:9.0f} {dynamo:10.0f} {jitted / max(eager, 1):9.2f}x")


if __name__ == "__main__":
    main()
