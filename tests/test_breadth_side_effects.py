"""Breadth suite, side effects: writes to objects, lists, dicts, globals, cells; in-place tensor ops."""
import torch

import rewrite
from breadth import check, rand, todo
from conftest import CompileCounter, assert_same, eager_copy

COUNTER = 0
SCALE = 1.0
LOG = []
CACHE = {}
LAST = None


class State:
    def __init__(self):
        self.steps = 0
        self.total = None
        self.history = []


def with_state(seed):
    return (rand(seed, 3), State())


def with_list(seed):
    return (rand(seed, 3), [rand(seed + 5, 3), rand(seed + 6, 3)])


def with_dict(seed):
    return (rand(seed, 3), {"a": rand(seed + 5, 3), "n": 1})


def x1(seed):
    return (rand(seed, 3),)


def x2d(seed):
    return (rand(seed, 3, 4),)


# attribute writes on passed-in objects

def test_attribute_increment():
    def f(x, st):
        st.steps += 1
        return x * 2
    check(f, with_state)


def test_attribute_write_of_tensor():
    def f(x, st):
        st.total = x.sum()
        return x + 1
    check(f, with_state)


def test_attribute_write_then_read_back():
    def f(x, st):
        st.steps = st.steps + 5
        return x * st.steps
    check(f, with_state)


def test_new_attribute_created():
    def f(x, st):
        st.fresh = x.mean()
        return x
    check(f, with_state)


def test_setattr_builtin():
    def f(x, st):
        setattr(st, "steps", 7)
        return x
    check(f, with_state)


def test_delattr_attribute():
    def f(x, st):
        del st.total
        return x - 1
    check(f, with_state)


def test_attribute_list_append():
    def f(x, st):
        st.history.append(x.max())
        return x
    check(f, with_state)


# lists passed in

def test_list_append():
    def f(x, xs):
        xs.append(x * 2)
        return x + 1
    check(f, with_list)


def test_list_extend():
    def f(x, xs):
        xs.extend([x, x + 1])
        return len(xs)
    check(f, with_list)


def test_list_pop_returns_item():
    def f(x, xs):
        last = xs.pop()
        return x + last
    check(f, with_list)


def test_list_item_assignment():
    def f(x, xs):
        xs[0] = x * 10
        return xs[1] + 1
    check(f, with_list)


def test_list_insert_and_delete():
    def f(x, xs):
        xs.insert(0, x)
        del xs[-1]
        return x
    check(f, with_list)


def test_list_slice_assignment():
    def f(x, xs):
        xs[:1] = [x, x * 2, x * 3]
        return x
    check(f, with_list)


def test_list_clear():
    def f(x, xs):
        xs.clear()
        return x
    check(f, with_list)


def test_list_reverse_in_place():
    def f(x, xs):
        xs.reverse()
        return xs[0] - x
    check(f, with_list)


def test_list_sort_in_place_of_python_values():
    def f(x, ns):
        ns.sort()
        return x * ns[0]
    check(f, lambda s: (rand(s, 3), [3, 1, 2]))


def test_list_plus_equals():
    def f(x, xs):
        xs += [x]
        return x
    check(f, with_list)


def test_list_mutation_then_loop_over_it():
    def f(x, xs):
        xs.append(x)
        return sum(xs)
    check(f, with_list)


def test_returned_list_is_the_input_list():
    def f(x, xs):
        xs.append(x * 2)
        return xs

    eager, cnt = eager_copy(f), CompileCounter()
    rewrite.jit(f, fullgraph=True, backend=cnt)
    for seed in (0, 1):
        a, b = [torch.ones(2)], [torch.ones(2)]
        out_c, out_e = f(rand(seed, 2), a), eager(rand(seed, 2), b)
        assert out_c is a and out_e is b
        assert_same(a, b)
    assert cnt.frame_count == 1


# dicts passed in

def test_dict_set_item():
    def f(x, d):
        d["b"] = x * 2
        return x
    check(f, with_dict)


def test_dict_overwrite_python_value():
    def f(x, d):
        d["n"] += 1
        return x * d["n"]
    check(f, with_dict)


def test_dict_delete():
    def f(x, d):
        del d["a"]
        return x
    check(f, with_dict)


def test_dict_update():
    def f(x, d):
        d.update({"c": x, "n": 5})
        return x
    check(f, with_dict)


def test_dict_pop_and_setdefault():
    def f(x, d):
        a = d.pop("a")
        d.setdefault("z", x)
        return a + x
    check(f, with_dict)


def test_dict_clear():
    def f(x, d):
        d.clear()
        return x
    check(f, with_dict)


def test_nested_dict_in_list_mutated():
    def f(x, cfg):
        cfg["layers"][0]["w"] = x
        return x
    check(f, lambda s: (rand(s, 3), {"layers": [{"w": None}]}))


# globals and nonlocals

def test_global_counter_increment():
    def f(x):
        global COUNTER
        COUNTER += 1
        return x + 1
    check(f, x1, shared=("COUNTER",))


def test_global_tensor_assignment():
    def f(x):
        global LAST
        LAST = x * 2
        return x
    check(f, x1, shared=("LAST",))


def test_global_rebinding_of_float_then_read():
    def f(x):
        global SCALE
        SCALE = 3.0
        return x * SCALE
    check(f, x1, shared=("SCALE",))


def test_global_list_append():
    def f(x):
        LOG.append(x.sum())
        return x
    check(f, x1, shared=("LOG",))


def test_global_dict_cache_write():
    def f(x):
        CACHE["last"] = x + 1
        return x
    check(f, x1, shared=("CACHE",))


def test_nonlocal_counter():
    calls = 0

    def f(x):
        nonlocal calls
        calls += 1
        return x * 2
    check(f, x1, shared=("calls",))


def test_nonlocal_tensor_accumulator():
    acc = torch.zeros(3)

    def f(x):
        nonlocal acc
        acc = acc + x
        return acc * 1
    check(f, x1, shared=("acc",))


def test_nonlocal_in_inner_helper():
    def f(x):
        total = 0

        def bump(n):
            nonlocal total
            total += n
        bump(2)
        bump(3)
        return x * total
    check(f, x1)


def test_closure_list_append():
    seen = []

    def f(x):
        seen.append(x * 2)
        return x
    check(f, x1, shared=("seen",))


# in-place tensor ops on inputs

def test_add_inplace_on_input():
    def f(x):
        x.add_(1)
        return x * 2
    check(f, x1)


def test_inplace_returns_the_input():
    def f(x):
        return x.mul_(3)
    check(f, x1)


def test_setitem_int_on_input():
    def f(x):
        x[0] = 1
        return x.sum()
    check(f, x1)


def test_setitem_slice_with_tensor():
    def f(x, y):
        x[:, 1:3] = y
        return x
    check(f, lambda s: (rand(s, 3, 4), rand(s + 3, 3, 2)))


def test_augmented_assign_on_input_index():
    def f(x):
        x[1] += 5
        return x
    check(f, x2d)


def test_augmented_assign_on_input():
    def f(x):
        x += 1
        return x
    check(f, x1)


def test_out_argument():
    def f(x, out):
        torch.add(x, 1, out=out)
        return out * 2
    check(f, lambda s: (rand(s, 3), torch.empty(3)))


def test_copy_and_zero_inplace():
    def f(x, y):
        y.copy_(x * 2)
        x.zero_()
        return x + y
    check(f, lambda s: (rand(s, 3), rand(s + 1, 3)))


def test_inplace_on_view_of_input():
    def f(x):
        x[0].mul_(0)
        x.t()[1].fill_(2)
        return x
    check(f, x2d)


def test_inplace_with_aliased_inputs():
    def f(a, b):
        a.add_(1)
        return b * 2  # b is a: sees the update

    def make(seed):
        x = rand(seed, 3)
        return (x, x)
    check(f, make)


def test_inplace_through_view_alias_input():
    def f(a, row):
        row.add_(10)
        return a.sum(0)

    def make(seed):
        x = rand(seed, 2, 3)
        return (x, x[0])
    check(f, make)


def test_inplace_on_tensor_in_passed_list():
    def f(xs):
        for t in xs:
            t.mul_(2)
        return len(xs)
    check(f, lambda s: ([rand(s, 3), rand(s + 1, 2)],))


def test_inplace_on_object_attribute_tensor():
    def f(h):
        h.total.sub_(1)
        return h.total * 2

    def make(seed):
        st = State()
        st.total = rand(seed, 3)
        return (st,)
    check(f, make)


def test_inplace_on_local_tensor_is_fine():
    def f(x):
        y = x.clone()
        y.add_(1)
        y[0] = 0
        return y
    check(f, x1)


def test_index_put_with_tensor_index_on_input():
    def f(x, i):
        x[i] = 0.0
        return x
    check(f, lambda s: (rand(s, 5), torch.tensor([0, 3])))


def test_masked_fill_inplace_on_input():
    def f(x):
        x.masked_fill_(x < 0, 0.0)
        return x.sum()
    check(f, x2d)


def test_side_effects_in_program_order():
    def f(x, xs, st):
        xs.append(st.steps)
        st.steps += 1
        xs.append(st.steps)
        return x
    check(f, lambda s: (rand(s, 3), [], State()))


# side effects around a graph break (fullgraph=False): each must happen exactly once

def test_list_append_before_graph_break():
    def f(x, xs):
        xs.append(x * 2)
        print(end="")
        return x + len(xs)
    check(f, with_list, fullgraph=False)


def test_attribute_increment_after_graph_break():
    def f(x, st):
        y = x * 2
        print(end="")
        st.steps += 1
        return y
    check(f, with_state, fullgraph=False)


def test_global_counter_with_graph_break():
    def f(x):
        global COUNTER
        COUNTER += 1
        print(end="")
        COUNTER += 1
        return x + 1
    check(f, x1, shared=("COUNTER",), fullgraph=False)


def test_inplace_on_input_before_graph_break():
    def f(x):
        x.mul_(2)
        print(end="")
        return x + 1
    check(f, x1, fullgraph=False)


def test_dict_update_before_graph_break():
    def f(x, d):
        d["seen"] = x.sum()
        print(end="")
        return x
    check(f, with_dict, fullgraph=False)


# mutation of objects created inside the function is not a side effect

def test_mutate_local_object_then_return_values():
    def f(x):
        st = State()
        st.steps += 2
        st.history.append(x)
        return x * st.steps, st.history
    check(f, x1)


def test_mutate_local_dict_and_list():
    def f(x):
        d = {"a": x}
        d["b"] = x + 1
        del d["a"]
        xs = [x]
        xs.extend([x * 2])
        xs.pop(0)
        xs[0] = xs[0] + 1
        return d, xs
    check(f, x1)


def test_mutate_copy_of_input_list_only():
    def f(x, xs):
        ys = list(xs)
        ys.append(x)
        ys[0] = x * 3
        return ys
    check(f, with_list)


def test_local_list_appended_across_breaks():
    def f(x):
        acc = []
        for i in range(3):
            acc.append(x * i)
            print(end="")
        return acc
    check(f, x1, fullgraph=False)


def test_local_dict_written_across_a_break():
    def f(x):
        d = {"a": x}
        print(end="")
        d["b"] = d["a"] + 1
        return d
    check(f, x1, fullgraph=False)


def test_nonlocal_written_across_a_break():
    def f(x):
        total = 0

        def add(v):
            nonlocal total
            total += v
        add(1)
        print(end="")
        add(2)
        return x * total
    check(f, x1, fullgraph=False)


def test_loop_over_input_list_that_grows():
    def f(x, xs):
        for t in xs:
            if len(xs) < 4:
                xs.append(t * 2)
            print(end="")
        return len(xs)
    check(f, lambda s: (rand(s, 3), [rand(s, 3)]), fullgraph=False)


# aliasing and order between side effects

def test_same_list_passed_twice():
    def f(x, a, b):
        a.append(1)
        return x * len(b)

    def make(seed):
        xs = [0]
        return (rand(seed, 3), xs, xs)
    check(f, make)


def test_same_object_passed_twice():
    def f(x, a, b):
        a.steps += 1
        return x * b.steps

    def make(seed):
        st = State()
        return (rand(seed, 3), st, st)
    check(f, make)


def test_dict_delete_then_reinsert_moves_key_last():
    def f(x, d):
        del d["a"]
        d["a"] = 5
        return x, list(d)
    check(f, with_dict)


def test_helper_reads_attribute_written_before():
    def steps_times_ten(st):
        return st.steps * 10

    def f(x, st):
        st.steps = 3
        return x * steps_times_ten(st)
    check(f, with_state)


def test_helper_reads_global_written_before():
    def read_counter():
        return COUNTER

    def f(x):
        global COUNTER
        COUNTER = COUNTER + 5
        return x * read_counter()
    check(f, x1, shared=("COUNTER",))


def test_containers_on_an_object():
    def f(x, st):
        st.history.append(st.steps)
        st.steps += 1
        st.history.append(st.steps)
        st.extra = {"n": len(st.history)}
        return x
    check(f, with_state)


def test_list_inside_dict_mutated():
    def f(x, d):
        d.setdefault("log", []).append(1)
        d["log"].append(len(d["log"]))
        return x
    check(f, with_dict)


def test_attribute_overwritten_twice():
    def f(x, st):
        st.total = x * 2
        st.total = st.total + 1
        return st.total
    check(f, with_state)


def test_two_input_lists_cross_mutated():
    def f(x, xs, ys):
        xs.extend(ys)
        ys.clear()
        return x
    check(f, lambda s: (rand(s, 3), [1], [2, 3]))


def test_pop_insert_remove_index():
    def f(x, ns):
        a = ns.pop(0)
        ns.insert(1, a)
        ns.remove(a)
        return x, ns.index(3)
    check(f, lambda s: (rand(s, 3), [1, 2, 3]))


def test_list_sort_with_key():
    def f(x, ns):
        ns.sort(key=lambda v: -v)
        return x
    check(f, lambda s: (rand(s, 3), [1, 3, 2]))


def test_write_through_dunder_dict():
    def f(x, st):
        st.__dict__["steps"] = 9
        return x * st.steps
    check(f, with_state)


def test_mutation_then_python_exception():
    def f(x, xs):
        xs.append(x)
        raise ValueError("boom")
    check(f, with_list, raises=ValueError, fullgraph=False)


def test_attribute_writes_around_a_data_dependent_break():
    def f(x, st):
        st.steps += 1
        if x.sum() > 100:  # never true for these inputs
            return x
        st.steps += 10
        return -x
    check(f, with_state, fullgraph=False)


# the same object across calls: the state the next call sees is the replayed one

def test_counter_on_the_same_object_over_calls():
    def f(x, st):
        st.steps += 1
        return x * st.steps

    eager = eager_copy(f)
    rewrite.jit(f, fullgraph=True, backend=CompileCounter())
    mine, theirs = State(), State()
    for seed in range(4):
        assert_same(f(rand(seed, 3), mine), eager(rand(seed, 3), theirs))
    assert mine.steps == theirs.steps == 4


def test_list_growing_on_the_same_object_over_calls():
    def f(x, xs):
        n = len(xs)
        xs.append(n)
        return x * n

    eager = eager_copy(f)
    rewrite.jit(f, fullgraph=True, backend=CompileCounter())
    mine, theirs = [], []
    for seed in range(3):
        assert_same(f(rand(seed, 3), mine), eager(rand(seed, 3), theirs))
    assert mine == theirs == [0, 1, 2]
