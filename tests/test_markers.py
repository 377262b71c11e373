"""torch's own markers: queries folded as under torch.compile, decorators honoured as rewrite's."""
import pytest
import torch
import torch._dynamo

import rewrite
from rewrite import dispatcher_of, jit

from conftest import assert_same, eager_copy

QUERIES = [
    (lambda: torch.compiler.is_compiling(), True),
    (lambda: torch.compiler.is_dynamo_compiling(), True),
    (lambda: torch._dynamo.is_compiling(), True),
    (lambda: torch._utils.is_compiling(), True),
    (lambda: torch.compiler.is_exporting(), False),
    (lambda: torch.jit.is_tracing(), False),
    (lambda: torch.jit.is_scripting(), False),
    (lambda: torch._jit_internal.is_scripting(), False),
    (lambda: torch.fx._symbolic_trace.is_fx_tracing(), False),
    (lambda: torch._C._get_tracing_state() is None, True),
]


@pytest.mark.parametrize("ask, under_compile", QUERIES, ids=[str(i) for i in range(len(QUERIES))])
def test_queries_fold_to_what_torch_compile_answers(ask, under_compile):
    def f(x):
        if ask():
            return x + 1
        return x - 1

    jit(f)
    compiled = torch.compile(eager_copy(f), backend="eager")
    x = torch.arange(4.0)
    for _ in range(2):
        assert_same(f(x), compiled(x))
    assert_same(f(x), x + 1 if under_compile else x - 1)
    out = rewrite.explain(f)(x)
    assert out.graph_count == 1 and out.graph_break_count == 0 and out.op_count == 1


def twice_a_float(t):
    return t * float(t.sum())  # .sum() to a Python float: a graph break if traced into


def test_torch_dynamo_allow_in_graph_is_one_node():
    def f(x):
        return helper(x + 1) - 1

    helper = torch._dynamo.allow_in_graph(eager_copy(twice_a_float))
    eager = eager_copy(f)
    jit(f)
    x = torch.arange(3.0)
    for _ in range(2):
        assert_same(f(x), eager(x))
    out = rewrite.explain(f)(x)
    assert out.graph_count == 1 and out.graph_break_count == 0 and out.op_count == 3


@pytest.mark.parametrize("disable", [torch._dynamo.disable, torch.compiler.disable])
def test_torch_disable_runs_eagerly_and_names_the_function(disable):
    def helper(t):
        return t.sin()

    wrapped = disable(helper)

    def f(x):
        return wrapped(x * 2) + 1

    eager = eager_copy(f)
    jit(f)
    for _ in range(2):
        assert_same(f(torch.ones(2)), eager(torch.ones(2)))
    reasons = [str(r) for r in rewrite.explain(f)(torch.ones(2)).break_reasons]
    assert len(reasons) == 1 and "helper, marked torch.compiler.disable" in reasons[0]
    assert "__name__" not in reasons[0]


def test_torch_compiler_disable_reason_is_in_the_break_reason():
    @torch.compiler.disable(reason="talks to a server")
    def helper(t):
        return t.cos()

    def f(x):
        return helper(x) * 3

    eager = eager_copy(f)
    jit(f)
    assert_same(f(torch.ones(2)), eager(torch.ones(2)))
    assert "(talks to a server)" in str(rewrite.explain(f)(torch.ones(2)).break_reasons[0])


def test_jit_of_a_torch_disabled_function_leaves_it_eager():
    def helper(t):
        return t.tan()

    wrapped = torch.compiler.disable(helper)
    code = wrapped.__code__
    assert jit(wrapped) is wrapped and wrapped.__code__ is code  # never rewritten
    assert_same(wrapped(torch.ones(2)), torch.ones(2).tan())


@pytest.mark.parametrize("brk", [torch._dynamo.graph_break, rewrite.graph_break])
def test_graph_break_calls_break_the_graph(brk):
    def f(x):
        y = x * 2
        brk()
        return y + 1

    eager = eager_copy(f)
    jit(f)
    for _ in range(2):
        assert_same(f(torch.ones(3)), eager(torch.ones(3)))
    out = rewrite.explain(f)(torch.ones(3))
    assert out.graph_count == 2 and out.graph_break_count == 1
    assert "graph_break()" in str(out.break_reasons[0])


@pytest.mark.parametrize("mark", [torch._dynamo.mark_dynamic, torch._dynamo.maybe_mark_dynamic, rewrite.mark_dynamic])
def test_mark_dynamic_of_either_kind_makes_the_first_compile_dynamic(mark):
    def f(x):
        return x * 2

    eager = eager_copy(f)
    jit(f)
    first = torch.ones(4, 3)
    mark(first, 0)
    assert_same(f(first), eager(first))
    for n in (5, 6, 7):
        assert_same(f(torch.ones(n, 3)), eager(torch.ones(n, 3)))
    assert len(dispatcher_of(f).entries) == 1


def test_torch_mark_static_keeps_a_size_static_under_dynamic_true():
    def f(x):
        return x + 1

    eager = eager_copy(f)
    jit(f, dynamic=True)
    first = torch.ones(4, 3)
    torch._dynamo.mark_static(first, 1)
    assert_same(f(first), eager(first))
    assert_same(f(torch.ones(6, 3)), eager(torch.ones(6, 3)))  # size 0 dynamic: a hit
    assert len(dispatcher_of(f).entries) == 1
    assert_same(f(torch.ones(4, 5)), eager(torch.ones(4, 5)))  # size 1 was static: a recompile
    assert len(dispatcher_of(f).entries) == 2


def test_mark_dynamic_inside_the_call_breaks_there():
    def f(x):
        y = x + 1
        torch._dynamo.mark_dynamic(y, 0)
        return y * 2

    eager = eager_copy(f)
    jit(f)
    for _ in range(2):
        assert_same(f(torch.ones(3)), eager(torch.ones(3)))
    assert "mark_dynamic() inside a compiled function" in str(rewrite.explain(f)(torch.ones(3)).break_reasons[0])


def test_a_call_that_runs_wholly_eagerly_warns_once_with_the_reason():
    import sys

    def f(x):
        frame = sys._getframe()  # reads the frame: nothing of the call can be compiled
        return x + len(frame.f_code.co_name)

    eager = eager_copy(f)
    jit(f)
    with pytest.warns(rewrite.EagerWarning, match=r"f ran wholly eagerly, none of its own code compiled") as seen:
        assert_same(f(torch.ones(2)), eager(torch.ones(2)))
        assert_same(f(torch.ones(3, 2)), eager(torch.ones(3, 2)))  # a second entry: no second warning
    assert len(seen) == 1 and seen[0].filename == __file__ and seen[0].lineno == f.__code__.co_firstlineno
    out = rewrite.explain(eager)(torch.ones(2))  # explain lists the call as run wholly eagerly
    assert out.graph_count == 0 and len(out.eager_reasons) == 1 and "Ran wholly eagerly" in str(out)


def test_a_call_that_raises_eagerly_does_not_warn():
    import warnings

    def f(x):
        return x + torch.ones(5)  # the shapes do not broadcast: eager raises

    jit(f)
    with warnings.catch_warnings():
        warnings.simplefilter("error", rewrite.EagerWarning)
        with pytest.raises(RuntimeError):
            f(torch.ones(3))
