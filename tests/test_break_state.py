"""Graph breaks after state changed (issue 19: GradScaler.step, transformers' output
collector): what the failing call changed of values that existed at the break's checkpoint
is undone before the eager step runs it again; a frame with cells no closure shares yet
resumes with its cells' values; a flag set and reset again in the call is no write. Each
compared with eager, arguments and globals after the call included."""
import torch

import rewrite
from conftest import assert_same, eager_copy

STATE = {"calls": 0}


class Box:
    pass


def helper(d, box, x):
    d["seen"] = d.get("seen", 0) + 1  # changes what the caller passed in...
    box.count = getattr(box, "count", 0) + 1
    print("helper")  # ...then breaks: the whole helper runs again eagerly at the break
    return x * 2


def test_a_break_after_the_failing_call_changed_its_arguments():
    def f(d, box, x):
        y = x + 1
        z = helper(d, box, y)
        return z - 1

    compiled = rewrite.jit(eager_copy(f))
    for _ in range(3):
        d1, d2, b1, b2 = {}, {}, Box(), Box()
        x = torch.randn(3)
        assert_same(compiled(d1, b1, x), f(d2, b2, x))
        assert d1 == d2 and vars(b1) == vars(b2)
    out = rewrite.explain(eager_copy(f))({}, Box(), torch.randn(3))
    assert out.graph_count >= 2 and not out.eager_reasons  # (f's two, and helper's own after its print)


def noisy(items, x):
    items.append(len(items))
    items.pop(0)
    if x.sum() > 0:  # a break on data, after the list changed
        return x
    return -x


def test_a_list_changed_and_then_a_data_dependent_branch_in_a_helper():
    def f(items, x):
        return noisy(items, x * 2) + 1

    compiled = rewrite.jit(eager_copy(f))
    for sign in (1, -1, 1):
        a, b = [0, 1], [0, 1]
        x = torch.rand(3) * sign
        assert_same(compiled(a, x), f(b, x))
        assert a == b


def test_a_frame_with_cells_resumes_when_no_closure_shares_them_yet():
    def f(x, scale):
        y = x * scale
        print("break")  # `scale` is a cell (the comprehension below reads it)
        return sum([t * scale for t in (y, y + 1)])

    compiled = rewrite.jit(eager_copy(f))
    x = torch.randn(3)
    assert_same(compiled(x, 2.0), f(x, 2.0))
    out = rewrite.explain(eager_copy(f))(x, 2.0)
    assert out.graph_count == 2 and not out.eager_reasons


def test_a_closure_made_before_the_break_keeps_the_whole_call_eager():
    def f(x):
        n = 1

        def bump():
            nonlocal n
            n += 1
        bump()
        print("break")
        bump()
        return x * n

    x = torch.randn(3)
    assert_same(rewrite.jit(eager_copy(f))(x), f(x))


class Collector:
    def __init__(self):
        self.active, self.value = False, None


COLLECTOR = Collector()


def test_a_flag_set_and_reset_in_the_call_is_no_write():
    def f(x):
        COLLECTOR.active, COLLECTOR.value = True, 3  # as transformers' output collector does
        y = x * COLLECTOR.value
        COLLECTOR.active, COLLECTOR.value = False, None
        return y

    counter_graphs = []
    compiled = rewrite.jit(eager_copy(f), backend=lambda gm, ex: (counter_graphs.append(gm), gm.forward)[1])
    x = torch.randn(3)
    assert_same(compiled(x), f(x))
    assert (COLLECTOR.active, COLLECTOR.value) == (False, None)
    entry = rewrite.dispatcher_of(compiled).entries[0]
    assert "COLLECTOR" not in entry.source.split("def ___entry")[-1].split("return")[-1]
    COLLECTOR.value = 5  # what the call started from is guarded
    assert_same(compiled(x), f(x))
    COLLECTOR.value = None


# -- what a review of this machinery found (each was a wrong result) ----------------------------------------------
def grow_then_break(lst, d, x):
    lst.append(len(lst))
    d["n"] = d.get("n", 0) + 1
    print("", end="")
    return x + len(lst)


def test_lists_and_dicts_that_came_in_are_undone_at_a_break():
    def f(lst, d, x):
        lst.append(-1)
        d["m"] = 5
        return grow_then_break(lst, d, x), lst, d

    compiled = rewrite.jit(eager_copy(f))
    for _ in range(2):
        a, b = f([1], {}, torch.ones(2)), compiled([1], {}, torch.ones(2))
        assert_same(b[0], a[0])
        assert b[1:] == a[1:]


def flag_then_break(x):
    x.requires_grad_()
    print("", end="")
    return x * 2


def test_requires_grad_of_an_input_in_the_failing_call_is_not_set_by_the_trace():
    def f(x):
        w = x * 1
        y = flag_then_break(x)
        return y.requires_grad, w.requires_grad

    compiled = rewrite.jit(eager_copy(f))
    for _ in range(2):
        assert compiled(torch.ones(2)) == f(torch.ones(2)) == (True, False)


def advance_then_break(it, x):
    first = next(it)
    print("", end="")
    return first


def test_an_iterator_advanced_by_the_failing_call_is_put_back():
    def f(x):
        it = iter([1, 2, 3])
        r = advance_then_break(it, x)
        return x + next(it) * 10 + r

    assert_same(rewrite.jit(eager_copy(f))(torch.ones(2)), f(torch.ones(2)))


def write_dict_then_break(o, x):
    o.__dict__["a"] = o.a + 1
    print("", end="")
    return x


def test_an_objects_dict_written_by_the_failing_call_is_put_back():
    def f(x):
        o = Box()
        o.a = 0
        write_dict_then_break(o, x)
        return o.a

    assert rewrite.jit(eager_copy(f))(torch.ones(1)) == f(torch.ones(1)) == 1


def test_a_flag_deleted_and_set_again_moves_to_the_end_as_in_eager():
    def f(o, x):
        del o.a
        o.a = 1
        return x + 1

    compiled = rewrite.jit(eager_copy(f))
    for _ in range(2):
        a, b = Box(), Box()
        for o in (a, b):
            o.a, o.b = 1, 2
        compiled(a, torch.ones(1)), f(b, torch.ones(1))
        assert list(vars(a)) == list(vars(b)) == ["b", "a"]


class Tripled:
    """`t * Tripled()`: its `__rmul__` prints first, so the operator breaks the graph."""

    def __rmul__(self, t):
        print("tripled")
        return t * 3


def test_an_operator_on_a_tensor_and_an_object_resumes_after_its_break():
    """The step loop keeps no checkpoint before an operator on tensors and numbers (nothing
    can break there); one on a tensor and another object keeps one, and a break there resumes
    after it instead of running the whole call eagerly."""
    def f(x, s):
        y = x + 1  # (tensor and number: recorded, no checkpoint)
        z = y * s  # breaks in __rmul__: the operator runs eagerly, the rest resumes
        return (z - 1) * 0.5

    compiled = rewrite.jit(eager_copy(f))
    for _ in range(3):
        x = torch.randn(3)
        assert_same(compiled(x, Tripled()), f(x, Tripled()))
    out = rewrite.explain(eager_copy(f))(torch.randn(3), Tripled())
    assert out.graph_count >= 2 and not out.eager_reasons


def test_operators_on_tensors_and_numbers_break_nowhere():
    """A long run of operators on tensors and numbers, with a break after it: one graph up to
    the break, whatever the operators (none keeps a checkpoint, none needs one)."""
    def f(x):
        for i in range(8):
            x = x * 1.5 - i if i % 2 else (x + i) / 2 ** 0.5
        print("after")
        return -x @ x.T

    compiled = rewrite.jit(eager_copy(f))
    for _ in range(2):
        x = torch.randn(3, 3)
        assert_same(compiled(x), f(x))
    out = rewrite.explain(eager_copy(f))(torch.randn(3, 3))
    assert out.graph_count == 2 and not out.eager_reasons
