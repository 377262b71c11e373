"""The cache directory is private: 0700, ours, files 0600 written without following links,
no temporary file left by a failed write, and trimmed to a size cap oldest first. Each test
also runs a compiled function against eager: generated code loads whatever the directory."""
import os
import stat
import warnings

import pytest
import torch

import rewrite
from rewrite import codeload

from conftest import same_calls


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """Point config.cache_dir at `tmp_path/cache` (not made yet) for one test."""
    root = tmp_path / "cache"
    monkeypatch.setattr(rewrite.config, "cache_dir", str(root))
    yield root
    monkeypatch.undo()
    codeload.cache_dir()  # back to the suite's directory


def compile_something():
    def f(x):
        return x * 2 + 1
    same_calls(f, lambda c: (torch.ones(3) * c,), calls=2)


def mode(path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_made_0700_with_files_0600(cache):
    compile_something()
    assert codeload.cache_dir() == str(cache) and mode(cache) == 0o700
    files = [p for p in cache.rglob("*") if p.is_file() and p.name != ".trimmed"]
    assert files and all(mode(p) == 0o600 for p in files)
    assert all(mode(p) == 0o700 for p in cache.iterdir() if p.is_dir())


def test_an_existing_own_directory_is_made_private(cache):
    cache.mkdir(mode=0o755)
    os.chmod(cache, 0o755)
    compile_something()
    assert codeload.cache_dir() == str(cache) and mode(cache) == 0o700


@pytest.mark.parametrize("make", ["writable by others", "a symlink", "another user's"])
def test_a_directory_others_control_is_refused_with_one_warning(cache, tmp_path, make):
    if make == "writable by others":
        cache.mkdir()
        os.chmod(cache, 0o777)
    elif make == "a symlink":
        target = tmp_path / "elsewhere"
        target.mkdir(mode=0o700)
        cache.symlink_to(target)
    else:
        if os.geteuid() != 0:
            pytest.skip("needs root to make a directory another user owns")
        cache.mkdir(mode=0o700)
        os.chown(cache, 12345, 12345)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compile_something()
        compile_something()
    assert sum("is not a private directory" in str(w.message) for w in caught) == 1
    chosen = codeload.cache_dir()
    assert chosen != str(cache) and mode(chosen) == 0o700 and os.lstat(chosen).st_uid == os.getuid()
    assert not any(p.is_file() for p in cache.rglob("*"))  # nothing was written where they could reach


def test_planted_links_are_not_followed(cache, tmp_path):
    """Links where the final file, or a temporary file with a predictable name, would go."""
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    source = "x = 1\n"
    path = codeload.path_for("entries", "planted", source)
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    os.symlink(victim, f"{path}.{os.getpid()}.tmp")
    os.symlink(tmp_path / "dangling", path)
    assert codeload.load("entries", "planted", source, {})["x"] == 1
    assert victim.read_text() == "precious" and not (tmp_path / "dangling").exists()


def test_a_failed_write_leaves_no_temporary_file(cache, monkeypatch):
    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")
    codeload.cache_dir()
    monkeypatch.setattr(codeload.os, "replace", full_disk)
    compile_something()  # still compiles and runs: the source is loaded from memory
    assert not [p for p in cache.rglob("*.tmp")]


def test_trim_deletes_the_oldest_files_first(tmp_path):
    root = tmp_path / "c"
    (root / "entries").mkdir(parents=True)
    for i in range(10):
        p = root / "entries" / f"f{i}.py"
        p.write_bytes(b"x" * 10000)
        os.utime(p, (1000 + i, 1000 + i))
    size = sum(os.stat(p).st_blocks * 512 for p in (root / "entries").iterdir())
    deleted = codeload.trim(str(root), size // 2)
    left = sorted(p.name for p in (root / "entries").iterdir())
    assert deleted >= 5 and left == [f"f{i}.py" for i in range(10 - len(left), 10)]
    assert codeload.trim(str(root), size) == 0


def test_the_directory_is_trimmed_at_start_up_to_the_cap(cache, monkeypatch):
    (cache / "entries").mkdir(parents=True, mode=0o700)
    os.chmod(cache, 0o700)
    for i in range(50):
        (cache / "entries" / f"old{i}.py").write_bytes(b"x" * 8192)
    monkeypatch.setattr(rewrite.config, "cache_max_bytes", 100_000)
    compile_something()
    held = sum(os.stat(p).st_blocks * 512 for p in cache.rglob("*") if p.is_file())
    assert held <= 100_000


def test_names_from_data_make_safe_file_names(cache):
    for name in ["../../etc/passwd", "a b\nc", "ﬁeld", "\x00", "x" * 500, ""]:
        path = codeload.path_for("entries", name, "y = 2\n")
        assert os.path.dirname(path) == os.path.join(str(cache), "entries")
        assert os.path.basename(path).replace("_", "").replace(".py", "").isalnum()
