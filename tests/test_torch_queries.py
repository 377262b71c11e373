"""torch's Python-level state and facts (issue 19, item 8): folded to constants under
fullgraph=True, guarded where the value can change between calls (`markers.STATE`), each
compared with eager -- also after the setting changes."""
import contextlib

import pytest
import torch

import rewrite
from conftest import CompileCounter, eager_copy

FACTS = {  # fixed for the process (or for constant arguments)
    "promote_types": lambda x: x.to(torch.promote_types(torch.float16, torch.int32)),
    "result_type": lambda x: x.to(torch.result_type(x, 2)),
    "distributed": lambda x: x + torch.distributed.is_available()
    + (torch.distributed.is_available() and torch.distributed.is_initialized()),
    "cuda": lambda x: x + torch.cuda.is_available() + torch.cuda.device_count(),
    "fan": lambda x: x * torch.nn.init._calculate_correct_fan(torch.empty(3, 4), "fan_in")
    + torch.nn.init.calculate_gain("leaky_relu", 0.2),
    "default_device": lambda x: torch.zeros(2, device=torch.get_default_device()) + x.sum(),  # (guarded)
    "finfo": lambda x: x + torch.finfo(x.dtype).eps + torch.finfo(torch.float16).max + torch.iinfo(torch.int8).max,
}


@pytest.mark.parametrize("name", sorted(FACTS))
def test_facts_are_constants(name):
    fn = FACTS[name]
    x = torch.ones(3)
    torch.testing.assert_close(rewrite.jit(eager_copy(fn), fullgraph=True)(x), fn(x))


@contextlib.contextmanager
def setting(get, put, value):
    old = get()
    put(value)
    try:
        yield
    finally:
        put(old)


SETTINGS = {  # a query, and a way to change what it returns
    "num_threads": (lambda x: x + torch.get_num_threads(),
                    lambda: setting(torch.get_num_threads, torch.set_num_threads, torch.get_num_threads() + 1)),
    "matmul_precision": (lambda x: x + (torch.get_float32_matmul_precision() == "highest"),
                         lambda: setting(torch.get_float32_matmul_precision, torch.set_float32_matmul_precision,
                                         "medium")),
    "deterministic": (lambda x: x + torch.are_deterministic_algorithms_enabled(),
                      lambda: setting(torch.are_deterministic_algorithms_enabled, torch.use_deterministic_algorithms,
                                      True)),
    "cudnn_tf32": (lambda x: x + torch.backends.cudnn.allow_tf32,
                   lambda: setting(lambda: torch.backends.cudnn.allow_tf32,
                                   lambda v: setattr(torch.backends.cudnn, "allow_tf32", v), False)),
    "cublas_tf32": (lambda x: x + torch.backends.cuda.matmul.allow_tf32,
                    lambda: setting(lambda: torch.backends.cuda.matmul.allow_tf32,
                                    lambda v: setattr(torch.backends.cuda.matmul, "allow_tf32", v), True)),
    "default_dtype": (lambda x: x.to(torch.get_default_dtype()) + 1,
                      lambda: setting(torch.get_default_dtype, torch.set_default_dtype, torch.float64)),
    "autocast_dtype": (lambda x: x.to(torch.get_autocast_dtype("cpu")),
                       lambda: setting(lambda: torch.get_autocast_dtype("cpu"),
                                       lambda v: torch.set_autocast_dtype("cpu", v), torch.float16)),
}


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_settings_are_guarded(name):
    fn, change = SETTINGS[name]
    cnt = CompileCounter()
    compiled = rewrite.jit(eager_copy(fn), fullgraph=True, backend=cnt)
    x = torch.ones(3)
    torch.testing.assert_close(compiled(x), fn(x))
    with change():
        got, want = compiled(x), fn(x)
        assert got.dtype == want.dtype
        torch.testing.assert_close(got, want)
    torch.testing.assert_close(compiled(x), fn(x))
    assert cnt.frame_count == 2  # (back to the first entry after the change is undone)


def test_autocast_dtype_inside_a_traced_autocast_block_is_the_blocks():
    def f(x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return x.to(torch.get_autocast_dtype("cpu"))
    torch.testing.assert_close(rewrite.jit(eager_copy(f), fullgraph=True)(torch.ones(2)), f(torch.ones(2)))
