"""What `jit` promises, one test per promise (in the spirit of tinygrad's test_jit_footguns.py).

Guarantees -- each holds for every call, the first (traced) one and cached ones alike:

  G1  the result is eager's: same types, values, dtypes, shapes, and the same object where
      eager returns an argument;
  G2  arguments are left as eager leaves them: in-place writes, attributes (and the order of
      an object's `__dict__`), list and dict contents, globals of any module;
  G3  an exception is eager's: same type and message, raised from the user's line (the last
      frame of its traceback), met by the user's `except` or swallowing `__exit__`;
  G4  global state moves as in eager: grad mode after the call, the random numbers drawn;
  G5  a guard that no longer holds recompiles: a new dtype, rank, value of a Python number,
      or an attribute that appears on an object, never reuses an entry made for another.

What makes a call run wholly eagerly (the original bytecode; it is still correct, and
`explain()` gives the reason):

  E1  the call raises and nothing of its own catches it (it raises from the user's line);
  E2  a graph break inside `try`, or inside a `with` over a context manager the tracer did not
      enter, or in a function that reads its own frame (`locals()`, `vars()`, `dir()`,
      `eval`, `exec`, `sys._getframe()`);
  E3  graph ops an `except` (or a user `__exit__`) covers, in a graph that writes into inputs,
      draws random numbers or switches inference_mode/autocast (it could not run again);
  E4  a backend whose compiled code raised where the captured graph does not: one warning,
      and that cache entry runs its calls eagerly from then on;
  E5  the recompile limit is reached: one warning naming the function and the last reason.
"""
import sys
import traceback
import warnings

import pytest
import torch

import rewrite
from rewrite import jit

from conftest import eager_copy, obj, same_calls


def reasons(fn):
    return [e.reason for e in rewrite.dispatcher_of(fn).entries]


# -- guarantees ----------------------------------------------------------------------------

def test_g1_results_and_identity_are_eagers():
    def f(x, lst):
        return x, lst, (x * 2).sum(dim=0), [t + 1 for t in lst]
    compiled = same_calls(f, lambda c: (torch.arange(6.0).reshape(3, 2) - c, [torch.ones(2)]))
    x, lst = torch.ones(3, 2), [torch.ones(2)]
    out = compiled(x, lst)
    assert out[0] is x and out[1] is lst


def test_g2_arguments_are_left_as_eager_leaves_them():
    def f(x, o, d, lst):
        x.mul_(2)
        o.count += 1
        o.last = x.sum()
        d["k"] = x[0]
        lst.append(x.mean())
        return x + 1
    same_calls(f, lambda c: (torch.ones(2) * c, obj(count=c), {"a": 1}, [1]))


def test_g3_exceptions_type_message_and_line():
    def f(x, d):
        y = x * 2
        return y + d["missing"]
    eager = eager_copy(f)
    for fn in (eager, jit(f)):
        with pytest.raises(KeyError) as info:
            fn(torch.ones(2), {})
        last = traceback.extract_tb(info.tb)[-1]
        assert (last.name, last.line) == ("f", 'return y + d["missing"]')


def test_g3_data_dependent_errors_meet_the_users_except():
    def f(x, i):
        try:
            return x[i] * 2
        except IndexError as e:
            return x.sum(), str(e)
    same_calls(f, lambda c: (torch.arange(3.0), torch.tensor([1, 9, 2][c])))


def test_g4_grad_mode_and_random_numbers_follow_eager():
    def f(x):
        with torch.no_grad():
            y = x * 2
        return y + torch.rand(3), torch.is_grad_enabled()

    def args(c):
        torch.manual_seed(c)
        return (torch.ones(3, requires_grad=True),)
    same_calls(f, args)
    assert torch.is_grad_enabled()


def test_g5_guards_recompile_instead_of_reusing_an_entry():
    def f(x, n, o):
        return x * n + getattr(o, "bias", 0)
    values = [(torch.ones(2), 2, obj()), (torch.ones(2, dtype=torch.float64), 2, obj()),
              (torch.ones(2, 2), 3, obj()), (torch.ones(2), 2, obj(bias=5))]
    compiled = same_calls(f, lambda c: values[c], calls=4)
    assert len(rewrite.dispatcher_of(compiled).entries) >= 3


# -- what runs the whole call eagerly --------------------------------------------------------

def test_e1_an_uncaught_raise_runs_eagerly_from_the_users_line():
    def f(x):
        y = x + 1
        raise ValueError(f"bad {y.shape[0]}")
    compiled = same_calls(f, lambda c: (torch.ones(2),))
    assert all(r is not None for r in reasons(compiled))


def test_e2_a_break_at_a_call_inside_try_resumes_at_the_call_under_the_handler():
    def f(x):
        y = x * 2
        try:
            print("", end="")
            return y + 1
        except RuntimeError:
            return x
    compiled = same_calls(f, lambda c: (torch.ones(2),))
    entry = rewrite.dispatcher_of(compiled).entries[0]
    assert entry.reason is None and entry.graph_break is not None and entry.graph_module is not None


def test_e2_a_break_at_another_step_inside_try_runs_the_whole_call_eagerly():
    def f(x):
        try:
            if x.sum() > 0:  # data-dependent: a break at the jump, inside the try
                return x + 1
            return x - 1
        except RuntimeError:
            return x
    compiled = same_calls(f, lambda c: (torch.ones(2),))
    assert reasons(compiled)[0] is not None


def test_e2_a_function_reading_its_frame_runs_eagerly():
    def f(x):
        y = x + 1
        return y * len(locals())
    compiled = same_calls(f, lambda c: (torch.ones(2),))
    assert "reads the frame" in reasons(compiled)[0]


def test_e3_ops_under_try_with_writes_into_inputs_run_eagerly():
    def f(x, i):
        x.add_(1)
        try:
            return x[i]
        except IndexError:
            return x.sum()
    compiled = same_calls(f, lambda c: (torch.zeros(3), torch.tensor([0, 5, 1][c])))
    assert reasons(compiled)[0] is not None


def test_e4_a_backend_raising_at_run_time_warns_once_then_runs_eagerly(monkeypatch):
    monkeypatch.setattr(rewrite.config, "strict", False)  # (strict mode makes it an InternalError instead)

    def broken(gm, example_inputs):
        def run(*args):
            raise RuntimeError("bad kernel")
        return run

    def f(x):
        return x.relu() + 1
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled = same_calls(f, lambda c: (torch.arange(3.0) - c,), backend=broken)
    assert sum("bad kernel" in str(w.message) for w in caught) == 1
    assert "bad kernel" in reasons(compiled)[0]


def test_e5_the_recompile_limit_warns_once_and_stays_correct(monkeypatch):
    monkeypatch.setattr(rewrite.config, "recompile_limit", 2)

    def f(x, n):
        return x + n
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        same_calls(f, lambda c: (torch.ones(2), [1.5, 2.5, 3.5, 4.5][c] if c < 4 else 0), calls=4,
                   dynamic=False)
    assert sum("recompile_limit" in str(w.message) for w in caught) == 1


def test_an_eager_run_is_still_eagers_for_every_python_construct():
    """Whatever made it run eagerly, the original bytecode runs: generators, closures, locals()."""
    def f(x, *args, **kwargs):
        total = 0

        def add(v):
            nonlocal total
            total += v
        for a in args:
            add(a)
        frame = sys._getframe()
        return x + total + len(kwargs), frame.f_code.co_name, sorted(locals())
    same_calls(f, lambda c: (torch.ones(2), 1, 2))
