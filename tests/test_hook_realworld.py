"""Unmodified programs under `python -m rewrite.hook`, against plain `python`:

* the pytest suites (parts of them) of two third-party pure-Python packages -- mpmath 1.3.0
  and sympy 1.14.0, installed with this project (sympy is a dependency; mpmath is sympy's) --
  instrumented with `--include <package>`: the same tests pass, fail and are skipped;
* examples/hook_training/train.py, a small training loop: the same losses, with its model
  code compiled (`--report`).
"""
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUITES = {
    "mpmath": ["mpmath.tests.test_basic_ops", "mpmath.tests.test_convert", "mpmath.tests.test_linalg",
               "mpmath.tests.test_functions"],
    "sympy": ["sympy.sets.tests.test_sets", "sympy.sets.tests.test_fancysets"],
}


def run(args, cwd=ROOT):
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=900)


def outcome(stdout: str) -> str:
    """pytest's summary without the time: '1 failed, 83 passed, 1 warning'."""
    last = [line for line in stdout.splitlines() if re.search(r"\d+ (passed|failed)", line)][-1]
    return re.sub(r" in [\d.]+s.*", "", last.strip("= "))


@pytest.mark.parametrize("package", list(SUITES))
def test_a_third_party_test_suite_gives_the_same_result_under_the_hook(package, tmp_path):
    pytest.importorskip(package)
    tests = ["-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "ignore::DeprecationWarning", "--pyargs",
             *SUITES[package]]
    plain = run(tests, cwd=tmp_path)
    hooked = run(["-m", "rewrite.hook", "--include", package, "--report", *tests], cwd=tmp_path)
    assert outcome(hooked.stdout) == outcome(plain.stdout), hooked.stdout[-3000:] + hooked.stderr[-3000:]
    instrumented = int(re.search(r"(\d+) functions instrumented", hooked.stderr).group(1))
    assert instrumented > 500  # the package's own functions were spliced as they were imported


def test_a_training_script_gives_the_same_losses_with_its_model_compiled():
    script = os.path.join("examples", "hook_training", "train.py")
    plain = run([script, "2"])
    hooked = run(["-m", "rewrite.hook", "--report", script, "2"])
    assert plain.returncode == hooked.returncode == 0, hooked.stderr
    assert hooked.stdout == plain.stdout and "epoch 1: loss" in plain.stdout
    rows = {line.split()[0]: line.split()[2:] for line in hooked.stderr.splitlines() if "(model.py:" in line}
    assert rows["MLP.forward"][0] == "1" and rows["loss_fn"][0] == "1"  # one graph each
