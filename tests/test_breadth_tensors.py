"""Breadth suite, tensors: indexing, creation, methods returning Python values, common ops."""
import torch
import torch.nn.functional as F

import rewrite
from breadth import check, check_each, rand, todo
from conftest import CompileCounter, assert_same, eager_copy


def x2d(seed):
    return (rand(seed, 4, 5),)


def x3d(seed):
    return (rand(seed, 2, 3, 4),)


# indexing

def test_index_int():
    check(lambda x: x[1], x2d)


def test_index_negative_int():
    check(lambda x: x[-1, -2], x2d)


def test_index_slice_with_step():
    check(lambda x: x[::2, 1:4], x2d)


def test_index_negative_slice():
    check(lambda x: x[-3:, :-1], x2d)


def test_index_none_adds_dims():
    check(lambda x: x[None, :, None], x2d)


def test_index_ellipsis():
    check(lambda x: x[..., 1], x3d)


def test_index_ellipsis_and_none():
    check(lambda x: x[..., None, :2], x3d)


def test_index_list_of_ints():
    check(lambda x: x[[0, 2, 3]], x2d)


def test_index_two_lists_advanced():
    check(lambda x: x[[0, 1], [2, 3]], x2d)


def test_index_long_tensor():
    check(lambda x, i: x[i], lambda s: (rand(s, 4, 5), torch.tensor([3, 0, 0])))


def test_index_bool_mask_tensor():
    check(lambda x: x[x > 0], x2d)  # an output size that depends on the values


def test_index_mixed_slice_and_tensor():
    check(lambda x, i: x[1:, i], lambda s: (rand(s, 4, 5), torch.tensor([4, 1])))


def test_index_with_python_int_arithmetic():
    def f(x):
        n = x.shape[1] // 2
        return x[:, n:] - x[:, :n + 1]
    check(f, x2d)


def test_index_select_and_gather():
    def f(x, i):
        return x.index_select(1, i[0]), x.gather(1, i.expand(4, 2))
    check(f, lambda s: (rand(s, 4, 5), torch.tensor([[1, 3]])))


# creation

def test_zeros_and_ones():
    def f(x):
        return torch.zeros(2, 3) + torch.ones(2, 3, dtype=torch.float64) + x.sum()
    check(f, x2d)


def test_zeros_from_shape_of_input():
    check(lambda x: torch.zeros(x.shape) + x, x2d)


def test_arange_variants():
    def f(x):
        return torch.arange(5), torch.arange(1, 10, 2.5), torch.arange(x.shape[0]) * x[:, 0]
    check(f, x2d)


def test_full_and_full_like():
    def f(x):
        return torch.full((2, 2), 7.0), torch.full_like(x, 3), torch.full((3,), 2, dtype=torch.int32)
    check(f, x2d)


def test_like_constructors():
    def f(x):
        return torch.zeros_like(x), torch.ones_like(x, dtype=torch.int64), torch.empty_like(x).shape
    check(f, x2d)


def test_new_constructors():
    def f(x):
        return x.new_zeros(2, 3), x.new_ones((3,)), x.new_full((2,), 4.0), x.new_tensor([1.0, 2.0])
    check(f, x2d)


def test_torch_tensor_from_python_list():
    def f(x):
        return x[0] * torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0])
    check(f, x2d)


def test_linspace_eye_tril():
    def f(x):
        return torch.linspace(0, 1, 5) + x, torch.eye(3), torch.ones(4, 4).tril()
    check(f, x2d)


@todo("call to torch.manual_seed (global side effect)")
def test_manual_seed_then_rand():
    def f(x):
        torch.manual_seed(0)
        return x + torch.rand(4, 5)
    check(f, x2d)


@todo("call to torch.manual_seed (global side effect)")
def test_manual_seed_then_randn_like_and_randint():
    def f(x):
        torch.manual_seed(123)
        return torch.randn_like(x), torch.randint(0, 10, (3,))
    check(f, x2d)


@todo("call to torch.manual_seed (global side effect)")
def test_manual_seed_then_dropout():
    def f(x):
        torch.manual_seed(7)
        return F.dropout(x, p=0.5, training=True)
    check(f, x2d)


@todo("constructing torch._C.Generator while tracing")
def test_seeded_generator_created_inside():
    def f(x):
        g = torch.Generator().manual_seed(3)
        return x + torch.randn(4, 5, generator=g)
    check(f, x2d)


# Tensor methods returning Python values

def test_size_dim_numel():
    def f(x):
        return x.size(), x.size(1), x.dim(), x.numel(), x.ndim
    check(f, x3d)


def test_shape_arithmetic_reshape():
    def f(x):
        b, c, n = x.shape
        return x.reshape(b * c, n).sum(0) * (b + c)
    check(f, x3d)


def test_is_contiguous_branch():
    def f(x):
        y = x.t()
        return (y.contiguous() if not y.is_contiguous() else y), y.is_contiguous(), x.is_contiguous()
    check(f, x2d)


def test_dtype_and_device_checks():
    def f(x):
        if x.dtype == torch.float32 and x.device.type == "cpu" and x.is_floating_point():
            return x.double()
        return x
    check(f, x2d)


def test_stride_and_element_size():
    def f(x):
        return x * x.stride(0) + x.element_size(), x.stride()
    check(f, x2d)


def test_len_of_tensor():
    check(lambda x: x * len(x), x2d)


def test_shape_in_python_loop():
    def f(x):
        out = x[0]
        for i in range(1, x.shape[0]):
            out = out + x[i]
        return out
    check(f, x2d)


def test_requires_grad_and_is_leaf_attributes():
    def f(x):
        return x * 2, x.requires_grad, x.is_leaf
    check(f, x2d)


@todo("recompiles: the list .tolist() returns is guarded by value (`___stack0[0][0] == ...`) in the resume function")
def test_tolist_of_input():
    # reads tensor values into Python: a graph break, as in Dynamo
    def f(x):
        return (x * 2).tolist()
    check(f, x2d, fullgraph=False)


@todo("recompiles: the float .item() returns is guarded by value (`___stack1 == ...`) in the resume function")
def test_item_of_sum():
    def f(x):
        return x + x.sum().item()
    check(f, x2d, fullgraph=False)


# pointwise, reductions, views

def test_pointwise_chain():
    check(lambda x: (x.sin() * x.cos() + x.exp().log1p()).abs().sqrt(), x2d)


def test_activations():
    def f(x):
        return F.gelu(x), F.silu(x), torch.sigmoid(x), F.softplus(x), F.leaky_relu(x, 0.1)
    check(f, x2d)


def test_where_and_clamp():
    check(lambda x: torch.where(x > 0, x, x * 0.1).clamp(min=-0.05), x2d)


def test_comparisons_and_logical():
    def f(x):
        return (x > 0) & (x < 1), (x == 0) | ~(x != 0), torch.logical_xor(x > 0, x > 0.5)
    check(f, x2d)


def test_reductions_with_dims():
    def f(x):
        return x.sum(-1), x.mean((0, 1)), x.amax(1, keepdim=True), x.std(0), x.norm()
    check(f, x3d)


def test_max_with_dim_returns_namedtuple():
    def f(x):
        r = x.max(dim=1)
        return r.values, r.indices, torch.min(x, 0)
    check(f, x2d)


def test_argmax_topk_sort():
    def f(x):
        v, i = x.topk(2, dim=1)
        return x.argmax(1), v, i, x.sort(dim=0).values
    check(f, x2d)


def test_cumsum_and_softmax():
    def f(x):
        return x.cumsum(1), x.softmax(-1), F.log_softmax(x, dim=0)
    check(f, x2d)


def test_view_reshape_flatten():
    def f(x):
        return x.view(6, 4), x.reshape(-1), x.flatten(1), x.view(-1, 2, 2).unflatten(0, (2, 3))
    check(f, x3d)


def test_permute_transpose_contiguous():
    def f(x):
        return x.permute(2, 0, 1).contiguous(), x.transpose(0, 2), x.mT
    check(f, x3d)


def test_squeeze_unsqueeze_expand():
    def f(x):
        y = x.unsqueeze(1)
        return y, y.squeeze(1), y.expand(4, 3, 5), x[:, :1].expand_as(x)
    check(f, x2d)


def test_cat_stack_split_chunk():
    def f(x):
        a, b = x.split([2, 3], dim=1)
        return torch.cat([b, a], dim=1), torch.stack(x.chunk(2, dim=0)), x.unbind(0)
    check(f, x2d)


def test_matmul_family():
    def f(x, w):
        return x @ w, torch.mm(x, w), torch.einsum("ij,jk->ik", x, w), F.linear(x, w.t())
    check(f, lambda s: (rand(s, 4, 5), rand(s + 9, 5, 3)))


def test_dtype_conversions():
    def f(x):
        return x.to(torch.float16), x.int(), x.long().float(), x.type(torch.float64), x.bool()
    check(f, x2d)


def test_broadcast_with_python_scalars():
    check(lambda x: 2 ** x + 1 / (x.abs() + 1) - 3 * x // 2 % 5, x2d)


def test_integer_tensor_ops():
    def f(i):
        return i // 3, i % 4, i << 1, i & 6, i.float().mean()
    check(f, lambda s: (torch.arange(12).reshape(3, 4) + s,))


def test_masked_fill_with_causal_mask():
    def f(x):
        n = x.shape[-1]
        mask = torch.ones(n, n, dtype=torch.bool).triu(1)
        return x.masked_fill(mask, float("-inf")).softmax(-1)
    check(f, lambda s: (rand(s, 2, 4, 4),))


def test_complex_indexing_assignment_free_scatter():
    def f(x, i):
        return torch.zeros(4, 5).scatter(1, i, x[:, :2])
    check(f, lambda s: (rand(s, 4, 5), torch.tensor([[0, 1], [2, 3], [4, 0], [1, 2]])))


# guards on tensor properties: a change must recompile (or take another entry), never reuse

def test_shape_change_between_calls():
    check_each(lambda x: x.sum(0) * x.shape[0], (rand(0, 3, 2),), (rand(0, 4, 2),), (rand(1, 3, 2),))


def test_dtype_change_between_calls():
    check_each(lambda x: x / 2, (torch.arange(3),), (torch.arange(3.0),), (torch.arange(3, dtype=torch.float64),))


def test_stride_change_between_calls():
    def f(x):
        return x.view(-1) if x.is_contiguous() else x.reshape(-1)
    check_each(f, (rand(0, 3, 2),), (rand(0, 2, 3).t(),))


def test_requires_grad_change_between_calls():
    check_each(lambda x: (x * 2, x.requires_grad), (rand(0, 3),), (rand(0, 3, requires_grad=True),))


def test_number_of_tensors_in_list_changes():
    check_each(lambda xs: torch.stack(xs).sum(0), ([rand(0, 3)] * 2,), ([rand(0, 3)] * 3,))


def test_none_then_tensor_argument():
    check_each(lambda x, b=None: x if b is None else x + b, (rand(0, 3), None), (rand(0, 3), rand(1, 3)))


def test_zero_dim_tensor_argument():
    check(lambda x, s: x * s, lambda s: (rand(s, 3), torch.tensor(2.0 + s)))


def test_global_tensor_rebound_and_mutated():
    def f(x):
        return x + G_T

    def rebind(t):
        global G_T
        G_T = t
        return (rand(0, 3),)

    def mutate():
        G_T.add_(1)
        return (rand(0, 3),)
    check_each(f, lambda: rebind(rand(0, 3)), lambda: rebind(rand(5, 3)), mutate)


G_T = None


def test_closure_tensor_resized_between_calls():
    w = rand(0, 3)

    def f(x):
        return x + w.shape[0] + w.sum()

    def resize():
        w.resize_(5)
        return (rand(0, 3),)
    check_each(f, (rand(0, 3),), resize)


def test_closure_tensor_data_replaced():
    w = rand(0, 3)

    def f(x):
        return x * w

    def replace():
        w.data = rand(1, 5)
        return (rand(0, 5),)
    check_each(f, (rand(0, 3),), replace)


def test_default_dtype_change_between_calls():
    def f(x):
        return torch.zeros(2) + x, torch.tensor([1.5]).dtype

    def set_default(dtype):
        torch.set_default_dtype(dtype)
        return (torch.zeros(2, dtype=torch.float64),)
    try:
        check_each(f, lambda: set_default(torch.float32), lambda: set_default(torch.float64))
    finally:
        torch.set_default_dtype(torch.float32)


# dtypes and special values

def test_integer_tensor_arithmetic_promotion():
    check(lambda x: (x // 2, x / 2, x * 1.5, x.sum(), x.float().mean()), lambda s: (torch.arange(5) + s,))


def test_bool_tensor_ops():
    check(lambda x: (x.sum(), x & True, ~x, x.float(), x.any(), x.all()),
          lambda s: (torch.tensor([True, False, bool(s)]),))


def test_complex_results():
    check(lambda x: ((x * 1j).abs(), torch.polar(x.abs(), x)), lambda s: (rand(s, 3),))


def test_half_precision_round_trip():
    check(lambda x: (x.half() * 3).float(), lambda s: (rand(s, 3),))


def test_scalar_type_promotion():
    check(lambda x: (x + 1.5, x * True, x + torch.tensor(2.5), x.to(torch.int8) + 300),
          lambda s: (torch.arange(3) + s,))


def test_large_python_int_with_int32_tensor():
    check(lambda x, n: x + n, lambda s: (torch.arange(3, dtype=torch.int32) + s, 2 ** 40))


def test_nan_and_inf_values():
    def f(x):
        return x.nan_to_num(), x.isnan(), torch.nansum(x), x.isinf(), x.clamp(max=1.0)
    check(f, lambda s: (torch.tensor([float("nan"), float("-inf"), 1.0, s]),))


def test_empty_and_zero_size_tensors():
    def f(x):
        return x[:0].sum() + x.sum(), x[5:], torch.cat([x[:0], x]), torch.zeros(0, 3).sum(0)
    check(f, lambda s: (rand(s, 4),))


def test_zero_dim_input():
    check(lambda x: x * 2 + x.dim(), lambda s: (torch.tensor(float(s)),))


def test_finfo_limits():
    check(lambda x: x.clamp(min=torch.finfo(x.dtype).min, max=torch.finfo(x.dtype).eps), lambda s: (rand(s, 3),))


# more Python values from tensors

def test_torch_size_operations():
    def f(x):
        return x.shape + (1,), x.shape[1:], list(x.shape), x.new_zeros(x.shape[::-1]), x.shape.numel()
    check(f, x2d)


def test_tensor_properties_as_python_values():
    def f(x):
        return x.size(-1), x.nelement(), x.is_cuda, x.device, x.dtype.is_floating_point, x.dtype.itemsize
    check(f, x2d)


def test_torch_is_tensor_and_numel():
    check(lambda x, n: (torch.is_tensor(x), torch.is_tensor(n), torch.numel(x)), lambda s: (rand(s, 3), 2))


def test_shape_and_dtype_in_strings():
    check(lambda x: (x, str(x.shape), f"{x.shape[0]}x{x.dtype}", str(x.device)), x2d)


def test_returned_input_is_the_same_tensor():
    def f(x):
        return x, x + 1

    rewrite.jit(f, fullgraph=True, backend=CompileCounter())
    for seed in (0, 1):
        x = rand(seed, 3)
        assert f(x)[0] is x


def test_returned_views_alias_the_input():
    def f(x):
        return x.view(-1), x[0]

    rewrite.jit(f, fullgraph=True, backend=CompileCounter())
    for seed in (0, 1):
        x = rand(seed, 2, 3)
        flat, row = f(x)
        flat[0] = 100.0
        assert x[0, 0] == 100.0 and row[0] == 100.0


def test_tensor_returned_twice_is_one_object():
    def f(x):
        y = x + 1
        return y, [y]

    rewrite.jit(f, fullgraph=True, backend=CompileCounter())
    a, (b,) = f(rand(0, 3))
    assert a is b


# in-place ops on tensors created inside the function

def test_inplace_on_local_views():
    def f(x):
        y = x.clone()
        z = y[1:]
        y[0] = 5
        z += 1
        y.t().mul_(2)
        return y, z
    check(f, lambda s: (rand(s, 3, 2),))


def test_setitem_with_mask_on_local():
    def f(x):
        y = x.clone()
        y[y > 0] = 0
        return y
    check(f, lambda s: (rand(s, 5),))


def test_out_argument_into_local():
    def f(x):
        o = torch.empty(3)
        torch.mul(x, 2, out=o)
        return o
    check(f, lambda s: (rand(s, 3),))


def test_unsqueeze_inplace_changes_local_shape():
    def f(x):
        y = x.clone()
        y.unsqueeze_(0)
        return y.shape, y
    check(f, x2d)


# random numbers without a seed inside: the global generator's stream matches eager

def test_unseeded_rand_follows_the_global_stream():
    def f(x):
        return x + torch.rand(3)

    eager = eager_copy(f)
    rewrite.jit(f, fullgraph=True, backend=CompileCounter())
    for _ in range(2):
        torch.manual_seed(5)
        expected, after_e = eager(torch.zeros(3)), torch.rand(3)
        torch.manual_seed(5)
        actual, after_c = f(torch.zeros(3)), torch.rand(3)
        assert_same(actual, expected)
        assert_same(after_c, after_e)


def test_unseeded_dropout_follows_the_global_stream():
    def f(x):
        return torch.nn.functional.dropout(x, 0.5) * 2

    eager = eager_copy(f)
    rewrite.jit(f, fullgraph=True, backend=CompileCounter())
    for _ in range(2):
        torch.manual_seed(1)
        expected = eager(torch.ones(8))
        torch.manual_seed(1)
        assert_same(f(torch.ones(8)), expected)


def test_shape_of_random_tensor_only():
    check(lambda x: (torch.rand(3).shape, x * 2), lambda s: (rand(s, 3),))
