"""The few settings there are. Change them as attributes: `rewrite.config.recompile_limit = 16`.

The settings torch._dynamo.config also has (`TORCH_KNOBS`) follow torch's where the program moved
torch's off its default: `torch._dynamo.config.cache_size_limit = 4` (or `torch._dynamo.config.patch(...)`,
or torch's environment variable) is in force for rewrite as for torch.compile. The compiler reads
every setting through `get(name)` when it needs it (at a miss, in a compile), never on a hit,
and only where torch._dynamo.config is imported already: nothing here imports it.
"""
from __future__ import annotations

import os
import sys

# Cache entries one code object may hold before calls no entry accepts run eagerly (Dynamo: 8).
recompile_limit: int = 8
# Compiles of one code object over its lifetime, a safety net over recompile_limit (Dynamo: 256).
accumulated_recompile_limit: int = 256
# On a backend failure: warn and run eagerly instead of raising BackendCompilerFailed.
suppress_errors: bool = os.environ.get("REWRITE_SUPPRESS_ERRORS", "") not in ("", "0")
# Graph breaks one @jit function's calls may compile (in it, its resume functions and the
# functions it calls) before a BreaksWarning says the breaks may cost more than they save.
graph_break_warning: int = 8
# Depth of user-function inlining before the tracer gives up on a call.
max_inline_depth: int = 32
# Instructions one trace may interpret before giving up (guards against runaway loops): asked
# where a frame starts or resumes and at each backward jump.
max_trace_instructions: int = 200_000
# Record `Tensor.item()` in the graph as a Python number instead of breaking the graph there
# (Dynamo's capture_scalar_outputs). Branching on such a number still breaks.
capture_scalar_outputs: bool = os.environ.get("REWRITE_CAPTURE_SCALAR_OUTPUTS", "") not in ("", "0")
# Record ops whose output's shape depends on data (nonzero, unique, x[mask], ...) in the graph
# instead of breaking the graph before them; reading such a size in Python still breaks.
# (Dynamo's default is False: it breaks before them.)
capture_dynamic_output_shape_ops: bool = True
# A size (or int argument) that differs from what the first compile saw is a symbol in the
# recompile instead of another constant (with jit(dynamic=None)).
automatic_dynamic_shapes: bool = True
# The first compile takes every size as it is; False: every size (of 2 or more) is a symbol
# from the first compile on, as with jit(dynamic=True).
assume_static_by_default: bool = True
# nn.Parameter sizes stay constants, whatever the rest do (unless marked dynamic).
force_parameter_static_shapes: bool = True
# So do the sizes of a module's parameters and buffers, read as its attributes.
force_nn_module_property_static_shapes: bool = True
# Check every eager run that stands in for a trace that raised, or for a compiled graph that raised
# where no `try` covers it: eager must raise the same exception class, else InternalError (see
# rewrite/strict.py). For tests and fuzzing: it costs an eager copy's run on those calls only.
strict: bool = os.environ.get("REWRITE_STRICT", "") not in ("", "0")
# Where generated sources (guards, entries, backend code) are written.
cache_dir: str = os.environ.get("REWRITE_CACHE_DIR", "")
# The cache directory's size cap: at start-up the oldest files go until it holds 80 % of this.
cache_max_bytes: int = int(os.environ.get("REWRITE_CACHE_MAX_BYTES", str(64 << 20)))
# Compiled entries kept in the cache directory and loaded by a new process instead of tracing
# again (rewrite/persist.py): "readwrite", "read" (load, never write) or "off".
persistent_cache: str = os.environ.get("REWRITE_PERSISTENT_CACHE", "readwrite")

# torch._dynamo.config's name for each setting both have, and torch's own default for it
TORCH_KNOBS: dict[str, tuple[str, object]] = {
    "recompile_limit": ("recompile_limit", 8),  # (cache_size_limit is torch's alias of it)
    "accumulated_recompile_limit": ("accumulated_recompile_limit", 256),  # (accumulated_cache_size_limit)
    "suppress_errors": ("suppress_errors", False),
    "capture_scalar_outputs": ("capture_scalar_outputs", False),
    "capture_dynamic_output_shape_ops": ("capture_dynamic_output_shape_ops", False),
    "automatic_dynamic_shapes": ("automatic_dynamic_shapes", True),
    "assume_static_by_default": ("assume_static_by_default", True),
    "force_parameter_static_shapes": ("force_parameter_static_shapes", True),
    "force_nn_module_property_static_shapes": ("force_nn_module_property_static_shapes", True),
}


def get(name: str):
    """The setting in force: torch._dynamo.config's where the program set that knob to a value
    other than torch's default, else rewrite's. (Not "set at all": torch.compile's own
    `config.patch` writes the prior value back on exit, so a knob once patched reads as set.)"""
    knob = TORCH_KNOBS.get(name)
    torch_config = sys.modules.get("torch._dynamo.config") if knob is not None else None
    if torch_config is not None:
        torch_name, torch_default = knob
        value = getattr(torch_config, torch_name)
        if value != torch_default:
            return value
    return globals()[name]
