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


RUN_BLOCKS = """
import pathlib, re, sys
import rewrite
text = pathlib.Path(sys.argv[1]).read_text()
for block in re.findall(r"```python\\n(.*?)```", text, flags=re.S):
    if block.startswith(("import", "from")):
        exec(compile(block, sys.argv[1], "exec"), {})
        rewrite.reset()
print("ran", flush=True)
"""


def test_every_runnable_readme_example_runs():
    """In a process of their own, as a user runs them (this one has compiled other tests' code)."""
    import subprocess
    import sys
    runnable = [b for b in python_blocks() if b.startswith(("import", "from"))]
    assert len(runnable) >= 2
    done = subprocess.run([sys.executable, "-c", RUN_BLOCKS, str(README)], capture_output=True, text=True,
                          timeout=600, cwd=README.parent)
    assert done.returncode == 0 and done.stdout.strip().endswith("ran"), done.stderr[-3000:]


def test_readme_commands_are_the_ci_commands():
    ci = (README.parent / ".ci" / "run").read_text()
    test_cmd = [line for line in README.read_text().splitlines() if "pytest" in line and "pip install" in line]
    assert test_cmd and test_cmd[0].strip() in ci
