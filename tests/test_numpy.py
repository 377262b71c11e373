"""NumPy code on arrays that come from tensors, come in, or that np.* makes: traced into the
graph under fullgraph=True, against eager NumPy (values, dtypes, the types of results, what
the arguments hold afterwards, eager's errors)."""
import subprocess
import sys

import numpy as np
import pytest
import torch

import rewrite
from rewrite import jit

from conftest import CompileCounter, assert_same, eager_copy


def compare(fn, make_args, calls=2, graphs=1, **options):
    """fn under fullgraph=True and its eager copy, each on fresh arguments from `make_args(i)`:
    results and arguments afterwards the same (values, dtypes, types); `graphs` compiled."""
    eager = eager_copy(fn)
    counter = CompileCounter()
    compiled = jit(fn, fullgraph=True, backend=counter, **options)
    for i in range(calls):
        want_args, got_args = make_args(i), make_args(i)
        want = eager(*want_args)
        got = compiled(*got_args)
        assert_same(got, want)
        for a, b in zip(got_args, want_args):
            if isinstance(b, (np.ndarray, torch.Tensor)):
                assert_same(a, b)
    if graphs is not None:
        assert counter.frame_count == graphs
    return counter


def tensor(*shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return torch.randn(*shape, generator=g).to(dtype)
    return torch.randint(-5, 6, shape, generator=g).to(dtype)


def array(*shape, dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    if np.dtype(dtype).kind == "b":
        return rng.integers(0, 2, shape).astype(dtype)
    return rng.integers(-5, 6, shape).astype(dtype)


# --- arrays from tensors: x.numpy(), then NumPy ------------------------------------------------

FROM_TENSORS = {
    "sum_axis": lambda x: torch.from_numpy(np.sum(x.numpy(), axis=0)),
    "where": lambda x: np.where(x.numpy() > 0, x.numpy(), 0),
    "gram": lambda x: x.numpy().T @ x.numpy(),
    "scalar_type": lambda x: x * np.float32(2.0),
    "arange": lambda x: x + torch.from_numpy(np.arange(3)),
    "int_true_division": lambda x: x.numpy().astype(np.int64) / 2,  # float64 in NumPy (torch._numpy: float32)
    "stats": lambda x: (x.numpy().mean(), x.numpy().std(ddof=1), np.var(x.numpy(), axis=1, keepdims=True)),
    "metadata": lambda x: (x.numpy().shape, x.numpy().ndim, x.numpy().size, x.numpy().dtype, x.numpy().itemsize),
    "reductions": lambda x: (np.max(x.numpy(), axis=1), np.min(x.numpy()), np.prod(x.numpy(), axis=(0, 1)),
                             np.argmax(x.numpy()), x.numpy().argmin(axis=0), np.cumsum(x.numpy(), axis=1),
                             np.any(x.numpy() > 1), np.all(x.numpy() > -5, axis=0), np.median(x.numpy(), axis=0)),
    "ufuncs": lambda x: (np.exp(x.numpy()), np.log(np.abs(x.numpy()) + 1), np.sqrt(x.numpy() ** 2), np.sign(x.numpy()),
                         np.maximum(x.numpy(), 0), np.clip(x.numpy(), -0.5, 0.5), np.tanh(x.numpy()),
                         np.floor(x.numpy()), np.arctan2(x.numpy(), 1.0), np.isnan(x.numpy())),
    "shapes": lambda x: (x.numpy().reshape(3, 4), x.numpy().reshape(-1), np.transpose(x.numpy()),
                         np.expand_dims(x.numpy(), 1).shape, np.concatenate([x.numpy(), x.numpy()], axis=1),
                         np.stack([x.numpy(), x.numpy()]), x.numpy()[:, None, :], x.numpy().flatten(),
                         np.vstack([x.numpy(), x.numpy()]), np.hstack([x.numpy(), x.numpy()])),
    "linalg": lambda x: (np.dot(x.numpy(), x.numpy().T), np.linalg.norm(x.numpy()), np.outer(x.numpy()[0], x.numpy()[1]),
                         np.einsum("ij,kj->ik", x.numpy(), x.numpy()), np.trace(x.numpy()[:3, :3]),
                         np.tensordot(x.numpy(), x.numpy(), axes=([1], [1]))),
    "indexing": lambda x: (x.numpy()[0], x.numpy()[1, 2], x.numpy()[::2, 1:], x.numpy()[..., -1],
                           x.numpy()[np.array([0, 2])], x.numpy()[[1, 3], [0, 2]]),
    "creation": lambda x: (np.zeros(3), np.ones((2, 2), dtype=np.int32), np.full(4, 7.5), np.eye(3),
                           np.eye(3, 4, k=1), np.linspace(0, 1, 5), np.linspace(0, 1, 4, endpoint=False),
                           np.zeros_like(x.numpy()), np.ones_like(x.numpy(), dtype=np.float64), np.arange(1, 10, 2),
                           np.array([1.0, 2.0]), np.asarray([[1, 2], [3, 4]]), np.identity(2),
                           np.empty((2, 3)).shape, np.empty_like(x.numpy()).dtype),
    "mixed_tensor_first": lambda x: (x + x.numpy(), x * np.float64(3.0), x - x.numpy().sum()),
    "scalars_into_torch": lambda x: torch.tensor(x.numpy()) * np.pi,
    "as_tensor": lambda x: torch.as_tensor(x.numpy() * 2, dtype=torch.float64),
    "comparisons": lambda x: ((x.numpy() > 0) & (x.numpy() < 1), x.numpy() == x.numpy(), ~(x.numpy() > 0)),
    "constants": lambda x: (x.numpy() * np.pi + np.e, np.finfo(np.float32).eps, np.iinfo(np.int8).max,
                            x.numpy()[np.newaxis].shape, isinstance(x.numpy(), np.ndarray)),
    "astype_and_dtypes": lambda x: (x.numpy().astype(np.float16), x.numpy().astype("int32"),
                                    np.float32(x.numpy()), (x.numpy() > 0).astype(np.uint8).sum()),
    "round_and_friends": lambda x: (np.round(x.numpy(), 2), np.around(x.numpy()), np.nan_to_num(x.numpy() / 0.0),
                                    np.diff(x.numpy(), axis=0), np.sort(x.numpy(), axis=1), np.flip(x.numpy(), 0)),
    "isclose": lambda x: (np.isclose(x.numpy(), x.numpy() + 1e-9), np.allclose(x.numpy(), x.numpy())),
    "percentiles": lambda x: (np.percentile(x.numpy(), 50), np.quantile(x.numpy(), [0.25, 0.75], axis=0)),
    "joins": lambda x: (np.split(x.numpy(), 2), np.array_split(x.numpy(), 3, axis=1), np.tile(x.numpy()[0], 2),
                        np.repeat(x.numpy()[0], 2), np.roll(x.numpy(), 1, axis=0), np.column_stack([x.numpy()[0]] * 2)),
    "bool_sum": lambda x: np.sum(x.numpy() > 0),
    "mean_of_ints": lambda x: np.mean(x.numpy().astype(np.int32), axis=0),
}


@pytest.mark.parametrize("name", sorted(FROM_TENSORS))
def test_numpy_from_tensors(name):
    counter = compare(FROM_TENSORS[name], lambda i: (tensor(4, 3, seed=i),), graphs=None)
    assert counter.frame_count <= 1  # (none: all of it constants)


def test_numpy_int_division_is_numpys_float64():
    """An int64 array divided by 2 is float64 in NumPy (float32 under torch._numpy and torch.compile):
    NumPy wins."""
    fn = jit(lambda x: x.numpy() // 1 / 2, fullgraph=True)
    out = fn(torch.arange(4))
    assert out.dtype == np.float64 and type(out) is np.ndarray


def test_numpy_int_division_by_zero_gives_zero():
    """x // 0 and x % 0 of integer arrays are 0 in NumPy (torch raises): so here, for divisors
    that are zero only in a later call."""
    compare(lambda a, b: (a // b, a % b), lambda i: (np.arange(6), np.array([1, 2, 3, 0 if i else 4, 5, 6])))


def test_numpy_scalars_types():
    """What a reduction returns is a NumPy scalar leaving the function, a 0-d tensor meeting one."""
    def f(x):
        a = x.numpy()
        s = a.sum()
        return s, a.max() * 2, x * a.mean(), np.allclose(a, a), s.dtype
    compare(f, lambda i: (tensor(3, 2, seed=i),))


# --- writes: the array is the tensor's memory -------------------------------------------------

def test_numpy_writes_through_to_the_tensor():
    def f(x):
        a = x.numpy()
        a[0] = 5.0
        a += 1
        a[1:, 0] *= 2
        return x
    compare(f, lambda i: (tensor(3, 2, seed=i),))


def test_numpy_array_arguments_written_in_place():
    def f(a, b):
        a += b
        b.fill(3)
        a[0, 0] = -1
        return a.sum(), b
    compare(f, lambda i: (array(2, 3, seed=i), array(2, 3, seed=i + 9)))


def test_numpy_in_place_sort_and_int_casting():
    def f(a):
        a.sort()
        a[0] = 2.7  # (cast into an int array: truncated)
        return a
    compare(f, lambda i: (array(5, dtype=np.int64, seed=i),))


# --- arrays passed in: guarded as tensors are -------------------------------------------------

def test_numpy_arrays_in_and_out():
    def f(a, b):
        return (a @ b.T + 1) / a.shape[0], a.dtype
    compare(f, lambda i: (array(3, 4, seed=i), array(2, 4, seed=i)))


def test_numpy_array_guards_recompile_on_dtype_and_shape():
    counter = CompileCounter()
    fn = jit(lambda a: a * 2, backend=counter, dynamic=False)
    for a in (array(3), array(3), array(3, dtype=np.float32), array(4), array(3, dtype=np.int32)):
        assert_same(fn(a), a * 2)
    assert counter.frame_count == 4


def test_numpy_array_sizes_become_dynamic():
    """A size that changed since the first compile is a symbol, as a tensor's."""
    counter = compare(lambda a: (a - a.mean(axis=0)) * a.shape[0], lambda i: (array(3 + i, 2, seed=i),),
                      calls=4, graphs=None)
    assert counter.frame_count == 2


def test_numpy_int_arrays_and_bools_in():
    def f(a, m):
        return np.where(m, a, -a), (a * m).sum(axis=1), a.astype(np.float32) / 3
    compare(f, lambda i: (array(2, 5, dtype=np.int32, seed=i), array(2, 5, dtype=np.bool_, seed=i)))


def test_numpy_array_returned_as_is_is_the_same_object():
    fn = jit(lambda a, x: (a, x + 1), fullgraph=True)
    a = array(3)
    out, _ = fn(a, torch.ones(2))
    assert out is a


def test_numpy_one_array_returned_twice_is_one_object():
    fn = jit(lambda x: (lambda a: (a, a))(x.numpy() + 1), fullgraph=True)
    a, b = fn(torch.ones(2))
    assert a is b


def test_numpy_views_share_memory_like_eager():
    def f(x):
        a = x.numpy()
        v = a[1:]
        v[0] = 7.0
        return a, v
    compare(f, lambda i: (tensor(3, seed=i),))


# --- eager's errors ---------------------------------------------------------------------------

ERRORS = {
    "requires_grad": (lambda x: x.numpy(), lambda: (torch.ones(2, requires_grad=True),)),
    "read_only": (lambda x: np.broadcast_to(x.numpy(), (2, 2)).__setitem__(0, 1.0), lambda: (torch.ones(2),)),
    "int_in_place_true_division": (lambda a: a.__itruediv__(2), lambda: (np.arange(3),)),
    "shape_mismatch": (lambda a: a + np.ones(4), lambda: (np.ones(3),)),
    "ambiguous_truth": (lambda x: 1 if x.numpy() > 0 else 2, lambda: (torch.ones(3),)),
    "ndarray_plus_tensor": (lambda x: x.numpy() + x, lambda: (torch.ones(3),)),
    "np_sum_of_tensor": (lambda x: np.sum(x), lambda: (torch.ones(3),)),
    "empty_max": (lambda a: a.max(), lambda: (np.ones(0),)),
    "len_of_scalar": (lambda x: len(x.numpy().sum()), lambda: (torch.ones(3),)),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_numpy_eager_errors(name):
    fn, make = ERRORS[name]
    try:
        eager_copy(fn)(*make())
        raise AssertionError("eager did not raise")
    except Exception as e:  # noqa: BLE001
        want = (type(e), str(e))
    with pytest.raises(want[0]) as info:
        jit(fn)(*make())
    assert str(info.value) == want[1]


# --- graph breaks: np.random, NumPy functions without a rule, data into Python ----------------

def test_numpy_random_breaks_the_graph_with_eagers_draws():
    def f(x):
        return x + torch.from_numpy(np.random.rand(3)).float()
    np.random.seed(0)
    want = eager_copy(f)(torch.ones(3))
    np.random.seed(0)
    assert_same(jit(f)(torch.ones(3)), want)
    with pytest.raises(rewrite.Unsupported, match="np.random.rand"):
        jit(f, fullgraph=True)(torch.ones(3))


def test_numpy_unknown_function_breaks_naming_it():
    def f(x):
        return torch.from_numpy(np.unwrap(x.numpy()))
    assert_same(jit(f)(torch.ones(3)), eager_copy(f)(torch.ones(3)))
    with pytest.raises(rewrite.Unsupported, match="np.unwrap"):
        jit(f, fullgraph=True)(torch.ones(3))


def test_numpy_value_into_python_breaks():
    def f(x):
        s = float(x.numpy().sum())
        return x * s
    assert_same(jit(f)(torch.ones(3)), eager_copy(f)(torch.ones(3)))
    with pytest.raises(rewrite.Unsupported, match="data-dependent"):
        jit(f, fullgraph=True)(torch.ones(3))


def test_numpy_unstable_argsort_breaks():
    with pytest.raises(rewrite.Unsupported, match="argsort"):
        jit(lambda x: np.argsort(x.numpy()), fullgraph=True)(torch.ones(3))
    compare(lambda x: np.argsort(x.numpy(), kind="stable"), lambda i: (tensor(5, seed=i).round(),))


def test_numpy_traces_never_import_dynamo():
    """NumPy traced without torch._numpy: importing rewrite and tracing NumPy code leaves
    torch._dynamo unimported (its import costs about a second)."""
    code = ("import sys, numpy as np, torch, rewrite\n"
            "f = rewrite.jit(lambda x: np.sum(x.numpy() * 2, axis=0), fullgraph=True)\n"
            "f(torch.ones(2, 3))\n"
            "assert 'torch._dynamo' not in sys.modules, 'torch._dynamo imported'\n")
    subprocess.run([sys.executable, "-c", code], check=True)


# --- what the fuzzer found (`--focus numpy`) ----------------------------------------------------

def test_numpy_write_into_an_expanded_tensors_array_breaks():
    """NumPy writes each element of a stride-0 array in turn; torch refuses the write (the graph
    raised on a later call where eager did not): a graph break, eager's result."""
    def f(x):
        a = x.detach().numpy()
        a.fill(2)
        return a
    for n in (0, 2, 3):
        want, got = eager_copy(f)(torch.ones(1).expand(n)), jit(f)(torch.ones(1).expand(n))
        assert_same(got, want)


def test_numpy_negative_steps_read_and_returned_as_views():
    """`a[::-1]`: torch slices take no negative step -- read through a flip, and made again as
    NumPy's view of `a` when it leaves the call (a write to `a` afterwards shows in it, as eager's)."""
    def f(x):
        a = x.numpy()
        r = a[::-1, 1:]
        return r, r.sum(axis=0), a[..., ::-2]
    compare(f, lambda i: (tensor(4, 3, seed=i),))
    compare(f, lambda i: (tensor(4 + i, 3 + i, seed=i),), calls=3, graphs=None)  # (sizes that change)
    compare(lambda x: x.numpy()[1:, 2::-1].sum(0), lambda i: (tensor(4 + i, 3 + i, seed=i),), calls=3, graphs=None)
    x = torch.arange(6.0).reshape(2, 3)
    r, _, _ = jit(f, fullgraph=True)(x)
    x[1, 2] = 100.0
    assert r[0, 1] == 100.0


def test_numpy_write_to_a_base_after_np_flip_then_reading_the_flip_breaks():
    def f(a):
        b = np.flip(a)
        a[0] = 9.0
        return b + 1
    assert_same(jit(f)(array(3)), eager_copy(f)(array(3)))
    with pytest.raises(rewrite.Unsupported, match="read after a write"):
        jit(f, fullgraph=True)(array(3))


def test_numpy_bools_abs_argmax_and_max():
    compare(lambda a: (abs(a), np.argmax(a), a.max(axis=0), np.argmin(a, axis=1)),
            lambda i: (array(3, 4, dtype=np.bool_, seed=i),))


def test_numpy_ascontiguousarray_of_a_0d_array_is_1d():
    compare(lambda x: np.ascontiguousarray(x.numpy().sum()), lambda i: (tensor(3, seed=i),))


def test_numpy_tensor_operator_array_takes_eagers_dtype():
    compare(lambda x, a: (x * a, x + a.astype(np.int32), x - a), lambda i: (tensor(2, 3, dtype=torch.int64, seed=i),
                                                                       array(2, 3, seed=i)))


def test_numpy_explicit_operator_methods():
    def f(a, b):
        z = np.zeros_like(a)
        z.__setitem__(0, 1.0)
        a.__iadd__(b)
        return z, a.__mul__(2), b.__rsub__(1.0), a.__lt__(b), len(a)
    compare(f, lambda i: (array(3, 2, seed=i), array(3, 2, seed=i + 5)))


def test_numpy_arrays_index_and_fill_tensors():
    def f(x, m):
        y = x.clone()
        y[m > 0] = 0.0
        y[np.array([0, 1])] = torch.from_numpy(np.ones(3, dtype=np.float32))
        return x[m > 0.5], x[np.arange(2)], y
    compare(f, lambda i: (tensor(4, 3, seed=i), array(4, seed=i)))


def test_numpy_scalars_passed_in_meet_tensors():
    """A NumPy scalar argument (or constant) in a tensor op: the Python number the op takes, in
    the graph as such (its repr, `np.float32(3.0)`, is no Python the generated code could run)."""
    compare(lambda x, s: (x * s + np.sqrt(2.0), x.half() * np.float64(1.5), s * 2),
            lambda i: (tensor(3, seed=i), np.float32(3.0)))


def test_numpy_views_of_negative_step_arrays_stay_views():
    """What NumPy makes as a view of `a[::-1]` (expand_dims, broadcast_to, a slice of it) is a
    view of the same memory leaving the call, as eager's (the fuzzer: aliasing of the result);
    torch.from_numpy of it raises eager's error (negative strides)."""
    def f(x):
        r = x.numpy()[..., ::-1]
        return r, np.expand_dims(r, 0), np.broadcast_to(r, (2, *r.shape)), r[1:], r * 2
    compare(f, lambda i: (tensor(3, 4, seed=i),))
    x = torch.zeros(3, 4)
    out = jit(f, fullgraph=True)(x)
    x[1, 0] = 5.0
    assert all(np.shares_memory(o, x.numpy()) for o in out[:4]) and out[3][0, -1] == 5.0
    with pytest.raises(ValueError, match="negative"):
        jit(lambda x: torch.from_numpy(x.numpy()[::-1]))(torch.ones(3))


def test_numpy_products_of_bools_and_ints():
    compare(lambda a, b: (a @ b.T, np.dot(a, b.T), np.einsum("ij,kj->ik", a, b), np.outer(a[0], b[0])),
            lambda i: (array(2, 3, dtype=np.bool_, seed=i), array(2, 3, dtype=np.bool_, seed=i + 1)))
    compare(lambda a: (a @ a.T, np.inner(a, a)), lambda i: (array(2, 3, dtype=np.int32, seed=i),))


def test_numpy_broadcast_to_a_dynamic_shape():
    compare(lambda a: np.broadcast_to(a, (2, *a.shape)) * 1, lambda i: (array(3 + i, 2, seed=i),), calls=3,
            graphs=None)


def test_numpy_scalars_and_copies_do_not_see_later_writes():
    """`a[0]` is a NumPy scalar -- a value -- and `+a`, `np.copy(a)` new arrays: a later write into
    `a` does not change them (torch's `t[0]` and `+t` are views: copied; the fuzzer, seed 5304 on 3.13)."""
    def f(x):
        a = x.detach().numpy()
        kept = a[0], a[..., :1], +a, a.sum(axis=0)
        a += 1
        return kept
    compare(f, lambda i: (tensor(2 + i, seed=i),), calls=3, graphs=None)


def test_numpy_out_arguments_break_before_numpy_writes():
    """`np.add(a, 1, out=a)`: NumPy would write while tracing, and eager's run after the break
    again -- refused before NumPy runs: the array is written once, as eager writes it."""
    for fn in (lambda a: np.add(a, 1, out=a), lambda a: np.add(a, 1, a), lambda a: np.sum(a, 0, None, a[0]),
               lambda a: a.sum(axis=0, out=a[0])):
        want, got = array(2, 3), array(2, 3)
        eager_copy(fn)(want)
        jit(fn)(got)
        assert_same(got, want)


def test_numpy_array_equal_of_sizes_that_change():
    """`np.array_equal` of arrays of other sizes is False for those sizes only: a later call with
    equal sizes compares values (the sizes a symbol: pinned where the answer came from them)."""
    compare(lambda a, b: np.array_equal(a, b), lambda i: (array(3 + i, seed=0), array(3 + 2 * i, seed=0)),
            calls=3, graphs=None)
