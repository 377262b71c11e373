"""The triton backend (issue 7, first slice): fused pointwise kernels, run under Triton's
interpreter on CPU, against eager; graphs it cannot fuse run through torch."""
import pytest
import torch
import torch.nn.functional as F

from rewrite import dispatcher_of, jit

from conftest import assert_same, eager_copy

pytest.importorskip("triton")


def fused(fn, *args):
    """jit(fn, backend='triton') over two calls against eager; True when a kernel ran."""
    eager = eager_copy(fn)
    jit(fn, backend="triton")
    for _ in range(2):
        got, expected = fn(*args), eager(*args)
        assert_same(got, expected)
    entry = dispatcher_of(fn).entries[0]
    return "___graph(" in entry.source and hasattr(entry.fn, "__code__")


UNARY = [torch.relu, torch.sigmoid, torch.tanh, torch.exp, torch.abs, torch.neg, F.silu, F.gelu,
         lambda x: F.gelu(x, approximate="tanh"), lambda x: torch.clamp(x, -0.5, 0.5), lambda x: x ** 2,
         lambda x: torch.sqrt(x.abs() + 1), lambda x: torch.rsqrt(x.abs() + 1), lambda x: torch.log(x.abs() + 1)]


@pytest.mark.parametrize("op", UNARY, ids=lambda op: getattr(op, "__name__", "lambda"))
def test_each_unary_lowering_matches_eager(op):
    def f(x):
        return op(x * 1.5)

    assert fused(f, torch.randn(257))


def test_binary_ops_comparisons_and_where_fuse_into_one_kernel():
    def f(x, y):
        a = (x * 2 + y - 1) / (y.abs() + 1)
        b = torch.where(x > y, torch.maximum(x, y), torch.minimum(x, y))
        return a.relu(), b.sigmoid(), x <= y

    assert fused(f, torch.randn(1000), torch.randn(1000))


def test_two_dimensional_inputs_and_float64():
    def f(x, y):
        return F.gelu(x + y) * torch.sigmoid(y)

    assert fused(f, torch.randn(33, 17, dtype=torch.float64), torch.randn(33, 17, dtype=torch.float64))


@pytest.mark.parametrize("case", ["output_smaller_than_broadcast", "matmul", "requires_grad"])
def test_graphs_it_cannot_fuse_run_through_torch(case):
    x = torch.randn(8, 8)

    def f(a, b):
        if case == "output_smaller_than_broadcast":
            return (a + b).relu(), b.exp()
        return (a @ b).relu() if case == "matmul" else (a + b).relu()

    args = {"output_smaller_than_broadcast": (x, torch.randn(8)), "matmul": (x, x),
            "requires_grad": (x.clone().requires_grad_(), x)}[case]
    assert not fused(f, *args)


def test_a_dynamic_entry_passes_the_size_to_the_kernel():
    def f(x, y):
        return (x * y + 1).sigmoid()

    eager = eager_copy(f)
    jit(f, backend="triton")
    for n in (5, 6, 9, 100):
        x, y = torch.randn(n), torch.randn(n)
        assert_same(f(x, y), eager(x, y))
    assert dispatcher_of(f).compiles == 2


def test_bool_inputs_run_through_torch():
    def f(x):
        return x + x  # bool + bool is a logical or in torch

    assert not fused(f, torch.tensor([True, False, True]))


def test_broadcast_and_strided_inputs_are_read_by_index_arithmetic():
    def f(x, b, w):
        return F.gelu(x + b) * w  # b: a row broadcast over x; w: a transposed (strided) input

    assert fused(f, torch.randn(6, 5), torch.randn(5), torch.randn(5, 6).t())

    def g(x, col):
        return (x * col).relu()  # col: (6, 1), broadcast along the last dim

    assert fused(g, torch.randn(6, 5), torch.randn(6, 1))
