"""Property-based differential testing of rewrite against eager PyTorch (Hypothesis).

* `python -m rewrite.fuzz --examples 2000 --seed 0 --backend python` fuzzes generated programs;
* `fuzz.check(fn, example_args)` fuzzes your own function over shapes, dtypes and layouts;
* `fuzz.programs()` / `fuzz.pyprograms` are the strategies, `fuzz.oracle` the comparison.

A difference from eager raises `Divergence` whose message is a ready-to-paste reproducer.
"""
from __future__ import annotations

if __name__ != "rewrite.fuzz":  # the folder installs as rewrite.fuzz; one import name per folder
    raise ImportError(f"import this package as rewrite.fuzz, not as {__name__}")

import types

import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

import rewrite
from rewrite.bytecode import original_code

from .inputs import LAYOUTS, TensorSpec, ValueSpec
from .oracle import STATS, Divergence, Stats, check_call, compare, run_program
from .programs import Program, dims, programs

__all__ = ["check", "programs", "dims", "run_program", "compare", "Divergence", "Stats", "STATS", "Program"]

_FLOATS = ("float32", "float64")


def check(fn, example_args, *, examples: int = 50, backend=None, seed: int = 0, vary=("shape", "dtype", "layout")):
    """Fuzz `fn` against eager over variations of `example_args`.

    Each tensor keeps its rank; sizes are redrawn per *distinct* size of the examples (so
    two dims that were equal stay equal and broadcasting keeps working), floating dtypes
    are redrawn among float32/float64 and layouts among contiguous, transposed, sliced,
    expanded, requiring grad and a view of one that requires grad. Other arguments are passed as they are (a deep copy per call). Every variant
    is called twice (compile, then cached) on fresh values. Raises `Divergence` with a
    reproducer on the first difference; returns the number of variants run.
    """
    code = getattr(fn, "__code__", None)
    if code is None:
        raise TypeError("fuzz.check takes a Python function")

    def fresh():
        f = types.FunctionType(original_code(code), fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
        f.__kwdefaults__ = fn.__kwdefaults__
        return f

    sizes = sorted({s for a in example_args if isinstance(a, torch.Tensor) for s in a.shape})
    symbol = {size: f"s{i}" for i, size in enumerate(sizes)}

    @st.composite
    def variants(draw):
        specs = []
        for i, a in enumerate(example_args):
            if isinstance(a, torch.Tensor):
                dtype = str(a.dtype).rpartition(".")[2]
                if "dtype" in vary and dtype in _FLOATS:
                    dtype = draw(st.sampled_from(_FLOATS))
                layout = draw(st.sampled_from(LAYOUTS)) if "layout" in vary else "contiguous"
                specs.append(TensorSpec(f"a{i}", tuple(symbol[s] for s in a.shape), dtype, layout))
            else:
                specs.append(ValueSpec(f"a{i}", a))
        size = st.integers(0, 6) if "shape" in vary else None
        chosen = {sym: (draw(size) if size is not None else s) for s, sym in symbol.items()}
        return specs, chosen

    count = 0

    @settings(max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @hypothesis_seed(seed)
    @given(variants(), st.integers(0, 2**16))
    def run(variant, value_seed):
        nonlocal count
        specs, chosen = variant
        compiled = rewrite.jit(fresh(), backend=backend)
        eager = fresh()
        for label, s in (("first call", value_seed), ("cached call", value_seed + 1)):
            try:
                check_call(compiled, eager, specs, chosen, s, label)
            except Divergence as d:
                args = ", ".join(sp.expr(chosen, s + i) for i, sp in enumerate(specs))
                raise Divergence(f"{d}\n\n# reproducer: compare jit({fn.__name__})({args}) with the eager call") \
                    from None
        count += 1
        rewrite.dispatcher_of(compiled).reset()  # each variant starts from an empty cache

    run()
    return count


