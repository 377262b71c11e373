"""Breadth suite, context: grad-mode context managers, try/except/finally, raise."""
import contextlib

import torch

import rewrite
from breadth import check, rand, todo
from conftest import CompileCounter, assert_same, eager_copy


def xg(seed):
    return (rand(seed, 3, requires_grad=True),)


def x1(seed):
    return (rand(seed, 3),)


# grad mode

def test_no_grad_block():
    def f(x):
        with torch.no_grad():
            y = x * 2
        return y, x * 3
    check(f, xg)


def test_no_grad_then_grad_result_backward():
    def f(x):
        with torch.no_grad():
            scale = x.abs().max()
        return x * scale
    check(f, xg, backward=True)


def test_no_grad_as_decorator_on_helper():
    @torch.no_grad()
    def helper(t):
        return t * 2

    def f(x):
        return helper(x) + x
    check(f, xg)


def test_enable_grad_inside_no_grad():
    def f(x):
        with torch.no_grad():
            a = x * 2
            with torch.enable_grad():
                b = x * 3
        return a, b
    check(f, xg)


def test_enable_grad_when_caller_disabled_grad():
    def f(x):
        with torch.enable_grad():
            return x * 2

    with torch.no_grad():
        check(f, xg)


def test_set_grad_enabled_false():
    def f(x):
        with torch.set_grad_enabled(False):
            y = x.sin()
        return y
    check(f, xg)


def test_set_grad_enabled_from_python_flag():
    def f(x, train):
        with torch.set_grad_enabled(train):
            return x.exp()
    check(f, lambda s: (rand(s, 3, requires_grad=True), False))


def test_set_grad_enabled_as_function_call():
    def f(x):
        torch.set_grad_enabled(False)
        y = x * 2
        torch.set_grad_enabled(True)
        return y, x * 2
    check(f, xg)


def test_is_grad_enabled_branch():
    def f(x):
        return x * 2 if torch.is_grad_enabled() else x

    with torch.no_grad():
        check(f, xg)


def test_inference_mode_block():
    def f(x):
        with torch.inference_mode():
            y = x + 1
        return y * 2
    check(f, x1)


def test_no_grad_grad_mode_read_inside():
    def f(x):
        with torch.no_grad():
            enabled = torch.is_grad_enabled()
        return x + 1, enabled
    check(f, xg)


def test_user_context_manager_class():
    class Tracker:
        def __init__(self):
            self.log = []

        def __enter__(self):
            self.log.append("in")
            return self

        def __exit__(self, *exc):
            self.log.append("out")
            return False

    def f(x, tr):
        with tr:
            y = x * 2
        return y
    check(f, lambda s: (rand(s, 3), Tracker()))


def test_contextlib_nullcontext():
    def f(x):
        with contextlib.nullcontext():
            return x + 1
    check(f, x1)


def test_contextmanager_generator():
    @contextlib.contextmanager
    def scaled():
        yield 3.0

    def f(x):
        with scaled() as k:
            return x * k
    check(f, x1)


# try / except / finally on Python exceptions

def test_try_without_exception():
    def f(x):
        try:
            y = x + 1
        except ValueError:
            y = x - 1
        return y
    check(f, x1)


def test_try_except_catches_raised_python_error():
    def f(x):
        try:
            raise ValueError("nope")
        except ValueError:
            y = x * 2
        return y
    check(f, x1)


def test_try_except_keyerror_from_dict():
    def f(x, d):
        try:
            k = d["missing"]
        except KeyError:
            k = 5.0
        return x * k
    check(f, lambda s: (rand(s, 3), {"a": 1.0}))


def test_try_except_as_reads_message():
    def f(x):
        try:
            raise RuntimeError("bad")
        except RuntimeError as e:
            msg = str(e)
        return x + len(msg), msg
    check(f, x1)


def test_try_except_else():
    def f(x, d):
        try:
            v = d["a"]
        except KeyError:
            v = 0.0
        else:
            v = v + 1
        return x * v
    check(f, lambda s: (rand(s, 3), {"a": 1.0}))


def test_try_finally_runs():
    def f(x):
        out = []
        try:
            out.append(x * 2)
        finally:
            out.append(x + 1)
        return out
    check(f, x1)


def test_try_except_finally_with_exception():
    def f(x):
        steps = []
        try:
            steps.append("try")
            raise IndexError
        except IndexError:
            steps.append("except")
        finally:
            steps.append("finally")
        return x * len(steps), steps
    check(f, x1)


def test_exception_from_helper_caught():
    def helper(n):
        if n > 2:
            raise ValueError(f"n={n}")
        return n

    def f(x):
        try:
            k = helper(3)
        except ValueError:
            k = -1
        return x * k
    check(f, x1)


def test_except_tuple_of_types():
    def f(x, xs):
        try:
            v = xs[10]
        except (KeyError, IndexError):
            v = 0
        return x + v
    check(f, lambda s: (rand(s, 3), [1, 2]))


def test_except_base_class_catches_subclass():
    def f(x):
        try:
            raise FileNotFoundError("f")
        except OSError:
            return x - 1
    check(f, x1)


def test_nested_try_reraise():
    def f(x):
        try:
            try:
                raise KeyError("k")
            except KeyError:
                raise ValueError("v")
        except ValueError:
            return x * 3
    check(f, x1)


def test_return_inside_finally_path():
    def f(x):
        try:
            return x + 1
        finally:
            x = x * 100
    check(f, x1)


def test_tensor_op_inside_try():
    def f(x):
        try:
            y = x.relu() * 2
        except RuntimeError:
            y = x
        return y
    check(f, x1)


# raise out of the compiled function

def test_raise_value_error_on_python_flag():
    def f(x, mode):
        if mode not in ("a", "b"):
            raise ValueError(f"unknown mode {mode!r}")
        return x
    check(f, lambda s: (rand(s, 3), "c"), raises=ValueError)


def test_assert_fails_on_python_value():
    ns = {}  # made by exec: pytest rewrites the asserts of test modules into calls of its own
    exec("def f(x, n):\n    assert n > 0, 'n must be positive'\n    return x * n\n", ns)
    check(ns["f"], lambda s: (rand(s, 3), -1), raises=AssertionError)


def test_raise_custom_exception_class():
    class ShapeError(Exception):
        pass

    def f(x):
        if x.dim() != 2:
            raise ShapeError(f"expected 2 dims, got {x.dim()}")
        return x
    check(f, x1, raises=ShapeError)


def test_raise_only_in_unused_branch():
    def f(x, n):
        if n < 0:
            raise ValueError("negative")
        return x * n
    check(f, lambda s: (rand(s, 3), 2))


def test_keyerror_propagates():
    def f(x, d):
        return x * d["b"]
    check(f, lambda s: (rand(s, 3), {"a": 1.0}), raises=KeyError)


# finally and loops around Python values

def test_finally_appends_to_returned_list():
    def f(x):
        out = [x]
        try:
            return out
        finally:
            out.append(x + 1)
    check(f, x1)


def test_return_in_finally_overrides():
    def f(x):
        try:
            return x
        finally:
            return 2
    check(f, x1)


def test_try_except_without_tensor_ops_inside():
    def f(x, d):
        try:
            k = d["a"] * 2
        except KeyError:
            k = 0.0
        return x * k
    check(f, lambda s: (rand(s, 3), {"a": 1.5}))


def test_no_grad_around_inlined_helper_with_grad_inside():
    def helper(t):
        with torch.enable_grad():
            return t * 2

    def f(x):
        with torch.no_grad():
            a = helper(x)
            b = x + 1
        return a, b
    check(f, xg)


def test_set_grad_enabled_call_leaks_out_as_in_eager():
    def f(x):
        torch.set_grad_enabled(False)
        return x * 2

    eager, cnt = eager_copy(f), CompileCounter()
    rewrite.jit(f, fullgraph=True, backend=cnt)
    try:
        for seed in (0, 1):
            x = rand(seed, 3, requires_grad=True)
            torch.set_grad_enabled(True)
            expected = eager(x)
            assert not torch.is_grad_enabled()
            torch.set_grad_enabled(True)
            actual = f(x)
            assert not torch.is_grad_enabled()
            assert_same(actual, expected)
            assert actual.requires_grad == expected.requires_grad
    finally:
        torch.set_grad_enabled(True)
    assert cnt.frame_count == 1


def test_no_grad_with_graph_break_inside():
    def f(x):
        with torch.no_grad():
            y = x * 2
            print(end="")
            z = y + 1
        return z, x * 3
    check(f, xg, fullgraph=False)


# context managers the tracer cannot enter yet: with fullgraph off, the call must still match eager

def test_inference_mode_block_fullgraph_off():
    def f(x):
        with torch.inference_mode():
            y = x + 1
        return y * 2
    check(f, x1, fullgraph=False)


def test_detect_anomaly_block_fullgraph_off():
    def f(x):
        with torch.autograd.set_detect_anomaly(True):
            y = x + 1
        return y * 2
    check(f, x1, fullgraph=False)


def test_nullcontext_block_fullgraph_off():
    def f(x):
        with contextlib.nullcontext():
            y = x + 1
        return y * 2
    check(f, x1, fullgraph=False)


def test_autocast_cpu_block():
    def f(x):
        with torch.autocast("cpu"):
            y = x @ x.t()
        return y * 2
    check(f, lambda s: (rand(s, 3, 3),))


@todo("with block over device device(type='cpu')")
def test_device_context_manager():
    def f(x):
        with torch.device("cpu"):
            y = torch.zeros(3) + x
        return y
    check(f, x1)


def test_fork_rng_block_fullgraph_off():
    def f(x):
        with torch.random.fork_rng():
            torch.manual_seed(0)
            y = x + torch.rand(3)
        return y * 2
    check(f, x1, fullgraph=False)


def test_two_context_managers_in_one_with():
    def f(x):
        with torch.no_grad(), torch.enable_grad():
            y = x * 2
        return y
    check(f, xg)


# graph breaks inside grad-mode blocks (fullgraph off): grad mode is right on both sides of the break

def test_nested_grad_modes_around_a_break():
    def f(x):
        with torch.no_grad():
            y = x * 2
            with torch.enable_grad():
                print(end="")
                z = x * 3
            w = x * 4
        return y, z, w, torch.is_grad_enabled()
    check(f, xg, fullgraph=False, backward=True)


def test_return_inside_no_grad_after_a_break():
    def f(x):
        with torch.no_grad():
            y = x * 2
            print(end="")
            return y + 1
    check(f, xg, fullgraph=False)


def test_enable_grad_break_when_caller_disabled_grad():
    def f(x):
        with torch.enable_grad():
            y = x * 2
            print(end="")
            z = y * 3
        return z, torch.is_grad_enabled()

    with torch.no_grad():
        check(f, xg, fullgraph=False)


def test_loop_with_break_inside_no_grad():
    def f(x):
        with torch.no_grad():
            for _ in range(2):
                x = x * 2
                print(end="")
        return x
    check(f, xg, fullgraph=False)
