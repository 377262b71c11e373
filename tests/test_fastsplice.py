"""The raw-bytes splice (rewrite/bytecode/fastsplice.py) against the `bytecode`-library
splice: the same instructions, locations and exception table for every function of a few
stdlib modules, and the same behaviour when run."""
import dis
import importlib
import types

import pytest

from rewrite.bytecode import splice_prologue
from rewrite.bytecode.compat import FAST_SPLICE
from rewrite.bytecode.fastsplice import fast_splice
from rewrite.bytecode.splice import argument_names
from rewrite.dispatch import MISS, Slot

pytestmark = pytest.mark.skipif(not FAST_SPLICE, reason="the raw splice is written for the traced Pythons (compat.FAST_SPLICE)")

MODULES = ["argparse", "json.decoder", "inspect", "dataclasses", "textwrap", "statistics", "fractions"]


def code_objects(name):
    mod = importlib.import_module(name)
    out = []

    def walk(c):
        out.append(c)
        for k in c.co_consts:
            if isinstance(k, types.CodeType):
                walk(k)
    walk(compile(open(mod.__file__).read(), mod.__file__, "exec"))
    return [c for c in out if not c.co_flags & 0x3A0 and c.co_name != "<module>"]


def listing(code, skip_bypass=False):
    """Instructions as (name, argument, location); jump targets and offsets left out."""
    rows = [(i.opname, None if i.opcode in dis.hasjrel + dis.hasjabs else i.argval, i.positions)
            for i in dis.get_instructions(code)]
    if skip_bypass:  # the three instructions `if slot.off: <original>` after RESUME
        at = next(k for k, r in enumerate(rows) if r[0] == "RESUME") + 1
        rows = rows[:at] + rows[at + 3:]
    return rows


def _span(code, entry):
    """A handler's covered instructions and target, as instruction indices."""
    offsets = [i.offset for i in dis.get_instructions(code)]
    return offsets.index(entry.start) - len(offsets), offsets.index(entry.target) - len(offsets), \
        sum(entry.start <= o < entry.end for o in offsets)


def handlers(code):
    return [(e.depth, e.lasti) for e in dis._parse_exception_table(code)]


@pytest.mark.parametrize("name", MODULES)
def test_same_instructions_locations_and_handlers_as_the_bytecode_library(name):
    slot = Slot()
    for code in code_objects(name):
        fast = fast_splice(code, slot, MISS, argument_names(code))
        ref = splice_prologue(code, slot, MISS)
        assert listing(fast, skip_bypass=True) == listing(ref), code.co_qualname
        assert handlers(fast) == handlers(ref)
        # each handler covers the same instructions and lands on the same one
        assert [_span(fast, e) for e in dis._parse_exception_table(fast)] == \
            [_span(ref, e) for e in dis._parse_exception_table(ref)]
        assert fast.co_varnames == code.co_varnames and fast.co_qualname == code.co_qualname
        assert list(fast.co_lines())[-1][2] == list(ref.co_lines())[-1][2]


def test_spliced_functions_run_as_before_with_a_missing_slot_and_with_the_bypass():
    import statistics
    slot = Slot()
    slot.call = lambda *a: MISS  # (slot.entry: NEXT, no entries)
    calls = [("mean", ([1, 2, 3, 4],)), ("median", ([3, 1, 2],)), ("stdev", ([1.0, 2.0, 4.0],)),
             ("quantiles", ([1, 2, 3, 4, 5, 6, 7, 8],)), ("geometric_mean", ([1, 2, 4],))]
    for off in (False, True):
        slot.off = off
        for fname, args in calls:
            fn = getattr(statistics, fname)
            copy = types.FunctionType(fast_splice(fn.__code__, slot, MISS, argument_names(fn.__code__)),
                                      fn.__globals__, fname, fn.__defaults__, fn.__closure__)
            copy.__kwdefaults__ = fn.__kwdefaults__
            assert copy(*args) == fn(*args)


def test_exceptions_inside_keep_their_handlers_and_traceback_lines():
    def f(x):
        try:
            return 1 / x
        except ZeroDivisionError:
            return "caught"

    def g(x):
        return [1][x]

    slot = Slot()
    slot.call = lambda *a: MISS  # (slot.entry: NEXT, no entries)
    ff = types.FunctionType(fast_splice(f.__code__, slot, MISS, ("x",)), globals())
    gg = types.FunctionType(fast_splice(g.__code__, slot, MISS, ("x",)), globals())
    assert ff(0) == "caught" and ff(2) == 0.5
    with pytest.raises(IndexError) as info:
        gg(3)
    assert info.traceback[-1].lineno + 1 == g.__code__.co_firstlineno + 1
    assert "return [1][x]" in str(info.traceback[-1].statement)


def test_cells_free_variables_and_many_constants():
    n = 300  # constant and name indices past 255: EXTENDED_ARG in the prologue
    src = "def outer(a, b):\n    c = a\n    def inner(x, *args, k=1, **kw):\n        return x + c + k + len(args)\n"
    src += "".join(f"    v{i} = {i} + a\n" for i in range(n)) + "    return inner\n"
    ns = {}
    exec(src, ns)
    outer = ns["outer"]
    slot = Slot()
    seen = []
    # (slot.entry: NEXT, no entries)
    slot.call = lambda *a: seen.append(a) or MISS
    spliced = fast_splice(outer.__code__, slot, MISS, argument_names(outer.__code__))
    fn = types.FunctionType(spliced, ns)
    inner = fn(1, 2)
    assert inner(10) == 12 and seen == [(1, 2)]
    code = inner.__code__
    inner2 = types.FunctionType(fast_splice(code, slot, MISS, argument_names(code)), ns, "inner", None,
                                inner.__closure__)
    assert inner2(5, 1, 2, k=3) == 5 + 1 + 3 + 2
    assert seen[-1][:3] == (5, 3, (1, 2)) and seen[-1][-1] is inner.__closure__[0]
