"""The import layers, bottom to top: the one place they are written down.

A module may import the modules of the layers below its own (those its layer's `imports`
names, when it names them) and, in its own layer, the modules listed before it. Nothing
imports upward: where a lower module must call code written above it (Python's protocols are
mutually recursive; a graph break needs jitted resume functions), it calls a table it owns
and the upper module fills at import (`rewrite.registry.Protocol`). `tests/test_layers.py`
reads every import of every module with `ast` (module and function level) and checks it
against this table; every module must be in it. Function-level imports are for deferred
heavy dependencies (sympy, triton, torch for the torch-free import hook), each with a comment.

Names are modules of the `rewrite` package ("" is `rewrite/__init__`); `codegen` is the
`codegen/` folder, installed as `rewrite.codegen`, and `fuzz` is `fuzz/`.
"""

LAYERS = (
    # name, modules in their order (a module may import those before it), layers it may import (None: all below)
    ("leaves", ("layers", "errors", "watch", "config", "logs", "slot", "symbolic", "registry", "codeload", "nodes"),
     None),
    ("guards", ("guards.source", "guards.guard", "guards.codegen", "guards.shapes"), None),
    ("bytecode", ("bytecode.compat", "bytecode.route", "bytecode.splice", "bytecode.fastsplice", "bytecode.resume",
                  "bytecode", "bytecode.dynamo"), ("leaves",)),
    ("values", ("values.vars", "values.side_effects", "values"), None),
    # the rules: Python's protocols and constants at the bottom (core), kind-specific rules above
    ("ops", ("ops.iterators", "ops.core", "ops.shape_rules", "ops.sets", "ops.fills", "ops.markers", "ops.tensors",
             "ops.arrays", "ops.numpy_ufuncs", "ops.numpy_functions", "ops.numpy_calls",
             "ops.bases", "ops.instances", "ops.attrdict", "ops.functions", "ops.exceptions", "ops.copying",
             "ops.context_vars", "ops.contexts", "ops.log_calls", "ops.modules", "ops.objects", "ops.operators",
             "ops.higher_order", "ops.signatures", "ops.builtins", "ops.library", "ops.containers", "ops"), None),
    ("trace", ("trace.opcodes", "trace.graph", "trace.builder", "trace.handlers.stack", "trace.handlers.variables",
               "trace.handlers.operators", "trace.handlers.build", "trace.handlers.calls", "trace.handlers.control",
               "trace.handlers", "trace.generators", "trace.interpreter"), None),
    ("compile", ("breaks", "handoff", "strict", "compile", "locate"), None),  # a frame to a cache entry
    ("cache", ("persist", "dispatch", "callees"), None),  # entries per code object; jitted functions and callees
    ("backends", ("codegen.lowering", "codegen.schedule", "codegen.triton_kernels", "codegen.compile_check",
                  "codegen.eager", "codegen.python", "codegen.triton_backend", "codegen"),
     ("leaves", "guards")),  # reached by name (registry), never imported by the compiler
    ("face", ("api", "patching", "explaining", "hook.instrument", "hook", "hook.__main__", ""), None),
    ("tools", ("fuzz.inputs", "fuzz.oracle", "fuzz.programs", "fuzz.pyprograms", "fuzz.threads", "fuzz",
               "fuzz.__main__"), None),
)
