"""python -m rewrite.fuzz: fuzz rewrite with generated PyTorch programs against eager.

    python -m rewrite.fuzz --examples 2000 --seed 0 --backend python [--time-budget 120] [--focus writes] [--reasons]
    python -m rewrite.fuzz --focus written --fullgraph --reasons   # what fullgraph=True still refuses
    python -m rewrite.fuzz --threads 8 --calls 10000 --examples 20      # thread mode (fuzz/threads.py)
    python -m rewrite.fuzz --warm      # each program again as a new process: entries loaded from the persistent cache

Runs in chunks of Hypothesis examples (each chunk its own derived seed) until the example
count or the time budget is reached, in strict mode (`rewrite.config.strict`: an eager run
standing in for a trace that raised must raise what the trace raised; where it does not, the
InternalError is a divergence like any other; `--no-strict` runs as users run by default).
A divergence prints Hypothesis's shrunk reproducer and the run goes on with the next chunk. The last line is the summary; the exit status
is 1 if anything diverged.
"""
from __future__ import annotations

import argparse
import sys
import time
import warnings

from hypothesis import HealthCheck, given, settings
from hypothesis import seed as hypothesis_seed

import rewrite

from .oracle import STATS, Divergence, run_program
from .programs import FOCUS, dims, programs
from .threads import run_threads

CHUNK = 100


def run_chunk(n: int, seed: int, backend: str, max_statements: int, focus: str | None = None,
              threads: int = 0, calls: int = 0, fullgraph: bool = False, warm: bool = False) -> list[Divergence]:
    rules = FOCUS[focus] if focus else None

    @settings(max_examples=n, deadline=None, database=None, suppress_health_check=list(HealthCheck),
              print_blob=False)
    @hypothesis_seed(seed)
    @given(programs(max_statements=max_statements, rules=rules), dims(), dims())
    def fuzz_one(program, dims1, dims2):
        rewrite.reset()
        run_program(program, dims1, dims2, backend=backend, seed=seed, fullgraph=fullgraph, warm=warm)

    @settings(max_examples=n, deadline=None, database=None, suppress_health_check=list(HealthCheck),
              print_blob=False)
    @hypothesis_seed(seed)
    @given(programs(max_statements=max_statements, rules=rules), dims(), dims(), dims())
    def threads_one(program, dims1, dims2, dims3):
        rewrite.reset()
        run_threads(program, [dims1, dims2, dims3], threads, calls, backend=backend, seed=seed)

    try:
        (threads_one if threads else fuzz_one)()
    except Divergence as d:
        return [d]
    except BaseExceptionGroup as group:  # Hypothesis found several distinct failures
        found, other = group.split(Divergence)
        if other is not None:
            raise other
        return list(found.exceptions)
    return []


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m rewrite.fuzz", description=__doc__.splitlines()[0])
    p.add_argument("--examples", type=int, default=500, help="programs to generate (default 500)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--backend", default="python", help="a registered backend name (default python)")
    p.add_argument("--time-budget", type=float, default=None, help="stop after this many seconds")
    p.add_argument("--max-statements", type=int, default=8, help="statements per program (default 8)")
    p.add_argument("--focus", choices=sorted(FOCUS), default=None,
                   help="draw from a subset of the rules (writes: in-place ops, inputs and their views)")
    p.add_argument("--threads", type=int, default=0,
                   help="thread mode: this many threads call each compiled program at once")
    p.add_argument("--calls", type=int, default=10_000,
                   help="thread mode: calls each thread makes over the whole run (default 10000)")
    p.add_argument("--no-strict", action="store_true",
                   help="do not check eager runs against the traces (strict mode, the default)")
    p.add_argument("--fullgraph", action="store_true",
                   help="compile with fullgraph=True: a refusal is counted (--reasons lists them), not a divergence")
    p.add_argument("--warm", action="store_true",
                   help="each program's calls again as a new process makes them: entries loaded from the "
                        "persistent cache (a private directory of this run), against eager")
    p.add_argument("--reasons", action="store_true",
                   help="print the most common reasons for graph breaks and calls run eagerly")
    args = p.parse_args(argv)
    warnings.simplefilter("ignore")  # deprecation noise from generated code, recompile-limit notes
    rewrite.config.strict = not args.no_strict
    if args.warm:
        import tempfile
        rewrite.config.persistent_cache = "readwrite"
        rewrite.config.cache_dir = tempfile.mkdtemp(prefix="rewrite-fuzz-warm-")
    STATS.__init__()  # count this run only
    start, done, chunk_index = time.perf_counter(), 0, 0
    while done < args.examples:
        if args.time_budget is not None and time.perf_counter() - start > args.time_budget:
            break
        n = min(CHUNK, args.examples - done)
        per_program = -(-args.calls * args.threads // args.examples) if args.threads else 0
        for divergence in run_chunk(n, args.seed * 100_003 + chunk_index, args.backend, args.max_statements,
                                    args.focus, args.threads, per_program, args.fullgraph, args.warm):
            STATS.divergences += 1
            print(f"\nDIVERGENCE ({args.backend}):\n{divergence}\n", flush=True)
        done += n
        chunk_index += 1
    elapsed = time.perf_counter() - start
    rate = STATS.programs / elapsed * 60 if elapsed else 0.0
    if args.reasons:
        for why, count in STATS.reasons.most_common(25):
            print(f"{count:6d}  {why}")
    run = f"backend={args.backend} seed={args.seed}" + (f" focus={args.focus}" if args.focus else "") + \
        (f" threads={args.threads}" if args.threads else "") + (" fullgraph" if args.fullgraph else "") + \
        (" warm" if args.warm else "")
    print(f"fuzz: {run} {STATS.line()}; {elapsed:.1f} s, {rate:.0f} programs/min")
    return 1 if STATS.divergences else 0


if __name__ == "__main__":
    sys.exit(main())
