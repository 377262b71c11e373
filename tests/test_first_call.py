"""The call that compiles computes its result once: the trace ran every op for real, so with
a backend that runs the graph's torch calls as they are (python, eager) that call returns
what the trace computed instead of running the graph again -- unless the trace could not
stand for the call (it wrote into copies of the inputs and what it wrote cannot be written
back, drew random numbers, switched modes, or stopped at a graph break). A torch.library
custom op counts how often each op really ran."""
import pytest
import torch

import rewrite
from rewrite import jit

from conftest import assert_same, eager_copy

RUNS = {"n": 0}


@torch.library.custom_op("rewrite_tests::counted_double", mutates_args=())
def counted_double(x: torch.Tensor) -> torch.Tensor:
    RUNS["n"] += 1
    return x * 2


@counted_double.register_fake
def _(x):
    return torch.empty_like(x)


def runs(fn, *args):
    before = RUNS["n"]
    out = fn(*args)
    return out, RUNS["n"] - before


def test_the_compiling_call_runs_each_op_once_and_a_hit_once():
    def f(x):
        return counted_double(x).sin() + 1

    eager = eager_copy(f)
    jit(f, backend="python")
    x = torch.randn(5)
    expected, n_eager = runs(eager, x)
    for _ in range(3):  # the compiling call, then hits
        out, n = runs(f, x)
        assert_same(out, expected)
        assert n == n_eager == 1
    assert rewrite.dispatcher_of(f).compiles == 1


def test_a_custom_op_is_one_graph_node_under_fullgraph():
    def f(x):
        return counted_double(x) + counted_double(x + 1)

    eager = eager_copy(f)
    jit(f, fullgraph=True)
    x = torch.randn(3)
    assert_same(f(x), eager(x))
    out = rewrite.explain(f)(x)
    assert out.graph_count == 1 and out.ops_per_graph[0].count("counted_double.default") == 2


def test_side_effects_and_the_result_come_from_the_trace_as_eager_gives_them():
    log = []

    def f(x, d):
        y = counted_double(x)
        log.append(y.shape[0])  # a side effect, replayed after the graph
        d["y"] = y
        return y, (y, [y + 1])

    eager = eager_copy(f)
    jit(f)
    x = torch.randn(4)
    e_d, c_d = {}, {}
    expected = eager(x, e_d)
    out, n = runs(f, x, c_d)
    assert_same(out, expected)
    assert_same(c_d, e_d) and n == 1 and log == [4, 4]
    assert out[0] is out[1][0] and c_d["y"] is out[0]  # one object returned twice is one object


def test_gradients_flow_through_the_compiling_calls_result():
    w = torch.randn(4, requires_grad=True)

    def f(x):
        return (counted_double(x) * w).relu().sum()

    eager = eager_copy(f)
    jit(f)
    x = torch.randn(4)
    eager(x).backward()
    expected, w.grad = w.grad, None
    f(x).backward()  # the compiling call
    assert_same(w.grad, expected)
    w.grad = None
    f(x).backward()  # a hit
    assert_same(w.grad, expected)


def test_grad_mode_the_function_leaves_switched_stays_switched():
    def f(x):
        torch.set_grad_enabled(False)
        return counted_double(x) + 1

    eager = eager_copy(f)
    jit(f)
    x = torch.randn(2, requires_grad=True)
    try:
        expected = eager(x)
        assert not torch.is_grad_enabled()
        torch.set_grad_enabled(True)
        out = f(x)
        assert not torch.is_grad_enabled()
        assert_same(out, expected)
    finally:
        torch.set_grad_enabled(True)


def _writes(x):
    x.add_(1)  # the trace wrote into a copy of x: written back into x
    return counted_double(x)


def _random(x):
    return counted_double(x) + torch.rand(x.shape)  # the trace drew from its own generator


def _reshapes(x):
    x.unsqueeze_(0)  # a change of x's sizes: not written back
    return counted_double(x)


def _returns_its_input(x):
    x.mul_(2)  # eager returns x itself: so does the entry (an input, read from the call)
    counted_double(x)
    return x


def _returns_a_view(x):
    x.mul_(2)  # eager returns a view of x: the trace's output views the copy
    return counted_double(x), x[1:]


def _writes_under_no_grad(x):
    with torch.no_grad():
        x.add_(1)  # x requires grad: the output's history would lead to the copy
    return counted_double(x.detach()) + x


@pytest.mark.parametrize("fn, graph_runs", [(_writes, 1), (_random, 2), (_reshapes, 2), (_returns_its_input, 1),
                                            (_returns_a_view, 2), (_writes_under_no_grad, 2)])
def test_calls_the_trace_cannot_stand_for_run_the_graph(fn, graph_runs):
    """A trace that wrote into copies of its inputs stands for the call when what it wrote can
    be written back (their contents); a random draw, a change of sizes, an output held in a
    copy, an input that requires grad run the graph after the trace. Against eager: results,
    the inputs after, the grad of one that requires it."""
    eager = eager_copy(fn)
    jit(fn)
    x = torch.randn(3, requires_grad=fn is _writes_under_no_grad)
    e_x, c_x = [x.detach().clone().requires_grad_(x.requires_grad) for _ in range(2)]
    torch.manual_seed(0)
    expected = eager(e_x)
    torch.manual_seed(0)
    out, n = runs(fn, c_x)
    assert_same(out, expected)
    assert_same(c_x.detach(), e_x.detach())
    assert c_x._version == e_x._version  # (autograd's check of saved tensors reads it)
    if fn is _returns_its_input:
        assert out is c_x
    if fn is _returns_a_view:
        assert out[1]._base is c_x
    if x.requires_grad:
        out.sum().backward(), expected.sum().backward()
        assert_same(c_x.grad, e_x.grad)
    assert n == graph_runs  # once in the trace (and once in the graph)


def test_a_backend_of_the_users_runs_from_the_first_call():
    seen = []

    def backend(gm, example_inputs):
        def run(*args):
            seen.append(len(args))
            return gm.forward(*args)
        return run

    def f(x):
        return counted_double(x) - 1

    eager = eager_copy(f)
    jit(f, backend=backend)
    x = torch.randn(3)
    assert_same(f(x), eager(x))
    assert seen == [1]


def test_a_resume_function_writing_into_an_array_passed_to_it():
    """At a graph break, a NumPy array over an input's memory goes to the resume function as an
    input of its own; a write into it there is the entry's to make (not written back from the
    trace's copy: it was made twice, the fuzzer's numpy family, seed 5474). Against eager:
    results and the input after, four calls over three shapes."""
    def f(x):
        o = x.detach().numpy()
        if x.float().sum() > 0:  # (a graph break: the rest is a resume function's)
            x = x * 2
        o += 1
        return o, x

    eager = eager_copy(f)
    jit(f)
    for shape in ((0, 0), (0, 0), (2, 5), (3, 6)):  # (empty first: other sizes recompile)
        a = torch.randn(shape)
        b = a.clone()
        got, want = f(a), eager(b)
        assert (got[0] == want[0]).all() and got[0].dtype == want[0].dtype
        assert_same(got[1], want[1])
        assert_same(a, b)
