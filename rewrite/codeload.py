"""Load generated Python source (guards, entries, backend code) under its file's name.

Each source is written to `<cache dir>/<kind>/<name>_<hash>.py` and registered with
`linecache`, so tracebacks, `inspect` and debuggers show the generated code itself. The
source is compiled from memory, never from the file: the files are there for people and
tools (and for `linecache` once its entry is dropped, say by `linecache.clearcache()`).
So a file already at that name is reused only if it is a regular file (not a link: opened
with O_NOFOLLOW), ours, with no permission for group or others, and holds exactly the bytes
that would be written; anything else is replaced. The file is written at a quiet moment, off
the compiling call's path (`later`: the writer thread the persistent cache's records go
through too), and at exit; `flush()` writes what is queued now. A file that cannot be
written costs only the file: under a refused subdirectory the source is loaded under a
pseudo-name, `<rewrite kind/name_hash>`, that linecache never looks for on disk; a full or
read-only disk leaves the path without its file. Either way tracebacks show the generated
lines while its linecache entry lives.

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

import atexit
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


def _choose(fallback) -> str | None:
    """The cache directory to use: `config.cache_dir` (or one in the temporary directory), made
    private, trimmed at most once an hour; where it is refused, `fallback(root, why)`."""
    root = config.cache_dir or os.path.join(tempfile.gettempdir(), f"rewrite-{os.getuid()}")
    try:
        os.mkdir(root, 0o700)
        os.chmod(root, 0o700)  # (mkdir's mode is cut by the umask; never widened)
    except FileExistsError:
        pass
    except OSError:
        return fallback(root, "cannot be made")
    if not _private(root):
        return fallback(root, "is not a private directory of this user (a symlink, another user's, or "
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


def prepare(kind: str) -> None:
    """Choose the cache directory and make its `kind` folder now -- on a thread of the caller's,
    ahead of the first call that reads it (rewrite.persist.prefetch) -- unless it is refused:
    then the call that needs it chooses another and warns, as it would have."""
    if _chosen(lambda root, why: None) is not None:
        try:
            _subdir(kind)
        except OSError:
            pass


def cache_dir() -> str:
    """The private directory generated files are written to (chosen once per process, and
    again if `config.cache_dir` changes)."""
    return _chosen(_fallback)


def _chosen(fallback) -> str | None:
    """The directory in use, chosen now if it is not yet (see _choose: None where `fallback`,
    given a refused one, says None)."""
    global _dir, _for
    if _dir is None or _for != config.cache_dir:
        with _lock:
            if _dir is None or _for != config.cache_dir:
                wanted = config.cache_dir
                root = _choose(fallback)
                if root is None:
                    return None
                _dir, _for = root, wanted
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


def _stem(name: str, source: str) -> str:
    return f"{safe_name(name)}_{hashlib.sha1(source.encode()).hexdigest()[:12]}"


def path_for(kind: str, name: str, source: str) -> str:
    return os.path.join(cache_dir(), kind, _stem(name, source) + ".py")


def pseudo_name(kind: str, name: str, source: str) -> str:
    """The name a source is loaded under when its file cannot be written. In angle brackets,
    as `<string>` is: linecache never looks for such a name on disk, so its entry (the
    generated lines) is all that tracebacks and `inspect` see."""
    return f"<rewrite {kind}/{_stem(name, source)}>"


def write(kind: str, name: str, source: str) -> str:
    """The path `source` is written to, at a quiet moment (see `later`); its directory is
    checked now: where it is refused, a pseudo-name (see pseudo_name), never the path of a
    file that may hold something else. A file already there is reused only if it is exactly
    what would be written (see _holds)."""
    try:
        folder = _subdir(kind)  # (first: nothing is read from a directory others may control)
    except OSError:  # (a refused directory)
        return pseudo_name(kind, name, source)
    path = os.path.join(folder, _stem(name, source) + ".py")
    later(_write_sources, (folder, path, source))
    return path


def _write_sources(items: list) -> None:
    """The writer thread's part of `write`: each queued source into its file (a full disk, a
    read-only one: that file is not written)."""
    for folder, path, source in items:
        data = source.encode()
        try:
            if not _holds(path, data):
                _count_write()
                _replace(folder, path, data)
        except OSError:
            pass


def _holds(path: str, data: bytes) -> bool:
    """Whether `path` is a private regular file of ours holding exactly `data` (then its age is
    refreshed, for trim). Anything else there (a link, a FIFO, another owner's file, one
    others could read or write, other bytes) is not trusted: it is written anew."""
    return _read_private(path, len(data)) == data


def _ours(st) -> bool:
    """A regular file of ours that nobody else can read or write."""
    return stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o077


def _read_private(path: str, most: int) -> bytes | None:
    """The bytes of `path` if it is a private regular file of ours of at most `most` bytes
    (its age refreshed, for trim), else None."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)  # (a FIFO: no hang)
    try:
        fd = os.open(path, flags)
    except OSError:  # (none yet, or a symlink: ELOOP)
        return None
    try:
        st = os.fstat(fd)
        if not _ours(st) or st.st_size > most:
            return None
        data = _read(fd, st.st_size + 1)
        if len(data) != st.st_size:
            return None
        try:
            os.utime(fd)
        except OSError:
            pass  # (its content is right: only its place in the trimming order is off)
        return data
    except OSError:
        return None
    finally:
        os.close(fd)


def read_private(kind: str, filename: str, most: int = 256 << 20) -> bytes | None:
    """The bytes of `<cache dir>/<kind>/<filename>`, if it is a private regular file of ours
    (see _read_private; the directory checked as write's), else None."""
    try:
        return _read_private(os.path.join(_subdir(kind), filename), most)
    except OSError:
        return None


def touch_private(kind: str, filename: str) -> bool:
    """Whether `<cache dir>/<kind>/<filename>` is a private regular file of ours (then its age is
    refreshed, for trim): what read_private would read, not read yet."""
    try:
        path = os.path.join(_subdir(kind), filename)
        st = os.lstat(path)
        if not _ours(st):
            return False
        os.utime(path, follow_symlinks=False)
        return True
    except OSError:
        return False


def write_private(kind: str, filename: str, data: bytes) -> bool:
    """Replace `<cache dir>/<kind>/<filename>` with `data`, atomically (see _replace); whether
    it could be written."""
    try:
        folder = _subdir(kind)
        _count_write()
        _replace(folder, os.path.join(folder, filename), data)
        return True
    except OSError:
        return False


def _read(fd: int, n: int) -> bytes:
    """Up to `n` bytes from `fd` (os.read may return fewer than asked)."""
    chunks = []
    while n > 0:
        chunk = os.read(fd, n)
        if not chunk:
            break
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _replace(folder: str, path: str, data: bytes) -> None:
    """Write `data` to a fresh temporary file and rename it to `path`: the rename replaces
    whatever is at `path` (a planted symlink itself, not its target)."""
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".", suffix=".tmp")  # O_EXCL, 0600
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


_writes = 0


def _count_write() -> None:
    """A long-lived process that keeps compiling new code trims as it goes (every 2,000 files)."""
    global _writes
    _writes += 1
    if _writes % 2000 == 0:
        trim(cache_dir(), config.cache_max_bytes)


def load(kind: str, name: str, source: str, namespace: dict) -> dict:
    """Exec `source` in `namespace` (filled in place and returned) under its file's name (or
    the pseudo-name write gives when there is no file). Its `linecache` entry lives as long
    as a function defined in it: then it goes."""
    return run(compile_source(kind, name, source), source, namespace)


def compile_source(kind: str, name: str, source: str):
    """`source` written to its file and compiled under that file's name (see load)."""
    return compile(source, write(kind, name, source), "exec")


def run(code, source, namespace: dict) -> dict:
    """Exec `code`, compiled from `source` (by compile_source, in this process or another: the
    persistent cache), in `namespace`, with `source` in linecache under the code's file name.
    `source` may be a function of no arguments that returns it (the persistent cache's, which
    reads it from a file): linecache then reads the code's own file while it is there, and
    calls that function only when it is not (a lazy entry, as `linecache.lazycache` makes)."""
    path = code.co_filename
    _LIVE[path] = _LIVE.get(path, 0) + _watch(code, path)
    if callable(source) and path.startswith("<"):  # (a pseudo-name: linecache has no lazy lookup for those)
        source = source()
    linecache.cache[path] = (source,) if callable(source) else (len(source), None, source.splitlines(True), path)
    exec(code, namespace)
    return namespace


class LazyText:
    """An attribute holding text that may be given as a function of no arguments returning it,
    called when the attribute is first read (a loaded entry's sources, in the persistent cache's
    file until asked for). As a dataclass field, its default is ""."""

    def __set_name__(self, owner, name: str):
        self.slot = "_" + name

    def __get__(self, obj, owner=None):
        if obj is None:
            return ""
        value = obj.__dict__.get(self.slot, "")
        if callable(value):
            value = obj.__dict__[self.slot] = value()
        return value

    def __set__(self, obj, value) -> None:
        obj.__dict__[self.slot] = value


_LIVE: dict[str, int] = {}  # path or pseudo-name -> code objects of it still alive


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


# -- writes at a quiet moment -----------------------------------------------------------------
QUIET = 0.25  # seconds with nothing new queued before what is queued is written
MAX_WAIT = 2.0  # ... but no later than this after the first of it was queued
_pending: list = []  # (sink, item), in the order queued
_last = 0.0  # when the last of them was queued (time.monotonic)
_queued = threading.Event()  # set while something waits to be written
_writing = threading.RLock()  # (the writer thread and flush() take what is queued under it)
_thread: threading.Thread | None = None


def later(sink, item) -> None:
    """Have `sink(items)` called on the writer thread with `item` among them, at a quiet
    moment: once nothing was queued for QUIET seconds (or MAX_WAIT after the first item),
    at `flush()`, and at exit -- so neither the first call nor the compiles right after it
    wait for the disk, or for the writer's hold on the GIL (a write takes it for about a
    millisecond: written while a burst of compiles runs, each would wait for it, up to
    sys.getswitchinterval()). Queueing wakes the thread once per batch, not per item. A
    SIGKILL within that moment loses what was queued."""
    global _last
    _pending.append((sink, item))
    _last = time.monotonic()
    if not _queued.is_set():
        if _thread is None or not _thread.is_alive():
            _start()
        _queued.set()


def flush() -> None:
    """Write everything queued now, on this thread (at exit, and for tests)."""
    with _writing:
        _write(_take())


atexit.register(flush)


def _start() -> None:
    global _thread
    with _writing:
        if _thread is None or not _thread.is_alive():
            _thread = threading.Thread(target=_write_loop, name="rewrite-writer", daemon=True)
            _thread.start()


def _after_fork() -> None:
    """A forked child starts with nothing queued (its parent writes what it queued) and no
    writer thread (started again by its first `later`); the lock may have been held."""
    global _writing, _queued, _thread
    _pending.clear()
    _writing, _queued, _thread = threading.RLock(), threading.Event(), None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def _take() -> list:
    """What is queued now, taken off the queue (items queued meanwhile stay, in order)."""
    _queued.clear()  # (before the take: an item queued after it sets it again)
    taken = _pending[:]
    del _pending[:len(taken)]
    return taken


def _write_loop() -> None:
    """Wait for something queued, then for a quiet moment (see `later`), and write it."""
    while True:
        _queued.wait()
        first = time.monotonic()
        while True:
            now = time.monotonic()
            left = min(_last + QUIET, first + MAX_WAIT) - now
            if left <= 0:
                break
            time.sleep(min(left, 0.05))  # (short naps: settings changed meanwhile count, and flush)
        with _writing:
            _write(_take())


def _write(taken: list) -> None:
    """Each sink once, with its items in the order they were queued."""
    by_sink: dict = {}
    for sink, item in taken:
        by_sink.setdefault(sink, []).append(item)
    for sink, items in by_sink.items():
        try:
            sink(items)
        except Exception:  # (a full disk, a refused directory: only those files are not written)
            pass
