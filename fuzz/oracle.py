"""The oracle: run a generated program eagerly and under @jit, and compare everything.

For each of three calls -- the first (compile), a second with new values of the same
shapes (the cache hit), a third with other sizes (the recompile path) -- it compares the
result (structure, dtype, shape, values), the inputs afterwards (in-place changes), the
passed-in list (side effects), what was printed, and the exception type if eager raised.
A difference raises `Divergence`, whose message is a reproducer ready to paste into a test.
"""
from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass, field

import torch

import rewrite

from .inputs import BoxSpec, ListSpec, TensorSpec, make


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

    def line(self) -> str:
        return (f"programs run: {self.programs}, divergences: {self.divergences}, graphs compiled: "
                f"{self.graphs}, fallbacks: {self.fallbacks}, calls: {self.calls} "
                f"({self.eager_errors} raising eagerly)")


STATS = Stats()


def _run(fn, args):
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


def compare(actual, expected, where: str = "result") -> None:
    """Raise Divergence at the first difference between two results."""
    if type(actual) is not type(expected):
        raise Divergence(f"{where}: type {type(actual).__name__} != eager's {type(expected).__name__}")
    if isinstance(expected, torch.Tensor):
        if actual.dtype != expected.dtype or actual.shape != expected.shape or actual.device != expected.device:
            raise Divergence(f"{where}: {actual.dtype}{list(actual.shape)} != eager's "
                             f"{expected.dtype}{list(expected.shape)}")
        if actual.requires_grad != expected.requires_grad:
            raise Divergence(f"{where}: requires_grad {actual.requires_grad} != eager's {expected.requires_grad}")
        try:
            torch.testing.assert_close(actual.detach(), expected.detach(), equal_nan=True,
                                       **_tolerance(expected.dtype))
        except AssertionError as e:
            raise Divergence(f"{where}: values differ\n{e}") from None
    elif isinstance(expected, (tuple, list)):
        if len(actual) != len(expected):
            raise Divergence(f"{where}: length {len(actual)} != eager's {len(expected)}")
        for i, (a, e) in enumerate(zip(actual, expected)):
            compare(a, e, f"{where}[{i}]")
    elif isinstance(expected, dict):
        if list(actual) != list(expected):
            raise Divergence(f"{where}: keys {list(actual)} != eager's {list(expected)}")
        for k in expected:
            compare(actual[k], expected[k], f"{where}[{k!r}]")
    elif isinstance(expected, float) and expected != expected:
        if actual == actual:
            raise Divergence(f"{where}: {actual!r} != eager's nan")
    elif actual != expected:
        raise Divergence(f"{where}: {actual!r} != eager's {expected!r}")


def check_call(compiled, eager, specs, dims, seed, label) -> None:
    eager_args = [make(s, dims, seed + i) for i, s in enumerate(specs)]
    jit_args = [make(s, dims, seed + i) for i, s in enumerate(specs)]
    (e_kind, e_val), e_out = _run(eager, eager_args)
    (j_kind, j_val), j_out = _run(compiled, jit_args)
    STATS.calls += 1
    if e_kind == "raised":
        STATS.eager_errors += 1
        if j_kind != "raised" or type(j_val) is not type(e_val):
            got = f"raised {type(j_val).__name__}: {j_val}" if j_kind == "raised" else "returned normally"
            raise Divergence(f"{label}: eager raised {type(e_val).__name__}: {e_val}; @jit {got}")
        return
    if j_kind == "raised":
        raise Divergence(f"{label}: @jit raised {type(j_val).__name__}: {j_val}; eager returned normally") from j_val
    compare(j_val, e_val, f"{label} result")
    for spec, a, e in zip(specs, jit_args, eager_args):
        if isinstance(spec, (TensorSpec, ListSpec)):
            compare(a, e, f"{label} input {spec.name} afterwards")
        elif isinstance(spec, BoxSpec) and a != e:
            raise Divergence(f"{label} input {spec.name} afterwards: {a!r} != eager's {e!r}")
    if j_out != e_out:
        raise Divergence(f"{label}: printed {j_out!r}, eager printed {e_out!r}")


def run_program(program, dims1: dict, dims2: dict, backend="python", seed: int = 0) -> None:
    """Compare eager and @jit on three calls of one program; raise Divergence on a difference."""
    source = program.source()
    eager_ns, jit_ns = {}, {}
    exec(compile(source, "<fuzz program>", "exec"), eager_ns)
    exec(compile(source, "<fuzz program>", "exec"), jit_ns)
    compiled = rewrite.jit(jit_ns["f"], backend=backend)
    STATS.programs += 1
    calls = [("first call", dims1, seed), ("cached call", dims1, seed + 100), ("other sizes", dims2, seed + 200)]
    try:
        for label, dims, s in calls:
            try:
                check_call(compiled, eager_ns["f"], program.inputs, dims, s, label)
            except Divergence as d:
                raise Divergence(f"{d}\n\n{reproducer(program, calls, backend)}") from None
    finally:
        entries = rewrite.dispatcher_of(compiled).entries
        STATS.graphs += sum(e.reason is None and e.graph_module is not None for e in entries)
        STATS.fallbacks += sum(e.reason is not None for e in entries)


def reproducer(program, calls, backend) -> str:
    """A pytest test that replays the failing program, ready to paste."""
    lines = ["# --- reproducer ---", program.source().rstrip(), "", "",
             "def test_fuzz_repro():",
             "    import rewrite",
             "    from fuzz.oracle import compare",
             "    from fuzz.inputs import Box",
             "    eager = f",
             "    compiled = rewrite.jit(type(f)(f.__code__, f.__globals__, 'f'), "
             f"backend={backend!r})"]
    for label, dims, seed in calls:
        args = ", ".join(s.expr(dims, seed + i) for i, s in enumerate(program.inputs))
        lines.append(f"    # {label}: {dims}")
        lines.append(f"    compare(compiled({args}), eager({args}))")
    return "\n".join(lines)
