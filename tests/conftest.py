import atexit
import os
import shutil
import tempfile
import types

import numpy as np
import pytest
import torch

import rewrite
from rewrite import persist

# The suite runs in strict mode (rewrite/strict.py): every eager run that stands in for a trace
# that raised is checked against it. REWRITE_STRICT=0 runs it as users run by default.
rewrite.config.strict = os.environ.get("REWRITE_STRICT", "1") not in ("", "0")


# The persistent cache (rewrite/persist.py) is on, as users have it, in a directory of this run
# alone (its subprocesses' too): tests of one code object load what an earlier test compiled,
# exactly as a new process would. Each test's records are written before the next test starts.
if not os.environ.get("REWRITE_CACHE_DIR"):
    os.environ["REWRITE_CACHE_DIR"] = rewrite.config.cache_dir = tempfile.mkdtemp(prefix="rewrite-tests-")
    atexit.register(shutil.rmtree, os.environ["REWRITE_CACHE_DIR"], ignore_errors=True)


@pytest.fixture(autouse=True)
def _fresh_caches():
    rewrite.reset()
    yield
    rewrite.reset()
    persist.flush()


def eager_copy(fn):
    """An un-jitted copy of `fn` (same code, globals, defaults and closure): the oracle."""
    code = rewrite.bytecode.original_code(fn.__code__)
    copy = types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    copy.__kwdefaults__ = fn.__kwdefaults__
    return copy


def assert_same(actual, expected):
    """Same structure, types, values (tensors: dtype, shape, values) as the eager result."""
    assert type(actual) is type(expected), (type(actual), type(expected))
    if isinstance(expected, torch.Tensor):
        assert actual.dtype == expected.dtype and actual.shape == expected.shape
        torch.testing.assert_close(actual, expected, equal_nan=True)
    elif isinstance(expected, (np.ndarray, np.generic)):  # (NumPy's float tolerance: torch's sums round otherwise)
        assert actual.dtype == expected.dtype and actual.shape == expected.shape, (actual, expected)
        if expected.dtype.kind in "fc":
            np.testing.assert_allclose(actual, expected, rtol=2e-3 if expected.dtype == np.float16 else 1e-5,
                                       atol=1e-6, equal_nan=True)
        else:
            np.testing.assert_array_equal(actual, expected)
    elif isinstance(expected, (type({}.keys()), type({}.values()), type({}.items()))):
        assert_same(list(actual), list(expected))
    elif isinstance(expected, (tuple, list)):
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected):
            assert_same(a, e)
    elif isinstance(expected, dict):
        assert list(actual) == list(expected)
        for k in expected:
            assert_same(actual[k], expected[k])
    else:
        assert actual == expected or (actual != actual and expected != expected)


class Obj:
    """A plain object to pass in (same_calls compares its attributes and their order)."""


def obj(**attrs):
    o = Obj()
    o.__dict__.update(attrs)
    return o


def same_calls(fn, make_args, calls=3, **options):
    """fn jitted and its eager copy, each called with fresh arguments: results,
    exceptions and the arguments afterwards (attributes and their order) agree."""
    eager = eager_copy(fn)
    compiled = rewrite.jit(fn, **options)
    for i in range(calls):
        outcomes, passed = [], []
        for f in (eager, compiled):
            args = make_args(i)  # made just before each run: they may reset global state
            passed.append(args)
            try:
                outcomes.append(("value", f(*args)))
            except Exception as e:  # noqa: BLE001
                outcomes.append(("raise", (type(e), str(e))))
        assert outcomes[1][0] == outcomes[0][0], outcomes
        if outcomes[0][0] == "value":
            assert_same(outcomes[1][1], outcomes[0][1])
        else:
            assert outcomes[1][1] == outcomes[0][1]
        for a, b in zip(passed[1], passed[0]):
            if isinstance(b, Obj):
                assert list(vars(a)) == list(vars(b))
                for k in vars(b):
                    assert_same(vars(a)[k], vars(b)[k])
            elif isinstance(b, torch.Tensor):
                assert_same(a, b)
    return compiled


class CompileCounter:
    """A backend that counts compiles and runs the graph as it is."""

    def __init__(self):
        self.frame_count = 0
        self.op_count = 0
        self.graphs = []

    def __call__(self, gm, example_inputs):
        self.frame_count += 1
        self.op_count += sum(n.op in ("call_function", "call_method") for n in gm.graph.nodes)
        self.graphs.append(gm)
        return gm.forward


# -- every Triton kernel the suite generates also compiles for sm_90 (no GPU needed) -------------

def pytest_configure(config):
    try:
        import rewrite.codegen.triton_backend as tb
    except ImportError:
        return
    tb.COLLECT = []


def pytest_sessionfinish(session, exitstatus):
    """Compile the kernels the tests generated for an H100/H200 target in a subprocess
    without TRITON_INTERPRET; a kernel that does not compile fails the run."""
    import json
    import os
    import subprocess
    import sys
    import tempfile

    tb = sys.modules.get("rewrite.codegen.triton_backend")
    records = getattr(tb, "COLLECT", None)
    if not records or os.environ.get("REWRITE_SKIP_SM90_CHECK"):
        return
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(records, f)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    script = os.path.join(os.path.dirname(tb.__file__), "compile_check.py")  # not -m: importing the
    proc = subprocess.run([sys.executable, script, f.name], env=env,  # codegen package turns the interpreter on
                          capture_output=True, text=True)
    os.unlink(f.name)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    lines = (proc.stdout + proc.stderr).strip().splitlines()
    shown = lines if proc.returncode else [line for line in lines if line.startswith("compile_check:")]
    if reporter is not None:
        reporter.write_line("\n".join(shown))
    if proc.returncode:
        session.exitstatus = 1
