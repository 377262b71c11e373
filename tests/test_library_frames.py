"""A graph break inside one block costs that block only, when the call passes through torch's
own frames: `nn.Sequential.forward`, a library module iterating an `nn.ModuleList`,
`Module._call_impl` with hooks, `torch.utils.checkpoint`, a `@torch.no_grad()` wrapper
(rewrite/callees.py's rule). Each test compares a jitted run with an eager run of a copy of
the same model (outputs and gradients) and reads `rewrite.explain` for which ops landed in
graphs, and where."""
import copy
import sys
import warnings

import pytest
import torch
import torch.nn as nn
import torch.utils.checkpoint as cp

import rewrite
from rewrite import BreaksWarning

from conftest import assert_same

OPS_PER_BLOCK = ["linear", "relu", "mul", "add"]


class Block(nn.Module):
    def __init__(self, brk=False):
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.brk = brk

    def forward(self, x, *args, **kwargs):
        x = self.lin(x).relu()
        if self.brk:
            print("a break", file=sys.stderr)
        return x * 2 + 1


class Staged(nn.Module):
    """stem, then `self.stages(x)`: an nn.Sequential of three blocks, the first one breaking."""

    def __init__(self, hook=False, checkpointed=False):
        super().__init__()
        self.stem = nn.Linear(8, 8)
        self.stages = nn.Sequential(Block(True), Block(), Block())
        self.checkpointed = checkpointed
        if hook:
            self.stages[0].register_forward_hook(lambda module, args, out: out * 3)

    def forward(self, x):
        x = self.stem(x)
        if self.checkpointed:
            for block in self.stages:
                x = cp.checkpoint(block, x, use_reentrant=False)
            return x
        return self.stages(x)


class Layer(Block):
    def __init__(self, brk=False):
        super().__init__(brk)
        self.self_attn = nn.MultiheadAttention(8, 2, batch_first=True)  # (what TransformerEncoder reads)


class Encoded(nn.Module):
    """An nn.ModuleList iterated by torch's own code: TransformerEncoder over layers of the user's."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Linear(8, 8)
        self.encoder = nn.TransformerEncoder(Layer(True), 3, enable_nested_tensor=False)
        self.encoder.layers[1].brk = self.encoder.layers[2].brk = False

    def forward(self, x):
        return self.encoder(self.stem(x))


@torch.no_grad()
def decorated(block, x):
    return block(x) * 2


class Decorated(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Linear(8, 8)
        self.block = Block(True)

    def forward(self, x):
        return decorated(self.block, self.stem(x))


def _run_both(model, x):
    """(eager's output and input gradient, the jitted model's over two calls); asserts they agree."""
    eager = copy.deepcopy(model)
    expected = eager(x)
    grad = None
    if expected.requires_grad:
        expected.sum().backward()
        grad, x.grad = x.grad, None
    jitted = rewrite.jit(copy.deepcopy(model))
    for _ in range(2):
        out = jitted(x)
        assert_same(out, expected)
        if out.requires_grad:
            out.sum().backward()
            assert_same(x.grad, grad)
            x.grad = None
    return rewrite.explain(copy.deepcopy(model))(x)


def _sites(explained, name):
    return [ops for ops, site in zip(explained.ops_per_graph, explained.graph_sites) if site.startswith(name)]


def test_a_break_in_one_block_of_a_sequential_costs_that_block_only():
    out = _run_both(Staged(), torch.randn(2, 8, requires_grad=True))
    # the stem, the breaking block in two around its print, the two others in the Sequential's resume
    assert out.ops_per_graph == [["linear"], ["linear", "relu"], ["mul", "add"], OPS_PER_BLOCK * 2]
    assert _sites(out, "Block.forward") == [["linear", "relu"]]
    assert "Block.forward" in str(out) and "container.py" in str(out)


def test_a_forward_hook_on_the_breaking_block():
    out = _run_both(Staged(hook=True), torch.randn(2, 8, requires_grad=True))
    assert ["linear", "relu"] in out.ops_per_graph and ["mul", "add"] in out.ops_per_graph
    assert ["mul"] in out.ops_per_graph  # the hook's own op: the hook is jitted too
    assert OPS_PER_BLOCK * 2 in out.ops_per_graph


def test_blocks_under_torch_utils_checkpoint():
    out = _run_both(Staged(checkpointed=True), torch.randn(2, 8, requires_grad=True))
    assert ["linear", "relu"] in out.ops_per_graph and ["mul", "add"] in out.ops_per_graph
    assert ["checkpoint", "getitem", "checkpoint", "getitem"] in out.ops_per_graph  # the other two, as checkpoints


def test_a_module_list_iterated_by_torch_code():
    out = _run_both(Encoded(), torch.randn(2, 3, 8, requires_grad=True))
    assert ["linear", "relu"] in out.ops_per_graph and ["mul", "add"] in out.ops_per_graph
    assert OPS_PER_BLOCK in out.ops_per_graph  # the other layers' (one compile, both layers run it)


def test_a_function_under_a_torch_no_grad_decorator():
    out = _run_both(Decorated(), torch.randn(2, 8, requires_grad=True))
    assert ["linear", "relu"] in out.ops_per_graph and ["mul", "add"] in out.ops_per_graph


def test_an_instance_forward_runs_through_call_impl_routed():
    model = Staged()
    inner = model.stages[0]
    inner.forward = lambda x: Block.forward(inner, x) - 1  # (an instance attribute: as accelerate's hooks set one)
    out = _run_both(model, torch.randn(2, 8, requires_grad=True))
    assert ["linear", "relu"] in out.ops_per_graph


class Stage(nn.Module):
    def __init__(self, brk=False, depth=2):
        super().__init__()
        self.down = nn.Linear(8, 8)
        self.blocks = nn.Sequential(*[Block(brk and i == 0) for i in range(depth)])

    def forward(self, x):
        return self.blocks(self.down(x).relu())


class TimmLike(nn.Module):
    """timm's layout: stem, `self.stages` (nn.Sequential of stages, each an nn.Sequential of
    blocks), head; the break in the second stage's first block."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Linear(8, 8)
        self.stages = nn.Sequential(Stage(), Stage(brk=True), Stage())
        self.head = nn.Linear(8, 2)

    def forward(self, x):
        return self.head(self.stages(self.stem(x)).mean(0))


def test_a_timm_like_model_with_a_break_in_one_stage():
    out = _run_both(TimmLike(), torch.randn(4, 8, requires_grad=True))
    compiled = sum(len(ops) for ops in out.ops_per_graph)
    # every op in a graph: stem 1, stages 3 x (2 + 2 x 4), mean, head 1 (one compile per code: the
    # first stage's blocks, say, are in the stages' Sequential graph)
    assert compiled >= 1 + 3 * (2 + 2 * 4) + 2
    assert _sites(out, "Block.forward") == [["linear", "relu"]]


def test_a_warning_when_a_quarter_of_the_ops_run_outside_graphs():
    def g(x):
        y = x.sin().cos().tanh().exp()
        keep = lambda: y  # noqa: E731 (a cell a closure captures before the break: g runs eagerly)
        torch._dynamo.graph_break()
        return keep() + 1

    def f(x):
        return g(x) * 2

    x = torch.randn(3)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        out = rewrite.jit(f)(x)
    assert_same(out, f(x))
    messages = [str(w.message) for w in seen if issubclass(w.category, BreaksWarning)]
    assert len(messages) == 1 and "at least 4 of the" in messages[0] and "outside any graph" in messages[0]


def test_no_warning_when_the_break_costs_one_block():
    x = torch.randn(2, 8)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        rewrite.jit(Staged())(x)
    assert not [w for w in seen if issubclass(w.category, BreaksWarning)]


@pytest.mark.parametrize("reentrant", [False, True])
def test_a_checkpointed_block_recomputed_in_backward(reentrant):
    """The checkpoint's recompute runs the jitted block again (its hooks stop it early by
    raising: the entry does not run it a second time)."""
    block = Block(True)
    x = torch.randn(2, 8, requires_grad=True)

    def f(x):
        return cp.checkpoint(block, x * 1.5, use_reentrant=reentrant).sum()

    f(x).backward()
    expected, x.grad = x.grad, None
    jitted = rewrite.jit(f)
    for _ in range(2):
        jitted(x).backward()
        assert_same(x.grad, expected)
        x.grad = None
