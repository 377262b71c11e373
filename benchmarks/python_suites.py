"""CPython's own tests of Python's semantics, each test method compiled with `fullgraph=True`:
by rewrite and by torch.compile, side by side, each against the eager run of the same test.

    python benchmarks/python_suites.py                  # the default modules, both compilers
    python benchmarks/python_suites.py test_list -v     # one module, a line per test
    python benchmarks/python_suites.py --no-torch       # rewrite only (torch.compile is slow)

A test counts where its eager run passes. Each compiler's run is: pass (the test passed with
its method compiled), refused (the compiler raised that it cannot compile: a graph break under
fullgraph), fail (the test failed: a wrong value or a different exception) or crash (an error of
the compiler's own). The summary's ratio is rewrite's passes among the tests torch.compile passes.
Each module runs in a child process (a crash or a hang costs that module only); the method is a
copy of the test's function, so that rewriting it leaves the class as it was for the next run.
"""
from __future__ import annotations

import argparse
import collections
import importlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import types
import unittest

MODULES = ["test_list", "test_tuple", "test_dict", "test_defaultdict", "test_iter", "test_generators",
           "test_contextlib", "test_with", "test_raise", "test_functools", "test_sort", "test_bool"]

REFUSED = ("Unsupported", "RecompileLimitExceeded")  # rewrite's; torch's below
TORCH_REFUSED = ("Unsupported", "UserError", "InternalTorchDynamoError", "BackendCompilerFailed")


def _cases(suite):
    for test in suite:
        if isinstance(test, unittest.TestSuite):
            yield from _cases(test)
        elif isinstance(test, unittest.TestCase) and isinstance(
                getattr(type(test), test._testMethodName, None), types.FunctionType):
            yield test  # (doctests and generated cases have no method to compile)


class Hang(Exception):
    """A test ran past its time (a loop that does not end where eager's does)."""


def raise_hang(signum, frame):
    raise Hang(f"ran past {TEST_SECONDS} s")


TEST_SECONDS = 60


def _outcome(case, method) -> tuple[str, str]:
    """Run `case` with its test method replaced by `method` (None: as it is)."""
    if method is not None:
        setattr(case, case._testMethodName, method)
    result = _Result()
    signal.signal(signal.SIGALRM, raise_hang)
    signal.alarm(TEST_SECONDS)
    try:
        case.run(result)
    finally:
        signal.alarm(0)
        if method is not None:
            delattr(case, case._testMethodName)
    if result.wasSuccessful() and not result.skipped:
        return "pass", ""
    if result.skipped:
        return "skip", result.skipped[0][1]
    kind, message = result.first
    return "error" if result.errors else "fail", f"{kind}: {message}"


class _Result(unittest.TestResult):
    """Keeps the first error's class name and message's first line."""
    first = ("", "")

    def _keep(self, err):
        if not self.first[0]:
            message = str(err[1]).strip().splitlines()
            self.first = (type(err[1]).__name__, message[0] if message else "")

    def addError(self, test, err):
        self._keep(err)
        super().addError(test, err)

    def addFailure(self, test, err):
        self._keep(err)
        super().addFailure(test, err)


def copy_function(fn: types.FunctionType) -> types.FunctionType:
    copy = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    copy.__kwdefaults__, copy.__qualname__ = fn.__kwdefaults__, fn.__qualname__
    copy.__dict__.update(fn.__dict__)
    return copy


def _classify(kind: str, message: str, refused: tuple) -> str:
    if kind == "pass":
        return "pass"
    name = message.split(":", 1)[0]
    if name in refused:
        return "refused"
    if name in ("InternalError", "RewriteError", "InternalTorchDynamoError", "Hang"):
        return "crash"
    return "fail"


def run_module(name: str, torch_too: bool, verbose: bool) -> list[dict]:
    import torch

    import rewrite
    torch._dynamo.config.enable_trace_unittest = True  # (as torch's own runs of these suites)
    module = importlib.import_module(f"test.{name}")
    rows = []
    for case in _cases(unittest.defaultTestLoader.loadTestsFromModule(module)):
        fn = getattr(type(case), case._testMethodName)
        row = {"test": f"{name}.{type(case).__name__}.{case._testMethodName}"}
        kind, message = _outcome(case, None)
        row["eager"] = kind
        if kind != "pass":
            rows.append(row)
            continue
        if torch_too:
            torch._dynamo.reset()
            kind, message = _outcome(case, types.MethodType(torch.compile(copy_function(fn), fullgraph=True), case))
            row["torch"], row["torch_why"] = _classify(kind, message, TORCH_REFUSED), message[:300]
        rewrite.reset()
        start = time.perf_counter()
        kind, message = _outcome(case, types.MethodType(rewrite.jit(copy_function(fn), fullgraph=True), case))
        row["rewrite"], row["rewrite_why"] = _classify(kind, message, REFUSED), message[:300]
        row["seconds"] = round(time.perf_counter() - start, 3)
        if verbose:
            print(f"{row['test']}: rewrite {row['rewrite']} {row['rewrite_why'][:160]}"
                  + (f" | torch {row['torch']}" if torch_too else ""), file=sys.stderr, flush=True)
        rows.append(row)
    return rows


def _reason(message: str) -> str:
    """A refusal's words, with the test's own names folded, to group them."""
    message = message.split(":", 1)[-1].strip()
    message = re.sub(r"'[^']*'", "'…'", message)
    return re.sub(r"\b(test_\w+|\d+)\b", "…", message)[:110]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("modules", nargs="*", default=MODULES)
    parser.add_argument("--no-torch", action="store_true", help="rewrite only")
    parser.add_argument("-v", "--verbose", action="store_true")
    parser.add_argument("--json", help="write every test's row here")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--timeout", type=int, default=1800, help="seconds a module may take")
    args = parser.parse_args(argv)
    if args.child:
        import warnings
        warnings.simplefilter("ignore")
        os.environ.setdefault("TORCHDYNAMO_VERBOSE", "0")
        rows = run_module(args.modules[0], not args.no_torch, args.verbose)
        print("ROWS " + json.dumps(rows))
        return 0
    rows = []
    for name in args.modules:
        command = [sys.executable, __file__, name, "--child"] + ["--no-torch"] * args.no_torch + ["-v"] * args.verbose
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout)
        except subprocess.TimeoutExpired:
            print(f"{name}: timed out", flush=True)
            continue
        sys.stderr.write(done.stderr if args.verbose else "")
        line = next((line for line in done.stdout.splitlines() if line.startswith("ROWS ")), None)
        if line is None:
            print(f"{name}: the child crashed (rc {done.returncode}): {done.stderr.strip()[-300:]}", flush=True)
            continue
        module_rows = json.loads(line[5:])
        rows += module_rows
        counted = [row for row in module_rows if row["eager"] == "pass"]
        torch_pass = [row for row in counted if row.get("torch") == "pass"]
        print(f"{name:18} {len(counted):4} tests: rewrite passes {sum(row['rewrite'] == 'pass' for row in counted):4}"
              + (f", torch.compile {len(torch_pass):4}; rewrite where torch.compile passes "
                 f"{sum(row['rewrite'] == 'pass' for row in torch_pass):4}" if not args.no_torch else ""), flush=True)
    counted = [row for row in rows if row["eager"] == "pass"]
    base = counted if args.no_torch else [row for row in counted if row.get("torch") == "pass"]
    tally = collections.Counter(row["rewrite"] for row in base)
    print(f"\n{sys.version.split()[0]}: of {len(base)} tests"
          + ("" if args.no_torch else " that torch.compile(fullgraph=True) passes")
          + f", rewrite(fullgraph=True): {tally['pass']} pass, {tally['refused']} refused, "
            f"{tally['fail']} fail, {tally['crash']} crash")
    if not args.no_torch:
        print(f"(torch.compile passes {len(base)} of the {len(counted)} tests eager passes;"
              f" rewrite passes {sum(row['rewrite'] == 'pass' for row in counted)} of them)")
    reasons = collections.Counter(_reason(row["rewrite_why"]) for row in base if row["rewrite"] != "pass")
    for reason, count in reasons.most_common(40):
        print(f"{count:4}  {reason}")
    if args.json:
        with open(args.json, "w") as out:
            json.dump(rows, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
