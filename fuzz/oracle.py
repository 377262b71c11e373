"""The oracle: run a generated program eagerly and under @jit, and compare everything.

For each call -- the first (compile), a second with new values of the same shapes (the
cache hit), a third with other sizes (the recompile path, where changed sizes become
dynamic), a fourth with every size >= 2 moved once more (served by the dynamic entry), a
fifth with torch's default dtype float64 (`OTHER_DEFAULT_DTYPE`: what the earlier entries
guarded of it), and one with the inputs' aliasing changed where it can be (inputs that shared memory no longer do, or
one tensor passed for two inputs) -- it compares the result (structure, dtype, shape,
values, inference-ness), the inputs afterwards (in-place changes: values, shapes, strides,
grad_fn, .grad, which inputs share memory; after an exception too), which results are inputs
or views of inputs (`return x.add_(1)` must return `x` itself; a returned list or object must be
the one passed in, or not), the passed-in list and objects (side effects), what was printed,
and the exception (type and args) if eager raised.

Objects of the program's own classes (plain classes, dataclasses, namedtuples, classes made
inside the function) are compared by class (qualified name and module: eager and @jit run in
two namespaces, each with its own classes) and attribute by attribute.
A difference raises `Divergence`, whose message is a reproducer ready to paste into a test.
"""
from __future__ import annotations

import collections
import contextlib
import io
import logging
import math
import types
from dataclasses import dataclass, field

import numpy as np
import torch

import rewrite

from .inputs import (AliasSpec, ArraySpec, Box, BoxSpec, ListSpec, ObjSpec, TensorSpec, alias_variant, input_lines,
                     make_args)

PROGRAM_MODULE = "fuzz_program"  # the `__name__` of a generated program's module
SEED = 1234  # the generator's state at the start of each run


class _PrintRecords(logging.Handler):
    """The programs' log records, printed (with the line that made them) where they are made:
    compared with eager's as what was printed."""

    def emit(self, record):
        print(f"[log] {record.getMessage()} (line {record.lineno} of {record.funcName})")


_PROGRAM_LOGGER = logging.getLogger("rewrite.fuzz.program")
if not any(isinstance(h, _PrintRecords) for h in _PROGRAM_LOGGER.handlers):
    _PROGRAM_LOGGER.addHandler(_PrintRecords())
_PROGRAM_LOGGER.propagate = False


class Divergence(AssertionError):
    pass


@dataclass
class Stats:
    programs: int = 0
    calls: int = 0
    divergences: int = 0
    graphs: int = 0
    fallbacks: int = 0
    eager_errors: int = 0
    reproducers: list = field(default_factory=list)
    # per program, over the entries of `f` its calls made: all one graph each, a graph break in
    # one (the rest in resume functions), or one that runs the whole call eagerly
    one_graph: int = 0
    broke: int = 0
    eager: int = 0
    uncached: int = 0  # no entry: every call's trace raised (a graph op raising under `try`), ran eagerly
    refused: int = 0  # under --fullgraph: programs the compiler refused (Unsupported)
    loaded: int = 0  # under --warm: entries loaded from the persistent cache (and checked against eager)
    reasons: collections.Counter = field(default_factory=collections.Counter)  # breaks and fallbacks

    def line(self) -> str:
        return (f"programs run: {self.programs}, divergences: {self.divergences}, graphs compiled: "
                f"{self.graphs}, fallbacks: {self.fallbacks}, calls: {self.calls} "
                f"({self.eager_errors} raising eagerly); programs: {self.one_graph} one graph, "
                f"{self.broke} with a graph break, {self.eager} run eagerly, {self.uncached} never cached"
                + (f", {self.refused} refused under fullgraph" if self.refused else "")
                + (f", {self.loaded} entries loaded warm" if self.loaded else ""))


STATS = Stats()


def _run(fn, args):
    torch.manual_seed(SEED)  # (eager and @jit draw from the same generator state: random ops compare too)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            return ("ok", fn(*args)), out.getvalue()
        except Exception as e:  # the user's exception, compared by type
            return ("raised", e), out.getvalue()


def _tolerance(dtype):
    if dtype in (torch.float16, torch.bfloat16):
        return dict(rtol=1e-2, atol=1e-2)
    if dtype.is_floating_point or dtype.is_complex:
        return dict(rtol=1e-5, atol=1e-6)
    return dict(rtol=0, atol=0)


# NumPy results: equal within this (NumPy and torch round sums, means and norms their own ways)
NUMPY_TOLERANCE = {"f": dict(rtol=1e-5, atol=1e-6), "c": dict(rtol=1e-5, atol=1e-6)}
NUMPY_HALF_TOLERANCE = dict(rtol=1e-2, atol=1e-2)


def _compare_numpy(actual, expected, where: str) -> None:
    """NumPy arrays and scalars: dtype, shape, writeable, values (floats: NUMPY_TOLERANCE)."""
    if actual.dtype != expected.dtype or actual.shape != expected.shape:
        raise Divergence(f"{where}: {actual.dtype}{list(actual.shape)} != eager's {expected.dtype}{list(expected.shape)}")
    if isinstance(expected, np.ndarray) and actual.flags.writeable != expected.flags.writeable:
        raise Divergence(f"{where}: writeable {actual.flags.writeable} != eager's {expected.flags.writeable}")
    tol = NUMPY_HALF_TOLERANCE if expected.dtype == np.float16 else NUMPY_TOLERANCE.get(expected.dtype.kind)
    try:
        if tol is None:
            np.testing.assert_array_equal(actual, expected)
        else:
            np.testing.assert_allclose(actual, expected, equal_nan=True, **tol)
    except AssertionError as e:
        raise Divergence(f"{where}: values differ\n{e}") from None


def program_object(value) -> bool:
    """An instance of a class the program defined (at module level or inside `f`; a pasted
    reproducer's module is not PROGRAM_MODULE, so any plain object of a user's module counts)."""
    module = getattr(type(value), "__module__", None) or ""
    if isinstance(value, (type, types.FunctionType, types.ModuleType, Box)):
        return False
    return module == PROGRAM_MODULE or (hasattr(value, "__dict__") and module.partition(".")[0] not in _LIBRARIES)


_LIBRARIES = {"builtins", "torch", "functools", "types", "typing", "collections", "contextlib",
              "dataclasses", "itertools", "operator", "rewrite"}


def _same_type(a: type, e: type) -> bool:
    """The same class; a program's classes differ between the eager and @jit namespaces, so
    those are compared by qualified name and module."""
    return a is e or (e.__module__ == PROGRAM_MODULE and a.__module__ == e.__module__
                      and a.__qualname__ == e.__qualname__)


def _drain(gen) -> list:
    """What a generator yields, then the class and message of the exception it ends with, if any."""
    out = []
    try:
        for item in gen:
            out.append(item)
    except Exception as e:  # noqa: BLE001 (any error of the program's own)
        out.append((type(e).__name__, str(e)))
    return out


def compare(actual, expected, where: str = "result", depth: int = 0) -> None:
    """Raise Divergence at the first difference between two results."""
    if not _same_type(type(actual), type(expected)):
        raise Divergence(f"{where}: type {type(actual).__qualname__} != eager's {type(expected).__qualname__}")
    if depth > 8:
        return
    if isinstance(expected, torch.Tensor):
        if actual.dtype != expected.dtype or actual.shape != expected.shape or actual.device != expected.device:
            raise Divergence(f"{where}: {actual.dtype}{list(actual.shape)} != eager's "
                             f"{expected.dtype}{list(expected.shape)}")
        if actual.requires_grad != expected.requires_grad:
            raise Divergence(f"{where}: requires_grad {actual.requires_grad} != eager's {expected.requires_grad}")
        if actual.is_inference() != expected.is_inference():
            raise Divergence(f"{where}: is_inference() {actual.is_inference()} != eager's {expected.is_inference()}")
        try:
            torch.testing.assert_close(actual.detach(), expected.detach(), equal_nan=True,
                                       **_tolerance(expected.dtype))
        except AssertionError as e:
            raise Divergence(f"{where}: values differ\n{e}") from None
    elif isinstance(expected, (np.ndarray, np.generic)):
        _compare_numpy(actual, expected, where)
    elif isinstance(expected, types.GeneratorType):  # a generator returned: what it yields from now on,
        compare(_drain(actual), _drain(expected), f"{where} (what it yields)", depth + 1)  # and how it ends
    elif isinstance(expected, collections.deque):
        if actual.maxlen != expected.maxlen:
            raise Divergence(f"{where}: maxlen {actual.maxlen} != eager's {expected.maxlen}")
        compare(list(actual), list(expected), where, depth + 1)
    elif isinstance(expected, (tuple, list)):  # namedtuples too
        if len(actual) != len(expected):
            raise Divergence(f"{where}: length {len(actual)} != eager's {len(expected)}")
        for i, (a, e) in enumerate(zip(actual, expected)):
            compare(a, e, f"{where}[{i}]", depth + 1)
    elif isinstance(expected, dict):
        if list(actual) != list(expected):
            raise Divergence(f"{where}: keys {list(actual)} != eager's {list(expected)}")
        for k in expected:
            compare(actual[k], expected[k], f"{where}[{k!r}]", depth + 1)
    elif isinstance(expected, (set, frozenset)):
        if len(actual) != len(expected):
            raise Divergence(f"{where}: {len(actual)} elements != eager's {len(expected)}")
        # members and their types (1 or True: eager keeps the one its algorithm met first); not
        # their order: a set rebuilt by the entry can iterate otherwise when hashes collide
        if not any(isinstance(v, torch.Tensor) for v in expected) and \
                sorted(map(repr, actual)) != sorted(map(repr, expected)):  # (tensors: by identity)
            raise Divergence(f"{where}: {actual!r} != eager's {expected!r}")
    elif program_object(expected) and hasattr(expected, "__dict__"):
        a_vars, e_vars = vars(actual), vars(expected)
        if list(a_vars) != list(e_vars):
            raise Divergence(f"{where}: attributes {list(a_vars)} != eager's {list(e_vars)}")
        for k in e_vars:
            compare(a_vars[k], e_vars[k], f"{where}.{k}", depth + 1)
    elif isinstance(expected, float) and expected != expected:
        if actual == actual:
            raise Divergence(f"{where}: {actual!r} != eager's nan")
    elif isinstance(expected, float) and isinstance(actual, float):
        # as float32 tensors are compared: `.item()` of a sum depends on the summation order
        if not math.isclose(actual, expected, rel_tol=1e-5, abs_tol=1e-6):
            raise Divergence(f"{where}: {actual!r} != eager's {expected!r}")
    elif actual != expected:
        raise Divergence(f"{where}: {actual!r} != eager's {expected!r}")


def compare_exceptions(actual: BaseException, expected: BaseException, where: str) -> None:
    """The same class and the same args (messages of torch's errors included)."""
    if not _same_type(type(actual), type(expected)):
        raise Divergence(f"{where}: eager raised {type(expected).__name__}: {expected}; @jit raised "
                         f"{type(actual).__name__}: {actual}")
    try:
        compare(actual.args, expected.args, "args")
    except Divergence as d:
        raise Divergence(f"{where}: eager raised {type(expected).__name__}: {expected}; @jit raised "
                         f"{type(actual).__name__}: {actual} ({d})") from None


def _mutable(value) -> bool:
    return isinstance(value, (torch.Tensor, list, dict, Box, np.ndarray)) or program_object(value)


def _memory(v):
    """The bytes a tensor's storage or an array's data spans: (device, start, end)."""
    if isinstance(v, np.ndarray):
        low, high = np.lib.array_utils.byte_bounds(v)
        return "cpu", low, high
    s = v.untyped_storage()
    return v.device, s.data_ptr(), s.data_ptr() + s.nbytes()


def _shares(a, b) -> bool:
    """Tensors: one storage; with arrays: overlapping bytes (`x.numpy()` is x's memory)."""
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        sa, sb = a.untyped_storage(), b.untyped_storage()
        return sa.nbytes() > 0 and sa.data_ptr() == sb.data_ptr() and a.device == b.device
    (da, a0, a1), (db, b0, b1) = _memory(a), _memory(b)
    return da == db and a0 < a1 and b0 < b1 and a0 < b1 and b0 < a1


def _parts(value, where: str, depth: int = 0):
    """Every tensor, list, dict and program object in a result, with where it is."""
    if depth > 8:
        return
    if isinstance(value, (torch.Tensor, list, dict, np.ndarray)) or program_object(value):
        yield where, value
    if isinstance(value, (tuple, list)):
        for i, v in enumerate(value):
            yield from _parts(v, f"{where}[{i}]", depth + 1)
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _parts(v, f"{where}[{k!r}]", depth + 1)
    elif program_object(value) and hasattr(value, "__dict__"):
        for k, v in vars(value).items():
            yield from _parts(v, f"{where}.{k}", depth + 1)


MEMORY = (torch.Tensor, np.ndarray)


def _tensors(value, where: str):
    return [(w, v) for w, v in _parts(value, where) if isinstance(v, torch.Tensor)]


def aliasing(result, args) -> set[str]:
    """Which results are inputs or share memory with them or with each other, as facts (lists,
    dicts and objects: which are the very objects passed in, or another result)."""
    facts = set()
    outs = list(_parts(result, "result"))
    ins = [(f"input {i}", a) for i, a in enumerate(args) if _mutable(a)]
    for k, (where, t) in enumerate(outs):
        for name, other in ins + outs[:k]:
            if t is other:
                facts.add(f"{where} is {name}")
            elif isinstance(t, MEMORY) and isinstance(other, MEMORY) and _shares(t, other):
                facts.add(f"{where} shares memory with {name}")
    return facts


def input_sharing(args) -> set[str]:
    """Which inputs share memory with each other."""
    ins = [(i, a) for i, a in enumerate(args) if isinstance(a, MEMORY)]
    return {f"input {i} shares memory with input {j}" for k, (i, a) in enumerate(ins) for j, b in ins[:k]
            if _shares(a, b)}


class Refused(Exception):
    """Under `--fullgraph`, the compiler said it cannot compile the program (Unsupported): no
    divergence, a reason (`--reasons` counts them)."""


# the call made with torch's default dtype float64: what the program's factories, its integer
# tensors' true divisions and float ops, and their promotions with Python floats make changes
# (the entries the earlier calls compiled must have guarded it, or miss)
OTHER_DEFAULT_DTYPE = "default dtype float64"


@contextlib.contextmanager
def default_dtype_of(label: str):
    """torch's default dtype set to float64 for the call `label` names so (OTHER_DEFAULT_DTYPE,
    warm or not), and set back; for any other call, as it is."""
    if not label.startswith(OTHER_DEFAULT_DTYPE):
        yield
        return
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        yield
    finally:
        torch.set_default_dtype(old)


def compare_call(compiled, eager, make_inputs, label: str = "call", mutable=None, make_jit_inputs=None) -> None:
    """Call eager and @jit, each on fresh inputs from `make_inputs()` (@jit's from
    `make_jit_inputs()` if given), and compare: the result (or the exception's type and args),
    the inputs afterwards (values, shapes, strides, which of them share memory; also after an
    exception), which results are inputs or views of inputs, and what was printed.
    `mutable[i]` says whether argument i is compared afterwards."""
    with default_dtype_of(label):  # (the inputs made, and both calls run, under it)
        eager_args, jit_args = make_inputs(), (make_jit_inputs or make_inputs)()
        (e_kind, e_val), e_out = _run(eager, eager_args)
        (j_kind, j_val), j_out = _run(compiled, jit_args)
    if j_kind == "raised" and isinstance(j_val, rewrite.Unsupported) and \
            rewrite.dispatcher_of(compiled).options.fullgraph:
        raise Refused(str(j_val).splitlines()[0])
    STATS.calls += 1
    if e_kind == "raised":
        STATS.eager_errors += 1
        if j_kind != "raised":
            raise Divergence(f"{label}: eager raised {type(e_val).__name__}: {e_val}; @jit returned normally")
        compare_exceptions(j_val, e_val, label)
    elif j_kind == "raised":
        raise Divergence(f"{label}: @jit raised {type(j_val).__name__}: {j_val}; eager returned normally") from j_val
    else:
        compare(j_val, e_val, f"{label} result")
    if mutable is None:
        mutable = [_mutable(e) for e in eager_args]
    for i, (a, e) in enumerate(zip(jit_args, eager_args)):
        if not mutable[i]:
            continue
        where = f"{label}: input {i} afterwards"
        if isinstance(e, Box):
            if a != e:
                raise Divergence(f"{where}: {a!r} != eager's {e!r}")
            continue
        compare(a, e, where)
        if isinstance(e, torch.Tensor):
            if a.stride() != e.stride() or a.storage_offset() != e.storage_offset():
                raise Divergence(f"{where}: stride {a.stride()} offset {a.storage_offset()} != eager's "
                                 f"{e.stride()} offset {e.storage_offset()}")
            if (a.grad_fn is None) != (e.grad_fn is None):
                raise Divergence(f"{where}: grad_fn {a.grad_fn} != eager's {e.grad_fn}")
            if a.is_leaf != e.is_leaf:
                raise Divergence(f"{where}: is_leaf {a.is_leaf} != eager's {e.is_leaf}")
            if a._version == 0 and e._version > 0:  # (written by eager, not here: autograd's check of saved
                raise Divergence(f"{where}: version counter {a._version} != eager's {e._version}")  # tensors
                # misses it. The other way is not checked: a NumPy write into a tensor's memory steps no
                # counter in eager, and is a torch op in the graph)
            if a.is_leaf and (a.grad is not None or e.grad is not None):  # (a non-leaf's .grad warns)
                compare(a.grad, e.grad, f"{where} .grad")
    e_share, j_share = input_sharing(eager_args), input_sharing(jit_args)
    if e_share != j_share:
        raise Divergence(f"{label}: inputs afterwards: {sorted(j_share)} != eager's {sorted(e_share)}")
    if e_kind == "ok":
        e_alias, j_alias = aliasing(e_val, eager_args), aliasing(j_val, jit_args)
        if e_alias != j_alias:
            raise Divergence(f"{label}: aliasing of the result: @jit {sorted(j_alias)} != eager's {sorted(e_alias)}")
    if j_out != e_out:
        raise Divergence(f"{label}: printed {j_out!r}, eager printed {e_out!r}")


def check_call(compiled, eager, specs, dims, seed, label, namespaces=(None, None)) -> None:
    """`namespaces`: the eager and the @jit program's module namespaces (inputs that are objects
    of the program's classes are made in each)."""
    mutable = [isinstance(s, (TensorSpec, AliasSpec, ListSpec, BoxSpec, ObjSpec, ArraySpec)) for s in specs]
    e_ns, j_ns = namespaces
    compare_call(compiled, eager, lambda: make_args(specs, dims, seed, e_ns), label, mutable,
                 lambda: make_args(specs, dims, seed, j_ns))


def run_program(program, dims1: dict, dims2: dict, backend="python", seed: int = 0, fullgraph: bool = False,
                warm: bool = False) -> None:
    """Compare eager and @jit on five calls of one program -- six where the inputs' aliasing
    can be changed (`alias_variant`) -- and raise Divergence on a difference. `fullgraph`: the
    program is compiled with fullgraph=True; where it is refused, the reason is counted.
    `warm`: then the same calls again as a new process makes them, each entry the persistent
    cache holds loaded instead of traced (rewrite/persist.py), against eager again."""
    eager_ns, jit_ns = program.load(), program.load()  # two modules: jit rewrites the function it gets
    compiled = rewrite.jit(jit_ns["f"], backend=backend, fullgraph=fullgraph)
    STATS.programs += 1
    # a third size set moves every size >= 2 once more: after "other sizes" made the changed sizes
    # dynamic (issue 6), this call runs on the dynamic entry (or shows it was specialized)
    dims3 = {s: v + 1 if v >= 2 else v for s, v in dims2.items()}
    calls = [("first call", dims1, seed), ("cached call", dims1, seed + 100), ("other sizes", dims2, seed + 200),
             ("third sizes", dims3, seed + 400), (OTHER_DEFAULT_DTYPE, dims1, seed + 500)]
    variant = alias_variant(program.inputs)
    if variant is not None:
        calls.append(("aliasing changed", dims1, seed + 300, variant))
    counted = False
    try:
        for label, dims, s, *specs in calls:
            try:
                check_call(compiled, eager_ns["f"], specs[0] if specs else program.inputs, dims, s, label,
                           (eager_ns, jit_ns))
            except Divergence as d:
                raise Divergence(f"{d}\n\n{reproducer(program, calls, backend, fullgraph)}") from None
        try:
            check_library_frames(compiled, jit_ns)
        except Divergence as d:
            raise Divergence(f"{d}\n\n{reproducer(program, calls, backend, fullgraph)}") from None
        if warm:
            count_entries(compiled)
            counted = True
            _new_process(compiled)
            for label, dims, s, *specs in calls:
                try:
                    check_call(compiled, eager_ns["f"], specs[0] if specs else program.inputs, dims, s,
                               f"{label}, warm", (eager_ns, jit_ns))
                except Divergence as d:
                    raise Divergence(f"{d}\n(entries loaded from the persistent cache)\n\n"
                                     f"{reproducer(program, calls, backend, fullgraph)}") from None
            from rewrite.dispatch import _ALL
            STATS.loaded += sum(e.loaded for d in list(_ALL) for e in d.entries)
            return
    except Refused as r:
        STATS.refused += 1
        STATS.reasons["refused: " + str(r)[:90]] += 1
    finally:
        if not counted:
            count_entries(compiled)


def check_library_frames(compiled, ns: dict) -> None:
    """Code the program reached through torch's own frames (programs.LIBRARY_FRAMES: an
    nn.Sequential, a hooked module, a checkpoint, a @torch.no_grad() wrapper) and that ran
    (it notes so in CALLED) compiled graphs of its own -- or, called on no tensor (a string
    the program made), found nothing to compile, or raised as eager does: a break inside it
    must not leave it eager
    (issue 44). Divergence if not."""
    from rewrite.callees import copy_of
    options = rewrite.dispatcher_of(compiled).options
    for name in ns.get("CALLED", {}):
        fn = ns["Step"].forward if name == "Step" else getattr(ns[name], "__wrapped__", ns[name])
        copy = copy_of(fn, options)
        held = rewrite.dispatcher_of(copy) if copy is not None else None
        if held is None or not held.plain and not any(e.graph or e.raises for e in held.entries):
            raise Divergence(f"{name}: reached through torch's own frames, it ran without a graph of its own "
                             f"({'no jitted copy was made' if copy is None else 'its copy compiled no graph'})")


def _new_process(compiled) -> None:
    """The compiled function as a new process has it: no entries, the persistent cache unread
    (what this process wrote, written)."""
    from rewrite import persist
    from rewrite.dispatch import _ALL
    persist.flush()
    rewrite.reset()  # (every function: the resume functions of its breaks load too)
    for dispatcher in list(_ALL):
        dispatcher.persisted = persist.Held()


def count_entries(compiled) -> None:
    """Add what the compiled function's cache holds to STATS (graphs, fallbacks, breaks)."""
    entries = rewrite.dispatcher_of(compiled).entries
    STATS.graphs += sum(e.reason is None and e.graph for e in entries)
    STATS.fallbacks += sum(e.reason is not None for e in entries)
    if any(e.reason is not None for e in entries):
        STATS.eager += 1
    elif any(e.graph_break is not None for e in entries):
        STATS.broke += 1
    elif entries:
        STATS.one_graph += 1
    else:
        STATS.uncached += 1
    for e in entries:
        why = e.reason or e.graph_break
        if why is not None:
            STATS.reasons[("eager: " if e.reason else "break: ") + why.splitlines()[0][:90]] += 1



def reproducer(program, calls, backend, fullgraph: bool = False) -> str:
    """A pytest test that replays the failing program, ready to paste."""
    lines = ["# --- reproducer ---", program.source().rstrip(), "", "",
             "def test_fuzz_repro():",
             "    import rewrite",
             "    from rewrite.fuzz.oracle import compare_call",
             "    from rewrite.fuzz.inputs import Box",
             "    eager = f",
             "    compiled = rewrite.jit(type(f)(f.__code__, f.__globals__, 'f'), "
             f"backend={backend!r}{', fullgraph=True' if fullgraph else ''})"]
    names = ", ".join(s.name for s in program.inputs)
    for label, dims, seed, *specs in calls:
        lines.append(f"    # {label}: {dims}")
        lines.append("    def inputs():")
        lines += ["        " + line for line in input_lines(specs[0] if specs else program.inputs, dims, seed)]
        lines.append(f"        return [{names}]")
        lines.append(f"    compare_call(compiled, eager, inputs, {label!r})  # results, inputs afterwards, aliasing")
    return "\n".join(lines)
