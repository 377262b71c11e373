"""The triton backend (issue 7): every lowering and fusion pattern, run under Triton's
interpreter on CPU against eager; the kernels it writes are also compiled for sm_90 at the
end of the session (see conftest.py)."""
import os
import re

import pytest
import torch
import torch.nn.functional as F

from rewrite import jit

from conftest import assert_same, eager_copy

pytest.importorskip("triton")

import rewrite.codegen.triton_backend as tb  # noqa: E402
import rewrite.codegen.triton_kernels as tk  # noqa: E402


class Built:
    """A backend that runs the triton backend and keeps what it built."""
    rewrite_native = True  # (a wrapper of rewrite's own: it takes the graph as traced)

    def __init__(self):
        self.built = []

    def __call__(self, gm, example_inputs):
        fn = tb.triton(gm, example_inputs)
        self.built.append(fn)
        return fn

    @property
    def kernels(self) -> str:
        return "".join(getattr(f, "kernel_source", "") for f in self.built)

    @property
    def wrappers(self) -> str:
        return "".join(f.source for f in self.built if hasattr(f, "kernel_source"))

    def count(self) -> int:
        return len(re.findall(r"^def kernel_", self.kernels, re.M))


def run(fn, *args, calls=2, **kw) -> Built:
    """jit(fn) with the triton backend over `calls` calls, each against eager."""
    eager, built = eager_copy(fn), Built()
    jit(fn, backend=built, **kw)
    for _ in range(calls):
        copies = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
        assert_same(fn(*args), eager(*copies))
        for a, c in zip(args, copies):
            if isinstance(a, torch.Tensor):
                assert_same(a, c)
    return built


def fused(fn, *args, kernels=1) -> Built:
    built = run(fn, *args)
    assert built.count() == kernels, built.kernels + built.wrappers
    return built


# -- pointwise lowerings -------------------------------------------------------------------

UNARY = [torch.relu, torch.sigmoid, torch.tanh, torch.exp, torch.abs, torch.neg, F.silu, F.gelu, torch.erf,
         lambda x: F.gelu(x, approximate="tanh"), lambda x: torch.clamp(x, -0.5, 0.5), lambda x: x ** 2,
         lambda x: x ** 3, lambda x: x.abs() ** 0.5, torch.square,
         lambda x: torch.sqrt(x.abs() + 1), lambda x: torch.rsqrt(x.abs() + 1), lambda x: torch.log(x.abs() + 1),
         lambda x: torch.reciprocal(x + 10), lambda x: x.clamp(min=0.1), lambda x: x.clip(max=0.2)]


@pytest.mark.parametrize("op", UNARY, ids=lambda op: getattr(op, "__name__", "lambda"))
def test_each_unary_lowering_matches_eager(op):
    def f(x):
        return op(x * 1.5)

    fused(f, torch.randn(257))


def test_binary_ops_comparisons_logical_ops_and_where():
    def f(x, y):
        a = (x * 2 + y - 1) / (y.abs() + 1)
        b = torch.where(x > y, torch.maximum(x, y), torch.minimum(x, y))
        c = torch.add(x, y, alpha=2) - torch.sub(y, x, alpha=0.5)
        m = (x < 0) & (y >= 0) | (x == y) | ~(x != 0)
        n = torch.logical_xor(x > 0, y > 0) ^ torch.logical_not(y <= 0.5)
        return a.relu(), b.sigmoid(), c, m, n, torch.where(m, 1.0, x), x <= y

    fused(f, torch.randn(1000), torch.randn(1000))


def test_nan_propagates_through_maximum_relu_and_clamp_as_in_eager():
    def f(x, y):
        return torch.maximum(x, y), torch.minimum(x, y), x.relu(), x.clamp(-1, 1), torch.amax(x, 0)

    nan = float("nan")
    fused(f, torch.tensor([nan, 1.0, -2.0, nan]), torch.tensor([0.0, nan, 3.0, nan]))


def test_type_promotion_as_torch_does_it():
    def f(i, x, h, b):
        return (i + x, i * 1.5, i * 2, i / 2, h * 2 + 1, h + x, b + x, b & (i > 0), (i > 0.5), x > i,
                torch.where(b, i, 0), h.sigmoid(), i.abs(), (i - 3).relu(), torch.maximum(i, i * -1),
                i.clamp(-2, 2), torch.minimum(i, (x * 3).int()))

    i = torch.randint(-5, 5, (64,), dtype=torch.int32)
    fused(f, i, torch.randn(64), torch.randn(64, dtype=torch.float16), torch.rand(64) > 0.5)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_other_float_dtypes(dtype):
    def f(x, y):
        return F.gelu(x + y) * torch.sigmoid(y) - x / 3

    fused(f, torch.randn(33, 17, dtype=dtype), torch.randn(33, 17, dtype=dtype))


def test_casts():
    def f(x):
        y = x * 3
        return y.float(), y.half(), y.to(torch.int32), y.bool(), y.long() + 1, y.to(dtype=torch.bfloat16), \
            (y > 0).float(), y.int().double(), y.type(torch.float16)

    fused(f, torch.randn(100, dtype=torch.float64) * 4)


def test_floor_division_and_modulo_follow_python_semantics():
    def f(x, y, i):
        return x // y, x % y, torch.div(x, y, rounding_mode="floor"), torch.remainder(x, 1.5), \
            i // 3, i % 3, i // -4, i % -4, torch.floor_divide(i, 2)

    x = torch.tensor([7.0, -7.0, 7.5, -7.5, 0.0, 3.0, -0.5, 6.0])
    y = torch.tensor([2.0, 2.0, -2.0, -2.0, 3.0, 0.0, 0.25, -3.0])
    fused(f, x, y, torch.arange(-8, 8)[:8].to(torch.int64))


def test_integer_division_by_a_tensor_runs_through_torch():
    def f(i, j):
        return (i // j) + 1

    i, j = torch.arange(1, 9), torch.tensor([1, 2, 3, 4, 5, 6, 7, 8])
    built = run(f, i, j)
    assert "torch.floor_divide" in built.wrappers or "//" in built.wrappers


def test_scalar_int_argument_becomes_a_kernel_argument():
    def f(x, n):
        return x * n + n

    eager, built = eager_copy(f), Built()
    g = jit(f, backend=built)
    for k in (3, 4, 5, 7):  # the int changes: from the second compile on it is a symbol
        x = torch.randn(10)
        assert_same(g(x, k), eager(x, k))
    assert len(built.built) == 2 and re.search(r"def kernel_\w+\(.*\bs_n\b", built.kernels)


# -- reductions and composites ----------------------------------------------------------------

REDUCTIONS = {
    "sum_last": lambda x: x.sum(-1), "sum_keep": lambda x: x.sum(1, keepdim=True), "sum_dim0": lambda x: x.sum(0),
    "sum_all": lambda x: x.sum(), "sum_two_dims": lambda x: x.sum((0, 2)), "mean": lambda x: x.mean(-1),
    "mean_all": lambda x: torch.mean(x), "amax": lambda x: x.amax(-1), "amin_keep": lambda x: x.amin(1, keepdim=True),
    "max_all": lambda x: x.max(), "min_all": lambda x: x.min(), "var": lambda x: x.var(-1),
    "var_correction0": lambda x: torch.var(x, 1, correction=0), "std_keep": lambda x: x.std(-1, keepdim=True),
    "var_all": lambda x: x.var(), "std_unbiased_false": lambda x: x.std(0, unbiased=False),
    "softmax": lambda x: x.softmax(-1), "softmax_dim1": lambda x: F.softmax(x, dim=1),
    "log_softmax": lambda x: F.log_softmax(x, -1), "log_softmax_dim0": lambda x: torch.log_softmax(x, 0),
    "layer_norm": lambda x: F.layer_norm(x, (x.shape[-1],)),
    "layer_norm_two_dims": lambda x: F.layer_norm(x, x.shape[1:], eps=1e-3),
}


@pytest.mark.parametrize("looped", [False, True], ids=["persistent", "looped"])
@pytest.mark.parametrize("name", list(REDUCTIONS))
def test_reductions_persistent_and_looped(name, looped, monkeypatch):
    if looped:
        monkeypatch.setitem(tk.PERSISTENT_MAX, "cpu", 4)
        monkeypatch.setitem(tk.LOOP_BLOCK, "cpu", 4)
    op = REDUCTIONS[name]

    def f(x):
        return op(x * 2 - 1)

    built = fused(f, torch.randn(5, 37, 6))
    assert ("for c0 in range" in built.kernels) == looped


def test_integer_and_half_sums_accumulate_as_eager():
    def f(i, h, b):
        return i.sum(-1), h.sum(-1), h.mean(0), b.sum(), (i * 2).sum(0, keepdim=True)

    i = torch.randint(-100, 100, (16, 300), dtype=torch.int32)
    fused(f, i, torch.randn(16, 300, dtype=torch.float16), torch.rand(16, 300) > 0.3, kernels=4)


def test_layer_norm_with_weight_and_bias_and_half_inputs():
    def f(x, w, b):
        return F.layer_norm(x, (x.shape[-1],), w, b) * 2

    fused(f, torch.randn(6, 40), torch.randn(40), torch.randn(40))
    fused(lambda x, w, b: F.layer_norm(x, (40,), w, b), *(t.half() for t in (torch.randn(6, 40), torch.randn(40),
                                                                           torch.randn(40))))


def test_layer_norm_module_fuses_with_the_pointwise_ops_around_it():
    ln = torch.nn.LayerNorm(64)
    with torch.no_grad():
        ln.weight.normal_()

    def f(x, y):
        return F.gelu(ln(x + y)) + 1

    with torch.no_grad():
        fused(f, torch.randn(8, 64), torch.randn(8, 64))


# -- fusion and scheduling --------------------------------------------------------------------

def test_softmax_fuses_its_producers_and_consumers_into_one_kernel():
    def f(x, mask):
        s = x * 0.125 + mask
        return torch.softmax(s, -1) * 2 + 1

    fused(f, torch.randn(4, 16, 32), torch.randn(32))


def test_pointwise_ops_on_reduction_results_fuse_into_the_reduction():
    def f(x):
        m = x.mean(-1, keepdim=True)
        v = ((x - m) ** 2).mean(-1, keepdim=True)
        return (x - m) / torch.sqrt(v + 1e-5), m * 2, x.sum(-1) + 3

    fused(f, torch.randn(7, 50))


def test_a_row_value_broadcast_along_the_wrong_dim_is_not_fused_per_row():
    def f(x):
        return x - x.sum(1), x - x.sum(0)  # (n, n) - (n,): torch broadcasts the sums along dim 1

    run(f, torch.randn(6, 6))


def test_ops_without_a_lowering_run_through_torch_between_kernels():
    def f(x, w, idx):
        h = F.gelu(x * 2 + 1)  # kernel
        y = h @ w  # torch
        z = torch.softmax(y, -1) + h.sum(-1, keepdim=True)  # kernel after the matmul
        return z[idx], h.t() * 3  # torch indexing; a pointwise op on a view

    built = run(f, torch.randn(8, 16), torch.randn(16, 16), torch.tensor([0, 3, 5]))
    assert built.count() >= 2
    assert "torch.matmul" in built.wrappers or "@" in built.wrappers


def test_a_node_joins_an_earlier_kernel_when_its_inputs_exist_by_then():
    def f(x, w):
        a = x * 2
        b = a @ w
        c = a + 1  # fuses into a's kernel although the matmul runs in between
        return b, c

    built = run(f, torch.randn(8, 8), torch.randn(8, 8))
    assert built.count() == 1


def test_writes_into_tensors_keep_graph_order():
    def f(x, y):
        a = x * 2
        x.add_(1)
        b = x * 3 + a
        y.mul_(b)
        return a, b, y + 1

    run(f, torch.randn(10), torch.randn(10))


def test_broadcast_and_strided_inputs_are_read_by_index_arithmetic():
    def f(x, b, w):
        return F.gelu(x + b) * w  # b: a row broadcast over x; w: a transposed (strided) input

    fused(f, torch.randn(6, 5), torch.randn(5), torch.randn(5, 6).t())

    def g(x, col):
        return (x * col).relu(), x.t().softmax(-1), (x.t() * 2).sum(0)

    fused(g, torch.randn(6, 5), torch.randn(6, 1), kernels=3)


def test_outputs_keep_eager_strides():
    def f(x):
        return x * 2

    x = torch.randn(4, 6).t()
    eager, built = f(x), Built()
    got = jit(f, backend=built)(x)
    assert got.stride() == eager.stride()
    assert_same(got, eager)


def test_zero_dim_and_single_element_tensors():
    def f(x, s):
        return x * s + s.exp(), (x * s).sum(), s.relu()

    fused(f, torch.randn(3, 4), torch.tensor(0.5), kernels=3)


def test_graphs_whose_inputs_require_grad_run_through_torch_and_give_gradients():
    def f(x, w):
        return (F.gelu(x * w) + 1).softmax(-1).sum()

    x, w = torch.randn(4, 8, requires_grad=True), torch.randn(8, requires_grad=True)
    x2, w2 = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    built = Built()
    g = jit(f, backend=built)
    g(x, w).backward()
    f2 = eager_copy(f)
    f2(x2, w2).backward()
    assert built.count() == 0
    assert_same(x.grad, x2.grad)
    assert_same(w.grad, w2.grad)


# -- sizes --------------------------------------------------------------------------------

def test_symbolic_sizes_become_kernel_arguments():
    def f(x, b):
        y = F.gelu(x + b)
        return y.softmax(-1), y.sum(-1), F.layer_norm(y, (y.shape[-1],))

    eager, built = eager_copy(f), Built()
    g = jit(f, backend=built)
    for n, m in [(4, 8), (5, 8), (7, 8), (9, 11), (3, 20), (2, 33)]:
        x, b = torch.randn(n, m), torch.randn(m)
        assert_same(g(x, b), eager(x, b))
    assert re.search(r"def kernel_\w+\(.*ks0", built.kernels)
    assert "for c0 in range(0, ks" in built.kernels  # a symbolic row length: the looped form
    assert len(built.built) <= 3


def test_pointwise_kernel_over_a_dynamic_size():
    def f(x, y):
        return (x * y + 1).sigmoid()

    eager, built = eager_copy(f), Built()
    g = jit(f, backend=built)
    for n in (5, 6, 9, 100):
        x, y = torch.randn(n), torch.randn(n)
        assert_same(g(x, y), eager(x, y))
    assert len(built.built) == 2


# -- loading, logs, devices -------------------------------------------------------------------

def test_kernels_are_written_to_hash_named_files_in_the_cache_dir(tmp_path, monkeypatch):
    import rewrite.codeload
    import rewrite.config
    monkeypatch.setattr(rewrite.config, "cache_dir", str(tmp_path))

    def f(x):
        return (x + 1).softmax(-1)

    fused(f, torch.randn(4, 4))
    rewrite.codeload.flush()  # (written at a quiet moment: now)
    files = sorted(os.listdir(tmp_path / "triton"))
    assert any(re.fullmatch(r"kernels_f_\d+_[0-9a-f]{12}\.py", name) for name in files), files
    assert any(re.fullmatch(r"wrapper_f_\d+_[0-9a-f]{12}\.py", name) for name in files), files


def test_output_code_log_shows_kernels_and_wrapper(caplog):
    from test_guards import logged

    def f(x):
        return x.relu().sum(-1)

    text = logged(caplog, "output_code", lambda: fused(f, torch.randn(3, 5)))
    assert "@triton.jit" in text and "def forward(" in text and "tl.sum(" in text


def test_triton_is_the_default_backend_for_cuda_tensors_only():
    from rewrite import codegen
    assert codegen.default_backend([torch.randn(2)]) == "python"

    class FakeCuda:
        is_cuda = True
    assert codegen.default_backend([FakeCuda()]) == "triton"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here: GPU kernels are covered by the "
                    "interpreter tests and the sm_90 compile check")
def test_on_a_cuda_device_the_default_backend_runs_kernels():
    def f(x, w, b):
        return F.layer_norm(F.gelu(x * 2), (x.shape[-1],), w, b).softmax(-1)

    x, w, b = (torch.randn(64, 1024, device="cuda"), torch.randn(1024, device="cuda"),
               torch.randn(1024, device="cuda"))
    eager = eager_copy(f)
    g = jit(f)
    assert_same(g(x, w, b), eager(x, w, b))


def test_compile_check_catches_what_only_the_gpu_compiler_rejects(tmp_path):
    """The interpreter runs a block stored through a scalar pointer; the sm_90 compiler does not."""
    import json
    import subprocess
    import sys

    body = '''import triton
import triton.language as tl


@triton.jit
def kernel_k(in_x, out_y):
    cols = tl.arange(0, 16)[None, :]
    v = tl.load(in_x + cols)
    tl.store(out_y{}, tl.sum(v, 1)[:, None])
'''
    records = [{"name": "kernel_k", "source": body.format(" + cols * 0"), "signature": {"in_x": "*fp32", "out_y": "*fp32"},
                "num_warps": 4},
               {"name": "kernel_k", "source": body.format(""), "signature": {"in_x": "*fp32", "out_y": "*fp32"},
                "num_warps": 4}]
    path = tmp_path / "kernels.json"
    path.write_text(json.dumps(records))
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, os.path.join(os.path.dirname(tb.__file__), "compile_check.py"), str(path)],
                          env=env, capture_output=True, text=True)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "1 of 2 kernels compile for sm_90" in proc.stdout
    assert "Value argument cannot be block type" in proc.stdout


def test_cuda_launcher_binds_the_compiled_kernel_after_the_first_call(monkeypatch):
    """Launcher's logic with a stand-in kernel (no GPU here): the first call goes through
    Triton's `kernel[grid](...)`, later ones straight to the compiled kernel's launcher,
    unless a pointer the wrapper did not allocate is not 16-byte aligned."""
    calls = []

    class Compiled:
        function, packed_metadata = "fn", "meta"

        def launch_metadata(self, grid, stream, *args):
            return ("md", grid, stream)

        def run(self, *args):
            calls.append(("bound", args))

    class Kernel:
        def __getitem__(self, grid):
            return lambda *args, num_warps: calls.append(("jit", grid, args, num_warps)) or Compiled()

    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda device: 7, raising=False)
    launch = tb.Launcher(Kernel(), (3, 8), (0,), torch.device("cuda", 0))
    x, out = torch.randn(64), torch.randn(64)
    launch(x, out)
    launch(x, out)
    launch(x[1:], out)  # 4 bytes off: Triton must re-specialize
    assert [c[0] for c in calls] == ["jit", "bound", "jit"]
    assert calls[0][1:] == ((3,), (x, out), 8)
    from triton import knobs
    assert calls[1][1] == (3, 1, 1, 7, "fn", "meta", ("md", (3,), 7), knobs.runtime.launch_enter_hook,
                           knobs.runtime.launch_exit_hook, x, out)


def test_the_wrapper_frees_intermediates_after_their_last_use():
    def f(x, w):
        h = (x * 2).relu()
        y = h @ w
        return (y + 1).sigmoid()

    built = run(f, torch.randn(4, 4), torch.randn(4, 4))
    assert "del " in built.wrappers


def test_views_torch_makes_with_symbolic_sizes_pass_their_strides_at_run_time():
    """fuzz finding: a transposed view of a dynamic input has strides only known at run time."""
    def f(x, v):
        y = x.t()
        return (y * 2).sum(0), y + 1, torch.exp(v.transpose(0, 0))

    eager, built = eager_copy(f), Built()
    g = jit(f, backend=built)
    for n in (3, 4, 5, 0):
        x, v = torch.randn(n, 7), torch.randn(n)
        assert_same(g(x, v), eager(x, v))
    assert ".stride(" in built.wrappers


@pytest.mark.parametrize("make", [lambda: torch.randn(0), lambda: torch.randn(1).expand(0), lambda: torch.randn(0, 3),
                                  lambda: torch.randn(3, 0), lambda: torch.randn(2, 0).t()],
                         ids=["empty", "expanded_empty", "no_rows", "no_cols", "transposed_empty"])
def test_empty_tensors(make):
    """fuzz finding: a one-element read of an empty input was an unmasked load (a segfault
    under the interpreter, an illegal address on a GPU)."""
    def f(x):
        return x - x, (x * 2).sum(-1), x.exp().amax(0, keepdim=True) if x.dim() == 2 and x.shape[0] else x + 1

    run(f, make())


def test_in_place_size_changes_run_through_torch():
    """fuzz finding: `t.unsqueeze_(0)` changed the traced example's sizes, and the kernel's
    buffer was allocated with the sizes after it."""
    def f(x):
        t = torch.exp(x)
        t.unsqueeze_(0)
        return t, (x * 2).t_()

    built = run(f, torch.randn(()))
    assert built.count() == 0
    run(f, torch.randn(3, 2))

    def g(x):  # fuzz finding (a segfault): out= resized an intermediate after it was traced
        a = x + 0
        b = a + 1
        torch.sum(b, 0, out=b)
        return b

    assert run(g, torch.randn(0)).count() == 0


def test_tensors_broadcast_along_a_whole_group_are_read_as_full_blocks():
    """fuzz finding: a (rows, 1) input read per element gave a pointer block smaller than its mask."""
    def f(x, m, c):
        return (x - m).softmax(-1), (x * c).sum(-1), x.sum(-1, keepdim=True) * m

    fused(f, torch.randn(6, 20), torch.randn(6, 1), torch.randn(20))


def test_modes_switched_inside_the_graph_keep_graph_order():
    """fuzz finding: an op inside an inference_mode block joined a kernel that ran before the
    block was entered, so its result was not an inference tensor."""
    def f(x):
        a = x * 2
        with torch.inference_mode():
            b = x + 1
        return a, b

    run(f, torch.randn(8))
    out = jit(eager_copy(f), backend=Built())(torch.randn(8))
    assert [t.is_inference() for t in out] == [False, True]
