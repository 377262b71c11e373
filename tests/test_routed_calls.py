"""When a jitted frame runs its original bytecode (a fallback entry: nothing of its own code
could be compiled), the functions it calls still compile: each call's callable goes through
the dispatcher's router first (rewrite/bytecode/route.py, rewrite/callees.py), as Dynamo's
frame hook would catch their frames. Each test compares with eager and checks which
callees got graphs."""
import functools
import sys
import traceback
import warnings

import pytest
import torch

import rewrite
from rewrite import dispatcher_of, jit
from rewrite.callees import copy_of

from conftest import assert_same, eager_copy


def helper(x):
    return torch.relu(x) * 2 + 1


class Scale(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.full((4,), 3.0))

    def forward(self, x):
        return x * self.w - 1


class Calls:
    def m(self, x, k=1):
        return x.sin() + k

    def __call__(self, x):
        return x.cos() * 2


def eager_top(f):
    """A call of `f` that ran wholly eagerly, and what it says about it."""
    d = dispatcher_of(f)
    assert d.entries and all(e.reason is not None for e in d.entries), [e.eager_reason for e in d.entries]


def graphs_of(fn, options):
    copy = copy_of(fn, options)
    assert copy is not None, f"{fn.__qualname__} was not routed to a jitted copy"
    return [e for e in dispatcher_of(copy).entries if e.graph]


# Each `f` below reads its own frame (`sys._getframe()`): the whole call runs eagerly.


def test_a_fallback_frame_compiles_the_functions_it_calls():
    scale, obj = Scale(), Calls()

    def f(x):
        sys._getframe()  # the whole call runs eagerly
        y = helper(x)  # a global function
        z = obj.m(y, k=3)  # a method, a keyword argument
        w = scale(z)  # a module without hooks: its class's forward
        return obj(w) + helper(*[w])  # a callable object; *args

    eager = eager_copy(f)
    jit(f)
    x = torch.randn(4)
    for _ in range(3):
        assert_same(f(x), eager(x))
        assert_same(f(-x.abs() - 1), eager(-x.abs() - 1))
    eager_top(f)
    o = dispatcher_of(f).options
    assert graphs_of(helper, o) and graphs_of(Calls.m, o) and graphs_of(Scale.forward, o)
    assert graphs_of(Calls.__call__, o)
    assert helper.__code__ is eager_copy(helper).__code__  # the user's function itself is left as it is


def test_the_callee_compiles_once_across_calls():
    def f(x):
        sys._getframe()  # the whole call runs eagerly
        return helper(x)

    eager = eager_copy(f)
    jit(f)
    x = torch.ones(3)
    for _ in range(4):
        assert_same(f(x), eager(x))
    assert dispatcher_of(copy_of(helper, dispatcher_of(f).options)).compiles == 1


def test_a_closure_made_by_each_call_shares_one_cache():
    def f(x, k):
        def g(t):  # a new function object on every call, over the same code
            return t * k + 1
        sys._getframe()  # the whole call runs eagerly
        return g(x)

    eager = eager_copy(f)
    jit(f)
    x = torch.ones(3)
    for k in (2, 2, 2):
        assert_same(f(x, k), eager(x, k))
    compiles = {d.qualname: d.compiles for d in list(_dispatchers()) if d.qualname.endswith("f.<locals>.g")}
    assert compiles == {next(iter(compiles)): 1}, compiles


def _dispatchers():
    from rewrite.dispatch import _ALL
    return list(_ALL)


def decorate(func):
    @functools.wraps(func)
    def wrapper(*args, **kwargs):  # one code over every function it wraps
        return func(*args, **kwargs) + 1
    return wrapper


def test_a_decorator_wrapping_many_functions_gets_a_cache_per_function():
    fns = [decorate(eval(f"lambda x: x * {i}")) for i in range(12)]  # more than the recompile limit

    def f(x):
        sys._getframe()  # the whole call runs eagerly
        out = x
        for fn in fns:
            out = out + fn(x)
        return out

    eager = eager_copy(f)
    jit(f)
    x = torch.ones(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # (the recompile-limit warning)
        warnings.simplefilter("ignore", rewrite.EagerWarning)
        for _ in range(2):
            assert_same(f(x), eager(x))
    o = dispatcher_of(f).options
    assert all(graphs_of(fn, o) for fn in fns)


def test_a_module_with_its_own_call_or_hooks_is_called_as_it_is():
    class Loud(Scale):
        def __call__(self, x):  # module.__call__ overridden: forward alone would skip this
            return super().__call__(x) * 10

    hooked = Scale()
    hooked.register_forward_hook(lambda m, args, out: out + 100)
    loud = Loud()

    def f(x):
        sys._getframe()  # the whole call runs eagerly
        return loud(x) + hooked(x)

    eager = eager_copy(f)
    jit(f)
    x = torch.randn(4)
    for _ in range(2):
        assert_same(f(x), eager(x))


def test_calls_that_raise_in_routed_code_raise_as_in_eager():
    def bad(x):
        return x @ torch.ones(5, 5)  # shapes do not match

    def f(x):
        sys._getframe()  # the whole call runs eagerly
        try:
            bad(x)
        except RuntimeError as e:
            caught = str(e)
        else:
            caught = None
        return x, caught, bad(x)

    eager = eager_copy(f)
    jit(f)
    x = torch.ones(3)
    errors = []
    for fn in (eager, f):
        with pytest.raises(RuntimeError) as info:
            fn(x)
        errors.append(info)
    assert str(errors[0].value) == str(errors[1].value)
    last = traceback.extract_tb(errors[1].tb)[-1]
    assert last.name == "bad" and last.line.startswith("return x @ torch.ones(5, 5)")  # the user's line last


def test_routed_code_keeps_with_blocks_generators_recursion_and_builtins():
    def gen(n):
        yield from range(n)

    def fact(n):
        return 1 if n <= 1 else n * fact(n - 1)

    def f(x):
        sys._getframe()  # the whole call runs eagerly
        acc = []
        with torch.no_grad():
            acc.append(helper(x).sum().item())
        for i in gen(3):  # a generator: called as it is
            acc.append(i)
        acc.append(fact(5))
        acc.append(max(len(acc), sys.getrecursionlimit() > 0, key=int))
        return x * sum(acc), sorted(acc, key=lambda v: -v)

    eager = eager_copy(f)
    jit(f)
    x = torch.arange(3.0)
    for _ in range(2):
        assert_same(f(x), eager(x))


def test_a_disabled_function_is_called_as_it_is():
    def quiet(x):
        return x + 5

    def f(x):
        sys._getframe()  # the whole call runs eagerly
        return quiet(x)

    eager = eager_copy(f)
    jit(f)
    x = torch.ones(2)
    assert_same(f(x), eager(x))
    rewrite.disable(quiet)
    assert_same(f(x), eager(x))
    assert copy_of(quiet, dispatcher_of(f).options) is None  # a copy made before is dropped


def test_only_jitted_code_routes_its_calls():
    from bytecode import Bytecode

    from rewrite.bytecode import splice_prologue
    from rewrite.dispatch import MISS, Dispatcher, Options

    def f(x):
        return helper(x).add(1)

    def calls(code):
        return [getattr(i, "arg", None) for i in Bytecode.from_code(code) if getattr(i, "name", None) == "CALL"]

    d = Dispatcher(f.__code__, f.__globals__, Options(None, False, None), "f")
    plain = splice_prologue(f.__code__, d.slot, MISS)  # (as the import hook splices)
    routed = splice_prologue(f.__code__, d.slot, MISS, lambda fn: fn)
    assert len(calls(routed)) == len(calls(plain)) + 2  # one router call before each of the two calls
    x = torch.ones(2)
    assert_same(types_function(routed, f)(x), f(x))


def types_function(code, like):
    import types
    fn = types.FunctionType(code, like.__globals__, like.__name__)
    fn.__rewrite_keep__ = code
    return fn


class CallableIterator:
    """An iterator that is callable too: a comprehension's call passes it where a call's
    callable sits, so routing it would hand the comprehension something else."""

    def __init__(self, items):
        self.items = list(items)

    def __iter__(self):
        return self

    def __next__(self):
        if not self.items:
            raise StopIteration
        return self.items.pop(0)

    def __call__(self):
        return "called"


def test_comprehensions_and_with_blocks_in_routed_code():
    def f(x):
        sys._getframe()  # the whole call runs eagerly
        with torch.no_grad():
            doubled = [helper(t) for t in x]  # the comprehension's own call: not routed
        return [v for v in CallableIterator(doubled)], {i: i * 2 for i in range(3)}

    eager = eager_copy(f)
    jit(f)
    x = torch.arange(3.0)
    for _ in range(2):
        assert_same(f(x), eager(x))


REGISTERED = []


def register(fn):
    REGISTERED.append(fn)  # a decorator that keeps the very function it is given
    return fn


def test_a_decorator_applied_in_routed_code_gets_the_function_itself():
    def f(x):
        sys._getframe()  # the whole call runs eagerly

        @register
        def inner(t):
            return t * 2
        return inner(x), inner.__code__ is REGISTERED[-1].__code__ and REGISTERED[-1] is inner

    eager = eager_copy(f)
    jit(f)
    x = torch.ones(2)
    from rewrite.bytecode import is_rewritten
    for _ in range(2):
        assert_same(f(x), eager(x))
        assert not is_rewritten(REGISTERED[-1].__code__)  # the function itself, not a jitted copy


def test_stacked_decorators_conditional_arguments_and_assert_messages():
    def twice(fn):
        @functools.wraps(fn)
        def wrapper(t):
            return fn(t) * 2
        return wrapper

    message = CallableIterator([])  # an assert's message that is also callable: passed as it is
    namespace = {}  # (compiled here: pytest rewrites the asserts of test modules)
    exec(compile("def check_size(y, message):\n    assert y.numel() == 3, message\n", "<assert>", "exec"), namespace)
    check_size = namespace["check_size"]

    def f(x, flag):
        sys._getframe()  # the whole call runs eagerly

        @register
        @twice
        def inner(t):
            return t - 1
        y = helper(x if flag else -x)  # a conditional expression among the arguments
        check_size(y, message)
        return inner(y), REGISTERED[-1] is inner

    eager = eager_copy(f)
    jit(f)
    x = torch.ones(3)
    from rewrite.bytecode import is_rewritten
    for flag in (True, True, False):
        assert_same(f(x, flag), eager(x, flag))
        assert not is_rewritten(REGISTERED[-1].__code__)
    assert graphs_of(helper, dispatcher_of(f).options)
    with pytest.raises(AssertionError) as info:
        f(torch.ones(2), True)
    assert info.value.args[0] is message
    jit(check_size)  # its own fallback (it raises): the assert's call routed as it must be
    with pytest.raises(AssertionError) as info:
        check_size(torch.ones(2), message)
    assert info.value.args[0] is message
