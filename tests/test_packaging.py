"""The package as users install it: one top-level import name, honest dependencies.

The folders `codegen/` and `fuzz/` install as `rewrite.codegen` and `rewrite.fuzz`, never under
their folder names (`codegen` and `fuzz` are other projects' names on the package index).
`.ci/install-check` goes further: the wheel in a fresh venv, used from outside the repository.
"""
import os
import pathlib
import shutil
import subprocess
import sys
import zipfile
from importlib import metadata

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent
FOLDERS = {"rewrite": "rewrite", "codegen": "rewrite/codegen", "fuzz": "rewrite/fuzz"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """A wheel built from a copy of the sources (the checkout gets no build/ folder)."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    for folder in FOLDERS:
        shutil.copytree(REPO / folder, src / folder, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    "-w", str(tmp / "dist"), str(src)], check=True, capture_output=True)
    (path,) = (tmp / "dist").glob("rewrite-*.whl")
    return zipfile.ZipFile(path)


def test_the_wheels_only_top_level_import_name_is_rewrite(wheel):
    names = wheel.namelist()
    top = {n.split("/")[0] for n in names if not n.split("/")[0].endswith((".dist-info", ".data"))}
    assert top == {"rewrite"}
    (top_level,) = [n for n in names if n.endswith(".dist-info/top_level.txt")]
    assert wheel.read(top_level).decode().split() == ["rewrite"]


def test_the_wheel_holds_every_module_of_the_three_folders(wheel):
    """A subpackage missing from pyproject's package list would be left out silently."""
    names = set(wheel.namelist())
    for folder, installed in FOLDERS.items():
        for path in (REPO / folder).rglob("*.py"):
            if "__pycache__" not in path.parts:
                rel = path.relative_to(REPO / folder).as_posix()
                assert f"{installed}/{rel}" in names, f"{folder}/{rel} is not in the wheel"


def test_the_wheels_dependencies(wheel):
    (meta,) = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
    requires = [line.split(":", 1)[1].strip() for line in wheel.read(meta).decode().splitlines()
                if line.startswith("Requires-Dist:")]
    core = [r for r in requires if "extra ==" not in r]
    by_name = {r.split(">")[0].split("<")[0].split("=")[0].split(";")[0].strip(): r for r in core}
    assert "pytest" not in by_name                      # tests only: the `test` extra
    assert any(r.startswith("pytest") and 'extra == "test"' in r for r in requires)
    assert by_name["torch"].replace(" ", "") in ("torch<2.15,>=2.13", "torch>=2.13,<2.15")
    assert "<3.9" in by_name["triton"] and "3.7.1" in by_name["triton"]
    assert "hypothesis" in by_name                      # the fuzzer is a feature


def test_installed_metadata_matches_the_source():
    dist = metadata.distribution("rewrite")
    assert dist.read_text("top_level.txt").split() == ["rewrite"]


@pytest.mark.parametrize("folder", ["codegen", "fuzz"])
def test_a_folder_has_one_import_name(folder, tmp_path):
    """`rewrite.<folder>` imports; the bare folder name does not, not even from the checkout's root."""
    import importlib
    module = importlib.import_module(f"rewrite.{folder}")
    assert pathlib.Path(module.__file__).parent.name == folder
    env = dict(os.environ, PYTHONPATH="")
    outside = subprocess.run([sys.executable, "-c", f"import importlib.util; "
                              f"print(importlib.util.find_spec({folder!r}))"],
                             cwd=tmp_path, env=env, capture_output=True, text=True, check=True)
    assert outside.stdout.strip() == "None"
    inside = subprocess.run([sys.executable, "-c", f"import {folder}"], cwd=REPO, env=env,
                            capture_output=True, text=True)
    assert inside.returncode == 1 and f"import this package as rewrite.{folder}" in inside.stderr


def test_the_fuzzer_command_line_is_rewrite_fuzz(tmp_path):
    out = subprocess.run([sys.executable, "-m", "rewrite.fuzz", "--examples", "5", "--seed", "1"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "divergences: 0" in out.stdout
