"""The first call does not hold every intermediate: the trace keeps meta-device shadows of
op results, so each real one dies when the traced code lets go of it, as in eager. Peak
memory measured in fresh processes (benchmarks/first_call_memory.py has the figures)."""
import json
import os
import subprocess
import sys

import pytest

PROGRAM = """
import sys, json, torch
import rewrite
torch.set_num_threads(1)

def rss(field):
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return int(line.split()[1]) / 1024

def chain(x):
    for i in range(40):
        x = x * 1.01 + 0.5 if i % 2 else torch.sin(x)
    return x

eager = chain
if sys.argv[1] == "jit":
    rewrite.jit(lambda t: torch.sin(t) * 2)(torch.ones(2))  # rewrite's imports, paid before measuring
    chain = rewrite.jit(chain)
x = torch.randn(10_000_000)  # 40 MB: above glibc's largest mmap threshold, so RSS follows what is alive
open("/proc/self/clear_refs", "w").write("5")
before = rss("VmRSS")
out = chain(x)
peak = rss("VmHWM") - before
assert torch.allclose(out, eager(x))
print(json.dumps(peak))
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"), reason="measures VmHWM (Linux)")
def test_first_call_of_a_long_chain_peaks_near_eager():
    def peak(kind):
        got = subprocess.run([sys.executable, "-c", PROGRAM, kind], capture_output=True, text=True, timeout=300)
        assert got.returncode == 0, got.stderr[-3000:]
        return json.loads(got.stdout.strip().splitlines()[-1])
    eager, jitted = peak("eager"), peak("jit")
    # holding every intermediate would be ~40 x 40 MB; eager holds two or three at a time
    assert jitted < 2.5 * eager + 60, (jitted, eager)


def test_no_real_intermediate_is_alive_when_the_backend_compiles(monkeypatch):
    """In-process and allocator-independent: when the backend gets the graph, the real
    results of the traced ops are dead, but for the one the call returns."""
    import gc
    import weakref

    import torch

    import rewrite
    from rewrite.trace.graph import GraphBuilder

    made, alive_at_backend = [], []
    real_call = GraphBuilder.call

    def call(self, *args, **kwargs):
        node, result = real_call(self, *args, **kwargs)
        made.append(weakref.ref(result))
        return node, result
    monkeypatch.setattr(GraphBuilder, "call", call)

    def counting(gm, example_inputs):
        gc.collect()
        alive_at_backend.append(sum(r() is not None for r in made))
        return gm.forward

    def chain(x):
        for i in range(10):
            x = torch.sin(x) if i % 2 else x * 1.5 + 1
        return x

    eager_out = chain(torch.ones(1000))
    rewrite.jit(chain, backend=counting)
    assert torch.allclose(chain(torch.ones(1000)), eager_out)
    assert len(made) == 15 and alive_at_backend == [1]  # the result only
