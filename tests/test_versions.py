"""What differs by Python version is decided in `rewrite/bytecode/compat.py` alone: no other
module reads `sys.version_info`; handlers named after another version's opcodes register
nothing here; and on a Python the tracer does not cover, every call runs eagerly (eager's
results) with one EagerWarning per process naming the version (simulated on this Python)."""
import ast
import pathlib
import warnings

import pytest
import torch

import rewrite
from rewrite import dispatch
from rewrite.bytecode import compat
from rewrite.trace.opcodes import HANDLERS

from conftest import eager_copy

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_only_compat_reads_the_python_version():
    readers = []
    for folder in ("rewrite", "codegen", "fuzz"):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Attribute) and node.attr in ("version_info", "hexversion") and \
                        ast.unparse(node.value) == "sys":
                    readers.append(str(path.relative_to(ROOT)))
    assert sorted(set(readers)) == ["rewrite/bytecode/compat.py"]


def test_no_module_outside_compat_names_a_version():
    """compat's rows say what differs (NULL_ABOVE_CALLABLE, TO_BOOL, ...); which versions
    they hold for is compat's alone: no other module names PY311, PY312 or PY313."""
    namers = []
    for folder in ("rewrite", "codegen", "fuzz"):
        for path in (ROOT / folder).rglob("*.py"):
            if path.name == "compat.py":
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else \
                    None
                if name is not None and name.startswith("PY3") and name[3:].isdigit():
                    namers.append(f"{path.relative_to(ROOT)}: {name}")
    assert namers == []


def test_handlers_are_registered_for_this_python_only():
    import dis
    assert set(HANDLERS) <= set(dis.opmap)
    assert not compat.OPNAMES_ELSEWHERE & set(dis.opmap)


@pytest.fixture
def untraced(monkeypatch):
    monkeypatch.setattr(compat, "UNTRACED", "tracing Python 9.9 bytecode is not supported yet (3.11 and 3.12 are)")
    monkeypatch.setattr(compat, "VERSION", "9.9")
    monkeypatch.setattr(dispatch, "_WARNED_UNTRACED", False)


def test_an_untraced_python_warns_once_per_process_and_runs_eagerly(untraced):
    def f(x):
        return x + 1

    def g(x, n):
        return x * n
    eager_f, eager_g = eager_copy(f), eager_copy(g)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rewrite.jit(f), rewrite.jit(g)
        for i in range(3):
            torch.testing.assert_close(f(torch.ones(2) * i), eager_f(torch.ones(2) * i))
            torch.testing.assert_close(g(torch.ones(2), i), eager_g(torch.ones(2), i))
    said = [str(w.message) for w in caught if issubclass(w.category, rewrite.EagerWarning)]
    assert len(said) == 1 and "Python 9.9" in said[0] and "once per process" in said[0], said


def _nested(x):
    try:
        try:
            y = len(x)
        except TypeError:
            z = 1
            raise
    except TypeError as e:
        y = len(e.args)
    try:
        y += len(x)
    except TypeError:
        y = 0
    return y


def test_rewritten_code_keeps_the_original_handler_depths():
    """The `bytecode` library derives exception-handler depths anew and gets 3.12's nested
    handlers wrong (a `raise` in an `except` in a `try`): the splice keeps the original's."""
    import textwrap
    from rewrite.bytecode.splice import splice_prologue
    from rewrite.slot import MISS, Slot
    for fn in (_nested, textwrap.TextWrapper._split, textwrap.dedent):
        code = fn.__code__
        new = splice_prologue(code, Slot(), MISS, router=lambda f: f)
        assert [e.depth for e in compat.exception_entries(new)] == [e.depth for e in compat.exception_entries(code)]
