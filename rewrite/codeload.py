"""Load generated Python source (guards, entries, backend code) under a real file name.

Each source is written once to `<cache dir>/<kind>/<name>_<hash>.py` and registered with
`linecache`, so tracebacks, `inspect` and debuggers show the generated code itself. The
files are never read back (the source is compiled from memory): they are there for people
and tools, so a file that cannot be written costs nothing but the file.

The cache directory is private: `$REWRITE_CACHE_DIR`, or `$TMPDIR/rewrite-<uid>`, made 0700.
A directory that is not ours, is a symlink, or that others could write into (and so plant
links in) is not used: a fresh private one is, with one warning. Files are created
exclusively, without following links, mode 0600 (entries embed guard literals such as
string arguments), and replace the final name atomically; a failed write leaves no
temporary file. At the first write of a process (at most once an hour) the directory is trimmed to
`config.cache_max_bytes`, oldest files first (a load refreshes a file's age); files that
others could read are made 0600 on the way.
"""
from __future__ import annotations

import hashlib
import linecache
import os
import stat
import tempfile
import threading
import time
import warnings
import weakref

from . import config

TRIM_EVERY = 3600.0  # seconds between two scans of the directory's size
_lock = threading.Lock()
_dir: str | None = None  # the directory in use, decided at the first write
_for: str | None = None  # the config.cache_dir it was chosen for
_made: set[str] = set()  # subdirectories made and checked in this process


def _private(path: str) -> bool:
    """A real directory of ours that nobody else can write into."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o022


def _choose() -> str:
    root = config.cache_dir or os.path.join(tempfile.gettempdir(), f"rewrite-{os.getuid()}")
    try:
        os.mkdir(root, 0o700)
        os.chmod(root, 0o700)  # (mkdir's mode is cut by the umask; never widened)
    except FileExistsError:
        pass
    except OSError:
        return _fallback(root, "cannot be made")
    if not _private(root):
        return _fallback(root, "is not a private directory of this user (a symlink, another user's, or "
                               "writable by others)")
    os.chmod(root, 0o700)  # ours and nobody else's to write: readable by nobody else either
    stamp = os.path.join(root, ".trimmed")
    try:
        fresh = time.time() - os.lstat(stamp).st_mtime < TRIM_EVERY
    except OSError:
        fresh = False
    if not fresh:  # (a scan of ten thousand files takes tens of milliseconds: at most once an hour)
        trim(root, config.cache_max_bytes)
        try:
            os.close(os.open(stamp, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600))
            os.utime(stamp, follow_symlinks=False)
        except OSError:
            pass
    return root


def _fallback(root: str, why: str) -> str:
    new = tempfile.mkdtemp(prefix=f"rewrite-{os.getuid()}-")  # 0700, made exclusively
    warnings.warn(f"rewrite: the cache directory {root!r} {why}; using {new!r} instead", RuntimeWarning,
                  stacklevel=4)
    return new


def cache_dir() -> str:
    """The private directory generated files are written to (chosen once per process, and
    again if `config.cache_dir` changes)."""
    global _dir, _for
    if _dir is None or _for != config.cache_dir:
        with _lock:
            if _dir is None or _for != config.cache_dir:
                _for = config.cache_dir
                _dir = _choose()
                _made.clear()
    return _dir


def _subdir(kind: str) -> str:
    path = os.path.join(cache_dir(), kind)
    if path not in _made:
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
        if not _private(path):
            raise OSError(f"{path} is not a private directory")
        _made.add(path)
    return path


def safe_name(name: str) -> str:
    """A file-name part made of `name`: letters, digits and underscores only."""
    return "".join(c if c.isascii() and (c.isalnum() or c == "_") else "_" for c in name)[:60] or "_"


def path_for(kind: str, name: str, source: str) -> str:
    digest = hashlib.sha1(source.encode()).hexdigest()[:12]
    return os.path.join(cache_dir(), kind, f"{safe_name(name)}_{digest}.py")


def write(kind: str, name: str, source: str) -> str:
    """Write `source` to its file (once; a later write only refreshes its age); its path."""
    path = path_for(kind, name, source)
    try:
        if os.path.exists(path):
            os.utime(path, follow_symlinks=False)
            return path
        _count_write()
        fd, tmp = tempfile.mkstemp(dir=_subdir(kind), prefix=".", suffix=".tmp")  # O_EXCL, 0600
        try:
            with os.fdopen(fd, "w") as f:
                f.write(source)
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
    except OSError:
        pass  # (a full disk, a read-only directory): the linecache entry still serves tracebacks
    return path


_writes = 0


def _count_write() -> None:
    """A long-lived process that keeps compiling new code trims as it goes (every 2,000 files)."""
    global _writes
    _writes += 1
    if _writes % 2000 == 0:
        trim(cache_dir(), config.cache_max_bytes)


def load(kind: str, name: str, source: str, namespace: dict) -> dict:
    """Exec `source` in `namespace` (filled in place and returned) with a real file name.
    Its `linecache` entry lives as long as a function defined in it: then it goes."""
    path = write(kind, name, source)
    code = compile(source, path, "exec")
    _LIVE[path] = _LIVE.get(path, 0) + _watch(code, path)
    linecache.cache[path] = (len(source), None, source.splitlines(True), path)
    exec(code, namespace)
    return namespace


_LIVE: dict[str, int] = {}  # path -> code objects of it still alive


def _watch(code, path: str) -> int:
    """Finalizers on the functions' code objects defined in `code` (recursively): when the
    last one is freed, the file's linecache entry is dropped. How many were watched."""
    n = 0
    for const in code.co_consts:
        if isinstance(const, type(code)):
            weakref.finalize(const, _dead, path)
            n += 1 + _watch(const, path)
    return n


def _dead(path: str) -> None:
    left = _LIVE.get(path, 1) - 1
    if left > 0:
        _LIVE[path] = left
        return
    _LIVE.pop(path, None)
    linecache.cache.pop(path, None)


def trim(root: str, max_bytes: int) -> int:
    """Delete the oldest generated files under `root` until they take at most `max_bytes` of
    disk (to 80 % of it, so that trimming is rare); the number of files deleted."""
    files, total = [], 0
    try:
        for kind in os.scandir(root):
            if not kind.is_dir(follow_symlinks=False):
                continue
            for entry in os.scandir(kind.path):
                if entry.is_file(follow_symlinks=False):
                    st = entry.stat(follow_symlinks=False)
                    size = getattr(st, "st_blocks", 0) * 512 or st.st_size  # what the disk holds
                    files.append((st.st_mtime, size, entry.path))
                    total += size
                    if st.st_mode & 0o077:  # written by an older version: private now
                        os.chmod(entry.path, 0o600)
    except OSError:
        return 0
    if total <= max_bytes:
        return 0
    deleted = 0
    for _, size, path in sorted(files):
        if total <= max_bytes * 0.8:
            break
        try:
            os.unlink(path)
            total -= size
            deleted += 1
        except OSError:
            pass
    return deleted
