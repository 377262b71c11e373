"""A graph break near a callee costs only that callee's unsupported step: the call at the
break runs through a jitted copy of the callee (rewrite/callees.py), whose frame gets its own
graphs and breaks; `CALL_FUNCTION_EX` is a break point; a callee's own containers do not
stop the break."""
import functools

import torch

import rewrite
from rewrite import dispatcher_of, jit

from conftest import assert_same, eager_copy
from rewrite.fuzz.programs import PRELUDE


def inner(x):
    y = x.sin() * 2
    print("", end="")  # a graph break: inner's own
    return y.cos() + 1


def decorator(func):
    @functools.wraps(func)
    def wrapper(*args, **kwargs):  # how decorators (transformers' among them) call the function
        return func(*args, **kwargs) * 3
    return wrapper


wrapped_inner = decorator(inner)


def test_a_break_behind_call_function_ex_compiles_the_callee():
    def f(x):
        return wrapped_inner(x + 1) - 1

    eager = eager_copy(f)
    jit(f)
    x = torch.arange(4.0)
    for _ in range(3):
        assert_same(f(x), eager(x))
    out = rewrite.explain(f)(x)
    ops = [op for g in out.ops_per_graph for op in g]
    assert {"sin", "cos", "add", "sub"} <= set(ops), out  # inner's ops are in graphs too
    assert inner.__code__ is eager_copy(inner).__code__ and not hasattr(inner, "__rewrite_dispatcher__")


def test_the_callee_copy_is_shared_and_compiled_once():
    def f(x):
        return inner(x) + 2

    jit(f)
    x = torch.ones(3)
    eager = eager_copy(f)
    for _ in range(3):
        assert_same(f(x), eager(x))
    from rewrite.callees import copy_of
    copy = copy_of(inner, dispatcher_of(f).options)
    assert dispatcher_of(copy).compiles == 1 and dispatcher_of(copy).entries[0].graph_module is not None


def builds_its_own_dict(x):
    d = {}
    d["a"] = x * 2  # a dict made after the caller's checkpoint: not the caller's business
    d["b"] = [x]
    d["b"].append(x + 1)
    print("", end="")
    return d["a"] + d["b"][1]


def test_a_callee_that_fills_its_own_dict_before_breaking_still_breaks():
    def f(x):
        y = x.exp()
        return builds_its_own_dict(y) * y

    eager = eager_copy(f)
    jit(f)
    x = torch.arange(3.0)
    for _ in range(2):
        assert_same(f(x), eager(x))
    entry = dispatcher_of(f).entries[0]
    assert entry.reason is None and entry.graph_break is not None  # a break, not a whole-call fallback


def test_a_callee_changing_the_callers_list_is_undone_and_run_again_at_the_break():
    def grow(items, x):
        items.append(x * 2)
        print("", end="")
        return len(items)

    def f(x):
        items = [x]
        n = grow(items, x)
        return items[-1] + n

    eager = eager_copy(f)
    jit(f)
    x = torch.arange(3.0)
    assert_same(f(x), eager(x))
    entry = dispatcher_of(f).entries[0]
    assert entry.graph_break is not None  # the trace forgets the append: the eager step appends once


def test_modules_called_at_a_break_run_their_jitted_forward():
    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x):
            h = self.lin(x).relu()
            print("", end="")
            return h * 2

    torch.manual_seed(0)
    block = Block()

    def f(x):
        return block(x) + 1

    eager = eager_copy(f)
    jit(f)
    x = torch.randn(2, 4)
    for _ in range(2):
        assert_same(f(x), eager(x))
    ops = [op for g in rewrite.explain(f)(x).ops_per_graph for op in g]
    assert "linear" in ops and "relu" in ops
    assert "forward" not in block.__dict__  # the user's module is left as it is


LOG = []


def assert_logged_same(f, eager, x, expected_log):
    """f and its eager copy give the same result and leave the same LOG (the handlers ran)."""
    runs = []
    for fn in (f, eager):
        LOG.clear()
        runs.append((fn(x), list(LOG)))
    LOG.clear()
    assert_same(runs[0][0], runs[1][0])
    assert runs[0][1] == runs[1][1] == expected_log


def guarded(func):
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)  # a break here must still meet the finally below
        finally:
            LOG.append("exit")
    return wrapper


@guarded
def guarded_inner(x):
    y = x.tanh() * 4
    print("", end="")
    return y - x


def test_a_break_at_a_call_inside_try_finally_keeps_the_handler_and_compiles_the_callee():
    def f(x):
        return guarded_inner(x * 2) + 1

    eager = eager_copy(f)
    jit(f)
    x = torch.arange(3.0)
    for _ in range(2):
        assert_logged_same(f, eager, x, ["exit"])
    ops = [op for g in rewrite.explain(f)(x).ops_per_graph for op in g]
    assert "tanh" in ops and "mul" in ops


def raises_inside(x):
    y = x * 2
    print("", end="")
    raise ValueError("from the callee")


def test_an_exception_from_the_call_inside_try_meets_the_users_handler():
    def f(x):
        LOG.append("start")
        try:
            return raises_inside(x)
        except ValueError as e:
            LOG.append(str(e))
            return x - 1
        finally:
            LOG.append("finally")

    eager = eager_copy(f)
    jit(f)
    x = torch.ones(2)
    for _ in range(2):
        assert_logged_same(f, eager, x, ["start", "from the callee", "finally"])
    assert dispatcher_of(f).entries[0].graph_break is not None  # a break at the call, not a fallback


def scaled(x, offset=0.0, *, scale=1.0):
    y = x * scale
    print("", end="")
    return y + offset


def test_a_keyword_call_inside_try_resumes_with_its_keyword_names():
    def f(x):
        try:
            return scaled(x, 0.5, scale=3.0) - scaled(x, scale=2.0)  # KW_NAMES before each call
        finally:
            LOG.append("done")

    eager = eager_copy(f)
    jit(f)
    x = torch.arange(3.0)
    for _ in range(2):
        assert_logged_same(f, eager, x, ["done"])
    assert dispatcher_of(f).entries[0].graph_break is not None


def test_a_method_call_inside_try_that_raises_unwinds_to_the_handlers_depth():
    """A break at a method call inside `try` whose call raises: the handler sees it, and the
    frame goes on as eager's."""
    def f(x, y):
        try:
            t = [x, y].index(x * 1)  # x == x * 1 is a tensor: bool() of it raises for 2+ elements
        except (ValueError, RuntimeError) as e:
            t = type(e).__name__
        z = [x + 1, y][-1] * 2
        return t, torch.cat((z, z + 1))

    eager = eager_copy(f)
    jit(f)
    for shape in ((2, 3), (5,), (1,)):
        x, y = torch.randn(shape), torch.randn(shape)
        for _ in range(2):
            assert_same(f(x, y), eager(x, y))


# the fuzzer's program at seed 1801: its helper classes from the fuzzer's own prelude, then f
SEED_1801 = "\n\n".join(["import collections\nimport torch"] + [PRELUDE[n] for n in ("Acc", "Scaled", "Pair", "Rows")]) + """

def f(x0, x1, x2, x3, x4, acc):
    try:
        t1 = [x4, x3].index(x4 * 1)
    except (ValueError, RuntimeError) as e:
        t1 = type(e).__name__
    o2 = acc.push(x4) + acc
    o3 = o2 + x3
    o4 = Pair(x3, x0)
    t5 = o4._asdict()
    t6 = list(Rows(x4))[-1]
    t8 = torch.cat((t6, t6 * 2))
    return t6
"""


def test_the_fuzzers_seed_1801_program_with_a_break_at_a_call_inside_try():
    """Found by the fuzzer (seed 1801): the resume function starts inside the `try`, whose
    beginning it never reaches; its handler must keep the original's stack depth (a wrong one
    left freed stack slots behind: a crash, a hang or a call of garbage later in the frame)."""
    import types
    ns = {}
    exec(compile(SEED_1801, "<seed 1801>", "exec"), ns)
    f = ns["f"]
    eager = types.FunctionType(f.__code__, ns, "f")
    jit(f)
    torch.manual_seed(0)
    for shape in ((2, 3), (5,)):
        xs = [torch.randn(shape) for _ in range(5)]
        for _ in range(2):
            got = f(*xs, ns["Scaled"](torch.ones(shape)))
            assert_same(got, eager(*xs, ns["Scaled"](torch.ones(shape))))


def step(x):
    x = x + 1
    print("", end="")  # a graph break in each call
    return x * 2


def test_many_graph_breaks_under_one_function_are_said_once():
    import warnings

    def many(x):  # (10 breaks: more than config.graph_break_warning's 8)
        x = step(step(step(step(step(x)))))
        return step(step(step(step(step(x)))))

    def few(x):
        return step(x) - 1

    for fn, warned in ((many, True), (few, False)):
        eager = eager_copy(fn)
        jit(fn)
        x = torch.ones(2)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always", rewrite.BreaksWarning)
            for _ in range(3):
                assert_same(fn(x), eager(x))
        said = [w for w in seen if issubclass(w.category, rewrite.BreaksWarning)]
        assert len(said) == int(warned), [str(w.message) for w in said]
        if warned:
            assert "many compiled" in str(said[0].message) and "slower than eager" in str(said[0].message)


def test_a_resume_at_an_instruction_with_extended_arg():
    """The jump's target is an EXTENDED_ARG (the instruction there loads constant #300)."""
    body = "".join(f"        x = x + {i}.5\n" for i in range(300))
    source = f"def f(x):\n    if x.sum() > 0:\n{body}    x = 1000.25 * x\n    return x\n"
    namespace = {}
    exec(compile(source, "<extended-arg>", "exec"), namespace)
    f = namespace["f"]
    eager = eager_copy(f)
    jit(f)
    for x in (torch.ones(2), -torch.ones(2), torch.ones(2)):
        assert_same(f(x), eager(x))
    assert all(e.graph_break for e in dispatcher_of(f).entries)


def test_a_second_break_inside_a_loop_runs_the_rest_eagerly_and_compiles_its_callees():
    """The first turn compiles up to the break and resumes; the resume function breaks in the
    loop again and runs the rest of the call eagerly (routed: the callee compiles), rather than
    chaining a new resume function, compiled anew, for each turn."""
    def loop(x, n):
        for _ in range(n):
            x = step(x)
        return x

    eager = eager_copy(loop)
    jit(loop)
    x = torch.ones(2)
    for n in (30, 30):
        assert_same(loop(x, n), eager(x, n))
    d = dispatcher_of(loop)
    assert d.compiles == 1 and d.entries[0].graph_break is not None
    resume = dispatcher_of(d.entries[0].resumes[0])
    assert resume.compiles == 1 and "again inside a loop" in resume.entries[0].reason
    from rewrite.callees import copy_of
    copy = dispatcher_of(copy_of(step, d.options))
    assert copy.compiles == 1 and copy.entries[0].graph_break is not None
