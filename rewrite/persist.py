"""The persistent cache: compiled entries written to disk, loaded by a new process instead of
tracing the call again.

What a compile produced is one *record*: the entry's generated module, compiled (the code
object, marshalled: no `compile()` on load), its guards as data (`encode_guards`: what a loaded
entry says when it misses, and dispatches on), how to find each constant the module names again
(`rewrite/locate.py`), and one hash of every code object those constants are checked by
(`locate.check_codes`). The texts -- the module's source (for tracebacks, logs and `explain`)
and the guard closure's (compiled when first needed, as in the process that traced) -- are in a
file of their own named by their SHA-256, read only when first asked for: a loaded entry's
first call does not read them (~60 % of the bytes). The tensor checker (torch's `TensorGuards`)
is made again from the recorded facts of each tensor the guards check: the loaded entry's first
call hands its tensors (read by its own checks) to `FirstTensorCheck`, which compares their
facts with the record's and builds the checker from them. A record whose constants cannot be
found again, or found changed (a function's code, its defaults), or whose tensors differ, is
not loaded: the call traces as if there were none. Entries of the `python` backend (the default
on CPU), entries without a graph, and entries that run the call eagerly are written -- at a
graph break too: its resume functions and steps are made again from how they were made
(`__rewrite_made__`, see rewrite/breaks.py); other backends' are not (yet): they trace again.

The records of one code object live in one file, `<cache dir>/persist/<key>.rwe`, keyed by
everything a compile depends on beyond the call (see `key_of`): the code object's hash
(`locate.code_hash`: its bytecode, constants, names *and line numbers*: an entry's tracebacks
name the lines as they are, so a function moved by an edit above it compiles again), the
options and backend, the settings that change what is traced, and the versions of rewrite (its
files), torch and Python. The file is `MAGIC`, the SHA-256 of the rest, and a marshalled dict
whose "key" must equal the expected one; it is read only if it is a regular file of ours that
nobody else can read (`codeload.read_private`). A record's texts are
`<cache dir>/persist/<sha256>.rws`: `SOURCES_MAGIC` and the marshalled pair, used only if its
SHA-256 is its name (a record whose texts file is gone is a miss; one found corrupt later reads
as no text: its guard closure then accepts nothing). A corrupt, truncated, foreign or stale file is a
miss, never an error. Writes go through codeload's writer thread (`codeload.later`, which
writes the generated sources too), at a quiet moment: once nothing was queued for a quarter of
a second (at most two seconds after the first), at `flush()`, and at exit -- so neither the
first call nor the compiles right after it wait for the disk or for the writer's hold on the
GIL (a SIGKILL within that moment loses those records: a miss later). Each write replaces the
file atomically with what it read plus its records, so two processes writing at once leave one
valid file (one of them's records may be lost: a miss later). The file also keeps the
automatic-dynamic state (`Dispatcher.frame_state`): a warm process makes the sizes that changed
in the cold one symbols as the cold one did.

`config.persistent_cache`: "readwrite" (the default), "read", or "off"
(`REWRITE_PERSISTENT_CACHE`). The cache directory's size cap and trimming are codeload's.
"""
from __future__ import annotations

import dataclasses
import hashlib
import marshal
import os
import sys
import threading
import time

import torch

from . import breaks, codeload, config, locate, logs
from .compile import Entry, GraphFailure, RngState, guard_maker
from .guards.codegen import GuardFunction, TensorGuards, has_facts
from .slot import NEXT

MAGIC = b"rewrite persistent entries 1\n"
SOURCES_MAGIC = b"rewrite entry sources 1\n"
SOURCES = ".rws"  # a record's sources file: <its SHA-256>.rws
KIND = "persist"
KEEP = 16  # records per code object: the newest
KNOBS = ("capture_scalar_outputs", "capture_dynamic_output_shape_ops", "automatic_dynamic_shapes",
         "assume_static_by_default", "force_parameter_static_shapes", "force_nn_module_property_static_shapes",
         "max_inline_depth", "max_trace_instructions")


def mode() -> str:
    """The setting in force: "off", "read" or "readwrite" (anything else reads as "off")."""
    value = config.persistent_cache
    return value if value in ("read", "readwrite") else "off"


_environment: tuple | None = None
_environment_thread: threading.Thread | None = None


def prefetch() -> None:
    """Compute `environment()` and choose the cache directory on a thread of its own, when this
    module is imported (while the rest of rewrite is) and again, if the setting was off then,
    when a function is jitted: the file scan (~0.5 ms) and the directory's checks (~0.1 ms) are
    then off the path of the first call."""
    global _environment_thread
    if _environment is None and _environment_thread is None and mode() != "off":
        _environment_thread = threading.Thread(target=_prefetched, name="rewrite-persist-environment", daemon=True)
        _environment_thread.start()


def _prefetched() -> None:
    environment()
    codeload.prepare(KIND)


def environment() -> tuple:
    """What every key holds: rewrite's files (sizes and modification times: an edit of rewrite
    is a new key), torch's and Python's versions."""
    global _environment
    thread = _environment_thread
    if _environment is None and thread is not None and thread is not threading.current_thread():
        thread.join()
    if _environment is None:
        stats: list = []
        root = os.path.dirname(os.path.abspath(__file__))
        _stat_tree(root, stats)
        beside = os.path.join(os.path.dirname(root), "codegen")  # (rewrite.codegen, where it is not installed)
        if os.path.isfile(os.path.join(beside, "__init__.py")):
            _stat_tree(beside, stats)
        stats.sort()
        own = hashlib.sha256(repr(stats).encode()).hexdigest()
        _environment = (own, torch.__version__, sys.version, sys.implementation.cache_tag)
    return _environment


def _stat_tree(folder: str, out: list) -> None:
    with os.scandir(folder) as entries:
        for e in entries:
            name = e.name
            if name.endswith(".py"):
                st = e.stat()
                out.append((e.path, st.st_size, st.st_mtime_ns))
            elif "." not in name and name != "__pycache__" and e.is_dir():
                _stat_tree(e.path, out)


def _backend_key(backend):
    if backend is None or isinstance(backend, str):
        return backend
    key = getattr(backend, "key", None)  # api.WithOptions: (name, mode, options)
    if isinstance(key, tuple) and isinstance(key[0], str):
        text = repr(key)
        return None if " at 0x" in text else text
    loc = locate.locate(backend, {})
    return None if loc is None else repr(loc)


def key_of(dispatcher) -> tuple | None:
    """(file name, what it must hold as "key") for the dispatcher's code object under the
    settings in force now, or None where the backend cannot be written down."""
    held = dispatcher.persisted
    code_hash = held.code_hash
    if code_hash is None:
        held.code_hash = code_hash = locate.code_hash(dispatcher.code)
    options = dispatcher.options
    backend = _backend_key(options.backend)
    if backend is None and options.backend is not None:
        return None
    key = (code_hash, backend, options.fullgraph, options.dynamic, tuple(config.get(k) for k in KNOBS),
           *environment())
    return hashlib.sha256(repr(key).encode()).hexdigest()[:40], repr(key)


class Held:
    """A dispatcher's view of the persistent cache: its code's hash (computed once), the key
    and file last read, and the records written or loaded by this process (never loaded again
    here: after `reset()` the function traces again, as it did before)."""

    def __init__(self):
        self.code_hash: str | None = None
        self.key: tuple | None = None
        self.file: dict = {}
        self.ids: set = set()


# -- writing ----------------------------------------------------------------------------------
def record_of(material: dict, qualname: str) -> tuple[dict, bytes] | None:
    """(The record of an entry's `persist` material (see compile.load_entry, and store), its
    sources file's payload), or None where a constant has no locator (then why is logged under
    `REWRITE_LOGS=perf_hints`)."""
    consts = material["consts"]
    locs = []
    for name, value in consts.items():
        loc = value.loc if isinstance(value, _Made) else locate.locate(value, consts)
        if loc is None:
            if logs.enabled("perf_hints"):
                logs.get("perf_hints").debug("entry %d of %s not persisted: constant %s (%s) has no locator",
                                             material["index"], qualname, name, type(value).__name__)
            return None
        locs.append((name, loc))
    try:
        codes = _codes_digest(locs)
    except locate.Lost as e:  # (not found again as written down: a locator's rule failed it)
        if logs.enabled("perf_hints"):
            logs.get("perf_hints").debug("entry %d of %s not persisted: %s", material["index"], qualname, e)
        return None
    sources = marshal.dumps((material["source"], material["guard"]))
    record = {"sources": hashlib.sha256(sources).hexdigest(), "code": marshal.dumps(material["code"]),
              "guards": encode_guards(material["guards"]), "consts": tuple(_in_order(locs)),
              "params": tuple(name for name, _ in locs),
              "tensors": material["tensors"], "name": material["name"], "ops": material["ops"],
              "eager_ops": material["eager_ops"], "graph": material["graph"], "graph_break": material["graph_break"],
              "reason": material["reason"], "raises": material["raises"], "where": material["where"],
              "codes": codes}
    record["id"] = hashlib.sha256(repr((record["sources"], record["consts"], record["tensors"])).encode()).hexdigest()
    return record, sources


MADE = frozenset(("tensors", "failure", "rng", "route", "resume", "at_line"))  # the locators _entry makes anew


def _in_order(locs) -> list:
    """The record's constants in the order they are found (and written: a load does not sort
    them; "params" keeps the entry's order): code objects found through functions and classes
    after them."""
    return sorted(locs, key=lambda c: c[1][0] in ("code", "classcode"))


def _codes_digest(locs) -> str | None:
    """locate.codes_digest of the code objects the constants' locators check, found again as
    _entry finds them (locate.Lost: one is not found again)."""
    found: dict = {}
    codes: list = []
    for name, loc in _in_order(locs):
        if loc[0] not in MADE:
            found[name] = locate.find(loc, found, codes)
    return locate.codes_digest(codes)


class _Made:
    """A constant the loading process makes anew for the entry (see _entry), by its locator."""

    def __init__(self, loc: tuple):
        self.loc = loc


def _made_anew(name: str, value):
    """The locator of a constant made for the entry itself (its tensor checker, its GraphFailure,
    its generators' state), or None. (Taken here: the writer thread must not keep them, nor
    what they hold -- a GraphFailure holds the graph.)"""
    if name == "___check_tensors":
        return ("tensors",)
    if name == "___route":
        return ("route",)
    made = getattr(value, "__rewrite_made__", None)  # (a graph break's resume function, its steps at the user's line)
    if isinstance(made, tuple):
        return made
    if isinstance(value, GraphFailure):
        return ("failure", value.backend_name, value.ops_in_try)
    if isinstance(value, RngState):
        return ("rng", tuple(str(g.device) for g in value.generators))
    return None


def store(dispatcher, entry: Entry) -> None:
    """Queue `entry` for writing (with "readwrite"): its record is made and written on the
    writer thread, off the compiling call's path (locating a constant there finds it as it is
    then, or not at all: never another object). The compile's material is let go here."""
    material, entry.persist = entry.persist, None
    if material is None or mode() != "readwrite":
        return
    key = key_of(dispatcher)  # (the settings in force now)
    if key is None:
        return
    material["consts"] = {name: _Made(loc) if (loc := _made_anew(name, value)) is not None else value
                          for name, value in material["consts"].items()}
    material.update(index=entry.index, ops=entry.ops, eager_ops=entry.eager_ops, graph=entry.graph, graph_break=entry.graph_break,
                    reason=entry.reason, raises=entry.raises,
                    where=tuple(tuple(w) for w in entry.where))
    codeload.later(_write_all, (key, material, dispatcher.qualname, dispatcher.persisted, dict(dispatcher.frame_state)))


def _write_all(pending: list) -> None:
    """The writer thread's part (codeload.later): the queued records, each key's file once."""
    by_key: dict = {}
    for key, *item in pending:
        by_key.setdefault(key, []).append(item)
    for key, items in by_key.items():
        try:
            write(key, items)
        except Exception:  # (a full disk, a refused directory: these entries are only not persisted)
            pass


def flush() -> None:
    """Write every queued record now, and wait until it is written (at exit, and for tests)."""
    codeload.flush()


def write(key: tuple, items: list) -> None:
    """Make the records of `items` ((material, qualname, persisted, frame_state) each) and add
    them to their key's file (replacing records with the same ids), newest last; this process
    will not load them (`persisted.ids`)."""
    new = []
    for material, qualname, persisted, _ in items:
        made = record_of(material, qualname)
        if made is not None:
            record, sources = made
            if not codeload.write_private(KIND, record["sources"] + SOURCES, SOURCES_MAGIC + sources):
                continue
            persisted.ids.add(record["id"])
            new.append(record)
    if not new:
        return
    name, text = key
    held = read(key) or {}
    newest = {r["id"]: r for r in new}  # (one record per id: the last made)
    records = [r for r in held.get("records", ()) if r.get("id") not in newest]
    records = (records + list(newest.values()))[-KEEP:]
    # (format 0: no interning flags. A load then makes plain strings instead of looking each up in
    # the process's table of interned ones -- ~1,000 for BERT, half the time of its unmarshalling --
    # for a file 40 % larger: no references to repeated strings. What shares parts -- the guards --
    # is bytes of its own, in the default format)
    payload = marshal.dumps({"key": text, "records": records, "frame_state": items[-1][3]}, 0)
    codeload.write_private(KIND, name + ".rwe", MAGIC + hashlib.sha256(payload).digest() + payload)


# -- guards, for what a loaded entry says (recompile reasons) and dispatches on ------------------
class _Unencodable(Exception):
    pass


def encode_guards(guards) -> bytes | None:
    """The guard objects as marshal-able tuples (dataclasses by their fields, sources included;
    leaves by their locators, sympy relations by `srepr`), marshalled on their own, or None
    where one cannot be: the loaded entry then says no reasons (its guards still decide). (Their
    own bytes: their sources share parts, which marshal's references write once, and a load
    unmarshals them only when first asked for.)"""
    memo: dict = {}
    try:
        return marshal.dumps(tuple(_encode(g, memo) for g in guards))
    except _Unencodable:
        return None


def _encode(obj, memo: dict):
    key = id(obj)
    if key in memo:
        return memo[key]
    if locate.marshallable(obj) and type(obj) not in (tuple, frozenset):
        out = ("lit", obj)
    elif type(obj) is tuple:
        out = ("tuple", tuple(_encode(x, memo) for x in obj))
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        cls = locate.locate(type(obj), {})
        if cls is None:
            raise _Unencodable(type(obj).__qualname__)
        out = ("dc", cls, tuple((f.name, _encode(getattr(obj, f.name), memo)) for f in dataclasses.fields(obj)
                                if f.init))
    elif type(obj).__module__.startswith("sympy."):
        import sympy  # (deferred: loaded only with symbolic sizes)
        out = ("sympy", sympy.srepr(obj))
    else:
        loc = locate.locate(obj, {})
        if loc is None:
            raise _Unencodable(type(obj).__qualname__)
        out = ("loc", loc)
    memo[key] = out
    return out


def decode_guards(encoded: bytes) -> list:
    """The guards `encode_guards` wrote (an empty list where any cannot be made again)."""
    memo: dict = {}
    try:
        return [_decode(g, memo) for g in marshal.loads(encoded)]
    except Exception:
        return []


def _decode(enc, memo: dict):
    kind = enc[0]
    if kind == "lit":
        return enc[1]
    if kind == "tuple":
        return tuple(_decode(x, memo) for x in enc[1])
    if kind == "dc":
        key = repr(enc)
        if key not in memo:
            cls = locate.find(enc[1], {})
            memo[key] = cls(**{name: _decode(value, memo) for name, value in enc[2]})
        return memo[key]
    if kind == "sympy":
        import sympy  # (deferred, as above)
        return eval(enc[1], vars(sympy))  # (srepr's text, from our own verified file)
    return locate.find(enc[1], {})


# -- reading ----------------------------------------------------------------------------------
def read(key: tuple) -> dict | None:
    """The key's file as written, or None if there is none or it is not to be trusted."""
    name, text = key
    data = codeload.read_private(KIND, name + ".rwe")
    if data is None or not data.startswith(MAGIC):
        return None
    view = memoryview(data)
    digest, payload = data[len(MAGIC):len(MAGIC) + 32], view[len(MAGIC) + 32:]
    if hashlib.sha256(payload).digest() != digest:
        return None
    try:
        held = marshal.loads(payload)
    except (ValueError, EOFError, TypeError):
        return None
    if not isinstance(held, dict) or held.get("key") != text or not isinstance(held.get("records"), list):
        return None
    return held


def read_sources(digest: str) -> tuple[str, str]:
    """(The entry module's source, its guard closure's) of a record (its "sources": the SHA-256
    of its sources file's payload), or ("", "") where that file is gone or not to be trusted."""
    data = codeload.read_private(KIND, digest + SOURCES)
    if data is None or not data.startswith(SOURCES_MAGIC):
        return "", ""
    payload = data[len(SOURCES_MAGIC):]
    if hashlib.sha256(payload).hexdigest() != digest:
        return "", ""
    try:
        texts = marshal.loads(payload)
    except (ValueError, EOFError, TypeError):
        return "", ""
    ok = type(texts) is tuple and len(texts) == 2 and all(type(t) is str for t in texts)
    return texts if ok else ("", "")


class _Sources:
    """A loaded entry's sources, read from their file when first asked for (a traceback through
    the entry, a miss, `explain`, a log), not on the first call."""

    def __init__(self, digest: str):
        self.digest = digest
        self.texts: tuple[str, str] | None = None

    def entry(self) -> str:
        return self._read()[0]

    def guard(self) -> str:
        return self._read()[1]

    def _read(self) -> tuple[str, str]:
        if self.texts is None:
            self.texts = read_sources(self.digest)
        return self.texts


def load(dispatcher, args) -> tuple[Entry, object] | None:
    """(An entry of the persistent cache whose guards accept `args`, a function that returns
    what the call returned in it -- it ran there -- or raises what it raised), or None. The
    file is read once per code object and settings."""
    if mode() == "off":
        return None
    key = key_of(dispatcher)
    if key is None:
        return None
    held = dispatcher.persisted
    if held.key != key:
        held.key, held.file = key, read(key) or {}
        state = held.file.get("frame_state")
        if isinstance(state, dict) and not dispatcher.frame_state and not dispatcher.compiles:
            dispatcher.frame_state.update(state)
    tried = held.ids
    for record in held.file.get("records", ()):
        if record.get("id") in tried:
            continue
        start = time.perf_counter()
        try:
            entry = _entry(dispatcher, record)
        except locate.Lost as e:
            if logs.enabled("perf_hints"):
                logs.get("perf_hints").debug("a persisted entry of %s does not apply: %s", dispatcher.qualname, e)
            continue
        except Exception as e:  # (a record this version cannot read: a miss)
            tried.add(record.get("id"))
            if logs.enabled("perf_hints"):
                logs.get("perf_hints").debug("a persisted entry of %s cannot be read: %s: %s", dispatcher.qualname,
                                             type(e).__name__, e)
            continue
        try:
            result = entry.fn(*args)
        except BaseException as e:  # (its guards passed: the call raised in it, as it does in eager)
            result = _Raised(e)
        if result is NEXT:  # its guards do not accept this call
            continue
        tried.add(record["id"])
        entry.compile_seconds = time.perf_counter() - start
        if logs.enabled("perf_hints"):
            logs.get("perf_hints").debug("entry of %s loaded from the persistent cache in %.2f ms",
                                         dispatcher.qualname, entry.compile_seconds * 1e3)
        if logs.enabled("guards"):
            logs.get("guards").debug("%s", entry.guard.source)
        if logs.enabled("output_code"):
            logs.get("output_code").debug("entry of %s, loaded from the persistent cache:\n%s", dispatcher.qualname,
                                          entry.source)
        return entry, result if isinstance(result, _Raised) else lambda *_: result
    return None


class _Raised:
    """Raises, when called, what the call raised in the entry that loaded."""

    def __init__(self, error: BaseException):
        self.error = error

    def __call__(self, *args):
        error, self.error = self.error, None
        raise error


def _entry(dispatcher, record: dict) -> Entry:
    """The entry `record` describes, its constants found again in this process (locate.Lost:
    one cannot be, or the call's tensors are not the recorded ones)."""
    if not codeload.touch_private(KIND, record["sources"] + SOURCES):  # (trimmed away, say: made again)
        raise locate.Lost("its sources file is gone")
    sources = _Sources(record["sources"])
    found: dict = {}
    failure = checker = None
    codes: list = []  # (their hashes checked at once, after: locate.check_codes)
    for name, loc in record["consts"]:
        kind = loc[0]
        if kind not in MADE:
            found[name] = locate.find(loc, found, codes)
        elif kind == "tensors":
            if TensorGuards is None:
                raise locate.Lost("torch's TensorGuards is not available")
            found[name] = checker = FirstTensorCheck(name, record["tensors"])
        elif kind == "failure":
            found[name] = failure = GraphFailure(dispatcher, loc[1], loc[2])
        elif kind == "rng":
            found[name] = RngState([torch.device(d) for d in loc[1]])
        elif kind == "route":
            found[name] = breaks.JIT.route_of(dispatcher)
        elif kind == "resume":
            found[name] = breaks.resume_function(dispatcher, *loc[1:])
        elif kind == "at_line":
            offset, what, n_in, n_out, with_globals = loc[1:]
            found[name] = breaks.at_line(dispatcher.code, offset, what, n_in, n_out,
                                         dispatcher.globals if with_globals else None)
    locate.check_codes(codes, record["codes"])
    if failure is not None and isinstance(found.get("___rng"), RngState):
        failure.rng = found["___rng"]  # (as compile._on_graph_error links them)
    values = [found[name] for name in record["params"]]
    code = marshal.loads(record["code"])
    ns = codeload.run(code, sources.entry, {})
    globals_ = dispatcher.globals
    fn = ns["___make_entry"](globals_, *values)
    fn.__qualname__ = fn.__name__ = f"entry_{record['name']}"
    if checker is not None:
        checker.entry = fn
    encoded = record["guards"]
    guard = GuardFunction(guard_maker(record["name"], sources.guard, globals_, values), sources.guard,
                          lambda: decode_guards(encoded) if encoded else [], dispatcher.params, globals_, lazy=True)
    entry = Entry(guard, fn, dispatcher.compiles, source=sources.entry, reason=record["reason"],
                  ops=record["ops"], eager_ops=record.get("eager_ops", 0), where=[tuple(w) for w in record["where"]],
                  raises=record["raises"], loaded=True,
                  graph=record["graph"], graph_break=record["graph_break"],
                  resumes=[value for name, value in found.items() if name.startswith("___resume")])
    if failure is not None:
        failure.entry = entry
    return entry


class FirstTensorCheck:
    """A loaded entry's tensor checker until its first call. The entry's own checks read the
    call's tensors and hand them here last of all; each is compared with the record's facts,
    torch's checker (`TensorGuards`) is made from them, and the entry's closure cell is set to
    that checker: later calls call it directly. (False where a tensor differs: the entry does
    not accept the call, and the load goes on to the next record.)"""

    def __init__(self, name: str, facts: tuple):
        self.name, self.facts = name, facts
        self.check = self.entry = None

    def __call__(self, *tensors) -> bool:
        if self.check is None:
            facts = self.facts
            if len(tensors) != len(facts) or not all(map(has_facts, tensors, facts)):
                if logs.enabled("perf_hints"):
                    logs.get("perf_hints").debug("a persisted entry does not apply: the call's tensors are not "
                                                 "the recorded ones")
                return False
            self.check = TensorGuards(*tensors, dynamic_dims_sizes=[list(f[1]) for f in facts],
                                      dynamic_dims_strides=[list(f[2]) for f in facts]).check
            code = getattr(self.entry, "__code__", None)
            if code is not None and self.name in code.co_freevars:
                self.entry.__closure__[code.co_freevars.index(self.name)].cell_contents = self.check
        return self.check(*tensors)  # (aliasing among them: False, as for the traced entry's)


prefetch()  # (the scan runs while the rest of rewrite is imported: see prefetch)
