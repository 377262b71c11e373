"""The trace's own graph (rewrite.nodes) and the torch.fx graph made of it for everything of
torch's world (backends, explain, a graph's GraphModule): the same nodes, names and results."""
import operator

import pytest
import torch

import rewrite
from rewrite import dispatcher_of, jit
from rewrite.nodes import Graph, to_fx

from conftest import CompileCounter, assert_same, eager_copy

lin = torch.nn.Linear(4, 4)


def names_that_clash(x, output, sum):
    """Inputs named as fx names things (`output`, a builtin), ops whose names shadow builtins
    (sum, max, abs: fx renames them), a module's parameters met after ops (placeholders come
    first all the same), a value used twice and a nested argument."""
    s = x.sum()
    m = torch.max(x, output)
    a = torch.abs(m - sum)
    y = lin(a) + s
    z = torch.cat([y, a * s], dim=0)
    return y.max(), z, z.sum()


def _described(gm) -> list:
    return [(n.op, n.name, n.target if n.op != "output" else None) for n in gm.graph.nodes]


@pytest.mark.parametrize("fn", [names_that_clash])
def test_the_entry_and_the_graph_module_of_each_path_give_eager_results(fn):
    args = (torch.randn(3, 4), torch.randn(3, 4), torch.randn(3, 4))
    expected = eager_copy(fn)(*args)
    native = jit(fn)  # the python backend: the trace's graph, an fx copy only when asked for
    assert_same(native(*args), expected)
    assert_same(native(*args), expected)  # (the entry, its statements inlined)
    counter = CompileCounter()  # a backend of torch's world: the fx copy, run as a GraphModule
    handed = jit(fn, backend=counter)
    assert_same(handed(*args), expected)
    assert_same(handed(*args), expected)
    made = dispatcher_of(native).entries[0].graph_module
    assert _described(made) == _described(counter.graphs[0])
    placeholders = [n for n in made.graph.nodes if n.op == "placeholder"]
    assert [p.target for p in placeholders[:3]] == ["x", "output", "sum"]
    assert all(n.op == "placeholder" for n in list(made.graph.nodes)[:len(placeholders)])
    assert_same(made(*args, *(p for p in lin.parameters()))[1:], expected[1:])


def test_explain_hands_the_fx_copy_on_to_the_python_backend():
    args = (torch.randn(3, 4), torch.randn(3, 4), torch.randn(3, 4))
    out = rewrite.explain(names_that_clash)(*args)
    assert out.graph_count == 1 and not out.break_reasons
    assert_same(out.result, eager_copy(names_that_clash)(*args))


def test_a_rolled_back_graph_keeps_its_users_right():
    def f(x):
        y = x * 2
        z = y + 1
        print("break")  # (the break rolls back what came after the checkpoint)
        return (z * y).relu()

    x = torch.randn(5)
    counter = CompileCounter()
    assert_same(jit(f, backend=counter)(x), eager_copy(f)(x))
    assert_same(jit(f)(x), eager_copy(f)(x))
    for gm in counter.graphs:
        for node in gm.graph.nodes:
            assert all(node in used.users for used in node.all_input_nodes)


def test_erasing_a_node_still_read_is_refused_as_fx_refuses_it():
    g = Graph()
    x = g.placeholder("x")
    y = g.create_node("call_function", operator.mul, (x, 2))
    g.create_node("call_function", operator.add, (y, x))
    with pytest.raises(ValueError):
        g.erase({y})
    fx_graph = to_fx(g)
    with pytest.raises(RuntimeError):
        fx_graph.erase_node(next(n for n in fx_graph.nodes if n.name == "mul"))
