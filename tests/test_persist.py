"""The persistent cache (rewrite/persist.py): entries a process compiled, loaded by the next
one instead of tracing, with eager's results; anything not to be trusted is a miss.

In-process tests stand a new `jit` of the same function in for a new process (its dispatcher
has read nothing yet); the subprocess tests run real fresh processes."""
import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import rewrite
from rewrite import codeload, persist
from rewrite import dispatcher_of

from conftest import assert_same


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A private cache directory of its own, the persistent cache reading and writing."""
    monkeypatch.setattr(rewrite.config, "cache_dir", str(tmp_path / "cache"))
    monkeypatch.setattr(rewrite.config, "persistent_cache", "readwrite")
    yield tmp_path / "cache"
    persist.flush()


def scaled(x, w):
    return torch.relu(x @ w) * SCALE + torch.nn.functional.gelu(x).sum()


SCALE = 2.0


def entries_of(fn):
    return dispatcher_of(fn).entries


def fresh(fn, **options):
    """A jitted copy of `fn` as a new process sees it: no entries, nothing read from the cache
    (functions of one code share a dispatcher: it is reset, and forgets what it wrote)."""
    import types
    from rewrite.bytecode import original_code
    copy = rewrite.jit(types.FunctionType(original_code(fn.__code__), fn.__globals__, fn.__name__,
                                          fn.__defaults__, fn.__closure__), **options)
    new_process(dispatcher_of(copy))
    return copy


def new_process(dispatcher):
    dispatcher.reset()
    dispatcher.persisted = persist.Held()


def files(cache, suffix=".rwe"):
    """The persistent cache's record files (or, with suffix=".rws", their texts files)."""
    folder = cache / "persist"
    return sorted(p for p in folder.iterdir() if p.suffix == suffix) if folder.exists() else []


def test_a_new_dispatcher_loads_what_another_compiled(cache):
    x, w = torch.randn(4, 3), torch.randn(3, 5)
    expected = scaled(x, w)
    first = fresh(scaled)
    assert_same(first(x, w), expected)
    assert not entries_of(first)[0].loaded
    persist.flush()
    assert len(files(cache)) == 1
    second = fresh(scaled)
    assert_same(second(x, w), expected)
    (entry,) = entries_of(second)
    assert entry.loaded and entry.ops == entries_of(first)[0].ops
    x2 = torch.randn(4, 3)
    assert_same(second(x2, w), scaled(x2, w))  # (a hit of the loaded entry)
    assert len(entries_of(second)) == 1


def test_a_changed_global_misses_and_compiles_correctly(cache, monkeypatch):
    x, w = torch.randn(4, 3), torch.randn(3, 5)
    fresh(scaled)(x, w)
    persist.flush()
    monkeypatch.setitem(globals(), "SCALE", 3.0)
    again = fresh(scaled)
    assert_same(again(x, w), scaled(x, w))
    (entry,) = entries_of(again)
    assert not entry.loaded  # (its guard on SCALE failed: traced again)


def test_other_options_are_another_key(cache, monkeypatch):
    x, w = torch.randn(4, 3), torch.randn(3, 5)
    fresh(scaled)(x, w)
    persist.flush()
    full = fresh(scaled, fullgraph=True)
    assert_same(full(x, w), scaled(x, w))
    assert not entries_of(full)[0].loaded
    monkeypatch.setattr(rewrite.config, "capture_scalar_outputs", not rewrite.config.capture_scalar_outputs)
    other = fresh(scaled)
    assert_same(other(x, w), scaled(x, w))
    assert not entries_of(other)[0].loaded


def test_other_tensors_miss(cache):
    x, w = torch.randn(4, 3), torch.randn(3, 5)
    fresh(scaled)(x, w)
    persist.flush()
    for x2, w2 in [(x.double(), w.double()), (x.requires_grad_(), w), (torch.randn(3, 4).t(), w)]:
        other = fresh(scaled)
        assert_same(other(x2, w2), scaled(x2, w2))
        assert not entries_of(other)[0].loaded


def _doubled(x, k=2):
    return x * k


def through_callee(x):
    return torch.relu(_doubled(x)) + 1


@pytest.mark.parametrize("change", ["code", "defaults"])
def test_a_callee_whose_code_or_defaults_changed_is_a_miss(cache, change):
    """A function the entry inlined is found again by name; its code is checked with every
    other code object of the entry at once (locate.check_codes), its defaults one by one."""
    x = torch.randn(4, 3)
    fresh(through_callee)(x)
    persist.flush()
    attr = "__code__" if change == "code" else "__defaults__"
    before = getattr(_doubled, attr)
    setattr(_doubled, attr, (lambda x, k=2: x * k + 1).__code__ if change == "code" else (3,))
    try:
        again = fresh(through_callee)
        assert_same(again(x), through_callee(x))
        assert not entries_of(again)[0].loaded
    finally:
        setattr(_doubled, attr, before)
    same = fresh(through_callee)
    assert_same(same(x), through_callee(x))
    assert entries_of(same)[0].loaded


def test_codes_are_checked_one_by_one_where_their_hash_together_differs():
    """The hash of all an entry's code objects (made when the record was) differs where the same
    code objects are found as other objects -- equal copies, say -- then each is checked alone."""
    from rewrite import locate
    code, other = _doubled.__code__, through_callee.__code__
    pairs = [(code, locate.code_hash(code)), (other, locate.code_hash(other))]
    digest = locate.codes_digest(pairs)
    locate.check_codes(pairs, digest)
    locate.check_codes(pairs, "0" * 64)  # (a digest of other objects: each one's own hash decides)
    changed = [(code.replace(co_name="renamed"), pairs[0][1]), pairs[1]]
    with pytest.raises(locate.Lost, match="_doubled changed"):
        locate.check_codes(changed, digest)


def test_a_loaded_entry_says_why_a_call_misses_as_the_traced_one_does(cache):
    """Its guards, as data (marshalled on their own, unmarshalled when first asked for), give
    the recompile reasons the traced entry's give."""
    x, w = torch.randn(4, 3), torch.randn(3, 5)
    traced = fresh(scaled)
    traced(x, w)
    persist.flush()
    again = fresh(scaled)
    again(x, w)
    (entry,) = entries_of(again)
    assert entry.loaded and entry.guard.guards
    for args in [(x.double(), w), (x, torch.randn(3, 6)), (x[:, :2], w)]:
        expected = entries_of(traced)[0].guard.failures(args)
        assert expected and entry.guard.failures(args) == expected


def added(a, b):
    return a * 2 + b


def test_a_loaded_entry_checks_its_first_calls_tensors_then_holds_torchs_checker(cache):
    a, b = torch.randn(4, 3), torch.randn(4, 3)
    fresh(added)(a, b)
    persist.flush()
    again = fresh(added)
    assert_same(again(a, b), added(a, b))
    (entry,) = entries_of(again)
    assert entry.loaded
    fn = entry.fn
    cell = fn.__closure__[fn.__code__.co_freevars.index("___check_tensors")]
    assert not isinstance(cell.cell_contents, persist.FirstTensorCheck)  # (torch's checker itself, now)
    assert_same(again(b, a), added(b, a))
    assert [e.loaded for e in entries_of(again)] == [True]
    aliased = fresh(added)  # (one tensor for both: torch's checker made from the call refuses it)
    assert_same(aliased(a, a), added(a, a))
    assert not entries_of(aliased)[0].loaded


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.norm, self.fc2 = torch.nn.Linear(6, 8), torch.nn.LayerNorm(8), torch.nn.Linear(8, 2)

    def forward(self, x):
        return self.fc2(torch.nn.functional.gelu(self.norm(self.fc1(x))))


def test_modules_load_and_read_their_own_parameters(cache):
    torch.manual_seed(0)
    model, other = Net(), Net()
    x = torch.randn(5, 6)
    expected = model(x)
    assert_same(rewrite.jit(model)(x), expected)
    persist.flush()
    expected_other = other(x)
    rewrite.jit(other)  # (instances of one class share compiled code: a new process's view of it)
    new_process(dispatcher_of(other.forward))
    assert_same(other(x), expected_other)
    assert [loaded for _, loaded in _loaded()] == [True]
    with torch.no_grad():
        other.fc1.weight.add_(1.0)
    expected_other = type(other).forward(other, x)
    assert_same(other(x), expected_other)  # (a hit: the loaded entry reads the new weights)
    assert [loaded for _, loaded in _loaded()] == [True]


def _loaded() -> list:
    """(qualname, loaded) of every entry of every function in the process."""
    from rewrite.dispatch import _ALL
    return [(d.qualname, e.loaded) for d in list(_ALL) for e in d.entries]


def _corrupt(path, how):
    data = path.read_bytes()
    if how == "missing":
        path.unlink()
    elif how == "flipped":
        path.write_bytes(data[:-10] + bytes([data[-10] ^ 0xFF]) + data[-9:])
    elif how == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "readable":  # others may read it: not ours alone
        os.chmod(path, 0o644)
    elif how == "symlink":
        target = path.with_suffix(".real")
        path.rename(target)
        path.symlink_to(target)
    elif how == "stale":  # a valid file for another key (another version, another environment)
        import hashlib
        import marshal
        held = marshal.loads(data[len(persist.MAGIC) + 32:])
        held["key"] = held["key"].replace("(", "('another', ", 1)
        payload = marshal.dumps(held)
        path.write_bytes(persist.MAGIC + hashlib.sha256(payload).digest() + payload)
    elif how == "garbage":
        path.write_bytes(persist.MAGIC + b"\0" * 32 + b"not marshal")


@pytest.mark.parametrize("suffix, how", [
    *((".rwe", how) for how in ["flipped", "truncated", "empty", "readable", "symlink", "stale", "garbage"]),
    # the texts (the entry's source, its guard's) are read when first asked for, not on load: a
    # texts file that is gone or not ours alone makes the record a miss at once
    *((".rws", how) for how in ["missing", "readable", "symlink"])])
def test_untrusted_files_are_misses(cache, suffix, how):
    x, w = torch.randn(4, 3), torch.randn(3, 5)
    fresh(scaled)(x, w)
    persist.flush()
    (path,) = files(cache, suffix)
    os.chmod(path, 0o600)
    _corrupt(path, how)
    again = fresh(scaled)
    assert_same(again(x, w), scaled(x, w))
    assert not entries_of(again)[0].loaded


@pytest.mark.parametrize("how", ["flipped", "truncated", "garbage"])
def test_a_corrupt_texts_file_reads_as_no_text_and_a_guard_that_accepts_nothing(cache, how):
    """Found corrupt when first read (after the entry loaded): the entry's source is empty, and
    its guard closure -- what a miss asks before compiling anew -- accepts no call; calls
    still run the loaded entry (its own checks) and give eager's results."""
    x, w = torch.randn(4, 3), torch.randn(3, 5)
    fresh(scaled)(x, w)
    persist.flush()
    (path,) = files(cache, ".rws")
    again = fresh(scaled)
    _corrupt(path, how)
    assert_same(again(x, w), scaled(x, w))
    (entry,) = entries_of(again)
    assert entry.loaded and entry.source == "" and entry.guard.source == ""
    assert not entry.guard.fn(x, w)
    y = torch.randn(2, 3, dtype=torch.float64)
    assert_same(again(y, w.double()), scaled(y, w.double()))  # (a miss: compiled anew)
    assert_same(again(x, w), scaled(x, w))
    assert sorted(e.loaded for e in entries_of(again)) == [False, True]


def test_a_loaded_entry_reads_its_texts_when_asked_and_tracebacks_show_its_lines(cache):
    x, w = torch.randn(4, 3), torch.randn(3, 5)
    first = fresh(scaled)
    first(x, w)
    persist.flush()
    traced = entries_of(first)[0]
    again = fresh(scaled)
    assert_same(again(x, w), scaled(x, w))
    (entry,) = entries_of(again)
    assert entry.loaded
    assert traced.source.strip() in entry.source and entry.guard.source == traced.guard.source
    import linecache
    path = entry.fn.__code__.co_filename
    for p in cache.rglob("entries/*.py"):
        p.unlink()  # (the entry module's file gone: linecache asks the texts file)
    linecache.checkcache()
    lines = linecache.getlines(path)
    assert "".join(lines).strip() == entry.source.strip()  # (the module the entry's code was compiled from)


def test_foreign_owned_files_are_misses(cache, monkeypatch):
    x, w = torch.randn(4, 3), torch.randn(3, 5)
    fresh(scaled)(x, w)
    persist.flush()
    (path,) = files(cache)
    real = os.fstat
    monkeypatch.setattr(os, "fstat", lambda fd: _owned_by_other(real(fd)))
    again = fresh(scaled)
    assert_same(again(x, w), scaled(x, w))
    assert not entries_of(again)[0].loaded


def _owned_by_other(st):
    fields = list(st)
    fields[4] = os.getuid() + 1  # st_uid
    return os.stat_result(fields)


def test_off_writes_nothing_and_read_only_reads(cache, monkeypatch):
    x, w = torch.randn(4, 3), torch.randn(3, 5)
    monkeypatch.setattr(rewrite.config, "persistent_cache", "off")
    fresh(scaled)(x, w)
    persist.flush()
    assert files(cache) == []
    monkeypatch.setattr(rewrite.config, "persistent_cache", "readwrite")
    fresh(scaled)(x, w)
    persist.flush()
    (path,) = files(cache)
    before = path.read_bytes()
    monkeypatch.setattr(rewrite.config, "persistent_cache", "read")
    loads = fresh(scaled)
    assert_same(loads(x, w), scaled(x, w))
    assert entries_of(loads)[0].loaded
    y = torch.randn(2, 3, dtype=torch.float64)
    assert_same(loads(y, w.double()), scaled(y, w.double()))  # (compiled, not written)
    persist.flush()
    assert path.read_bytes() == before
    monkeypatch.setattr(rewrite.config, "persistent_cache", "off")
    never = fresh(scaled)
    never(x, w)
    assert not entries_of(never)[0].loaded


def test_records_wait_for_a_quiet_moment_then_one_write_per_file(cache, monkeypatch):
    """The writer holds what compiles queue until none came for QUIET seconds (here: never,
    within the test) or flush(): then each file is written once with all of its records."""
    monkeypatch.setattr(codeload, "QUIET", 60.0)  # (the writer thread's: codeload.later)
    monkeypatch.setattr(codeload, "MAX_WAIT", 60.0)
    persist.flush()  # (the writer, waiting on the queue, takes the new values with its next record)
    x, w = torch.randn(4, 3), torch.randn(3, 5)
    first = fresh(scaled)
    assert_same(first(x, w), scaled(x, w))
    y = torch.randn(2, 3, dtype=torch.float64)
    assert_same(first(y, w.double()), scaled(y, w.double()))  # (a second record, same code: same file)
    assert files(cache) == []  # (queued: nothing written while compiles may follow)
    persist.flush()
    (path,) = files(cache)
    again = fresh(scaled)
    assert_same(again(y, w.double()), scaled(y, w.double()))
    assert_same(again(x, w), scaled(x, w))
    assert [e.loaded for e in entries_of(again)] == [True, True]


def sized(x):
    return x * 2 + x.sum()


def test_automatic_dynamic_state_persists(cache):
    cold = fresh(sized)
    for n in (3, 5):
        t = torch.randn(n)
        assert_same(cold(t), sized(t))
    assert [e.loaded for e in entries_of(cold)] == [False, False]
    persist.flush()
    warm = fresh(sized)
    for n in (3, 7, 9):  # the static entry, then the dynamic one: nothing traced
        t = torch.randn(n)
        assert_same(warm(t), sized(t))
    assert [e.loaded for e in entries_of(warm)] == [True, True]
    warm2 = fresh(sized)
    t = torch.randn(11)  # the dynamic entry first; (3,) then compiles as the cold process would have
    assert_same(warm2(t), sized(t))
    assert entries_of(warm2)[0].loaded
    assert dispatcher_of(warm2).frame_state  # (read back with the records)


def gathered(x, idx):
    return x.gather(0, idx) * 2


def test_a_loaded_entry_raises_as_eager(cache):
    x = torch.randn(6)
    good, bad = torch.tensor([0, 5]), torch.tensor([0, 9])
    assert_same(fresh(gathered)(x, good), gathered(x, good))
    persist.flush()
    again = fresh(gathered)
    with pytest.raises(RuntimeError) as eager:
        gathered(x, bad)
    with pytest.raises(RuntimeError) as compiled:
        again(x, bad)  # (the loaded entry's guards pass; its graph raises, as eager)
    assert str(compiled.value) == str(eager.value)
    assert_same(again(x, good), gathered(x, good))
    assert [e.loaded for e in entries_of(again)] == [True]


SCRIPT = textwrap.dedent('''
    import json, sys, torch, rewrite
    sys.path.insert(0, {tests!r})
    from helpers_persist import Net, step
    torch.manual_seed(0)
    net = Net().eval()
    x = torch.randn(4, 8)
    expected = [net(x), step(x, 3)]
    jnet, jstep = rewrite.jit(net), rewrite.jit(step)
    got = [jnet(x), jstep(x, 3)]
    from rewrite.dispatch import _ALL
    loaded = sorted((d.qualname, e.loaded) for d in list(_ALL) for e in d.entries)
    same = all(torch.equal(a, b) for a, b in zip(got, expected))
    print(json.dumps({{"same": same, "loaded": loaded}}))
''')

HELPERS = textwrap.dedent('''
    import torch

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(8, 8)
            self.kind = "tanh"

        def forward(self, x):
            if self.kind not in {"tanh", "gelu", "silu"}:  # (a set among the constants: hashed alike
                raise ValueError(self.kind)                  # whatever the string hashes)
            return torch.tanh(self.fc(x)) + x

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = torch.nn.ModuleList([Block(), Block()])

        def forward(self, x):
            for b in self.blocks:
                x = b(x)
            return x.softmax(-1)

    def step(x, n):
        return (x * n).cumsum(0)
''')


def run_script(tmp_path, cache_dir, env_extra=None):
    env = {**os.environ, "REWRITE_CACHE_DIR": str(cache_dir), "REWRITE_PERSISTENT_CACHE": "readwrite",
           "OMP_NUM_THREADS": "1", **(env_extra or {})}
    script = tmp_path / "script.py"
    script.write_text(SCRIPT.format(tests=str(tmp_path)))
    out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_fresh_processes_load_with_eager_results(tmp_path):
    (tmp_path / "helpers_persist.py").write_text(HELPERS)
    cache_dir = tmp_path / "cache"
    cold = run_script(tmp_path, cache_dir, {"PYTHONHASHSEED": "1"})
    assert cold["same"] and cold["loaded"] and not any(loaded for _, loaded in cold["loaded"])
    warm = run_script(tmp_path, cache_dir, {"PYTHONHASHSEED": "2"})  # (code hashed alike whatever the string hashes)
    assert warm["same"] and all(loaded for _, loaded in warm["loaded"]), warm
    # an edited callee (Block.forward): the entry that inlined it is a miss, traced again
    (tmp_path / "helpers_persist.py").write_text(HELPERS.replace("torch.tanh(self.fc(x)) + x",
                                                                 "torch.sigmoid(self.fc(x)) + x"))
    edited = run_script(tmp_path, cache_dir)
    assert edited["same"], edited
    assert dict(edited["loaded"]) == {"Net.forward": False, "step": True}, edited
    off = run_script(tmp_path, cache_dir, {"REWRITE_PERSISTENT_CACHE": "off"})
    assert off["same"] and not any(loaded for _, loaded in off["loaded"])


WRITER = textwrap.dedent('''
    import sys, torch, rewrite
    sys.path.insert(0, {tests!r})
    from helpers_persist import step
    jstep = rewrite.jit(step, dynamic=False)
    for dtype in {dtypes}:
        for n in range(2, 6):
            x = torch.ones(n, 3, dtype=dtype)
            assert torch.equal(jstep(x, 3), step(x, 3))
            rewrite.reset()  # (every call compiles, and writes)
''')


def test_two_processes_writing_at_once_leave_a_valid_file(tmp_path):
    (tmp_path / "helpers_persist.py").write_text(HELPERS)
    cache_dir = tmp_path / "cache"
    env = {**os.environ, "REWRITE_CACHE_DIR": str(cache_dir), "REWRITE_PERSISTENT_CACHE": "readwrite",
           "OMP_NUM_THREADS": "1"}
    procs = []
    for i, dtypes in enumerate(["[torch.float32, torch.float64]", "[torch.int32, torch.int64]"]):
        script = tmp_path / f"writer{i}.py"
        script.write_text(WRITER.format(tests=str(tmp_path), dtypes=dtypes))
        procs.append(subprocess.Popen([sys.executable, str(script)], env=env, stderr=subprocess.PIPE, text=True))
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    (path,) = files(cache_dir)
    data = path.read_bytes()
    import hashlib
    import marshal
    payload = data[len(persist.MAGIC) + 32:]
    assert data.startswith(persist.MAGIC) and hashlib.sha256(payload).digest() == data[len(persist.MAGIC):][:32]
    held = marshal.loads(payload)
    assert 1 <= len(held["records"]) <= persist.KEEP
    for record in held["records"]:  # (each one's texts file written whole, by one of them or both)
        texts = (cache_dir / "persist" / (record["sources"] + ".rws")).read_bytes()
        assert hashlib.sha256(texts[len(persist.SOURCES_MAGIC):]).hexdigest() == record["sources"]


def printing(x, n):
    y = torch.relu(x) * 2
    print("between graphs", n)  # a graph break: the rest is a resume function
    z = y.sum() + n
    if z > 0:  # (a break on a tensor's truth value)
        return y - z
    return y + z


def every_dispatcher_new():
    from rewrite.dispatch import _ALL
    rewrite.reset()
    for d in list(_ALL):
        d.persisted = persist.Held()


def test_graph_breaks_load_with_their_resume_functions(cache, capsys):
    x = torch.randn(5)
    expected = printing(x, 3)
    eager_out = capsys.readouterr().out
    compiled = fresh(printing)
    assert_same(compiled(x, 3), expected)
    assert capsys.readouterr().out == eager_out
    persist.flush()
    every_dispatcher_new()
    for v in (x, -x.abs() - 10):  # (both sides of the branch)
        expected = printing(v, 3)
        eager_out = capsys.readouterr().out
        assert_same(compiled(v, 3), expected)
        assert capsys.readouterr().out == eager_out
    loaded = _loaded()
    assert ("printing", True) in loaded and any(q.startswith("resume_in_printing") and done for q, done in loaded), \
        loaded



def indexed_with_dropout(x):
    try:
        t = x[x.long().abs() % (x.shape[0] + 1)]  # raises IndexError for some values
    except IndexError:
        t = x.new_zeros(x.shape)
    return t, torch.nn.functional.dropout(x, 0.3)


def test_a_loaded_graph_that_raises_under_try_runs_again_eagerly_with_the_same_draws(cache):
    """The loaded entry's GraphFailure puts the generators back before the eager run (as the
    compiled entry's does): the draws are eager's. (Found by `fuzz --warm`, seed 5421.)"""
    fine, raising = torch.tensor([0.5, 1.5]), torch.tensor([2.0, 0.0])
    compiled = fresh(indexed_with_dropout)
    torch.manual_seed(0)
    expected = indexed_with_dropout(fine)
    torch.manual_seed(0)
    assert_same(compiled(fine), expected)
    persist.flush()
    new_process(dispatcher_of(compiled))
    for x in (fine, raising):
        torch.manual_seed(1)
        expected = indexed_with_dropout(x)
        torch.manual_seed(1)
        assert_same(compiled(x), expected)
    assert [e.loaded for e in entries_of(compiled)] == [True]


HOOKED = textwrap.dedent('''
    import json, torch

    def helper(x):
        return torch.tanh(x) * 2

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 4)

        def forward(self, x):
            return helper(self.fc(x)).sum(-1)

    torch.manual_seed(0)
    m, x = M(), torch.randn(3, 4)
    outs = [m(x).tolist() for _ in range(3)]
    from rewrite.dispatch import _ALL
    loaded = sorted((d.qualname, e.loaded) for d in list(_ALL) for e in d.entries)
    print(json.dumps({"outs": outs, "loaded": loaded}))
''')


def test_the_import_hook_starts_warm(tmp_path):
    """Under `python -m rewrite.hook` every function's code carries a prologue: what a compiled
    entry inlined is found again by the hash of that code, the same in every process."""
    script = tmp_path / "hooked.py"
    script.write_text(HOOKED)
    env = {**os.environ, "REWRITE_CACHE_DIR": str(tmp_path / "cache"), "REWRITE_PERSISTENT_CACHE": "readwrite",
           "OMP_NUM_THREADS": "1"}
    eager = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    runs = [subprocess.run([sys.executable, "-m", "rewrite.hook", str(script)], env=env, capture_output=True,
                           text=True, timeout=300) for _ in range(2)]
    assert all(r.returncode == 0 for r in runs), runs[-1].stderr
    cold, warm = (json.loads(r.stdout.strip().splitlines()[-1]) for r in runs)
    assert cold["outs"] == warm["outs"] == json.loads(eager.stdout.strip().splitlines()[-1])["outs"]
    assert cold["loaded"] and not any(loaded for _, loaded in cold["loaded"])
    assert all(loaded for _, loaded in warm["loaded"]), warm["loaded"]


def test_records_are_trimmed_least_recently_used_first(cache):
    """The cache directory's size cap trims records as it trims sources; a load refreshes a
    record's age, so the one a process read last stays."""
    x, w = torch.randn(4, 3), torch.randn(3, 5)
    fresh(scaled)(x, w)
    fresh(sized)(torch.randn(3))
    persist.flush()
    by_name = {_record(p)["name"]: p for p in files(cache)}
    older, newer = by_name["scaled_0"], by_name["sized_0"]
    older_texts, newer_texts = (p.parent / (_record(p)["sources"] + ".rws") for p in (older, newer))
    for p, age in ((older, 1000), (older_texts, 1000), (newer, 2000), (newer_texts, 2000)):
        os.utime(p, (age, age))
    again = fresh(scaled)
    assert_same(again(x, w), scaled(x, w))  # (loads `older`: it and its texts now the most recently used)
    assert entries_of(again)[0].loaded
    for p in cache.rglob("*"):
        if p.is_file() and p.parent.name != "persist":
            os.utime(p, (10, 10))  # (the generated sources: older than both, trimmed first)
    kept = sum(os.stat(p).st_blocks * 512 for p in (older, older_texts))
    codeload.trim(str(cache), int(kept / 0.8) + 1)  # (trims to 80 % of the cap: the other record must go)
    assert older.exists() and older_texts.exists() and not newer.exists() and not newer_texts.exists()


def _record(path) -> dict:
    import marshal
    held = marshal.loads(path.read_bytes()[len(persist.MAGIC) + 32:])
    return held["records"][0]
