"""Triton kernel source for one scheduled kernel (codegen/schedule.py's `Kernel`).

    @triton.jit
    def kernel_f_0_0(in_x, in_w, in_b, out_layer_norm):
        rows = tl.program_id(0) * 1 + tl.arange(0, 1)[:, None]
        rmask = rows < 512
        cols = tl.arange(0, 1024)[None, :]
        mask = rmask & (cols < 1000)
        l_x_1 = tl.load(in_x + rows * 1000 + cols, mask=mask, other=0)
        r_2 = tl.sum(tl.where(mask, l_x_1, 0), 1)[:, None]
        ...

A pointwise kernel iterates over one flat index `offs`; a reduction kernel over `rows` (the
kept dims) x `cols` (the reduced dims), persistent when a row fits one block, looped
otherwise. Each node becomes instructions (loads, computes, reductions, stores) at the
element or row level; the layout decides where they go. Tensors are read and written by
index arithmetic over the domain (broadcast dims have stride 0), static sizes are literals,
symbolic sizes and run-time strides are kernel arguments. Under Triton's interpreter blocks
are large (it pays per program, not per element) and no `libdevice` call is used.
"""
from __future__ import annotations

import re

import torch

from .lowering import TL, Operand, cast, literal, lower_pointwise
from .schedule import ELEM, ROW, Kernel

# block sizes: (GPU, interpreter)
POINTWISE_BLOCK = {"cuda": 1024, "cpu": 1 << 16}
PERSISTENT_MAX = {"cuda": 8192, "cpu": 1 << 14}  # longest row reduced in one block
ROW_ELEMENTS = {"cuda": 4096, "cpu": 1 << 15}  # rows x cols per block
LOOP_BLOCK = {"cuda": 2048, "cpu": 4096}  # cols per step of a looped reduction
FILL = {"sum": "0", "max": '-float("inf")', "min": 'float("inf")'}  # what masked lanes hold in a reduction


HEADER = '''import triton
import triton.language as tl


@triton.jit
def _max_nan(a, b):
    return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def _min_nan(a, b):
    return tl.minimum(a, b, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def _round_bf16(x):
    """float32 -> the nearest bfloat16 (ties to even), held as float32."""
    bits = x.to(tl.uint32, bitcast=True)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.to(tl.float32, bitcast=True)
'''


def prod(sizes):
    out = 1
    for s in sizes:
        out = out * s
    return out


def _is_one(e) -> bool:
    return e == 1


def _zero(e) -> bool:
    if isinstance(e, int):
        return e == 0
    import sympy  # (deferred: sympy, imported with the first symbolic size)
    return sympy.expand(e) == 0


class Sizes:
    """Size expressions in kernels: ints as literals, symbolic ones as kernel arguments."""

    def __init__(self):
        self.args: dict = {}  # sympy expression -> argument name

    def __call__(self, e) -> str:
        if isinstance(e, int):
            return str(e)
        import sympy  # (deferred: sympy, imported with the first symbolic size)
        e = sympy.expand(e)
        if e.is_Integer:
            return str(int(e))
        if e not in self.args:
            self.args[e] = f"ks{len(self.args)}"
        return self.args[e]


class Instr:
    """One step of a kernel: `load`/`compute` (`var = code`), `reduce` (`var` = sum/max/min of
    `extra[1]` over the row: `extra[0]`), `store` (`code`); at the element or row level, reading
    the vars in `deps` (the looped layout recomputes an element value's deps in each loop)."""
    __slots__ = ("kind", "var", "level", "code", "deps", "extra")

    def __init__(self, kind, var, level, code, deps=(), extra=None):
        self.kind, self.var, self.level, self.code, self.deps, self.extra = kind, var, level, code, set(deps), extra


class KernelWriter:
    """One kernel's source: instructions from the nodes, then laid out persistent or looped."""

    def __init__(self, kernel: Kernel, name: str, infos, outputs, names, allocated):
        self.k, self.name, self.infos = kernel, name, infos
        self.allocated = allocated  # node -> strides of the buffer the wrapper allocates for it
        self.sizes = Sizes()
        self.instrs: list[Instr] = []
        self.var: dict = {}  # node -> (var, level) for values computed here
        self.dtype: dict[str, torch.dtype] = {}  # var -> dtype of the value it holds
        self.ptrs: dict = {}  # tensor node -> pointer argument
        self.loads: dict = {}  # (node, level, shape) -> var
        self.scalars: dict = {}  # int node -> argument
        self.strides: dict = {}  # symbol -> (node, dim): a stride read at run time
        self.outputs = outputs  # nodes this kernel stores
        self.names = names
        self._n = 0
        self.reduction = bool(kernel.dims)
        if self.reduction:
            self.groups = [("rows", [i for i in range(len(kernel.shape)) if i not in kernel.dims]),
                           ("cols", list(kernel.dims))]
        else:
            self.groups = [("offs", list(range(len(kernel.shape))))]
        for n in kernel.nodes:
            self._node(n)
        for n in outputs:
            v, level = self.var[n]
            self.instrs.append(Instr("store", None, level, self._store(n, v, level), [v]))

    # -- values --------------------------------------------------------------------------
    def _fresh(self, base: str) -> str:
        self._n += 1
        return f"{base}_{self._n}"

    def _emit(self, kind, base, level, code, deps, dtype, extra=None) -> str:
        var = self._fresh(base)
        self.instrs.append(Instr(kind, var, level, code, deps, extra))
        self.dtype[var] = dtype
        return var

    def operand(self, a, level: str, shape: tuple) -> tuple[Operand, list]:
        """`a` (node or number) as an operand of a node at `level` whose result has `shape`."""
        if not isinstance(a, torch.fx.Node):
            return Operand(None, None, a), []
        info = self.infos[a]
        if a in self.var:
            v = self.var[a][0]
            return Operand(v, info.dtype, info.example), [v]
        if not info.is_tensor:
            arg = self.scalars.setdefault(a, f"s_{self.names[a]}")
            return Operand(arg, torch.int64, info.example), []
        addr = self._address(a, level, shape)
        if (a, level, addr) not in self.loads:
            self.loads[(a, level, addr)] = self._load(a, level, addr)
        v = self.loads[(a, level, addr)]
        return Operand(v, info.dtype, info.example), [v]

    def _load(self, a, level, addr: str) -> str:
        ptr = self.ptrs.setdefault(a, f"in_{self.names[a]}")
        dtype = self.infos[a].dtype
        addr = self._block(addr, level)
        code = f"tl.load({ptr} + {addr}, mask={'rmask' if level == ROW else 'mask'}, other=0)"
        if dtype in (torch.float16, torch.bfloat16):
            code += ".to(tl.float32)"
        return self._emit("load", f"l_{self.names[a]}", level, code, [], dtype)

    def _block(self, addr: str, level) -> str:
        """`addr` as a block of the mask's shape: a pointer block may not be smaller than its
        mask (a tensor broadcast along the columns is read at `rows * 3 + cols * 0`), and one
        element read by every lane is still masked (the tensor may be empty)."""
        if addr == "0":
            addr = ""
        need = ["rows"] if level == ROW else ["rows", "cols"] if self.reduction else ["offs"]
        missing = [f"{v} * 0" for v in need if not re.search(rf"\b{v}\b", addr)]
        return " + ".join(([addr] if addr else []) + missing)

    def _store(self, n, v, level) -> str:
        ptr = f"out_{self.names[n]}"
        self.ptrs[n] = ptr
        addr = self._address(n, level, self.infos[n].shape)
        dtype = self.infos[n].dtype
        value = f"{v}.to({TL[dtype]})" if dtype in (torch.float16, torch.bfloat16) else v
        addr = self._block(addr, level)
        return f"tl.store({ptr} + {addr}, {value}, mask={'rmask' if level == ROW else 'mask'})"

    # -- addresses -------------------------------------------------------------------------
    def _tensor_strides(self, a) -> list:
        info = self.infos[a]
        if a in self.allocated and not info.symbolic:
            return list(self.allocated[a])
        if not info.symbolic:
            return list(info.example.stride())
        if a.op == "placeholder" or a in self.allocated:
            out, inner = [], 1
            for s in reversed(info.shape):  # contiguous (dynamic inputs are guarded contiguous)
                out.append(inner)
                inner = inner * s
            return list(reversed(out))
        import sympy  # strides read at run time: symbols the wrapper reads with `.stride(d)`
        out = []
        for d in range(len(info.shape)):
            sym = sympy.Symbol(f"st_{self.names[a]}_{d}", integer=True)
            self.strides[sym] = (a, d)
            out.append(sym)
        return out

    def _address(self, a, level, shape) -> str:
        """The element offset of tensor `a` for the current index, read by a value of `shape`."""
        info, k = self.infos[a], self.k
        strides = self._tensor_strides(a)
        # right-align `a` to `shape` (torch broadcasting), stride 0 where it broadcasts
        lead = len(shape) - len(info.shape)
        in_shape = [0 if i - lead < 0 or _is_one(info.shape[i - lead]) else strides[i - lead]
                    for i in range(len(shape))]
        # place `shape`'s dims in the domain's
        if len(shape) == len(k.shape):
            domain = in_shape
        else:  # a row value without the reduced dims
            kept = [i for i in range(len(k.shape)) if i not in k.dims]
            domain = [0] * len(k.shape)
            for j, i in enumerate(kept):
                domain[i] = in_shape[j]
        terms = [t for var, dims in self.groups if (t := self._group_offset(var, dims, domain))]
        return " + ".join(terms) if terms else "0"

    def _group_offset(self, var: str, dims: list, strides: list) -> str:
        sizes = [self.k.shape[d] for d in dims]
        inner = [prod(sizes[i + 1:]) for i in range(len(sizes))]
        live = [i for i in range(len(dims)) if not _is_one(sizes[i]) and not _zero(strides[dims[i]])]
        if not live:
            return ""
        nonunit = [i for i in range(len(dims)) if not _is_one(sizes[i])]
        last = nonunit[-1]
        k = strides[dims[last]]
        if live == nonunit and all(_zero(strides[dims[i]] - k * inner[i]) for i in live):
            return var if _is_one(k) else f"{var} * {self.sizes(k)}"
        terms = []
        for i in live:
            idx = var if _is_one(inner[i]) else f"({var} // {self.sizes(inner[i])})"
            if i != nonunit[0]:
                idx = f"({idx} % {self.sizes(sizes[i])})"
            s = strides[dims[i]]
            terms.append(idx if _is_one(s) else f"{idx} * {self.sizes(s)}")
        return "(" + " + ".join(terms) + ")"

    # -- nodes -----------------------------------------------------------------------------
    def _node(self, n) -> None:
        info = self.infos[n]
        level = self.k.level[n]
        if info.kind == "pointwise":
            name, args, options = info.op
            ops, deps = [], []
            for a in args:
                if a is None:
                    ops.append(None)
                    continue
                op, d = self.operand(a, level, info.shape)
                ops.append(op)
                deps += d
            code = lower_pointwise(name, ops, options, info.dtype)
            v = self._emit("compute", f"v_{self.names[n]}", level, code, deps, info.dtype)
        else:
            v = self._reduction(n, info)
        self.var[n] = (v, level)

    def _reduce(self, op: str, src: str, acc: torch.dtype) -> str:
        return self._emit("reduce", "r", ROW, None, [src], acc, extra=(op, src))

    def _reduction(self, n, info) -> str:
        spec, k = info.op, self.k
        x, deps = self.operand(info.input, ELEM, k.shape)
        dx, out = x.dtype, info.dtype
        compute = torch.float64 if torch.float64 in (dx, out) else torch.float32
        count = prod(k.shape[d] for d in k.dims)
        n_expr = f"{float(count)!r}" if isinstance(count, int) else self.sizes(count)
        op = spec["op"]

        def pw(code, deps, level, dtype=compute):
            if code.isidentifier():  # no cast needed: the value itself
                return code
            return self._emit("compute", f"t_{self.names[n]}", level, code, deps, dtype)

        if op in ("sum", "mean"):
            acc = compute if (dx.is_floating_point or op == "mean") else torch.int64
            r = self._reduce("sum", pw(x.as_(acc), deps, ELEM, acc), acc)
            if op == "mean":
                r = pw(f"({r} / {n_expr})", [r], ROW)
            return pw(cast(r, acc, out), [r], ROW, out)
        if op in ("amax", "amin", "max", "min"):
            r = self._reduce("max" if op in ("amax", "max") else "min", pw(x.as_(compute), deps, ELEM), compute)
            return pw(cast(r, compute, out), [r], ROW, out)
        xv = pw(x.as_(compute), deps, ELEM)
        if op in ("softmax", "log_softmax"):
            m = self._reduce("max", xv, compute)
            shifted = pw(f"({xv} - {m})", [xv, m], ELEM)
            e = pw(f"tl.exp({shifted})", [shifted], ELEM)
            s = self._reduce("sum", e, compute)
            if op == "softmax":
                y = pw(f"({e} / {s})", [e, s], ELEM)
            else:
                y = pw(f"({shifted} - tl.log({s}))", [shifted, s], ELEM)
            return pw(cast(y, compute, out), [y], ELEM, out)
        # var, std, layer_norm: mean, then the mean of squared deviations
        total = self._reduce("sum", xv, compute)
        mean = pw(f"({total} / {n_expr})", [total], ROW)
        d = pw(f"({xv} - {mean})", [xv, mean], ELEM)
        sq = self._reduce("sum", pw(f"({d} * {d})", [d], ELEM), compute)
        if op in ("var", "std"):
            c = spec["correction"]
            denom = f"tl.maximum({n_expr} - {literal(c, compute)}, 0.0)" if not isinstance(count, int) \
                else repr(float(max(count - c, 0)))
            v = pw(f"({sq} / {denom})", [sq], ROW)
            if op == "std":
                v = pw(f"tl.sqrt({v})", [v], ROW)
            return pw(cast(v, compute, out), [v], ROW, out)
        rstd = pw(f"tl.rsqrt({sq} / {n_expr} + {literal(spec['eps'], compute)})", [sq], ROW)
        y = pw(f"({d} * {rstd})", [d, rstd], ELEM)
        for key, op_ in (("weight", "*"), ("bias", "+")):
            w = spec[key]
            if w is not None:
                wo, wd = self.operand(w, ELEM, k.shape)
                y = pw(f"({y} {op_} {wo.as_(compute)})", [y, *wd], ELEM)
        return pw(cast(y, compute, out), [y], ELEM, out)

    # -- layout --------------------------------------------------------------------------
    def source(self, block: dict) -> str:
        """The kernel's source for block sizes `block` (XBLOCK, or RBLOCK/CBLOCK + looped)."""
        k = self.k
        self.interpret = block["interpret"]
        if not self.reduction:
            x = block["XBLOCK"]
            body = [f"offs = tl.program_id(0) * {x} + tl.arange(0, {x})",
                    f"mask = offs < {self.sizes(prod(k.shape))}"]
            body += [self._line(i) for i in self.instrs]
        else:
            rb, cb = block["RBLOCK"], block["CBLOCK"]
            cols = self.sizes(prod(k.shape[d] for d in k.dims))
            body = [f"rows = tl.program_id(0) * {rb} + tl.arange(0, {rb})[:, None]",
                    f"rmask = rows < {self.sizes(prod(k.kept))}"]
            if block["looped"]:
                body += self._looped(rb, cb, cols)
            else:
                body += [f"cols = tl.arange(0, {cb})[None, :]", f"mask = rmask & (cols < {cols})"]
                body += [self._line(i) for i in self.instrs]
        self.params = [*self.ptrs.values(), *self.scalars.values(), *self.sizes.args.values()]
        head = ["@triton.jit", f"def {self.name}({', '.join(self.params)}):"]
        return "\n".join(head + ["    " + line for line in body]) + "\n"

    def _reduce_call(self, op: str, value: str) -> str:
        """max/min over a block's rows that propagates NaN as torch does: a combine function on
        the GPU; under the interpreter (whose tl.reduce calls a combine function once per
        element pair, in Python) tl.max/tl.min with NaN put back."""
        if self.interpret:
            nans = f"tl.sum(({value} != {value}).to(tl.int32), 1)[:, None] > 0"
            return f'tl.where({nans}, float("nan"), tl.{op}({value}, 1)[:, None])'

        return f"tl.reduce({value}, 1, _{op}_nan)[:, None]"

    def _row_result(self, op: str, value: str) -> str:
        """The row's sum/max/min of a block `value` (masked lanes already hold FILL[op])."""
        return f"tl.sum({value}, 1)[:, None]" if op == "sum" else self._reduce_call(op, value)

    def _line(self, i: Instr) -> str:
        if i.kind == "store":
            return i.code
        if i.kind == "reduce":
            op, src = i.extra
            return f"{i.var} = {self._row_result(op, f'tl.where(mask, {src}, {FILL[op]})')}"
        return f"{i.var} = {i.code}"

    def _looped(self, rb, cb, cols) -> list[str]:
        """One loop over the columns per round of reductions, then one that stores."""
        by_var = {i.var: i for i in self.instrs if i.var}
        avail: dict[str, int] = {}  # row value -> the loop after which it exists (0: before any)

        def need(var) -> int:
            """The last loop whose row values the element value `var` reads."""
            i = by_var[var]
            if i.level == ROW:
                return avail[var]
            return max((need(d) for d in i.deps), default=0)

        for i in self.instrs:
            if i.kind == "reduce":
                avail[i.var] = need(i.extra[1]) + 1
            elif i.level == ROW and i.kind != "store":
                avail[i.var] = max((avail[d] if by_var[d].level == ROW else need(d) for d in i.deps), default=0)
        rounds = max((avail[i.var] for i in self.instrs if i.kind == "reduce"), default=0)
        out = [self._line(i) for i in self.instrs if i.level == ROW and i.kind not in ("reduce", "store")
               and avail[i.var] == 0]

        def cone(roots) -> list[str]:
            wanted, stack = set(), list(roots)
            while stack:
                v = stack.pop()
                i = by_var[v]
                if i.level == ELEM and v not in wanted:
                    wanted.add(v)
                    stack += i.deps
            return [self._line(i) for i in self.instrs if i.var in wanted]

        step = [f"cols = c0 + tl.arange(0, {cb})[None, :]", f"mask = rmask & (cols < {cols})"]
        for r in range(1, rounds + 1):
            reds = [i for i in self.instrs if i.kind == "reduce" and avail[i.var] == r]
            for i in reds:
                op, src = i.extra
                out.append(f"acc_{i.var} = tl.full([{rb}, {cb}], {FILL[op]}, {TL[self.dtype[i.var]]})")
            out.append(f"for c0 in range(0, {cols}, {cb}):")
            body = step + cone([i.extra[1] for i in reds])
            for i in reds:
                op, src = i.extra
                masked = f"tl.where(mask, {src}, {FILL[op]})"
                combined = f"acc_{i.var} + {masked}" if op == "sum" else f"_{op}_nan(acc_{i.var}, {masked})"
                body.append(f"acc_{i.var} = {combined}")
            out += ["    " + line for line in body]
            for i in reds:
                out.append(f"{i.var} = {self._row_result(i.extra[0], f'acc_{i.var}')}")
            out += [self._line(i) for i in self.instrs if i.level == ROW and i.kind == "compute"
                    and avail[i.var] == r]
        out += [i.code for i in self.instrs if i.kind == "store" and i.level == ROW]
        elem_stores = [i for i in self.instrs if i.kind == "store" and i.level == ELEM]
        if elem_stores:
            out.append(f"for c0 in range(0, {cols}, {cb}):")
            body = step + cone([d for i in elem_stores for d in i.deps]) + [i.code for i in elem_stores]
            out += ["    " + line for line in body]
        return out


def _pow2(n: int) -> int:
    return 1 << max(0, (max(n, 1) - 1).bit_length())


def blocks(kernel: Kernel, device: str) -> dict:
    """Block sizes and warps for a kernel (sizes known now, or symbolic)."""
    if not kernel.dims:
        n = prod(kernel.shape)
        x = POINTWISE_BLOCK[device]
        return {"XBLOCK": min(x, max(16, _pow2(n))) if isinstance(n, int) else x, "num_warps": 4,
                "interpret": device == "cpu"}
    rows = prod(kernel.kept)
    cols = prod(kernel.shape[d] for d in kernel.dims)
    looped = not isinstance(cols, int) or cols > PERSISTENT_MAX[device]
    cb = LOOP_BLOCK[device] if looped else max(16, _pow2(cols))
    rb = max(1, ROW_ELEMENTS[device] // cb)
    if isinstance(rows, int):
        rb = min(rb, _pow2(rows))
    warps = 16 if rb * cb >= 8192 else 8 if rb * cb >= 2048 else 4
    return {"RBLOCK": rb, "CBLOCK": cb, "looped": looped, "num_warps": warps, "interpret": device == "cpu"}
