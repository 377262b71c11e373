"""Issue 40: the Python that real code (and its tests) is written in, under fullgraph -- each row
of the issue's table against an eager run of the same code (`breadth.check`: an un-jitted copy
is the oracle; the second call must compile nothing)."""
import contextlib
import functools
import itertools
import traceback
import unittest

import pytest
import torch

import rewrite
from breadth import check, check_each, rand
from conftest import assert_same


def x1(seed):
    return (rand(seed, 3),)


# --- attributes of bound methods and builtin functions ---------------------------------------------------

def test_names_of_builtin_methods_and_functions():
    def f(x):
        d, xs = {}, [1]
        m = d.get
        return x + 1, [m.__name__, m.__qualname__, m.__self__ is d, type(m).__name__, m.__module__,
                       m.__text_signature__, next.__name__, next.__module__, len.__qualname__, xs.append.__qualname__,
                       [].__len__.__name__, type([].__len__).__name__, dict.get.__name__, {}.setdefault.__doc__,
                       "abc".upper.__name__, type("abc".upper).__name__]
    check(f, x1)


def test_names_of_methods_of_objects_that_came_in_and_made_in_the_call():
    class C:
        def meth(self):
            "doc"
            return 1

    def f(x, c):
        m, n = c.meth, C().meth
        return x + 1, [m.__name__, m.__qualname__, m.__doc__, m.__func__ is C.meth, m.__self__ is c, m.__module__,
                       n.__name__, n.__func__ is C.meth, type(n).__name__]
    check(f, lambda seed: (rand(seed, 3), C()))


def test_assert_raises_with_a_callable_formats_its_name():
    class T(unittest.TestCase):
        def runTest(self):
            pass
    case = T()

    def f(x):
        case.assertRaises(KeyError, {}.__getitem__, 1)
        case.assertRaises(TypeError, len, 5)
        case.assertRaises(StopIteration, next, iter([]))
        return x + 1
    check(f, x1)


# --- exceptions: chains, tracebacks, their own fields -------------------------------------------------

def test_context_cause_and_suppress_context_of_exceptions_raised_in_the_call():
    def f(x):
        out = []
        try:
            try:
                raise KeyError("a")
            except KeyError as e:
                out.append(e.__traceback__ is not None)
                raise ValueError("b") from e
        except ValueError as v:
            out += [type(v.__cause__).__name__, type(v.__context__).__name__, v.__suppress_context__,
                    v.__cause__ is v.__context__]
        try:
            try:
                1 / 0
            except ZeroDivisionError:
                {}["k"]
        except KeyError as k:
            out += [type(k.__context__).__name__, k.__cause__, k.__suppress_context__, k.args]
        try:
            raise OSError(2, "nope") from None
        except OSError as o:
            out += [o.__cause__, o.__suppress_context__, o.__context__, o.errno, o.strerror, str(o)]
        e = RuntimeError("never raised")
        out += [e.__traceback__, e.__context__]
        return x + 1, out
    check(f, x1)


def test_a_context_cycle_is_cut_as_cpython_cuts_it():
    def f(x):
        try:
            try:
                raise KeyError(1)
            except KeyError as a:
                try:
                    raise ValueError(2)
                except ValueError as b:
                    raise a  # (a's context would become b, whose context is a)
        except KeyError as k:
            return x + 1, [type(k.__context__).__name__, k.__context__.__context__]
    check(f, x1)


def test_with_traceback_and_the_traceback_assert_raises_clears():
    class T(unittest.TestCase):
        def runTest(self):
            pass
    case = T()

    def f(x):
        with case.assertRaises(KeyError) as cm:
            {}[1]
        with case.assertRaisesRegex(ValueError, "invalid literal"):
            int("inv")
        e = cm.exception
        w = e.with_traceback(None)
        return x + 1, [e.args, w is e, e.__traceback__, type(e).__name__]
    check(f, x1)


def test_traceback_clear_frames_of_a_traceback_of_the_call():
    def f(x):
        try:
            raise KeyError(1)
        except KeyError as e:
            traceback.clear_frames(e.__traceback__)
            return x + 1, e.args
    check(f, x1)


def test_attributes_and_notes_set_on_exceptions():
    def f(x):
        e = ValueError("a", 1)
        e.extra = [1, 2]
        e.__cause__ = KeyError(2)
        if hasattr(e, "add_note"):
            e.add_note("a note")
        try:
            raise e
        except ValueError as v:
            return x + 1, [v.extra, repr(v.__cause__), v.__suppress_context__, getattr(v, "__notes__", None)]
    check(f, x1)


def test_exception_classes_with_their_own_init_methods_and_str():
    class MyErr(Exception):
        def __init__(self, *args):
            super().__init__(*args)
            self.extra = len(args)

        def describe(self):
            return f"{self.args} {self.extra}"

    class WithRepr(KeyError):  # (str() is BaseException's: found before a __repr__ of the class's)
        def __repr__(self):
            return "mine"

    class WithStr(ValueError):
        code = 7

        def __str__(self):
            return "custom " + str(self.args[0])

        @property
        def double(self):
            return self.args[0] * 2

        @staticmethod
        def helper():
            return "h"

    def f(x):
        out = []
        try:
            raise MyErr(1, 2)
        except MyErr as e:
            out += [e.args, e.extra, e.describe(), str(e), repr(e)]
        try:
            raise WithStr("z")
        except ValueError as e:
            out += [e.args, str(e), repr(e), e.code, e.double, e.helper()]
        out += [str(WithRepr(3)), repr(WithRepr(3))]
        return x + 1, out
    check(f, x1)


def test_an_exception_made_in_the_call_is_returned_with_its_fields():
    def f(x):
        e = ValueError("a", 1)
        e.foo = 3
        e.__context__ = KeyError(1)
        return x + 1, e
    for fn in (f, rewrite.jit(f, fullgraph=True)):
        y, e = fn(torch.ones(1))
        assert (type(e), e.args, e.foo, repr(e.__context__), e.__traceback__) == \
            (ValueError, ("a", 1), 3, "KeyError(1)", None)


def test_an_exception_raised_in_the_call_that_leaves_it_is_a_graph_break():
    def f(x):
        try:
            raise ValueError(1)
        except ValueError as e:
            return x + 1, e
    with pytest.raises(rewrite.Unsupported, match="its traceback is the trace's"):
        rewrite.jit(f, fullgraph=True)(torch.ones(1))


def test_invalid_exception_fields_raise_as_eager():
    def f(x):
        out = []
        e = ValueError()
        for name, value in (("__cause__", 5), ("__context__", "s"), ("__traceback__", 3)):
            try:
                setattr(e, name, value)
            except TypeError as t:
                out.append(str(t))
        try:
            e.with_traceback(7)
        except TypeError as t:
            out.append(str(t))
        return x + 1, out
    check(f, x1)


# --- attributes set on functions made in the call ------------------------------------------------------

def _target(x):
    "doc of target"
    return x * 2


def test_functools_wraps_and_attributes_set_on_functions_made_in_the_call():
    def deco(fn):
        @functools.wraps(fn)
        def wrapper(*a, **k):
            wrapper.calls += 1
            return fn(*a, **k)
        wrapper.calls = 0
        return wrapper

    def f(x):
        w = deco(_target)
        y = w(x)

        def local(v: int = 1) -> int:
            "local doc"
            return v
        g = deco(local)
        local.__defaults__ = (3,)
        local.__qualname__ = "renamed"
        return y, [w.__name__, w.__qualname__, w.__doc__, w.__wrapped__ is _target, w.calls, g.__name__, g.__doc__,
                   g.__wrapped__ is local, g.__annotations__ == local.__annotations__, local(), sorted(w.__dict__),
                   g.__module__, local.__qualname__, sorted(local.__annotations__.items(), key=str)]
    check(f, x1)


def test_contextmanager_made_in_the_call():
    def f(x):
        @contextlib.contextmanager
        def scaled(k):
            yield x * k

        with scaled(3) as y:
            z = y + 1
        return z
    check(f, x1)


def test_invalid_function_attributes_raise_as_eager():
    def f(x):
        def g():
            pass
        out = []
        for name, value in (("__name__", 1), ("__defaults__", [1]), ("__annotations__", 5)):
            try:
                setattr(g, name, value)
            except TypeError as t:
                out.append(str(t))
        try:
            del g.missing
        except AttributeError as a:
            out.append(str(a))
        return x + 1, out
    check(f, x1)


# --- `in` on sets that came in and on iterators ---------------------------------------------------------

def test_in_on_a_set_that_came_in_is_guarded_on_the_answer():
    def f(x, s):
        return x + 1, [1 in s, "b" in s, None in s, int in s]
    check_each(f, (torch.ones(1), {1, "a"}), (torch.ones(1), {"b", int}), (torch.ones(1), {None}))


def test_in_on_an_iterator_consumes_it_as_python_does():
    def f(x):
        it = iter([1, 2, 3, 4])
        g = (i * i for i in range(5))
        return x + 1, [3 in it, list(it), 9 in iter(range(5)), 4 in g, next(g)]
    check(f, x1)


# --- the old sequence protocol ---------------------------------------------------------------------------

class _Seq:
    def __init__(self, n):
        self.n = n

    def __getitem__(self, i):
        if i >= self.n:
            raise IndexError(i)
        return i * 10


class _Stopper:
    def __getitem__(self, i):
        if i == 2:
            raise StopIteration
        return i


def test_iteration_through_getitem_until_index_error():
    def f(x, s):
        out = [list(_Seq(3)), list(s), list(_Stopper()), 10 in _Seq(3), sum(_Seq(4))]
        it = iter(_Seq(2))
        out += [next(it), next(it), next(it, "end"), next(it, "still"), type(it).__name__]
        a, b, c = _Seq(3)
        return x + 1, out + [a, b, c]
    check(f, lambda seed: (rand(seed, 3), _Seq(2)))


# --- classes with __slots__ and their own __new__ ------------------------------------------------------

class _Slotted:
    __slots__ = ("a", "b")

    def __init__(self, a):
        self.a = a


class _MoreSlots(_Slotted):
    __slots__ = ("c",)


class _OwnNew:
    def __new__(cls, *args):
        self = super().__new__(cls)
        self.made = args
        return self

    def __init__(self, *args):
        self.inited = True


class _NewReturnsOther:
    def __new__(cls):
        return 5


def test_objects_of_slotted_classes_made_in_the_call():
    def f(x):
        out = []
        p = _Slotted(1)
        out.append(p.a)
        for action in ("read b", "set z", "del a twice"):
            try:
                if action == "read b":
                    p.b
                elif action == "set z":
                    p.z = 3
                else:
                    del p.a
                    del p.a
            except AttributeError as e:
                out.append(str(e))
        p.b = 2
        q = _MoreSlots(5)
        q.c = 7
        return x + 1, out + [p.b, q.a, q.c, hasattr(p, "__dict__"), hasattr(p, "a")], p, q
    check(f, x1)


def test_classes_with_their_own_new():
    def f(x):
        n = _OwnNew(1, 2)
        return x + 1, [n.made, n.inited, _NewReturnsOther()], n
    check(f, x1)


def test_a_functools_partial_subclass_with_slots_and_new_in_python():
    class PyPartial:
        __slots__ = ("func", "args", "keywords", "__dict__")

        def __new__(cls, func, /, *args, **keywords):
            self = super(PyPartial, cls).__new__(cls)
            self.func, self.args, self.keywords = func, args, keywords
            return self

        def __call__(self, /, *args, **keywords):
            return self.func(*self.args, *args, **{**self.keywords, **keywords})

    class Sub(PyPartial):
        pass

    def f(x):
        p = Sub(torch.add, x, alpha=2)
        return p(x), [p.args[0] is x, p.keywords]
    check(f, x1)


# --- siblings the CPython suites found ---------------------------------------------------------------------

def _gen():
    try:
        yield 1
    except ValueError as e:
        yield ("caught", e.args)


def test_generator_throw_in_its_three_argument_and_value_forms():
    def f(x):
        out = []
        for value in (5, (1, 2), None, ValueError("inst")):
            it = _gen()
            next(it)
            out.append(it.throw(ValueError, value) if not isinstance(value, ValueError) else it.throw(value))
        it = _gen()
        next(it)
        try:
            it.throw(ValueError("a"), 1)
        except TypeError as e:
            out.append(str(e))
        return x + 1, out
    check(f, x1)


def test_contextmanager_exits_that_throw_into_the_generator():
    def f(x):
        out = []

        @contextlib.contextmanager
        def cm():
            try:
                yield
            except KeyError:
                out.append("swallowed")
        with cm():
            raise KeyError(1)
        with contextlib.ExitStack() as stack:
            stack.callback(out.append, "callback")
            stack.push(lambda *exc: out.append(("pushed", exc[0])))
        return x + 1, out
    check(f, x1)


def test_sys_exc_info_and_the_generators_own_exception_state():
    import sys

    def f(x):
        out = []
        it = _gen()
        next(it)
        out.append(it.throw(ValueError, 1))  # (suspended inside its own `except`: not the caller's)
        try:
            raise IndexError(3)
        except IndexError:
            t, v, tb = sys.exc_info()
            out += [t.__name__, v.args, tb is not None, tb == tb, tb != v.__traceback__]
        out.append(sys.exc_info())
        return x + 1, out
    check(f, x1)


def test_what_the_caller_handles_is_not_assumed_away():
    import sys
    import types as pytypes

    def f(x):
        try:
            raise IndexError(3)
        except IndexError:
            pass
        return x + 1, sys.exc_info()[0]
    copy = lambda: pytypes.FunctionType(f.__code__, f.__globals__, "f", None, f.__closure__)  # noqa: E731
    eager, plain = copy(), rewrite.jit(copy())
    compiled = rewrite.jit(f, fullgraph=True)
    assert compiled(torch.ones(1))[1] is eager(torch.ones(1))[1] is None
    try:
        raise ValueError("the caller's")
    except ValueError:
        assert eager(torch.ones(1))[1] is ValueError
        with pytest.raises(rewrite.Unsupported, match="the caller handles"):
            compiled(torch.ones(1))
        assert plain(torch.ones(1))[1] is ValueError  # (not fullgraph: a graph break there)


def test_a_class_body_reading_the_enclosing_functions_variables():
    def f(x, n):
        k = n * 2
        base = dict

        class C(base):
            scale = k

            def get(self):
                return self.scale + k
        c = C(a=1)
        return x * C.scale, c.get(), c["a"], C.__name__
    check_each(f, (torch.ones(1), 3), (torch.ones(1), 4))


def test_pytree_is_traced_as_python():
    import torch.utils._pytree as pytree

    def f(x):
        leaves, spec = pytree.tree_flatten({"a": x, "b": [x * 2, (x, 3)]})
        leaves = [leaf + 1 if isinstance(leaf, torch.Tensor) else leaf for leaf in leaves]
        return pytree.tree_unflatten(leaves, spec), pytree.tree_map(lambda t: t * 2, [x, x])
    check(f, x1)


def test_grad_mode_objects_made_in_the_call_as_decorators():
    def f(x):
        @torch.no_grad()
        def g(t):
            return t * 2, torch.is_grad_enabled()
        h = torch.enable_grad()(lambda t: t + 1)
        k = torch.set_grad_enabled(False)(lambda t: (t - 1, torch.is_grad_enabled()))
        return g(x), h(x).requires_grad, k(x), torch.is_grad_enabled()
    check(f, lambda seed: (rand(seed, 2).requires_grad_(),))


def test_torch_mode_queries_per_device():
    def f(x):
        a = torch.is_autocast_cpu_enabled()
        with torch.autocast("cpu"):
            b = torch.is_autocast_cpu_enabled()
        return x + 1, a, b
    check(f, x1)


class _Cached:
    def __init__(self, n):
        self.n = n

    @functools.cached_property
    def cost(self):
        "the cost"
        return self.n * 2


def test_cached_property_defaultdict_factory_builtin_classmethods_truth():
    import collections
    import operator

    def f(x):
        c = _Cached(3)
        d = collections.defaultdict(list)
        d.default_factory = int
        d["a"] += 1
        return x + 1, [c.cost, c.cost, c.__dict__, _Cached.cost.__doc__, dict(d), bool.from_bytes(b"\x01", "big"),
                       int.from_bytes(b"\x01\x00", "little"), operator.truth([]), operator.not_(3), repr({1: 2}.items()),
                       str({}.keys()), bool.__new__(bool, 5), collections.defaultdict(int).__missing__.__name__]
    check(f, x1)


def test_what_cannot_be_iterated_or_measured_raises_as_eager():
    class Plain:
        pass

    def f(x):
        out = []
        for v in (None, 1, Plain(), 2.5):
            try:
                list(v)
            except TypeError as e:
                out.append(str(e))
        try:
            len(reversed([1]))
        except TypeError as e:
            out.append(str(e))
        try:
            [].__getitem__()
        except TypeError as e:
            out.append(str(e))
        return x + 1, out
    check(f, x1)


# --- siblings the Dynamo-style suites found -------------------------------------------------------------

def test_a_break_inside_a_with_block_whose_branch_raises():
    def f(a):
        with torch.no_grad():
            y = torch.mm(a, a)
            if y[0][0] > 100:  # (data-dependent: a break; the resume starts inside the block, its handler
                raise AssertionError("big")  # reached from this raise before the block's own beginning)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            z = torch.mm(a, a)
            assert z[0][0] == z[0][0]
        return y, z
    check(f, lambda seed: (rand(seed, 2, 2),), fullgraph=False)


def test_an_exception_context_cycle_made_by_the_code_ends_the_walk():
    def f(x):
        try:
            try:
                raise ValueError(1)
            except ValueError as ex:
                ex.__context__ = ex
                raise TypeError(2)
        except TypeError as e:
            return x + 1, [type(e.__context__).__name__, e.__context__.__context__ is e.__context__]
    check(f, x1)


def test_a_generator_never_run_is_returned_and_runs_lazily():
    def f(t):
        return _counted(t, 3), t.sin()

    calls = []

    def _counted(t, k):
        calls.append(k)
        yield t + k
        yield t * k
    eager_gen, _ = f(torch.ones(1))
    compiled_gen, _ = rewrite.jit(f, fullgraph=True)(torch.ones(1))
    assert type(compiled_gen) is type(eager_gen) and calls == []  # (nothing of it ran yet)
    assert [v.item() for v in compiled_gen] == [v.item() for v in eager_gen] and calls == [3, 3]


def test_a_generator_the_call_ran_part_of_returned():
    """Where it can stand where the trace left it (tests/test_break_values.py has the rest):
    returned; one of a function made in the call, or stopped in an `except` block, is refused."""
    def f(t):
        g = _gen_of(t)
        next(g)
        return g

    assert_same(list(rewrite.jit(f, fullgraph=True)(torch.ones(1))), [torch.ones(1) + 1])

    def made_here(t):
        def gen():
            yield t
            yield t + 1
        g = gen()
        next(g)
        return g

    with pytest.raises(rewrite.Unsupported, match="made from a function made in the call"):
        rewrite.jit(made_here, fullgraph=True)(torch.ones(1))

    def in_except(t):
        g = _gen_in_except(t)
        next(g)
        return g

    with pytest.raises(rewrite.Unsupported, match="stopped in an `except` block"):
        rewrite.jit(in_except, fullgraph=True)(torch.ones(1))


def _gen_in_except(t):
    try:
        raise ValueError
    except ValueError:
        yield t


def _gen_of(t):
    yield t
    yield t + 1


def test_bare_grad_mode_decorators_made_in_the_call():
    def f(x):
        @torch.no_grad
        def g(t):
            return t * 2
        return g(x).requires_grad, torch.enable_grad(lambda t: t + 1)(x).requires_grad
    check(f, lambda seed: (rand(seed, 2).requires_grad_(),))


def test_one_rule_says_which_torch_functions_are_graph_ops():
    import torch.nn.functional as F
    import torch.utils._pytree as pytree

    from rewrite.ops.tensors import trace_rule
    assert trace_rule(torch.add, False) == trace_rule(F.relu, False) == trace_rule(torch.Tensor.add, False) == "op"
    assert trace_rule(pytree.tree_flatten, False) == trace_rule(torch.testing.assert_close, False) == "python"
    assert trace_rule(torch.optim.Adam.step, False) == "python"
    assert trace_rule(F.relu, True) == "python"  # (given objects a graph op cannot hold)
    assert trace_rule(_target, False) is None


def test_context_managers_of_torch_made_in_the_call_as_decorators():
    def f(x):
        @torch.autograd.graph.disable_saved_tensors_hooks("no hooks here")
        def h(t):
            return t.sin()
        mm = torch.autocast("cpu", dtype=torch.bfloat16)(lambda t: torch.mm(t, t))
        return h(x), mm(x).dtype, torch.is_autocast_enabled("cpu")
    check(f, lambda seed: (rand(seed, 2, 2).requires_grad_(),))


def test_a_method_in_c_of_an_object_that_came_in_breaks_the_graph_where_it_is_called():
    import random

    def f(x, rng):
        a = rng.random()  # (the draw is eager's: the generator's state goes on as eager's)
        return x + a + random.Random(3).randint(0, 10)
    check_each(f, (torch.ones(1), random.Random(0)), (torch.ones(1), random.Random(1)), fullgraph=False)


class _Meta(type):
    def __iter__(cls):
        for item in cls.items:  # (`2 in C` leaves it suspended: closed where eager's last reference goes)
            yield item


class _Iterated(metaclass=_Meta):
    items = [1, 2, 3]


def test_iterating_a_class_its_metaclass_iterates():
    import enum

    class Color(enum.Enum):
        RED = 1
        BLUE = 2

    def f(x):
        return x + 1, list(_Iterated), [c.name for c in Color], 2 in _Iterated
    check(f, x1)


_log = []


def _sub(t):
    try:
        yield t + 1
        yield t + 2
    except ValueError as e:
        _log.append(("sub caught", e.args))
        yield t * 10
    finally:
        _log.append("sub finally")


def _sub_returns(t):
    try:
        yield t
    except KeyError:
        return "ret"


def _outer(t):
    try:
        r = yield from _sub(t)
        _log.append(("outer after", r))
        r2 = yield from _sub_returns(t)
        _log.append(("outer after2", r2))
        yield t - 1
    except IndexError as e:
        _log.append(("outer caught", e.args))
        yield t * 100
    finally:
        _log.append("outer finally")


def _plain(t):
    yield from iter([1, 2, 3])


def test_throw_and_close_of_a_generator_stopped_in_yield_from_go_to_the_sub_generator_first():
    def f(x):
        del _log[:]
        g = _outer(x)
        out = [next(g), g.throw(ValueError, 7), next(g), g.throw(KeyError(1)), g.throw(IndexError(3))]
        g.close()
        g2 = _outer(x)
        next(g2)
        g2.close()  # (GeneratorExit closes the sub-generator first: both finally blocks run)
        p = _plain(x)
        next(p)
        try:
            p.throw(ValueError("x"))  # (a list iterator has no throw: raised where it waits)
        except ValueError as e:
            out.append(("plain raised", e.args))
        return out, list(_log)
    check(f, x1, shared=("_log",))


class _MetaFrom(type):
    def __iter__(cls):
        yield from cls.items


class _IteratedFrom(metaclass=_MetaFrom):
    items = [1, 2, 3]


def test_a_generator_left_in_yield_from_is_closed_as_cpython_closes_it():
    def f(x):
        return x + 1, 2 in _IteratedFrom, list(_IteratedFrom)
    check(f, x1)


def test_itertools_tee():
    """tee's iterators share one buffer: the source is advanced by the one ahead only."""
    def f(x):
        a, b = itertools.tee(iter(range(2000)))
        drawn = list(a)
        c, d, e = itertools.tee((x * i for i in range(3)), 3)
        first = next(c)
        return len(drawn), sum(b), list(d), list(c), first, next(e), itertools.tee([], 0)
    check(f, lambda seed: (rand(seed, 2),))


def test_itertools_tee_errors():
    def f(x, n):
        try:
            itertools.tee([1], n)
        except (ValueError, TypeError) as e:
            return x + 1, type(e).__name__, str(e)
        return x
    for n in (-1, "2"):
        check(f, lambda seed, n=n: (rand(seed, 2), n))


class _MyTuple(tuple):
    scale = 3

    def total(self):
        return sum(self) * self.scale


class _Point(_MyTuple):
    @property
    def first(self):
        return self[0]


def test_tuple_subclasses_made_in_the_call():
    """A tuple subclass with methods only: a tuple of that class (its methods, properties and
    class attributes traced); what tuple's operators make of it is a plain tuple, as CPython's."""
    def f(x):
        m = _MyTuple((1, 2))
        p = _Point(i for i in range(3))
        e = _MyTuple()
        return (x + len(m), m, m.total(), p.first, p, isinstance(p, _MyTuple), m == (1, 2), e, m + (5,), m[:1],
                tuple(m), m * 1 is m, [type(v).__name__ for v in (m, p, e, m + (5,), tuple(m))])
    check(f, lambda seed: (rand(seed, 2),))


# -- torch._dynamo.error_on_graph_break: whether a break raises, per region ------------------------------------
def _graphs_of(fn, *args, outer=None):
    """(result, graphs compiled, eager's result) of jit(fn) called as given, inside
    error_on_graph_break(outer) when outer is a bool (a compile-time flag, as Dynamo reads it)."""
    import torch._dynamo
    from conftest import CompileCounter, eager_copy
    eager = eager_copy(fn)
    counter = CompileCounter()
    compiled = rewrite.jit(fn, backend=counter)
    if outer is not None:
        compiled = torch._dynamo.error_on_graph_break(outer)(compiled)
    return compiled(*args), counter.frame_count, eager(*args)


def test_error_on_graph_break_false_lets_a_region_break():
    import torch._dynamo

    def f(x):
        x = x + 1
        with torch._dynamo.error_on_graph_break(False):
            torch._dynamo.graph_break()
            x = x + 2
            torch._dynamo.graph_break()
        return x + 4
    got, graphs, want = _graphs_of(f, torch.ones(3), outer=True)
    assert_same(got, want)
    assert graphs == 3
    assert torch._dynamo.utils._get_error_on_graph_break() is False  # (left as it was)


def test_error_on_graph_break_true_makes_a_break_an_error():
    import torch._dynamo

    def f(x):
        x = x + 1
        with torch._dynamo.error_on_graph_break(True):
            torch._dynamo.graph_break()
        return x + 2

    def g(x):  # outside the region: a break as usual
        with torch._dynamo.error_on_graph_break(True):
            x = x * 2
        torch._dynamo.graph_break()
        return x + 1

    with pytest.raises(rewrite.Unsupported, match="graph_break"):
        _graphs_of(f, torch.ones(3))
    got, graphs, want = _graphs_of(g, torch.ones(3))
    assert_same(got, want)
    assert graphs == 2

    def h(x):  # flag on for the whole call (a decorator outside the compiled function)
        x = x + 1
        torch._dynamo.graph_break()
        return x
    with pytest.raises(rewrite.Unsupported, match="graph_break"):
        _graphs_of(h, torch.ones(3), outer=True)


def test_error_on_graph_break_in_a_helper_and_under_fullgraph():
    import torch._dynamo

    def inner(x):
        x = x + 2
        with torch._dynamo.error_on_graph_break(True):
            torch._dynamo.graph_break()
        return x + 4

    def f(x):
        return inner(x + 1)
    with pytest.raises(rewrite.Unsupported, match="graph_break"):
        _graphs_of(f, torch.ones(3), outer=False)

    def g(x):  # fullgraph=True: every break is an error, error_on_graph_break(False) too
        with torch._dynamo.error_on_graph_break(False):
            torch._dynamo.graph_break()
        return x + 2
    with pytest.raises(rewrite.Unsupported, match="graph_break"):
        rewrite.jit(g, fullgraph=True)(torch.ones(3))

    @torch._dynamo.error_on_graph_break(False)
    def decorated(x):
        x = x + 2
        torch._dynamo.graph_break()
        return x + 4

    def k(x):  # torch's decorator wrapper is traced (it holds the user's function), not an op
        return decorated(x + 1)
    got, graphs, want = _graphs_of(k, torch.ones(3), outer=True)
    assert_same(got, want)


@functools.singledispatch
def _describe(arg):
    return "object"


@_describe.register
def _(arg: int):
    return "int"


@_describe.register(list)
def _(arg):
    return f"list of {len(arg)}"


@_describe.register(torch.Tensor)
def _(arg):
    return arg * 2


def test_functools_singledispatch():
    """The implementation registered for the first argument's class, as `dispatch` finds it (a
    subclass too); registering another implementation later recompiles (the registry is guarded)."""
    def f(x):
        return _describe(1), _describe(True), _describe([1, 2]), _describe("s"), _describe(x)
    check(f, lambda seed: (rand(seed, 2),))

    compiled = rewrite.jit(lambda t: (_describe(1.5), _describe(t)), fullgraph=True)
    first = compiled(torch.ones(1))
    _describe.register(float, lambda arg: "float")  # (last: a registry cannot unregister)
    assert compiled(torch.ones(1))[0] == "float" and first[0] == "object"
