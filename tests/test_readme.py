"""The README's examples run as written."""
import pathlib
import re

import rewrite

README = pathlib.Path(__file__).resolve().parent.parent / "README.md"


def python_blocks():
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_readme_first_example_runs_and_compiles_twice():
    ns = {}
    exec(compile(python_blocks()[0], str(README), "exec"), ns)
    assert len(rewrite.dispatcher_of(ns["f"]).entries) == 2


def test_every_runnable_readme_example_runs():
    runnable = [b for b in python_blocks() if b.startswith(("import", "from"))]
    assert len(runnable) >= 2
    for block in runnable:
        rewrite.reset()  # each as a fresh program would run it (other tests compiled the same models' code)
        exec(compile(block, str(README), "exec"), {})
        rewrite.reset()


def test_readme_commands_are_the_ci_commands():
    ci = (README.parent / ".ci" / "run").read_text()
    test_cmd = [line for line in README.read_text().splitlines() if "pytest" in line and "pip install" in line]
    assert test_cmd and test_cmd[0].strip() in ci
