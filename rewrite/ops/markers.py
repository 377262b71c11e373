"""torch's own markers, as tables: the queries library code asks ("am I being compiled?")
folded to the constants torch.compile gives them, and the decorators and calls torch offers
to steer a compiler honoured as rewrite's own.

Functions are named by (module, qualname), so nothing here imports `torch._dynamo` (~1 s):
a program that never imports it never pays for it, and one that does gets its functions
matched all the same.
"""
from __future__ import annotations

import sys
import types

from ..registry import ALLOWED, DISABLED

# what each query returns while rewrite traces (as under torch.compile): folded, no guard
QUERIES: dict[tuple[str, str], object] = {
    ("torch.compiler", "is_compiling"): True,
    ("torch.compiler", "is_dynamo_compiling"): True,
    ("torch._dynamo.external_utils", "is_compiling"): True,  # torch._dynamo.is_compiling
    ("torch._utils", "is_compiling"): True,
    ("torch.compiler", "is_exporting"): False,
    ("torch.jit._trace", "is_tracing"): False,  # torch.jit.is_tracing
    ("torch._jit_internal", "is_scripting"): False,  # torch.jit.is_scripting
    ("torch.fx._symbolic_trace", "is_fx_tracing"): False,
}
# torch code that asks "am I being compiled?" to take a path written for Dynamo (the optimizers
# keep their step count a tensor rather than read it with .item(), which Dynamo cannot trace):
# in these modules rewrite traces the eager path as it is -- `.item()` becomes a number the
# graph computes (GradScaler's found-inf test then breaks at its branch, not at the read) --
# so a compiled step computes exactly what eager computes, bit for bit
EAGER_PATHS = ("torch.optim.", "torch.amp.")
COMPILING = {("torch.compiler", "is_compiling"), ("torch.compiler", "is_dynamo_compiling"),
             ("torch._dynamo.external_utils", "is_compiling"), ("torch._utils", "is_compiling")}


def eager_path(caller_module: str | None) -> bool:
    return caller_module is not None and f"{caller_module}.".startswith(EAGER_PATHS)


BUILTIN_QUERIES: dict[str, object] = {  # C functions of torch._C, by name
    "_get_tracing_state": None,
}

# torch's Python-level state and facts: what each returns now, as a constant. "fixed": the same
# for the whole process, or for the same (constant) arguments -- no guard. "guarded": it can
# change between calls (a flag, a setting): guarded on the value read. A kind names the traced
# context that sets it, inside which the value is the context's (no guard): see ops/tensors.py.
STATE: dict[tuple[str, str], tuple[str, str | None]] = {
    ("torch", "promote_types"): ("fixed", None),
    ("torch", "result_type"): ("fixed", None),
    ("torch", "can_cast"): ("fixed", None),
    ("torch.distributed", "is_available"): ("fixed", None),
    ("torch.cuda", "is_available"): ("fixed", None),
    ("torch.cuda", "device_count"): ("fixed", None),
    ("torch.backends.mps", "is_available"): ("fixed", None),
    ("torch._C", "_get_privateuse1_backend_name"): ("fixed", None),
    ("torch._C", "_accelerator_getAccelerator"): ("fixed", None),  # torch.accelerator.current_accelerator()
    ("torch", "get_default_dtype"): ("guarded", None),  # (a DefaultDtypeMatch, as factories add)
    ("torch", "get_default_device"): ("guarded", None),
    ("torch.distributed", "is_initialized"): ("guarded", None),
    ("torch.distributed.distributed_c10d", "is_initialized"): ("guarded", None),
    ("torch", "get_autocast_dtype"): ("guarded", "autocast"),
    ("torch", "get_autocast_gpu_dtype"): ("guarded", "autocast"),
    ("torch", "get_autocast_cpu_dtype"): ("guarded", "autocast"),
    ("torch", "is_autocast_cache_enabled"): ("guarded", None),
    ("torch", "get_float32_matmul_precision"): ("guarded", None),
    ("torch", "are_deterministic_algorithms_enabled"): ("guarded", None),
    ("torch", "is_deterministic_algorithms_warn_only_enabled"): ("guarded", None),
    ("torch", "get_num_threads"): ("guarded", None),
    ("torch", "get_num_interop_threads"): ("guarded", None),
    ("torch._C", "_get_cublas_allow_tf32"): ("guarded", None),  # torch.backends.cuda.matmul.allow_tf32
    ("torch._C", "_get_cudnn_allow_tf32"): ("guarded", None),  # torch.backends.cudnn.allow_tf32
    ("torch._C", "_get_cudnn_enabled"): ("guarded", None),
    ("torch._C", "_get_cudnn_benchmark"): ("guarded", None),
    ("torch._C", "_get_cudnn_deterministic"): ("guarded", None),
    ("torch._C", "_get_cublas_allow_fp16_reduced_precision_reduction"): ("guarded", None),
    ("torch._C", "_get_cublas_allow_bf16_reduced_precision_reduction"): ("guarded", None),
}
# torch functions written in Python that compute on Python values (sizes, strings): traced as
# Python, not recorded as an op
PYTHON_HELPERS = {
    ("torch.nn.init", "_calculate_correct_fan"),
    ("torch.nn.init", "_calculate_fan_in_and_fan_out"),
    ("torch.nn.init", "calculate_gain"),
}


# torch's modules whose functions are Python over Python objects (an optimizer, its state, its
# param groups, a GradScaler): traced as Python, not recorded as one op each as torch's tensor
# functions are; at a graph break their frames compile on their own, as the user's do
PYTHON_MODULES = ("torch.optim.", "torch.amp.grad_scaler.", "torch.utils._foreach_utils.", "torch.utils._pytree.",
                  "torch.testing.")


def python_library(fn) -> bool:
    """(by the module that defined it, or the one it says it is from: a wrapper's __module__ is
    the wrapped function's)"""
    return isinstance(fn, types.FunctionType) and (f"{fn.__globals__.get('__name__')}.".startswith(PYTHON_MODULES)
                                                   or f"{fn.__module__}.".startswith(PYTHON_MODULES))


def state(fn) -> tuple[str, str | None] | None:
    """("fixed" | "guarded", the context kind that sets it) when `fn` is one of the STATE reads."""
    name = _name(fn)
    if name is not None:
        return STATE.get(name)
    name = getattr(fn, "__name__", None)  # a C function: found under that name in torch or torch._C
    for module in ("torch", "torch._C"):
        if (module, name) in STATE and getattr(sys.modules.get(module), name, None) is fn:
            return STATE[module, name]
    return None


def python_helper(fn) -> bool:
    return _name(fn) in PYTHON_HELPERS


# calls that break the graph where they are (what comes before and after compiles apart)
BREAKS: dict[tuple[str, str], str] = {
    ("torch._dynamo.decorators", "graph_break"): "torch._dynamo.graph_break()",
    ("rewrite.api", "graph_break"): "rewrite.graph_break()",
    # marking a tensor inside the call: it runs eagerly, and the next compile reads the mark
    ("torch._dynamo.decorators", "mark_dynamic"): "torch._dynamo.mark_dynamic() inside a compiled function",
    ("torch._dynamo.decorators", "maybe_mark_dynamic"): "torch._dynamo.maybe_mark_dynamic() inside a compiled function",
    ("torch._dynamo.decorators", "mark_static"): "torch._dynamo.mark_static() inside a compiled function",
    ("rewrite.api", "mark_dynamic"): "rewrite.mark_dynamic() inside a compiled function",
    ("rewrite.api", "mark_static"): "rewrite.mark_static() inside a compiled function",
}
# (the marks torch._dynamo.mark_dynamic and friends leave on tensors: rewrite.shapes.DYNAMIC_DIMS)

# calls that break the graph when user code makes them, but are hints to Dynamo's own
# pipeline when torch makes them: the optimizers' `_use_grad` breaks around `step` so that
# AOTAutograd sees its no_grad; rewrite's graphs switch grad mode where eager does, so the
# step stays one graph, as the rest of torch.compile's
TORCH_HINTS = {("torch._dynamo.decorators", "graph_break")}


def _name(fn) -> tuple[str, str] | None:
    if isinstance(fn, types.FunctionType):
        return fn.__module__, fn.__qualname__
    return None


def query(fn, caller_module: str | None = None):
    """(True, the folded value) when `fn` is one of the queries (asked from a function of
    `caller_module`), else (False, None)."""
    name = _name(fn)
    if name is not None:
        if name in COMPILING and eager_path(caller_module):
            return True, False
        if name in QUERIES:
            return True, QUERIES[name]
        return False, None
    name = getattr(fn, "__name__", None)
    if name in BUILTIN_QUERIES and getattr(sys.modules.get("torch._C"), name, None) is fn:
        return True, BUILTIN_QUERIES[name]
    return False, None


def breaks(fn) -> str | None:
    """Why a call of `fn` breaks the graph, if it is one of the marker calls that do."""
    name = _name(fn)
    return BREAKS.get(name) if name is not None else None


def hint(fn, caller_module: str | None) -> bool:
    """A call of torch's Dynamo hints from torch's own code (see TORCH_HINTS): it does nothing."""
    name = _name(fn)
    return name in TORCH_HINTS and caller_module is not None and caller_module.split(".")[0] == "torch"


def dynamo_patch(fn):
    """The function under a `torch._dynamo.disable` wrapper Dynamo puts on torch's Python
    libraries when torch.compile first runs (every optimizer's `_init_group`: Dynamo runs it
    its own way), or None. rewrite traces those libraries as they are, so it calls the original."""
    if getattr(fn, "_torchdynamo_disable", False) is True:
        inner = getattr(fn, "_torchdynamo_orig_callable", None)
        if python_library(inner):
            return inner
    return None


def disabled(fn) -> str | None:
    """Why `fn` always runs eagerly, if a decorator said so: `rewrite.disable`,
    `torch._dynamo.disable` or `torch.compiler.disable` (the wrapper those return names the
    function it wraps, and the reason given)."""
    if isinstance(fn, types.FunctionType) and fn.__code__.co_qualname == "_disable_dynamo.<locals>.inner" \
            and fn.__globals__.get("__name__") == "torch._compile":  # torch's own (lazy) torch._dynamo.disable
        return f"call to {_describe(getattr(fn, '__wrapped__', fn))}, marked torch._disable_dynamo"
    if getattr(fn, "_torchdynamo_disable", False) is True and dynamo_patch(fn) is None:
        inner = getattr(fn, "_torchdynamo_orig_callable", fn)
        msg = getattr(fn, "_torchdynamo_disable_msg", None)
        return f"call to {_describe(inner)}, marked torch.compiler.disable" + (f" ({msg})" if msg else "")
    if isinstance(fn, types.FunctionType) and fn in DISABLED:
        return f"call to {_describe(fn)}, marked rewrite.disable"
    return None


def allowed(fn) -> bool:
    """Recorded as one graph node: `rewrite.allow_in_graph`, or torch._dynamo's allow-list
    (`torch._dynamo.allow_in_graph`, `torch.compiler.allow_in_graph`; einops registers
    its functions there)."""
    if isinstance(fn, types.FunctionType) and fn in ALLOWED:
        return True
    rules = sys.modules.get("torch._dynamo.trace_rules")
    ids = getattr(rules, "_allowed_callable_ids", None) if rules is not None else None
    if ids is None:
        return False
    try:
        return id(fn) in ids
    except Exception:
        return False


def _describe(fn) -> str:
    module = getattr(fn, "__module__", None)
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type(fn).__name__
    return f"{module}.{name}" if module else name
