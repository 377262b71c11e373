"""Graph breaks with resume functions, explain(), disable and allow_in_graph."""
import torch

import rewrite
from rewrite import dispatcher_of, jit

from conftest import CompileCounter, assert_same, eager_copy


def seed_example(x):
    y = x * 2
    if y.sum() > 0:
        z = y.relu()
    else:
        z = y.tanh()
    return z + 1


def test_seed_example_gives_three_graphs():
    cnt = CompileCounter()
    f = eager_copy(seed_example)
    eager = eager_copy(seed_example)
    jit(f, backend=cnt)
    for x in (torch.ones(3), -torch.ones(3), torch.ones(3), -torch.ones(3)):
        assert_same(f(x), eager(x))
    assert cnt.frame_count == 3
    first, then, other = cnt.graphs
    outputs = [n for n in first.graph.nodes if n.op == "output"][0].args[0]
    assert [o.name for o in outputs] == ["gt", "mul"]  # graph 1 outputs (gt, y)
    assert "relu" in then.code and " + 1" in then.code
    assert "tanh" in other.code and " + 1" in other.code


def test_explain_reports_one_break_with_file_and_line():
    out = rewrite.explain(seed_example)(torch.ones(3))
    assert out.graph_count == 2 and out.graph_break_count == 1
    (reason,) = out.break_reasons
    assert "data-dependent branching" in reason.reason
    file, line, fn = reason.user_stack[-1]
    assert file == __file__ and fn == "seed_example" and line == seed_example.__code__.co_firstlineno + 2
    assert out.ops_per_graph[0] == ["mul", "sum", "gt"]
    text = str(out)
    assert "Graph break count: 1" in text and "test_graph_breaks.py" in text
    assert_same(out.result, seed_example(torch.ones(3)))


def test_print_breaks_and_both_halves_compile(capsys):
    def f(x):
        y = x + 1
        print("y is", tuple(y.shape))
        return y * 2

    eager = eager_copy(f)
    jit(f)
    for _ in range(2):
        assert_same(f(torch.ones(2)), eager(torch.ones(2)))
    assert capsys.readouterr().out == "y is (2,)\n" * 4
    entry = dispatcher_of(f).entries[0]
    assert entry.graph_break and "print" in entry.graph_break
    assert entry.graph_module is not None


def test_item_in_the_middle_keeps_values_and_locals():
    def f(x, k):
        y = x * k
        s = y.sum().item()
        z = y + s
        return z, s, k

    eager = eager_copy(f)
    jit(f)
    for x in (torch.arange(3.0), torch.ones(3), torch.arange(3.0)):
        assert_same(f(x, 2), eager(x, 2))


def test_in_place_on_input_at_a_break_runs_once():
    def f(x):
        y = x * 2
        x.add_(1)
        return x + y

    eager = eager_copy(f)
    jit(f)
    for _ in range(2):
        a, b = torch.ones(3), torch.ones(3)
        assert_same(f(a), eager(b))
        assert_same(a, b)


def test_break_inside_inlined_helper_runs_the_helper_eagerly():
    def helper(t):
        print("inside", t.shape[0])
        return t * 3

    def f(x):
        return helper(x + 1) - 1

    eager = eager_copy(f)
    jit(f)
    for _ in range(2):
        assert_same(f(torch.ones(2)), eager(torch.ones(2)))


def test_two_breaks_chain_resume_functions():
    def f(x):
        a = x.sum().item()
        b = (x * a).max().item()
        return x * a + b

    eager = eager_copy(f)
    jit(f)
    for x in (torch.arange(4.0), torch.arange(4.0) - 2):
        assert_same(f(x), eager(x))


def test_break_in_a_loop_is_correct():
    def f(x, n):
        for i in range(n):
            if x.sum() > i:
                x = x - 1
            else:
                x = x + 2
        return x

    eager = eager_copy(f)
    jit(f)
    for x in (torch.ones(2) * 3, torch.zeros(2), torch.ones(2) * 3):
        assert_same(f(x, 3), eager(x, 3))


def test_fullgraph_raises_at_the_break_with_hint():
    def f(x):
        if x.sum() > 0:
            return x
        return -x

    jit(f, fullgraph=True)
    try:
        f(torch.ones(1))
    except rewrite.Unsupported as e:
        text = str(e)
    assert "data-dependent branching" in text and "torch.where" in text
    assert f"{__file__}:{f.__code__.co_firstlineno + 1}" in text


def test_disable_runs_eagerly_and_breaks_the_graph():
    @rewrite.disable
    def helper(t):
        return t.sin()

    def f(x):
        return helper(x * 2) + 1

    code = helper.__code__
    assert jit(helper) is helper and helper.__code__ is code  # never rewritten
    eager = eager_copy(f)
    jit(f)
    for _ in range(2):
        assert_same(f(torch.ones(2)), eager(torch.ones(2)))
    assert "rewrite.disable" in dispatcher_of(f).entries[0].eager_reason


def test_allow_in_graph_records_one_opaque_node():
    @rewrite.allow_in_graph
    def opaque(t):
        if t.sum() > 0:  # would break the graph if traced into
            return t * 2
        return t

    cnt = CompileCounter()

    def f(x):
        return opaque(x + 1) - 1

    eager = eager_copy(f)
    jit(f, backend=cnt)
    for x in (torch.ones(2), -torch.ones(2) * 3):
        assert_same(f(x), eager(x))
    assert cnt.frame_count == 1
    assert any(n.target is opaque for n in cnt.graphs[0].graph.nodes)


def test_break_inside_a_loop_resumes_the_loop(capsys):
    def f(x, n):
        acc = []
        for i in range(n):
            x = x * 2
            print("step", i)
            acc.append(x.sum())
        return x, acc

    eager = eager_copy(f)
    jit(f)
    for _ in range(2):
        assert_same(f(torch.ones(2), 3), eager(torch.ones(2), 3))
    out = capsys.readouterr().out
    assert out == "step 0\nstep 1\nstep 2\n" * 4
    assert dispatcher_of(f).entries[0].graph_break is not None


def test_break_while_iterating_a_list_that_grows():
    def f(x):
        xs = [x]
        for t in xs:
            if len(xs) < 3:
                xs.append(t * 2)
            print(len(xs))
        return xs

    eager = eager_copy(f)
    jit(f)
    for _ in range(2):
        assert_same(f(torch.ones(1)), eager(torch.ones(1)))


def test_explicit_graph_break():
    cnt = CompileCounter()

    def f(x):
        y = x.sin()
        rewrite.graph_break()
        return y.cos()

    eager = eager_copy(f)
    jit(f, backend=cnt)
    for _ in range(2):
        assert_same(f(torch.ones(2)), eager(torch.ones(2)))
    assert cnt.frame_count == 2
    assert "graph_break" in dispatcher_of(f).entries[0].graph_break


def test_resume_functions_read_the_right_locals_past_sixteen():
    """A resume function takes its locals in a new order; Python 3.13 reads two locals with one
    instruction whose oparg holds 4 bits each (LOAD_FAST_LOAD_FAST): past index 15 they are
    split in two, never wrapped around (fuzz seed 2904: a returned local read another's value)."""
    def f(x0, x1, x2, s, out):
        s1 = set(x0.shape)
        s2 = set(x0.shape)
        s3 = s1 | s2
        s4 = {1, 2}
        s5 = set(x0.shape)
        s6 = set(x0.shape)
        s7 = s5 | s6
        s8 = set(x0.shape)
        s9 = {2, 1, x0.dim()}
        s10 = x0.float().sum().item()  # a break: the rest is a resume function ...
        s11 = set(x0.shape)
        s12 = x2.float().sum().item()  # ... with a break of its own
        return (s1, s10), (s12, s11), (s3, s4, s7, s8, s9)

    eager = eager_copy(f)
    jit(f)
    for seed in range(2):
        args = [torch.randn((), generator=torch.Generator().manual_seed(seed + i)) for i in range(3)]
        assert_same(f(*args, -1.5, []), eager(*args, -1.5, []))
    assert len(dispatcher_of(f).entries[0].resumes) == 1
