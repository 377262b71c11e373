"""Generated PyTorch programs, eager against @jit, on a bounded deterministic budget.

CI runs a few hundred programs per backend (seconds). For the long run:
    REWRITE_FUZZ_EXAMPLES=5000 .venv/bin/python -m pytest tests/test_fuzz.py
or the command line: .venv/bin/python -m fuzz --examples 2000
"""
import os
import warnings

import pytest
import torch
from hypothesis import HealthCheck, given, seed, settings

import fuzz
import rewrite
from fuzz.oracle import Divergence, compare, run_program
from fuzz.programs import Program, dims, programs
from fuzz.inputs import ListSpec, ScalarSpec, TensorSpec

EXAMPLES = int(os.environ.get("REWRITE_FUZZ_EXAMPLES", "300"))


@pytest.mark.parametrize("backend", ["python", "eager"])
def test_generated_programs_match_eager(backend):
    @settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @seed(1234)
    @given(programs(), dims(), dims())
    def run(program, dims1, dims2):
        rewrite.reset()
        run_program(program, dims1, dims2, backend=backend)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run()


def test_the_oracle_catches_a_wrong_backend_and_shrinks_to_a_reproducer():
    def off_by_one(gm, example_inputs):
        def run(*args):
            return tuple(o + 1 if o.is_floating_point() else o for o in gm(*args))
        return run

    @settings(max_examples=200, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @seed(0)
    @given(programs(), dims(), dims())
    def run(program, dims1, dims2):
        rewrite.reset()
        run_program(program, dims1, dims2, backend=off_by_one)

    with warnings.catch_warnings(), pytest.raises(Divergence) as info:
        warnings.simplefilter("ignore")
        run()
    message = str(info.value)
    assert "# --- reproducer ---" in message and "def f(" in message and "def test_fuzz_repro" in message
    assert message.count("\n    t") <= 3  # shrunk to a couple of statements


def test_reproducer_is_runnable_python():
    program = Program([TensorSpec("x0", ("d1", "d2"), "float32", "transposed"), ScalarSpec("n", "int", 2),
                       ListSpec("out")], body=["t1 = x0 * n"], returns="t1")
    dims1 = {"d0": 2, "d1": 3, "d2": 4}
    run_program(program, dims1, dims1)
    from fuzz.oracle import reproducer
    text = reproducer(program, [("first call", dims1, 0)], "python")
    ns = {}
    exec(compile(text, "<repro>", "exec"), ns)
    ns["test_fuzz_repro"]()


def test_compare_reports_what_differs():
    with pytest.raises(Divergence, match="dtype|float64"):
        compare(torch.ones(2, dtype=torch.float64), torch.ones(2))
    with pytest.raises(Divergence, match="keys"):
        compare({"a": 1}, {"b": 1})
    with pytest.raises(Divergence, match="length"):
        compare([1], [1, 2])
    compare((torch.tensor(float("nan")), 1.0), (torch.tensor(float("nan")), 1.0))


def test_check_fuzzes_a_users_function():
    def attention(q, k, scale):
        s = (q @ k.transpose(-1, -2)) * scale
        return s.softmax(-1) @ k

    assert fuzz.check(attention, (torch.randn(2, 3, 4), torch.randn(2, 3, 4), 0.5), examples=20) == 20


def test_check_finds_a_divergence_in_a_users_function():
    calls = []

    def f(x):
        return x * 2

    def lying_backend(gm, example_inputs):
        calls.append(1)
        return lambda *a: tuple(o.flip(-1) for o in gm(*a))

    with pytest.raises(Divergence, match="values differ"):
        fuzz.check(f, (torch.randn(3, 4),), examples=20, backend=lying_backend)
    assert calls


def test_command_line_summary(capsys):
    from fuzz.__main__ import main

    code = main(["--examples", "30", "--seed", "3"])
    out = capsys.readouterr().out
    assert code == 0
    assert "programs run: 30, divergences: 0" in out and "programs/min" in out
