"""The `triton` backend: a graph's pointwise ops and reductions as fused Triton kernels
(codegen/schedule.py groups them, codegen/triton_kernels.py writes them) and a Python wrapper
that allocates buffers, launches the kernels and calls torch for every other op:

    def forward(x, w, b, proj):
        layer_norm = torch.empty((8, 64), dtype=torch.float32, device=___k0)
        kernel_block_0_0[(1,)](x, w, b, layer_norm)
        matmul = layer_norm @ proj
        del layer_norm
        ...

Kernels and wrapper are loaded from hash-named files in the cache directory
(`REWRITE_CACHE_DIR`); `REWRITE_LOGS=output_code` prints them. Graphs whose tensors require
grad while grad mode is on run through torch (the `python` backend's code): there are no
backward kernels yet. On CPU tensors the kernels run under Triton's interpreter:
`TRITON_INTERPRET=1` is set before `triton` is first imported.
"""
from __future__ import annotations

import os
import sys
import warnings

import torch
import torch.fx

from .lowering import NoLowering
from .python import Renderer, python
from .schedule import Kernel, analyze, schedule
from .triton_kernels import HEADER, KernelWriter, blocks, prod
from rewrite import codeload, logs
from rewrite.guards.source import comment
from rewrite.registry import register_backend

# Without a CUDA device Triton can only interpret: ask for that before anything imports triton.
if "triton" not in sys.modules and not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

SIGNATURE = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16", torch.float64: "fp64",
             torch.int64: "i64", torch.int32: "i32", torch.int16: "i16", torch.int8: "i8", torch.uint8: "u8",
             torch.bool: "i1"}
# a list: every kernel built from now on is also written with GPU block sizes and recorded
# here ({"name", "source", "signature", "num_warps"}) for codegen.compile_check (the tests do)
COLLECT: list | None = None


def _import_triton(device: torch.device):
    """triton, under the interpreter for CPU tensors (None: it cannot run them here)."""
    if device.type == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
        if "triton" in sys.modules:
            return None  # imported without the interpreter: too late to ask for it
        os.environ["TRITON_INTERPRET"] = "1"
    import triton  # (deferred: after TRITON_INTERPRET is decided; triton is slow to import)
    return triton


def _needs_grad(example_inputs, graph) -> bool:
    if not torch.is_grad_enabled():
        return False
    values = list(example_inputs) + [n.meta.get("example_value") for n in graph.nodes]
    return any(isinstance(v, torch.Tensor) and v.requires_grad for v in values)


@register_backend(native=True)
def triton(gm: torch.fx.GraphModule, example_inputs):
    fallback = python(gm, example_inputs)
    name = codeload.safe_name(getattr(gm, "_rewrite_name", "graph"))  # kernels are named after it
    try:
        if _needs_grad(example_inputs, gm.graph):
            raise NoLowering("tensors that require grad (no backward kernels yet)")
        infos = analyze(gm.graph, example_inputs)
        devices = {i.device for i in infos.values() if i.is_tensor}
        if len(devices) != 1 or next(iter(devices)).type not in ("cpu", "cuda"):
            raise NoLowering(f"tensors on devices {sorted(map(str, devices))}")
        items = schedule(gm.graph, infos)
        if not any(isinstance(item, Kernel) for item in items):
            raise NoLowering("no op with a lowering")
        device = next(iter(devices))
        tr = _import_triton(device)
        if tr is None:
            warnings.warn("rewrite: the triton backend needs TRITON_INTERPRET=1 before triton is imported to run "
                          "CPU tensors; running through torch", RuntimeWarning, stacklevel=2)
            return fallback
        return Wrapper(gm.graph, name, infos, items, device).build()
    except NoLowering as e:
        if logs.enabled("output_code"):
            logs.get("output_code").debug("triton backend: %s runs through torch (%s)", name, e)
        return fallback


class Wrapper:
    """The Python function that runs a graph's kernels and extern ops in order."""

    def __init__(self, graph, name, infos, items, device):
        self.graph, self.name, self.infos, self.items, self.device = graph, name, infos, items, device
        self.r = Renderer(graph, taken={"triton"})
        self.symbols = self._symbol_sources()
        self.launchers: dict = {}  # kernel name -> ((grid, num_warps), indices of pointers to check)

    def _symbol_sources(self) -> dict:
        """Each size symbol -> the wrapper expression that reads it from an argument."""
        import sympy  # (deferred: sympy, imported with the first symbolic size)
        out = {}
        for n in self.graph.nodes:
            sym = n.meta.get("sym_shape") if n.op == "placeholder" else None
            if isinstance(sym, tuple):
                for d, s in enumerate(sym):
                    if isinstance(s, sympy.Symbol):
                        out.setdefault(s, f"{self.r.names[n]}.size({d})")
            elif isinstance(sym, sympy.Symbol):
                out.setdefault(sym, self.r.names[n])
        return out

    def size(self, e) -> str:
        if isinstance(e, int):
            return str(e)
        from rewrite.symbolic import to_python  # (deferred: sympy, imported with the first symbolic size)
        return to_python(e, lambda s: self.symbols[s])

    def build(self):
        r, kernels, lines = self.r, [], []
        placeholders = [n for n in self.graph.nodes if n.op == "placeholder"]
        output = next(n for n in self.graph.nodes if n.op == "output")
        allocated = {}
        device = r.const(self.device)
        last_use = self._last_uses(output)
        named = set(placeholders)  # values the wrapper holds in a local
        for index, item in enumerate(self.items):
            dying = sorted(r.names[n] for n in last_use.get(index, ()) if n in named and n.op != "placeholder")
            if not isinstance(item, Kernel):
                lines += r.statement(item)
                named.add(item)
                if dying:
                    lines.append(f"del {', '.join(dying)}")
                continue
            kname = f"kernel_{self.name}_{len(kernels)}"
            outputs = [n for n in item.nodes
                       if any(u not in item.level for u in n.users) or n in output.all_input_nodes]
            allocated.update({n: self._layout(n) for n in outputs})
            writer = KernelWriter(item, kname, self.infos, outputs, r.names, allocated)
            block = blocks(item, self.device.type)
            src = writer.source(block)
            kernels.append((kname, src, writer))
            for n in outputs:
                lines.append(f"{r.names[n]} = {self._alloc(n, device)}")
            lines.append(self._launch(kname, item, writer, block, allocated))
            named.update(outputs)
            if dying:
                lines.append(f"del {', '.join(dying)}")
        params = [r.names[n] for n in placeholders]
        body = ["    " + line for line in lines] + [f"    return {r.arg(output.args[0])}"]
        wrapper = "\n".join([f"def forward({', '.join(params)}):", *body]) + "\n"
        kernel_source = HEADER + "".join("\n\n" + src for _, src, _ in kernels)
        ns = codeload.load("triton", f"kernels_{self.name}", kernel_source, {})
        if COLLECT is not None:
            for kname, _, writer in kernels:
                gpu = blocks(writer.k, "cuda")
                COLLECT.append({"name": kname, "source": HEADER + "\n\n" + writer.source(gpu),
                                "signature": self._signature(writer), "num_warps": gpu["num_warps"]})
        namespace = dict(r.consts)
        namespace.update({kname: ns[kname] for kname, _, _ in kernels})
        namespace["torch"] = torch
        namespace.update({f"launch_{kname}": Launcher(ns[kname], grid, checked, self.device)
                          for kname, (grid, checked) in self.launchers.items()})
        wrapper_source = f"# triton backend wrapper: {comment(self.name)}\n" + wrapper
        fn = codeload.load("triton", f"wrapper_{self.name}", wrapper_source, namespace)["forward"]
        if logs.enabled("output_code"):
            logs.get("output_code").debug("triton kernels for %s:\n%s\n%s", self.name, kernel_source, wrapper_source)
        fn.source, fn.kernel_source = wrapper_source, kernel_source
        return fn

    def _layout(self, n) -> tuple | None:
        """Strides of the buffer for `n`: eager's when dense (a transposed input gives a
        transposed result), else contiguous; None for symbolic sizes (contiguous)."""
        info = self.infos[n]
        if info.symbolic:
            return None
        ex = info.example
        if torch._prims_common.is_non_overlapping_and_dense_or_false(ex) and ex.numel() > 0:
            return tuple(ex.stride())
        return tuple(torch.empty(ex.shape, device="meta").stride())

    def _alloc(self, n, device: str) -> str:
        info = self.infos[n]
        dtype = f"dtype={info.dtype}, device={device}"
        if info.symbolic:
            return f"torch.empty(({''.join(self.size(s) + ', ' for s in info.shape)}), {dtype})"
        shape, strides = tuple(info.example.shape), self._layout(n)
        if strides == tuple(torch.empty(shape, device="meta").stride()):
            return f"torch.empty({shape}, {dtype})"
        return f"torch.empty_strided({shape}, {strides}, {dtype})"

    def _last_uses(self, output) -> dict:
        """item index -> nodes whose last reader is that item (graph outputs live to the end)."""
        where = {}
        for index, item in enumerate(self.items):
            for n in (item.nodes if isinstance(item, Kernel) else [item]):
                where[n] = index
        last: dict = {}
        for n in self.graph.nodes:
            if n.op == "output" or n in output.all_input_nodes or not n.users:
                continue
            readers = [where.get(u, len(self.items)) for u in n.users if u.op != "output"]
            home = where.get(n)
            outside = [i for i in readers if i != home]
            if outside:
                last.setdefault(max(outside), []).append(n)
        return last

    def _launch(self, kname, kernel: Kernel, writer: KernelWriter, block: dict, allocated) -> str:
        names = self.r.names
        args = [names[n] for n in writer.ptrs]
        args += [names[n] for n in writer.scalars]
        self.symbols.update({sym: f"{names[n]}.stride({d})" for sym, (n, d) in writer.strides.items()})
        args += [self.size(e) for e in writer.sizes.args]
        if kernel.dims:
            work, per = prod(kernel.kept), block["RBLOCK"]
        else:
            work, per = prod(kernel.shape), block["XBLOCK"]
        grid = f"({max(1, -(-work // per))},)" if isinstance(work, int) else f"(max(1, -(-{self.size(work)} // {per})),)"
        if self.device.type != "cuda":
            return f"{kname}[{grid}]({', '.join(args)})"
        if len(args) == len(writer.ptrs) and isinstance(work, int):  # no int arguments: bind once
            checked = tuple(i for i, n in enumerate(writer.ptrs) if n not in allocated)
            self.launchers[kname] = ((max(1, -(-work // per)), block["num_warps"]), checked)
            return f"launch_{kname}({', '.join(args)})"
        return f"{kname}[{grid}]({', '.join(args)}, num_warps={block['num_warps']})"

    def _signature(self, writer: KernelWriter) -> dict:
        sig = {}
        for n, p in writer.ptrs.items():
            sig[p] = "*" + SIGNATURE[self.infos[n].dtype]
        for p in writer.scalars.values():
            sig[p] = "i64"
        for p in writer.sizes.args.values():
            sig[p] = "i32"
        return sig


class Launcher:
    """A CUDA kernel launched through its compiled form after the first call.

    `kernel[grid](*args)` re-derives Triton's specialization on every call (each int's value,
    each pointer's 16-byte alignment) before it launches. Kernels bound here take no int
    arguments (all sizes static), so only the alignment of pointers the wrapper did not
    allocate can change between calls: the launcher checks those, then does what Triton's
    own launch does once it has found the compiled kernel in its cache.
    """

    __slots__ = ("kernel", "grid", "warps", "checked", "compiled", "device", "runtime")

    def __init__(self, kernel, grid_and_warps, checked, device):
        from triton import knobs  # (deferred: triton, imported with the first kernel)
        self.runtime = knobs.runtime  # the launch hooks profilers set
        (self.grid, self.warps), self.kernel, self.checked = grid_and_warps, kernel, checked
        self.compiled, self.device = None, device.index if device.index is not None else 0

    def __call__(self, *args):
        ck = self.compiled
        if ck is not None and all(args[i].data_ptr() % 16 == 0 for i in self.checked):
            stream = torch._C._cuda_getCurrentRawStream(self.device)
            grid, runtime = self.grid, self.runtime
            ck.run(grid, 1, 1, stream, ck.function, ck.packed_metadata, ck.launch_metadata((grid,), stream, *args),
                   runtime.launch_enter_hook, runtime.launch_exit_hook, *args)
            return
        compiled = self.kernel[(self.grid,)](*args, num_warps=self.warps)
        if ck is None and all(args[i].data_ptr() % 16 == 0 for i in self.checked):
            self.compiled = compiled
