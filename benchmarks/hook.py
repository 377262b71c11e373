"""What `python -m rewrite.hook` costs a program that does not use torch.

    python benchmarks/hook.py

1. Run time: the pure-Python workloads of benchmarks/purepy_workload.py, loaded twice in one
   process -- as plain Python and instrumented by the hook -- and timed alternately (median
   of rounds). Target (issue 8): <= 3 % overhead.
2. Import time: stdlib modules not imported yet, imported in fresh processes with and
   without the hook instrumenting them (`include=`), median of runs; with the number of
   functions spliced and the cost per function.
3. Startup: a tiny script that never imports torch, under `python` and under the hook
   (which does not import torch either).
"""
from __future__ import annotations

import gc
import json
import os
import statistics
import subprocess
import sys
import time
import types

os.environ.setdefault("REWRITE_PERSISTENT_CACHE", "off")  # (first calls traced: warm starts are warm_start.py's)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

from rewrite.dispatch import Options  # noqa: E402
from rewrite.hook.instrument import instrument  # noqa: E402

MODULES = ["pydoc", "difflib", "tarfile", "configparser", "optparse", "smtplib", "imaplib", "ftplib", "cmd",
           "pdb", "http.server", "xml.dom.minidom", "email.parser", "mailbox", "calendar", "gettext", "shlex",
           "statistics", "fractions", "decimal", "wave", "plistlib", "netrc", "sched", "bdb", "trace",
           "pickletools", "zipapp", "filecmp", "tabnanny"]


def load(instrumented: bool) -> types.ModuleType:
    path = os.path.join(HERE, "purepy_workload.py")
    module = types.ModuleType("purepy_" + ("hooked" if instrumented else "plain"))
    module.__file__ = path
    sys.modules[module.__name__] = module
    code = compile(open(path).read(), path, "exec")
    if instrumented:
        code = instrument(code, Options())
    exec(code, module.__dict__)
    return module


def run_time(rounds: int = 15) -> list[tuple[str, float, float]]:
    plain, hooked = load(False), load(True)
    rows = []
    gc.disable()  # allocation-heavy workloads: a collection in one and not the other is noise
    try:
        for name in plain.WORKLOADS:
            (fp, arg), (fh, _) = plain.WORKLOADS[name], hooked.WORKLOADS[name]
            assert fp(arg) == fh(arg)  # also: the hooked module's first calls decide here
            tp, th = [], []
            for r in range(rounds):
                pair = ((fp, tp), (fh, th)) if r % 2 else ((fh, th), (fp, tp))
                for fn, times in pair:
                    t0 = time.perf_counter()
                    fn(arg)
                    times.append(time.perf_counter() - t0)
                gc.collect()
            rows.append((name, statistics.median(tp) * 1e3, statistics.median(th) * 1e3))
    finally:
        gc.enable()
    return rows


IMPORT_SCRIPT = """
import sys, time, json
import rewrite.hook, rewrite.hook.instrument as ins
mods = json.loads(sys.argv[1])
if sys.argv[2] == "hook":
    rewrite.hook.install(include=mods)
t0 = time.perf_counter()
for m in mods:
    __import__(m)
dt = time.perf_counter() - t0
print(json.dumps([dt, len(ins.LAZIES)]))
"""


def import_time(runs: int = 5) -> tuple[list[str], float, float, int]:
    probe = subprocess.run([sys.executable, "-c", "import rewrite.hook, sys, json; print(json.dumps(sorted(sys.modules)))"],
                           capture_output=True, text=True, cwd=os.path.join(HERE, ".."), check=True)
    loaded = set(json.loads(probe.stdout.strip().splitlines()[-1]))
    mods = [m for m in MODULES if m not in loaded]
    out = {"plain": [], "hook": []}
    count = 0
    for _ in range(runs):
        for mode in ("plain", "hook"):
            r = subprocess.run([sys.executable, "-c", IMPORT_SCRIPT, json.dumps(mods), mode], capture_output=True,
                               text=True, cwd=os.path.join(HERE, ".."), check=True)
            dt, n = json.loads(r.stdout.strip().splitlines()[-1])
            out[mode].append(dt)
            if mode == "hook":
                count = n
    return mods, statistics.median(out["plain"]) * 1e3, statistics.median(out["hook"]) * 1e3, count


def startup(runs: int = 5) -> tuple[float, float]:
    """Wall time of a tiny pure-Python script: `python s.py` and `python -m rewrite.hook s.py`."""
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        script = os.path.join(d, "s.py")
        with open(script, "w") as f:
            f.write("import sys\ndef f(n):\n    return n + 1\nassert f(1) == 2 and 'torch' not in sys.modules\n")
        env = dict(os.environ, PYTHONPATH=os.path.join(HERE, ".."))
        times = {"plain": [], "hook": []}
        for _ in range(runs):
            for mode, cmd in (("plain", [sys.executable, script]),
                              ("hook", [sys.executable, "-m", "rewrite.hook", script])):
                t0 = time.perf_counter()
                subprocess.run(cmd, check=True, env=env, cwd=d)
                times[mode].append(time.perf_counter() - t0)
    return statistics.median(times["plain"]) * 1e3, statistics.median(times["hook"]) * 1e3


def main() -> None:
    print("run time of pure-Python workloads (ms, median of rounds, one process)")
    print(f"{'workload':24} {'plain':>9} {'hooked':>9} {'overhead':>9}")
    total_p = total_h = 0.0
    for name, tp, th in run_time():
        total_p, total_h = total_p + tp, total_h + th
        print(f"{name:24} {tp:9.2f} {th:9.2f} {100 * (th / tp - 1):8.1f}%")
    print(f"{'all':24} {total_p:9.2f} {total_h:9.2f} {100 * (total_h / total_p - 1):8.1f}%")
    mods, tp, th, n = import_time()
    print(f"\nimport time of {len(mods)} stdlib modules not yet imported (ms, median of fresh processes)")
    print(f"plain {tp:.1f}  hooked {th:.1f}  overhead {th - tp:.1f} ms ({100 * (th / tp - 1):.0f}%) "
          f"for {n} functions spliced: {1e3 * (th - tp) / max(n, 1):.1f} us per function")
    tp, th = startup()
    print(f"\nstartup of a 4-line script that never imports torch (ms, median): plain {tp:.0f}, "
          f"under the hook {th:.0f} (torch is not imported)")


if __name__ == "__main__":
    main()
