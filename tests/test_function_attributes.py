"""Function and code attributes, and inspect.signature, read while tracing (issue 18, item 2):
constants in one graph (fullgraph), guarded so that a change between calls retraces.

Every test compares the compiled function with an un-jitted copy (`check`, `check_each`).
"""
import functools
import inspect

import pytest
import torch

import rewrite
from breadth import check, check_each, rand
from conftest import CompileCounter, eager_copy


def helper(a, b=2, *args, c=3, **kwargs):
    """Adds nothing."""
    return a


def undocumented(a):
    return a


def t1(seed):
    return (rand(seed, 3),)


def with_fn(fn):
    return lambda seed: (rand(seed, 3), fn)


# --- names and documentation ------------------------------------------------------------------------

def test_name_qualname_module_doc_of_passed_in_function():
    def f(x, fn):
        return x * len(fn.__name__), fn.__qualname__, fn.__module__, fn.__doc__
    check(f, with_fn(helper))
    check(f, with_fn(undocumented))  # __doc__ None


def test_name_qualname_module_doc_of_global_function():
    def f(x):
        return x + len(helper.__name__ + helper.__qualname__ + helper.__module__ + helper.__doc__)
    check(f, t1)


def test_name_of_a_local_function_through_the_closure():
    def local(a):
        return a

    def f(x):
        return x + len(local.__qualname__)
    check(f, t1)


def test_rename_between_calls_retraces():
    def g(a):
        return a

    def f(x, fn):
        return x * len(fn.__name__), fn.__name__

    def rename(name):
        g.__name__ = name
        return rand(0, 3), g
    check_each(f, lambda: rename("g"), lambda: rename("other"), lambda: rename("g"))


def test_doc_changed_between_calls_retraces():
    def g(a):
        """one"""

    def f(x, fn):
        return x if fn.__doc__ is None else x + len(fn.__doc__)

    def set_doc(doc):
        g.__doc__ = doc
        return rand(0, 3), g
    check_each(f, lambda: set_doc("one"), lambda: set_doc(None), lambda: set_doc("three"))


# --- code objects -----------------------------------------------------------------------------------

def test_positional_parameter_names_from_the_code():
    def f(x, fn):
        code = fn.__code__
        names = code.co_varnames[:code.co_argcount]
        return x * len(names), names, code.co_kwonlyargcount, code.co_name, code.co_posonlyargcount
    check(f, with_fn(helper))


def test_code_flags():
    def f(x, fn):
        flags = fn.__code__.co_flags
        varargs = bool(flags & inspect.CO_VARARGS)
        return x + varargs + bool(flags & inspect.CO_VARKEYWORDS) * 10, varargs
    check(f, with_fn(helper))
    check(f, with_fn(undocumented))


def test_code_reassigned_between_calls_retraces():
    def g(a, b):
        return a

    def two(a, b):
        return a

    def three(p, q, r):
        return p

    def f(x, fn):
        return x * fn.__code__.co_argcount, fn.__code__.co_varnames

    def set_code(code):
        g.__code__ = code
        return rand(0, 3), g
    check_each(f, lambda: set_code(two.__code__), lambda: set_code(three.__code__))


def test_code_object_passed_in_is_guarded_on_identity():
    def f(x, code):
        return x * code.co_argcount, code.co_consts
    check_each(f, (rand(0, 3), helper.__code__), (rand(0, 3), undocumented.__code__))


def test_code_of_a_jitted_function_is_the_code_eager_sees():
    def g(a):
        return a + 1
    rewrite.jit(g)
    g(torch.ones(1))  # (g's __code__ is now the rewritten code)

    def f(x):
        return x + g.__code__.co_argcount, g.__code__
    compiled = rewrite.jit(f, fullgraph=True)
    eager = eager_copy(f)
    x = rand(0, 3)
    (out, code), (expected, expected_code) = compiled(x), eager(x)
    torch.testing.assert_close(out, expected)
    assert code is expected_code is g.__code__


# --- defaults ---------------------------------------------------------------------------------------

def test_defaults_and_kwdefaults_with_a_tensor():
    def f(x, fn):
        return x * fn.__defaults__[0] + fn.__kwdefaults__["c"], len(fn.__defaults__)
    check(f, with_fn(helper))


def test_no_defaults_is_none():
    def f(x, fn):
        return x + (fn.__defaults__ is None) + (fn.__kwdefaults__ is None) * 10
    check(f, with_fn(undocumented))


def test_defaults_reassigned_between_calls_retraces():
    def g(a, b=2, *, c=3):
        return a

    def f(x):
        d = g.__defaults__
        return x + (0 if d is None else sum(d)) + g.__kwdefaults__["c"]

    def set_defaults(defaults, c):
        g.__defaults__ = defaults
        g.__kwdefaults__["c"] = c  # in place
        return (rand(0, 3),)
    cnt = CompileCounter()
    eager = eager_copy(f)
    compiled = rewrite.jit(f, fullgraph=True, backend=cnt)
    for defaults, c in [((2,), 3), ((5,), 3), ((5,), 7), ((1, 2), 7), (None, 7), ((5,), 3)]:
        args = set_defaults(defaults, c)
        torch.testing.assert_close(compiled(*args), eager(*args))
    assert cnt.frame_count == 5  # the last call reuses the second entry


# --- __wrapped__ and other entries of a function's __dict__ -------------------------------------------

def inner_function(x, y=4):
    return x * y


@functools.wraps(inner_function)
def wrapper_function(*args, **kwargs):
    return inner_function(*args, **kwargs) + 1


def test_wrapped_of_a_functools_wraps_wrapper():
    def f(x, fn):
        return fn.__wrapped__(x), fn.__name__, fn.__wrapped__.__name__
    check(f, with_fn(wrapper_function))


def test_missing_wrapped_is_attribute_error():
    def f(x, fn):
        try:
            inner = fn.__wrapped__
        except AttributeError as e:
            return x - 1, str(e)
        return inner(x), "wrapped"
    check(f, with_fn(inner_function))
    check_each(f, (rand(0, 3), wrapper_function), (rand(0, 3), inner_function), (rand(0, 3), wrapper_function))


def test_attribute_set_on_a_function():
    def g(a):
        return a
    g.scale = 3

    def f(x, fn):
        return x * fn.scale

    def set_scale(k):
        g.scale = k
        return rand(0, 3), g
    check_each(f, lambda: set_scale(3), lambda: set_scale(5))


def test_entry_of_a_function_dict():
    def g(a):
        return a
    g.scale = 3

    def f(x, fn):
        return x * fn.__dict__["scale"] + ("other" in fn.__dict__)

    def set_other():
        g.other = 1
        return rand(0, 3), g
    check_each(f, (rand(0, 3), g), set_other)


# --- inspect.signature ------------------------------------------------------------------------------

def test_signature_parameter_names_and_defaults():
    def f(x, fn):
        params = inspect.signature(fn).parameters
        names = list(params.keys())
        b = params["b"]
        return x * b.default + params["c"].default, names, "kwargs" in params, "z" in params, b.name, len(params)
    check(f, with_fn(helper))


def test_signature_parameter_kinds():
    def f(x, fn):
        kinds = [p.kind == p.POSITIONAL_OR_KEYWORD for p in inspect.signature(fn).parameters.values()]
        empty = [name for name, p in inspect.signature(fn).parameters.items() if p.default is inspect.Parameter.empty]
        return x + sum(kinds), empty, [int(p.kind) for p in inspect.signature(fn).parameters.values()]
    check(f, with_fn(helper))


def test_signature_follows_wrapped():
    def f(x, fn):
        return x + len(inspect.signature(fn).parameters), list(inspect.signature(fn, follow_wrapped=False).parameters)
    check(f, with_fn(wrapper_function))


def test_signature_of_a_module_method():
    class M(torch.nn.Module):
        def forward(self, x, scale=2.0, *, flag=False):
            return x * scale

    def f(x, m):
        params = inspect.signature(m.forward).parameters
        return m(x) * params["scale"].default, list(params)
    check(f, lambda s: (rand(s, 3), M()))


def test_signature_follows_changes_between_calls():
    def g(a, b: int = 2):
        return a

    def f(x, fn):
        p = inspect.signature(fn).parameters["b"]
        return x * p.default + (p.annotation is int)

    def change(what):
        if what == "defaults":
            g.__defaults__ = (7,)
        elif what == "annotations":
            g.__annotations__["b"] = float
        elif what == "signature":
            g.__signature__ = inspect.Signature([inspect.Parameter("b", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                                                   default=10)])
        return rand(0, 3), g
    check_each(f, lambda: change(None), lambda: change("defaults"), lambda: change("annotations"),
               lambda: change("signature"))


# --- functions made in the call ---------------------------------------------------------------------

def test_attributes_of_a_function_made_in_the_call():
    def f(x):
        def inner(y, k=2, *, m=3):
            """inner's doc"""
            return y * k
        code = inner.__code__
        return (inner(x) + inner.__defaults__[0] + inner.__kwdefaults__["m"] + code.co_argcount,
                inner.__name__, inner.__qualname__, inner.__module__, inner.__doc__, (lambda: "not a doc").__doc__,
                (lambda: 0).__defaults__, (lambda: 0).__kwdefaults__, code.co_varnames)
    check(f, t1)


def test_missing_attribute_of_a_function_made_in_the_call():
    def f(x):
        fn = lambda y: y
        try:
            return fn.__wrapped__(x)
        except AttributeError as e:
            return x + 1, str(e)
    check(f, t1)


# --- a decorator in the style of Hugging Face transformers -------------------------------------------

def fill_defaults(func):
    """Reads the wrapped function's parameter names and signature on every call."""
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        names = func.__code__.co_varnames[:func.__code__.co_argcount]
        bound = dict(zip(names, args))
        for name, param in inspect.signature(func).parameters.items():
            if name not in bound and name not in kwargs and param.default is not inspect.Parameter.empty:
                kwargs[name] = param.default
        if kwargs.get("scale") is None and "scale" in inspect.signature(func).parameters:
            kwargs["scale"] = 0.5
        if func.__name__ == "forward":
            kwargs["shift"] = kwargs["shift"] * 2
        return func(*args, **kwargs)
    return wrapper


class Decorated(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)

    @fill_defaults
    def forward(self, x, scale=None, shift=1.0):
        return self.lin(x) * scale + shift


@fill_defaults
def decorated_step(x, scale=None, *, shift=0.25):
    return x * scale + shift


def test_transformers_style_decorator():
    def f(x):
        return decorated_step(x) + decorated_step(x, scale=3.0)
    check(f, t1)
    check(Decorated(), t1)


def test_transformers_style_decorator_breaks_no_graph():
    def f(x):
        return decorated_step(x, shift=1.0)
    out = rewrite.explain(f)(rand(0, 3))
    assert out.graph_break_count == 0 and out.graph_count == 1
    model = Decorated()
    assert rewrite.explain(model)(rand(0, 3)).graph_break_count == 0


def test_unsupported_signature_target_breaks_not_silently():
    """A callable inspect.signature is not folded for: the graph breaks (fullgraph says so)."""
    def f(x):
        return x + len(inspect.signature(functools.partial(helper, 1)).parameters)
    with pytest.raises(rewrite.Unsupported):
        rewrite.jit(f, fullgraph=True)(rand(0, 3))


def test_fewer_defaults_after_the_call_compiled_are_seen():
    def g(x, a=1, b=2):
        return x * a + b

    def f(x):
        return g(x)
    compiled = rewrite.jit(eager_copy(f))
    torch.testing.assert_close(compiled(torch.ones(2)), f(torch.ones(2)))
    g.__defaults__ = (5,)  # `a` is required now: eager raises
    with pytest.raises(TypeError) as eager_error:
        f(torch.ones(2))
    with pytest.raises(TypeError) as compiled_error:
        compiled(torch.ones(2))
    assert str(compiled_error.value) == str(eager_error.value)
