"""The few settings there are. Change them as attributes: `rewrite.config.recompile_limit = 16`."""
from __future__ import annotations

import os

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
# Instructions one trace may interpret before giving up (guards against runaway loops).
max_trace_instructions: int = 200_000
# Record `Tensor.item()` in the graph as a Python number instead of breaking the graph there
# (Dynamo's capture_scalar_outputs). Branching on such a number still breaks.
capture_scalar_outputs: bool = os.environ.get("REWRITE_CAPTURE_SCALAR_OUTPUTS", "") not in ("", "0")
# Where generated sources (guards, entries, backend code) are written.
cache_dir: str = os.environ.get("REWRITE_CACHE_DIR", "")
# The cache directory's size cap: at start-up the oldest files go until it holds 80 % of this.
cache_max_bytes: int = int(os.environ.get("REWRITE_CACHE_MAX_BYTES", str(64 << 20)))
