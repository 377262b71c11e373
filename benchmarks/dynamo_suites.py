"""TorchDynamo's own unit tests (pytorch's test/dynamo/test_*.py), run as written and again with
`torch.compile` standing for rewrite: how many of the tests torch.compile passes rewrite passes.

    python benchmarks/dynamo_suites.py DIR                      # every test_*.py in DIR
    python benchmarks/dynamo_suites.py DIR test_generator.py -v # one file, a line per test
    python benchmarks/dynamo_suites.py DIR --json out.json      # every test's row, to a file

DIR holds copies of the test files (they are pytorch's, not this project's: keep them out of
it). They import `torch._dynamo.test_case`, which needs the `expecttest` package (`pip install
expecttest`; or --stub-expecttest puts a stub of it on the path); a file that imports a sibling
this DIR lacks (test_ctx_manager.py imports test_functions) finds it on a --path folder.

Each test method runs twice, in two child processes per file (each runs the file's tests in
order, so that one compiler's runs leave nothing behind for the other's): as written (the
"torch" column), and with torch.compile, torch._dynamo.optimize and optimize_assert (what
`make_dynamo_test` and `torch._dynamo.testing.standard_test` compile with) calling
`rewrite.jit(fn, fullgraph=..., backend=..., dynamic=..., mode=..., options=...)` instead (the
"rewrite" column): the backend as the test names it ("eager", "aot_eager", "inductor" or a
callable such as CompileCounter; none named: rewrite's default), optimize_assert's fullgraph=True,
optimize's nopython as fullgraph. rewrite.jit rewrites a function in place, so it is given a copy
(the test's own function stays eager, as torch.compile leaves it; --in-place jits the function
itself); a module is jitted as it is. Before each run torch._dynamo.reset() and rewrite.reset();
Dynamo's enable_trace_unittest is on (the tests compile functions that call unittest's asserts).

A run is: pass, refused (rewrite's Unsupported or RecompileLimitExceeded; Dynamo's Unsupported,
UserError, ... in the torch column), fail (a wrong value or a different exception), crash (an
error of rewrite's own, or a hang: a run past 60 s, or a child that died) or skip. A test marked
@expectedFailure (a Dynamo bug) counts by what it did: its failure as a fail, an unexpected
success as a pass. The summary: the tests torch.compile passes, how many of them rewrite passes,
the commonest reasons of the others (the error's first line, the test's own names folded) and,
apart, the failures that assert on Dynamo's internals (frame_count, op_count, counters, recorded
graphs, assertExpectedInline: in the message or about the test's line that failed) and those of
tests that expect Dynamo's own errors (an assertRaises(Unsupported, ...) in the test).
"""
from __future__ import annotations

import argparse
import collections
import functools
import importlib
import inspect
import json
import linecache
import os
import re
import signal
import subprocess
import sys
import time
import traceback
import types
import unittest

from python_suites import TEST_SECONDS, Hang, copy_function, raise_hang  # (a script: its folder is on sys.path)

STUBS = "/tmp/dynamo_stubs"
REFUSED = ("rewrite.Unsupported", "rewrite.RecompileLimitExceeded")
TORCH_REFUSED = ("Unsupported", "UserError", "InternalTorchDynamoError", "BackendCompilerFailed",
                 "RecompileLimitExceeded")
CRASH = ("rewrite.InternalError", "rewrite.RewriteError", "Hang", "ChildDied")
INTERNALS = re.compile(r"CompileCounter|frame_count|op_count|counters\b|_dynamo\.utils|assertExpectedInline|"
                       r"\.graphs\b|compilation_metrics|normalize_gm")
DYNAMO_ERRORS = re.compile(r"assertRaises\w*\(\s*(torch\._dynamo\.exc\.)?"
                           r"(Unsupported|UserError|InternalTorchDynamoError)")

# ---- the child: one file's tests, each run under torch.compile and then under rewrite ----

MODE = "torch"  # what torch.compile stands for now: "torch" (itself) or "rewrite"
IN_PLACE = False


def _copy(fn):
    """A copy of a function (or of a bound method's function), so that rewrite.jit leaves the
    test's own function eager, as torch.compile does; anything else as it is."""
    if isinstance(fn, types.MethodType) and isinstance(fn.__func__, types.FunctionType):
        return types.MethodType(_copy(fn.__func__), fn.__self__)
    if IN_PLACE or not isinstance(fn, types.FunctionType):
        return fn
    return copy_function(fn)


def _jit(fullgraph=False, dynamic=None, backend=None, mode=None, options=None, disable=False):
    """A decorator: rewrite.jit with torch.compile's keywords."""
    import rewrite

    def decorate(fn):
        if disable:
            return fn
        return rewrite.jit(_copy(fn), fullgraph=fullgraph, backend=backend, dynamic=dynamic, mode=mode,
                           options=options)
    return decorate


def _install():
    """torch.compile, torch._dynamo.optimize and optimize_assert (every name tests reach them by)
    replaced by switches: torch's own while MODE is "torch", rewrite's while it is "rewrite"."""
    import torch
    import torch._dynamo
    import torch._dynamo.testing
    real_compile, real_optimize, real_assert = torch.compile, torch._dynamo.optimize, torch._dynamo.optimize_assert

    @functools.wraps(real_compile)
    def compile(model=None, **kwargs):
        if MODE == "torch":
            return real_compile(model, **kwargs)
        decorate = _jit(**kwargs)
        return decorate if model is None else decorate(model)

    @functools.wraps(real_optimize)
    def optimize(*args, **kwargs):
        if MODE == "torch":
            return real_optimize(*args, **kwargs)
        backend = args[0] if args else kwargs.get("backend")
        return _jit(fullgraph=kwargs.get("nopython", False), dynamic=kwargs.get("dynamic"), backend=backend,
                    disable=kwargs.get("disable", False))

    @functools.wraps(real_assert)
    def optimize_assert(*args, **kwargs):
        if MODE == "torch":
            return real_assert(*args, **kwargs)
        backend = args[0] if args else kwargs.get("backend")
        return _jit(fullgraph=True, dynamic=kwargs.get("dynamic"), backend=backend)

    torch.compile = compile
    torch._dynamo.optimize = optimize
    torch._dynamo.optimize_assert = torch._dynamo.testing.optimize_assert = optimize_assert


class _Result(unittest.TestResult):
    """Keeps the first error's class, message's first line and the test file's line it came from."""
    first = None

    def __init__(self, source):
        super().__init__()
        self.source = source

    def _keep(self, err):
        if self.first is None and err is not None:
            kind, value, tb = err
            name = kind.__name__
            if kind.__module__.split(".")[0] == "rewrite":
                name = f"rewrite.{name}"
            message = str(value).strip().splitlines()
            frames = [f for f in traceback.extract_tb(tb) if f.filename == self.source]
            line, near = "", ""
            if frames:  # the test's line that failed, and the few before it
                line = frames[-1].line or ""
                near = " ; ".join(linecache.getline(self.source, n).strip()
                                  for n in range(max(1, frames[-1].lineno - 6), frames[-1].lineno))
            self.first = (name, message[0] if message else "", line, near)

    def addError(self, test, err):
        self._keep(err)
        super().addError(test, err)

    def addFailure(self, test, err):
        self._keep(err)
        super().addFailure(test, err)

    def addSubTest(self, test, subtest, err):
        self._keep(err)
        super().addSubTest(test, subtest, err)

    def addExpectedFailure(self, test, err):
        self._keep(err)
        super().addExpectedFailure(test, err)


def _run(case, source) -> dict:
    """One run of a test (a fresh instance of its case): its outcome, why, and where."""
    import torch

    import rewrite
    torch._dynamo.reset()
    rewrite.reset()
    hidden = {name: entry.hide for name, entry in torch._dynamo.config._config.items()}
    result = _Result(source)
    signal.signal(signal.SIGALRM, raise_hang)
    signal.alarm(TEST_SECONDS)
    start = time.perf_counter()
    try:
        type(case)(case._testMethodName).run(result)
    except Hang as e:  # (raised outside the test's own try: in setUp's or tearDown's caller)
        result.first = ("Hang", str(e), "", "")
    finally:
        signal.alarm(0)
        for name, hide in hidden.items():  # (mock.patch of an alias, cache_size_limit, hides it for good)
            torch._dynamo.config._config[name].hide = hide
    seconds = round(time.perf_counter() - start, 3)
    if result.skipped and not result.first:
        return {"kind": "skip", "why": str(result.skipped[0][1])[:300], "seconds": seconds}
    if result.first is None or result.unexpectedSuccesses:
        return {"kind": "pass", "why": "", "seconds": seconds}
    name, message, line, near = result.first
    return {"kind": "error", "why": f"{name}: {message}"[:300], "line": line.strip()[:200], "near": near[:400],
            "seconds": seconds}


def _classify(run: dict, refused: tuple) -> str:
    if run["kind"] in ("pass", "skip"):
        return run["kind"]
    name = run["why"].split(":", 1)[0]
    if name in refused:
        return "refused"
    return "crash" if name in CRASH else "fail"


def _cases(suite):
    for test in suite:
        if isinstance(test, unittest.TestSuite):
            yield from _cases(test)
        else:
            yield test


def run_file(directory: str, path: str, column: str, skip: int, verbose: bool) -> None:
    """Every test of one file under one compiler, a ROW line on stdout each (a crash loses no
    finished row)."""
    global MODE
    import torch
    import torch._dynamo.testing

    import rewrite  # noqa: F401 (imported before the tests: it follows torch._dynamo's reset)
    _install()
    MODE = column
    torch._dynamo.config.enable_trace_unittest = True  # (as these files' tests expect: self.assert* traced)
    stem = os.path.splitext(os.path.basename(path))[0]
    sys.path.insert(0, directory)
    try:
        module = importlib.import_module(stem)
    except Exception as e:  # noqa: BLE001 (any error of the file's own import)
        print("IMPORT " + json.dumps(f"{type(e).__name__}: {e}"[:500]), flush=True)
        return
    source = os.path.abspath(module.__file__)
    cases = list(_cases(unittest.defaultTestLoader.loadTestsFromModule(module)))
    classes = []
    for index, case in enumerate(cases):
        if index < skip:
            continue
        cls = type(case)
        if cls not in classes:  # (class fixtures: Dynamo's TestCase patches its config there)
            if classes:
                classes[-1].tearDownClass()
            cls.setUpClass()
            classes.append(cls)
        method = getattr(case, case._testMethodName)
        row = {"test": f"{stem}.{cls.__name__}.{case._testMethodName}",
               "xfail": bool(getattr(method, "__unittest_expecting_failure__", False))}
        try:
            row["expects_dynamo_error"] = bool(DYNAMO_ERRORS.search(inspect.getsource(method)))
        except (OSError, TypeError):
            row["expects_dynamo_error"] = False
        print("START " + json.dumps(row["test"]), flush=True)
        run = _run(case, source)
        row[column] = _classify(run, REFUSED if column == "rewrite" else TORCH_REFUSED)
        row.update({f"{column}_{key}": value for key, value in run.items() if key != "kind"})
        if verbose:
            print(f"{row['test']}: {column} {row[column]} {row[f'{column}_why'][:140]}", file=sys.stderr, flush=True)
        print("ROW " + json.dumps(row), flush=True)
    if classes:
        classes[-1].tearDownClass()
    print("DONE", flush=True)


# ---- the parent: a child per file and compiler, the tally ----

def _child(args, path: str, column: str) -> list[dict]:
    """A file's rows under one compiler; where its child dies or runs past its time, the test
    in flight counts as a crash and a new child goes on after it."""
    rows, skip = [], 0
    while True:
        command = [sys.executable, __file__, args.dir, path, "--child", column, "--skip", str(skip)]
        command += ["-v"] * args.verbose + ["--stub-expecttest"] * args.stub_expecttest + ["--in-place"] * args.in_place
        for folder in args.path:
            command += ["--path", folder]
        died = None
        try:
            done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=args.timeout)
            out, err = done.stdout, done.stderr
            if done.returncode:
                died = f"ChildDied: the child exited with {done.returncode}: {err.strip()[-200:]}"
        except subprocess.TimeoutExpired as e:
            out, err = e.stdout or "", e.stderr or ""
            out, err = (x.decode(errors="replace") if isinstance(x, bytes) else x for x in (out, err))
            died = f"Hang: the file's child ran past {args.timeout} s"
        died = died or "ChildDied: the child stopped without a word"
        sys.stderr.write(err if args.verbose else "")
        current, finished = None, False
        for line in out.splitlines():
            if line.startswith("IMPORT "):
                print(f"{os.path.basename(path)}: its import failed: {json.loads(line[7:])}", flush=True)
                return rows
            if line.startswith("START "):
                current = json.loads(line[6:])
                skip += 1
            elif line.startswith("ROW "):
                rows.append(json.loads(line[4:]))
                current = None
            finished |= line == "DONE"
        if finished:
            return rows
        if current is None:  # (died before its first test, or between two)
            print(f"{os.path.basename(path)}: the {column} child died: {died[:300]}", flush=True)
            return rows
        rows.append({"test": current, column: "crash", f"{column}_why": died})


def _reason(message: str) -> str:
    """An error's first line with the test's own names folded, to group them."""
    message = re.sub(r"0x[0-9a-f]+", "0x…", message)
    message = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", message)
    message = re.sub(r"\b(test_\w+|\d+(\.\d+)?)\b", "…", message)
    return message[:120]


def _internals(row: dict) -> bool:
    """Whether rewrite's failure is an assert on Dynamo's own counters or graphs: named in the
    message or the line that failed, or, where that line is an assertTrue/assertIn, in the few
    lines before it (`found = any(... counters["unimplemented"])`; `self.assertTrue(found)`)."""
    line = row.get("rewrite_line", "")
    return bool(INTERNALS.search(row.get("rewrite_why", "")) or INTERNALS.search(line)
                or re.search(r"assert(True|False|In)\b", line) and INTERNALS.search(row.get("rewrite_near", "")))


def _expecttest_or_exit(stub: bool) -> None:
    try:
        import expecttest  # noqa: F401
    except ImportError:
        if not stub:
            print("torch._dynamo.test_case needs the expecttest package: pip install expecttest "
                  "(or pass --stub-expecttest for a stub of it)", file=sys.stderr)
            sys.exit(2)
        os.makedirs(STUBS, exist_ok=True)
        with open(os.path.join(STUBS, "expecttest.py"), "w") as out:
            out.write("import unittest\n\nTestCase = unittest.TestCase\n")
        sys.path.insert(0, STUBS)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dir", help="the folder of the test files")
    parser.add_argument("files", nargs="*", help="test files in it (default: every test_*.py)")
    parser.add_argument("-v", "--verbose", action="store_true")
    parser.add_argument("--json", help="write every test's row here")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds a file's child may take")
    parser.add_argument("--stub-expecttest", action="store_true", help=f"a stub expecttest, in {STUBS}")
    parser.add_argument("--path", action="append", default=[], help="a folder to import from (repeatable)")
    parser.add_argument("--in-place", action="store_true", help="jit the test's function itself, not a copy")
    parser.add_argument("--child", choices=("torch", "rewrite"), help=argparse.SUPPRESS)
    parser.add_argument("--skip", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.dir = os.path.abspath(args.dir)
    _expecttest_or_exit(args.stub_expecttest)
    if args.child:
        global IN_PLACE
        import warnings
        warnings.simplefilter("ignore")
        IN_PLACE = args.in_place
        sys.path[:0] = args.path
        run_file(args.dir, args.files[0], args.child, args.skip, args.verbose)
        return 0
    files = args.files or sorted(f for f in os.listdir(args.dir) if re.fullmatch(r"test_\w+\.py", f))
    rows = []
    for name in files:
        file_rows = {row["test"]: row for row in _child(args, os.path.join(args.dir, name), "torch")}
        for row in _child(args, os.path.join(args.dir, name), "rewrite"):
            file_rows[row["test"]] = {**file_rows.get(row["test"], {"torch": "crash", "torch_why": "not run"}), **row}
        file_rows = list(file_rows.values())
        for row in file_rows:
            row.setdefault("rewrite", "skip")
            row.setdefault("rewrite_why", "not run")
        rows += file_rows
        base = [row for row in file_rows if row["torch"] == "pass"]
        tally = collections.Counter(row["rewrite"] for row in base)
        print(f"{name:22} {len(file_rows):4} tests: torch.compile passes {len(base):4}, rewrite passes "
              f"{tally['pass']:4} of them ({tally['refused']} refused, {tally['fail']} fail, {tally['crash']} crash, "
              f"{tally['skip']} skip); rewrite passes {sum(row['rewrite'] == 'pass' for row in file_rows)} in all",
              flush=True)
    base = [row for row in rows if row["torch"] == "pass"]
    tally = collections.Counter(row["rewrite"] for row in base)
    beyond = [row for row in rows if row["torch"] != "pass" and row["rewrite"] == "pass"]
    print(f"\n{len(rows)} tests; torch.compile passes {len(base)}; rewrite passes {tally['pass']} of them "
          f"({tally['refused']} refused, {tally['fail']} fail, {tally['crash']} crash, {tally['skip']} skip); "
          f"and {len(beyond)} that torch.compile does not pass")
    others = [row for row in base if row["rewrite"] != "pass"]
    internal = [row for row in others if _internals(row)]
    expecting = [row for row in others if row not in internal and row.get("expects_dynamo_error")]
    reasons = collections.defaultdict(list)
    for row in others:
        if row not in internal and row not in expecting:
            reasons[_reason(row["rewrite_why"])].append(row["test"].split(".", 1)[1])
    print(f"\nwhy rewrite does not pass the others ({len(others) - len(internal) - len(expecting)}; and "
          f"{len(internal)} assert on Dynamo's internals, {len(expecting)} expect Dynamo's errors, below):")
    for reason, tests in sorted(reasons.items(), key=lambda item: -len(item[1]))[:40]:
        print(f"{len(tests):4}  {reason}\n      {', '.join(tests)[:300]}")
    for title, group in (("assert on Dynamo's internals (counters, recorded graphs)", internal),
                         ("expect Dynamo's own errors (assertRaises(Unsupported, ...))", expecting)):
        print(f"\n{len(group)} {title}:")
        for row in group:
            print(f"      {row['test'].split('.', 1)[1]}: {row['rewrite_why'][:90]} | "
                  f"{row.get('rewrite_line', '')[:70]}")
    if args.json:
        with open(args.json, "w") as out:
            json.dump(rows, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
