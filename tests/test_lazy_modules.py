"""Modules jitted before their first call: lazy layers (their first forward makes their
parameters and changes their class), parametrizations, weight norm, spectral norm and pruning
masks. Each is compared with an eager twin under the same seed: outputs, parameters and
buffers after every call."""
import copy
import warnings

import pytest
import torch
from torch import nn
from torch.nn.utils import parametrizations, parametrize, prune

import rewrite
from rewrite import dispatcher_of, jit


class LazyMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.LazyLinear(8), nn.ReLU(), nn.LazyBatchNorm1d(), nn.LazyLinear(4))

    def forward(self, x):
        return self.net(x).tanh()


class LazyConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.LazyConv2d(4, 3, padding=1)
        self.norm = nn.LazyBatchNorm2d()

    def forward(self, x):
        return self.norm(self.conv(x)).relu().mean((2, 3))


class LazyNormOnly(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LazyBatchNorm1d()
        self.proj = nn.Linear(3, 2)

    def forward(self, x):
        return self.proj(self.norm(x))


def assert_same_state(a: nn.Module, b: nn.Module):
    sa, sb = a.state_dict(), b.state_dict()
    assert list(sa) == list(sb)
    for k in sa:
        torch.testing.assert_close(sa[k], sb[k], rtol=0, atol=0, msg=k)
    assert [type(m).__qualname__ for m in a.modules()] == [type(m).__qualname__ for m in b.modules()]  # (parametrize makes a class per module)


def run_twins(make, inputs, calls=3, **options):
    """An eager model and a jitted one, made and called under the same seeds."""
    torch.manual_seed(0)
    eager = make()
    torch.manual_seed(0)
    model = make()
    compiled = jit(model, **options)
    for i in range(calls):
        x = inputs(i)
        torch.manual_seed(10 + i)
        expected = eager(x)
        torch.manual_seed(10 + i)
        with warnings.catch_warnings():
            warnings.simplefilter("error", rewrite.EagerWarning)  # (a lazy first call is not a silent fallback)
            actual = compiled(x)
        torch.testing.assert_close(actual, expected, rtol=0, atol=0)
        assert_same_state(model, eager)
    return model


@pytest.mark.parametrize("make, inputs", [
    (LazyMLP, lambda i: torch.randn(5, 3)),
    (LazyConvNet, lambda i: torch.randn(2, 3, 6, 6)),
    (LazyNormOnly, lambda i: torch.randn(4, 3)),
], ids=["linear_and_batchnorm1d", "conv_and_batchnorm2d", "batchnorm1d"])
@pytest.mark.parametrize("fullgraph", [False, True])
def test_lazy_modules_initialize_as_eager_then_compile(make, inputs, fullgraph):
    model = run_twins(make, inputs, fullgraph=fullgraph)
    assert not any(isinstance(m, nn.modules.lazy.LazyModuleMixin) for m in model.modules())
    entries = dispatcher_of(model).entries
    compiled = [e for e in entries if e.graph_module is not None]
    assert compiled and compiled[0] is entries[0] and entries[0].ops > 0  # the newest entry compiles
    assert len(compiled) == 1  # and later calls hit it


def test_lazy_module_in_eval_mode_and_a_new_batch_size():
    def make():
        return LazyMLP().eval()
    model = run_twins(make, lambda i: torch.randn(5 + i, 3), calls=4)
    assert dispatcher_of(model).entries[0].ops > 0


def test_lazy_module_first_call_explained():
    torch.manual_seed(0)
    model = LazyMLP()
    out = rewrite.explain(model)(torch.randn(5, 3))
    assert out.graph_count == 0 and "uninitialized parameter" in str(out.break_reasons[0])
    again = rewrite.explain(model)(torch.randn(5, 3))  # (initialized by the first call)
    assert again.graph_count == 1 and again.op_count > 0


def _parametrized():
    class Symmetric(nn.Module):
        def forward(self, w):
            return w.triu() + w.triu(1).mT

    m = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
    parametrize.register_parametrization(m[0], "weight", Symmetric())
    return m


def _pruned():
    m = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 2))
    prune.l1_unstructured(m[0], "weight", amount=0.5)
    prune.random_unstructured(m[2], "bias", amount=0.5)
    return m


@pytest.mark.parametrize("make", [
    _parametrized,
    lambda: parametrizations.weight_norm(nn.Linear(4, 3)),
    lambda: nn.utils.weight_norm(nn.Linear(4, 3)),
    lambda: parametrizations.spectral_norm(nn.Linear(4, 3)),
    lambda: nn.utils.spectral_norm(nn.Linear(4, 3)),
    _pruned,
], ids=["parametrize", "weight_norm", "old_weight_norm", "spectral_norm", "old_spectral_norm", "pruning"])
def test_reparametrized_modules_jitted_before_their_first_call(make):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # (torch.nn.utils.weight_norm is deprecated)
        run_twins(make, lambda i: torch.randn(3, 4), calls=3)


def test_a_copy_of_an_initialized_lazy_module_compiles_at_once():
    torch.manual_seed(0)
    model = LazyMLP()
    model(torch.randn(5, 3))
    twin = copy.deepcopy(model)
    compiled = jit(model)
    x = torch.randn(5, 3)
    torch.testing.assert_close(compiled(x), twin(x), rtol=0, atol=0)
    assert dispatcher_of(model).entries[0].ops > 0
