"""Random plain-Python programs (no tensors) for fuzzing the rewrite itself (issue 3, item 6).

`python_programs()` is a Hypothesis strategy of `(source, func_name, args, kwargs)`: the
source text of a small module (a few globals and helpers, then `def f(...)`) and one call's
arguments as plain data (ints, floats, bools, strs, lists, dicts, tuples, sets; two
parameters may share one list) -- deep-copy them before each run. `program_cases()` gives a
`PyProgram`: the same plus a second argument set (most often the first one nudged: 1 ->
True, 0.0 -> -0.0, 7.0 -> 7, one item changed, a dict's keys reordered, two lists made one
-- what a guard must notice), `make_args()` (fresh deep copies, aliasing kept) and
`reproducer()` (a standalone script).

The programs are drawn from tables of constructs, with a typed environment so that most of
them run to the end instead of failing with a TypeError on their first line:

    expressions  int/float/bool/str arithmetic, //, %, ** (small literal exponents), bit ops,
                 comparisons (chained too), and/or/not, conditional expressions, indexing
                 and slicing (IndexError, KeyError), builtins (len, min, max, abs, sum,
                 sorted, reversed, enumerate, zip, map, filter, isinstance, int, float, str,
                 repr, round, divmod, any, all, next, iter, chr, ord), str methods, f-strings
                 (conversions and format specs), %-formatting, str.format, list/dict/set
                 displays with * and ** unpacking, list/dict/set comprehensions (two for
                 clauses too), generator expressions, lambdas (late-binding ones too), calls
                 of closures (positional, by keyword, *args, **kwargs), nested generator
                 functions consumed by list()/sum()/max()/next(), live iterators made now
                 and consumed later (iter, map, filter, reversed, dict views, generators)
    statements   assignment, augmented assignment, walrus (in an `if`, in a comprehension),
                 tuple/star/nested unpacking, swaps, mutation of lists/dicts/sets (local
                 copies, arguments, closures and globals alike), if/elif/else, for over
                 range/lists/tuples/strs/dict items/enumerate/zip/generators/iterators (with
                 else), while loops (bounded counters, with else), break/continue, nested
                 functions and closures (nonlocal, defaults read at definition time),
                 recursive closures, generator functions (yield, yield from, `x = yield`),
                 try/except/else/finally, raise (ValueError/KeyError/IndexError, from), bare
                 re-raise, assert, `global`, early returns (of the function's variables too)
    signatures   positional parameters, defaults (mutable ones too), keyword-only
                 parameters, *args, **kwargs; calls pass parameters positionally or by name

Swarm testing: each program draws which statement kinds and value types it may use at all,
so programs dense in a few constructs (and traced to the end) are common. Every program
compiles and terminates: loops run over small literal ranges, bounded counters, or carry a
hidden iteration cap; code that may run many times (loop bodies, nested functions) only
grows values by bounded steps; calls are left out where the estimated work would be large.

`check_program` is the differential oracle: the original function, one with every code
object spliced with an always-missing dispatcher prologue, and one under `rewrite.jit` must
agree call by call on the result (value, type, identity with the arguments), the exception
(type and message), and the state of the arguments, the defaults and the module's globals.
"""
from __future__ import annotations

import copy
import dataclasses
import hashlib
import itertools
import linecache
import math
import types

from hypothesis import strategies as st

INT, FLOAT, BOOL, STR, LIST, DICT, TUPLE, SET = "int", "float", "bool", "str", "list", "dict", "tuple", "set"
FUNC, GEN = "func", "gen"  # (p, q=...) -> int closures; (n) -> iterator of ints
ITER = "iter"  # a live iterator of ints, consumed later (maybe partly, maybe twice)
DATA = (INT, FLOAT, BOOL, STR, LIST, DICT, TUPLE, SET)

INT_LITS = [0, 1, 2, 3, -1, 5, 7, 10, -4, 100, 2 ** 31, -(10 ** 20)]
FLOAT_LITS = [0.0, 1.5, -2.5, 0.1, 3.0, -0.0, 1e300, 2.75, float("inf"), float("nan")]
STR_LITS = ["", "a", "ab", "Hello", "x y", "12", "a,b", "zz", " pad "]
KEYS = ["a", "b", "c", "k"]
FUNC_NAME = "f"

PRELUDE = '''\
G_K = 3
G_S = "g"
G_N = 0
LOG = []


def helper(p, q=2):
    return p * q + G_K


def ticks(n):
    for i in range(min(n, 3)):
        yield i * G_K


'''
# LOG holds values of any type: it is only appended to (and returned), never computed with
PRELUDE_VARS = {"G_K": INT, "G_S": STR, "G_N": INT, "LOG": "log", "helper": FUNC, "ticks": GEN}


def elements(options):
    """Like `st.sampled_from`, drawn by index: sampled_from hashes its elements, and functions
    and nan hash by identity (strs by a per-process seed), which made `derandomize=True` draw
    different programs from run to run."""
    options = list(options)
    return st.integers(0, len(options) - 1).map(options.__getitem__)


# value strategies, made once
SMALL_LITS = elements(INT_LITS[:9])
KEY_LITS = elements(KEYS)
ARG_KEYS = elements([*KEYS, "zz"])
EXTRA_KWARGS = elements(["z", "w"])
SMALL_INTS = st.integers(-6, 12) | elements([2 ** 40, -(2 ** 63), 10 ** 30])
FLOATS = (elements([0.0, -0.0, 1.5, -3.25, 0.1, 1e16, 7.0, float("inf"), float("nan")])
          | st.floats(-100, 100, allow_nan=False).map(lambda x: round(x, 2)))


# ------------------------------------------------------------------------------------------
# source text helpers
# ------------------------------------------------------------------------------------------

def lit(value) -> str:
    """A Python literal for `value`, always safe as an operand (negatives parenthesized)."""
    if isinstance(value, float):
        if math.isnan(value):
            return 'float("nan")'
        if math.isinf(value):
            return 'float("inf")' if value > 0 else '(-float("inf"))'
        text = repr(value)
        return f"({text})" if text.startswith("-") else text
    if isinstance(value, (bool, str)) or value is None:
        return repr(value)
    if isinstance(value, int):
        return f"({value})" if value < 0 else repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(lit(v) for v in value) + "]"
    if isinstance(value, tuple):
        return "(" + "".join(lit(v) + ", " for v in value) + ")"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{lit(k)}: {lit(v)}" for k, v in value.items()) + "}"
    if isinstance(value, set):
        return "{" + ", ".join(lit(v) for v in sorted(value)) + "}" if value else "set()"
    raise TypeError(type(value))


def indent(lines: list[str]) -> list[str]:
    return ["    " + line for line in lines]


def render_call_args(args: tuple, kwargs: dict) -> str:
    """Python statements that rebuild `args` and `kwargs` -- shared containers stay shared."""
    counts: dict[int, int] = {}

    def count(v):
        if isinstance(v, (list, dict, set)):
            counts[id(v)] = counts.get(id(v), 0) + 1
            if counts[id(v)] > 1:
                return
        if isinstance(v, (list, tuple, set)):
            for x in v:
                count(x)
        elif isinstance(v, dict):
            for x in v.values():
                count(x)

    for v in (*args, *kwargs.values()):
        count(v)
    shared = {i: f"shared{n}" for n, i in enumerate(i for i, c in counts.items() if c > 1)}
    lines = []
    done: set[int] = set()

    def render(v):
        if id(v) in shared:
            if id(v) not in done:
                done.add(id(v))
                lines.append(f"{shared[id(v)]} = {lit(v)}")
            return shared[id(v)]
        return lit(v)

    a = ", ".join(render(v) for v in args)
    k = ", ".join(f"{key!r}: {render(v)}" for key, v in kwargs.items())
    lines.append(f"args = ({a}{',' if len(args) == 1 else ''})")
    lines.append(f"kwargs = {{{k}}}")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------
# the generator
# ------------------------------------------------------------------------------------------

class Scope:
    """What a block may use: variables by type, which may be rebound, what loops enclose it."""

    def __init__(self, vars_: dict, assignable: set, glob: set, kind: str, loops: int = 0,
                 repeat: bool = False, depth: int = 0, weight: int = 1):
        self.vars = vars_  # name -> type
        self.assignable = assignable  # names this function may rebind
        self.glob = glob  # names that are module globals (never nonlocal)
        self.kind = kind  # "main", "inner" (returns an int) or "gen" (a generator)
        self.loops = loops  # loops around this block inside the same function
        self.repeat = repeat  # this code may run many times per call
        self.depth = depth  # statement nesting
        self.weight = weight  # about how many times this code runs per call of its function

    def child(self, **changes) -> Scope:
        s = Scope(dict(self.vars), set(self.assignable), set(self.glob), self.kind, self.loops,
                  self.repeat, self.depth + 1, self.weight)
        for k, v in changes.items():
            setattr(s, k, v)
        return s

    def with_vars(self, **vars_) -> Scope:
        s = self.child(depth=self.depth)
        s.vars.update(vars_)
        return s

    def of(self, ty) -> list[str]:
        return [n for n, t in self.vars.items() if t == ty]


SWARM_STATEMENTS = ("s_reassign", "s_augassign", "s_mutate", "s_unpack", "s_log", "s_cond_raise",
                    "s_cond_return", "s_assert", "s_call", "s_walrus", "s_if", "s_for", "s_while", "s_try",
                    "s_def", "s_lambda", "s_gendef", "s_iter", "s_recdef")
LOOP = 6  # the most iterations one loop (or comprehension over an argument) is assumed to run
COMP = 8
BUDGET = 3000  # calls are left out where the estimated work per call would exceed this


class Gen:
    MAX_DEPTH = 3  # statement nesting
    EXPR_DEPTH = 2

    def __init__(self, draw):
        self.draw = draw
        self.n = 0
        self.costs = {"helper": 1, "ticks": 3}  # callable -> estimated work per call
        self.work = [1]  # estimated work of the function bodies being generated
        self.in_fstring = False
        # swarm testing: each program draws which statements and types it may use at all,
        # so that programs dense in a few constructs (and traceable to the end) are common
        # (appending to the global LOG makes the whole call run eagerly: a few programs do it)
        self.stmts_on = {name for name in SWARM_STATEMENTS if self.chance(2 if name == "s_log" else 5)}
        self.types_on = {INT, LIST} | {t for t in (STR, BOOL, FLOAT, DICT, TUPLE, SET) if self.chance(2 if t == SET else 5)}

    # -- drawing ----------------------------------------------------------------------------
    def pick(self, options):
        return options[self.draw(st.integers(0, len(options) - 1))]

    def chance(self, p_in_8: int) -> bool:
        return self.draw(st.integers(0, 7)) < p_in_8

    def int_in(self, lo, hi) -> int:
        return self.draw(st.integers(lo, hi))

    def fresh(self, prefix="v") -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    def choose(self, cands):
        """Call one of the candidate zero-argument builders (the first ones shrink best)."""
        return self.pick(cands)()

    def spend(self, work: int) -> None:
        self.work[-1] = max(self.work[-1], work)

    def callables(self, sc, ty) -> list[str]:
        """Functions of type `ty` that may be called here without blowing the work budget."""
        return [n for n in sc.of(ty) if sc.weight * self.costs.get(n, 1) <= BUDGET]

    def call_of(self, sc, ty) -> str:
        name = self.pick(self.callables(sc, ty))
        self.spend(sc.weight * self.costs.get(name, 1))
        return name

    # -- atoms ------------------------------------------------------------------------------
    def literal(self, ty):
        if ty == INT:
            return lit(self.pick(INT_LITS))
        if ty == FLOAT:
            return lit(self.pick(FLOAT_LITS))
        if ty == BOOL:
            return lit(self.pick([True, False]))
        if ty == STR:
            return lit(self.pick(STR_LITS))
        if ty == LIST:
            return lit(self.draw(st.lists(SMALL_LITS, max_size=4)))
        if ty == DICT:
            keys = self.draw(st.lists(KEY_LITS, max_size=3, unique=True))
            return lit({k: self.pick(INT_LITS[:9]) for k in keys})
        if ty == TUPLE:
            return lit(tuple(self.draw(st.lists(SMALL_LITS, max_size=3))))
        if ty == SET:
            return lit(set(self.draw(st.lists(SMALL_LITS, max_size=3))))
        raise AssertionError(ty)

    def atom(self, sc, ty):
        names = sc.of(ty)
        if names and self.chance(5):
            return self.pick(names)
        return self.literal(ty)

    def small_int(self, sc):
        """An int expression that is small: for ranges and repetition counts."""
        return self.choose([
            lambda: lit(self.int_in(0, 4)),
            lambda: f"min({self.atom(sc, INT)}, {self.int_in(0, 4)})",
            lambda: f"({self.atom(sc, INT)} % {self.int_in(2, 5)})",
            lambda: f"len({self.atom(sc, LIST)}[:4])",
        ])

    def key(self, sc):
        return self.choose([lambda: lit(self.pick(KEYS)), lambda: self.atom(sc, STR)])

    def ty(self, *options):
        """One of the types `options` that this program uses (the first one if it uses none)."""
        return self.pick([t for t in options if t in self.types_on] or [options[0]])

    def any_type(self):
        return self.pick([t for t in (INT, LIST, STR, BOOL, FLOAT, DICT, TUPLE, INT, LIST, SET) if t in self.types_on])

    # -- expressions ------------------------------------------------------------------------
    def expr(self, sc, ty, d=None):
        d = self.EXPR_DEPTH if d is None else d
        if d <= 0 or self.chance(2):
            return self.atom(sc, ty)
        return getattr(self, "e_" + ty)(sc, d - 1)

    def comp_over(self, sc):
        """One `for` clause of a comprehension over ints, and the scope of what follows it."""
        v = self.fresh("c")
        c = [
            lambda: self.atom(sc, LIST),
            lambda: f"range({self.small_int(sc)})",
            lambda: self.atom(sc, TUPLE),
            lambda: f"sorted({self.atom(sc, self.ty(SET, LIST))})",
        ]
        if self.callables(sc, GEN):
            c.append(lambda: f"{self.call_of(sc, GEN)}({self.small_int(sc)})")
        src = self.choose(c)
        inner = sc.child(depth=sc.depth, weight=sc.weight * COMP)
        inner.vars[v] = INT
        return f"for {v} in {src}", inner

    def comp_tail(self, sc):
        clause, inner = self.comp_over(sc)
        if self.chance(3):
            clause += f" if {self.expr(inner, BOOL, 1)}"
        return clause, inner

    def genexp(self, sc, d, ty=INT):
        clause, inner = self.comp_tail(sc)
        return f"({self.expr(inner, ty, d)} {clause})"

    def comprehension(self, sc, d, ty=INT):
        """The inside of a list/set comprehension's brackets."""
        clause, inner = self.comp_tail(sc)
        if self.chance(1):  # a second for clause
            clause2, inner = self.comp_over(inner)
            clause += " " + clause2
        return f"{self.expr(inner, ty, d)} {clause}"

    def call_func(self, sc, d):
        name = self.call_of(sc, FUNC)
        a = self.expr(sc, INT, d)
        return self.choose([
            lambda: f"{name}({a})",
            lambda: f"{name}({a}, {self.expr(sc, INT, d)})",
            lambda: f"{name}({a}, q={self.expr(sc, INT, d)})",
            lambda: f"{name}(*[{a}])",
            lambda: f"{name}(**{{'p': {a}}})",
        ])

    def e_int(self, sc, d):
        e = lambda ty=INT: self.expr(sc, ty, d)
        c = [
            lambda: f"({e()} {self.pick(['+', '-', '*'])} {e()})",
            lambda: f"({e()} {self.pick(['//', '%'])} {e()})",
            lambda: f"({e()} ** {self.int_in(0, 3)})",
            lambda: f"(-{e()})",
            lambda: f"abs({e()})",
            lambda: f"({e()} {self.pick(['&', '|', '^'])} {e()})",
            lambda: f"({e()} {self.pick(['<<', '>>'])} {self.int_in(0, 3)})",
            lambda: f"len({e(self.ty(LIST, STR, DICT, TUPLE, SET))})",
            lambda: f"{self.pick(['min', 'max'])}({e()}, {e()})",
            lambda: f"max({e()}, {e()}, {e()})",
            lambda: f"({e()} if {e(BOOL)} else {e()})",
            lambda: f"{e(LIST)}[{e()}]",
            lambda: f"{e(TUPLE)}[{self.int_in(-2, 2)}]",
            lambda: f"{e(DICT)}[{self.key(sc)}]",
            lambda: f"{e(DICT)}.get({self.key(sc)}, {e()})",
            lambda: f"sum({e(self.ty(LIST, TUPLE))})",
            lambda: f"{self.pick(['min', 'max'])}({e(LIST)})",
            lambda: f"max({e(LIST)}, default={e()})",
            lambda: f"int({e(self.ty(FLOAT, BOOL))})",
            lambda: f"int({e(STR)})",
            lambda: f"round({e(FLOAT)})",
            lambda: f"{e(STR)}.{self.pick(['find', 'count'])}({e(STR)})",
            lambda: f"{e(LIST)}.index({e()})",
            lambda: f"{e(LIST)}.count({e()})",
            lambda: f"({e(BOOL)} + {e()})",
            lambda: f"sum({self.genexp(sc, d)})",
            lambda: f"len([{self.comprehension(sc, d)}])",
            lambda: f"divmod({e()}, {e()})[{self.int_in(0, 1)}]",
            lambda: f"next(iter({e(LIST)}), {e()})",
            lambda: f"(lambda p, q=1: {self.expr(sc.with_vars(p=INT, q=INT), INT, d)})({e()})",
            lambda: f"int({e(FLOAT)} // 1)",
            lambda: f"sorted({e(LIST)}, key=lambda t: ({self.pick(['-t', 't % 3', 'abs(t)'])}, t))[0]",
        ]
        if self.callables(sc, FUNC):
            c += [lambda: self.call_func(sc, d)] * 3
        if self.callables(sc, GEN):
            g = lambda: f"{self.call_of(sc, GEN)}({self.small_int(sc)})"
            c += [lambda: f"sum({g()})", lambda: f"max({g()}, default={e()})", lambda: f"next({g()}, {e()})",
                  # close() (None; 3.13: what the generator returned), send, the generator's class
                  lambda: f"(lambda g: next(g, 0) + (g.close() or 0) + next(g, {e()}))({g()})",
                  lambda: f"(lambda g: next(g, 0) + g.send(None))({g()})",
                  lambda: f"(lambda g: len(type(g).__name__) + next(g, {e()}))({g()})"]
        if sc.of(ITER):
            it = lambda: self.pick(sc.of(ITER))
            c += [lambda: f"next({it()}, {e()})", lambda: f"sum({it()})", lambda: f"max({it()}, default={e()})",
                  lambda: f"len(list({it()}))"]
        return self.choose(c)

    def e_float(self, sc, d):
        e = lambda ty=FLOAT: self.expr(sc, ty, d)
        num = lambda: e(self.ty(FLOAT, INT))
        return self.choose([
            lambda: f"({num()} {self.pick(['+', '-', '*'])} {num()})",
            lambda: f"({num()} / {num()})",
            lambda: f"({num()} {self.pick(['//', '%'])} {num()})",
            lambda: f"({e()} ** {self.int_in(-1, 3)})",
            lambda: f"({e(INT)} ** {self.int_in(-2, -1)})",
            lambda: f"float({e(INT)})",
            lambda: f"float({lit(self.pick(['1.5', '-0', 'inf', '2e3', 'nan']))})",
            lambda: f"abs({e()})",
            lambda: f"(-{e()})",
            lambda: f"round({e()}, {self.int_in(0, 2)})",
            lambda: f"{self.pick(['min', 'max'])}({num()}, {e()})",
            lambda: f"({e()} if {e(BOOL)} else {num()})",
            lambda: f"sum([{e()}, {num()}])",
            lambda: f"(sum({e(LIST)}) / len({e(LIST)}))",
            lambda: f"({e(TUPLE)}[0] * 0.5)",
        ])

    def e_bool(self, sc, d):
        e = lambda ty=INT: self.expr(sc, ty, d)
        cmp = lambda: self.pick(["<", "<=", ">", ">=", "==", "!="])
        c = [
            lambda: f"({e()} {cmp()} {e()})",
            lambda: f"({e(FLOAT)} {cmp()} {e(self.ty(INT, FLOAT))})",
            lambda: f"({e(STR)} {cmp()} {e(STR)})",
            lambda: f"({e()} {cmp()} {e()} {cmp()} {e()})",
            lambda: f"(not {e(BOOL)})",
            lambda: f"({e(BOOL)} {self.pick(['and', 'or'])} {e(BOOL)})",
            lambda: f"({e()} {self.pick(['in', 'not in'])} {e(self.ty(LIST, TUPLE, SET))})",
            lambda: f"({self.key(sc)} in {e(DICT)})",
            lambda: f"({e(STR)} in {e(STR)})",
            lambda: f"isinstance({e(self.any_type())}, {self.pick(['int', 'float', 'str', 'list', 'bool', 'dict', '(int, float)', '(list, tuple)'])})",
            lambda: f"{e(STR)}.{self.pick(['startswith', 'endswith'])}({e(STR)})",
            lambda: f"{e(STR)}.{self.pick(['isdigit', 'isalpha', 'isupper', 'islower'])}()",
            lambda: f"{self.pick(['any', 'all'])}({self.genexp(sc, d, BOOL)})",
            lambda: f"{self.pick(['any', 'all'])}({e(LIST)})",
            lambda: f"bool({e(self.any_type())})",
            lambda: f"({e(LIST)} == {e(LIST)})",
            lambda: f"({e(LIST)} < {e(LIST)})",
            lambda: f"({e(DICT)} == {e(DICT)})",
            lambda: f"({e(TUPLE)} {cmp()} {e(TUPLE)})",
            lambda: f"({(e(ty := self.ty(SET, LIST)))} <= {e(ty)})",
            lambda: f"({e(FLOAT)} != {e(FLOAT)})",
            lambda: f"{e(FLOAT)}.is_integer()",
        ]
        lists = sc.of(LIST)
        if lists:
            c.append(lambda: f"({self.pick(lists)} is {self.pick(lists)})")
        if sc.of(ITER):  # `in` consumes an iterator up to the first match
            c.append(lambda: f"({e()} in {self.pick(sc.of(ITER))})")
        return self.choose(c)

    def fstring(self, sc, d):
        parts = []
        self.in_fstring = True
        try:
            for _ in range(self.int_in(1, 3)):
                ty = self.ty(INT, STR, FLOAT, LIST, BOOL, TUPLE)
                val = self.expr(sc, ty, d).replace('"', "'")
                if self.chance(2):
                    parts.append(self.pick(["-", ":", "", "x=", " "]))
                spec = ""
                if ty == INT and self.chance(3):
                    spec = self.pick([":03d", ":>4", ":x", ":+", ":,"])
                elif ty == FLOAT and self.chance(3):
                    spec = self.pick([":.2f", ":e", ":>8.1f", ":g"])
                elif ty == STR and self.chance(3):
                    spec = self.pick(["!r", ":>5", ":^6", ":.2"])
                elif self.chance(2):
                    spec = self.pick(["!r", "!s"])
                # parenthesized: a dict display, lambda or `!=` inside stays one expression
                parts.append("{" + (val if val.isidentifier() else f"({val})") + spec + "}")
        finally:
            self.in_fstring = False
        return 'f"' + "".join(parts) + '"'

    def e_str(self, sc, d):
        e = lambda ty=STR: self.expr(sc, ty, d)
        c = [
            lambda: f"({e()} + {e()})",
            lambda: f"({e()} * {self.int_in(0, 3)})",
            lambda: f"{e()}.{self.pick(['upper', 'lower', 'strip', 'title', 'swapcase', 'lstrip'])}()",
            lambda: f"{e()}.replace({e()}, {e()})",
            lambda: f"{e()}[{self.int_in(-3, 3)}:{self.pick(['', '2', '-1', '5'])}]",
            lambda: f"{e()}[{e(INT)}]",
            lambda: f"str({e(self.any_type())})",
            lambda: f"repr({e(self.any_type())})",
            lambda: f"{lit(self.pick([',', '', '-', ' ']))}.join(str({(v := self.fresh('c'))}) for {v} in {e(LIST)})",
            lambda: f"{lit(self.pick([',', '+']))}.join(sorted({e(DICT)}))",
            lambda: f"({lit(self.pick(['%s-%d', '%r:%x', '[%s] %05d']))} % ({e()}, {e(INT)}))",
            lambda: f"{e()}.split({lit(self.pick([',', ' ']))})[{self.int_in(-1, 1)}]",
            lambda: f"{lit(self.pick(['-', ':']))}.join({e()}.split())",
            lambda: f"({e()} if {e(BOOL)} else {e()})",
            lambda: f"{e()}.center({self.int_in(0, 7)}, {lit(self.pick(['*', '.']))})",
            lambda: f"{e()}.zfill({self.int_in(0, 5)})",
            lambda: f"{lit(self.pick(['{}-{}', '{1}{0}', '{!r}{}']))}.format({e(INT)}, {e()})",
            lambda: f"chr(65 + {e(INT)} % 26)",
            lambda: f"({e()} or {lit(self.pick(STR_LITS[1:]))})",
        ]
        if not self.in_fstring:
            c += [lambda: self.fstring(sc, d)] * 2
        return self.choose(c)

    def e_list(self, sc, d):
        e = lambda ty=LIST: self.expr(sc, ty, d)
        c = [
            lambda: f"[{', '.join(self.expr(sc, INT, d) for _ in range(self.int_in(0, 3)))}]",
            lambda: f"list({e(self.ty(LIST, TUPLE, SET))})",
            lambda: f"({e()} + {e()})",
            lambda: f"({e()} * {self.int_in(0, 2)})",
            lambda: f"{e()}[{self.pick(['', '1', '-2'])}:{self.pick(['', '2', '-1'])}{self.pick(['', ':2', ':-1'])}]",
            lambda: f"sorted({e(self.ty(LIST, TUPLE, SET))}{self.pick(['', ', reverse=True', ', key=abs', ', key=lambda t: -t'])})",
            lambda: f"[{self.comprehension(sc, d)}]",
            lambda: f"list(range({self.small_int(sc)}))",
            lambda: f"list(range({self.int_in(-2, 2)}, {self.int_in(0, 6)}, {self.pick([1, 2, -1])}))",
            lambda: f"[*{e()}, {self.expr(sc, INT, d)}]",
            lambda: f"[*{e(TUPLE)}, *{e()}]",
            lambda: f"list({e(DICT)}.values())",
            lambda: f"[{(i := self.fresh('c'))} * {(v := self.fresh('c'))} for {i}, {v} in enumerate({e()})]",
            lambda: f"[{(a := self.fresh('c'))} - {(b := self.fresh('c'))} for {a}, {b} in zip({e()}, {e()})]",
            lambda: f"list(map(lambda t: t {self.pick(['+', '*', '%'])} {self.int_in(1, 3)}, {e()}))",
            lambda: f"list(reversed({e()}))",
            lambda: f"list(filter(None, {e()}))",
            # late binding: every lambda sees the comprehension variable's last value
            lambda: f"[{(h := self.fresh('c'))}() for {h} in [lambda: {(v := self.fresh('c'))} * 2 for {v} in {e()}]]",
            lambda: f"[{(h := self.fresh('c'))}() for {h} in [lambda {(v := self.fresh('c'))}={v}: {v} + 1 for {v} in {e()}]]",
            lambda: f"[ord({(ch := self.fresh('c'))}) for {ch} in {self.expr(sc, STR, d)}]",
            lambda: f"list(divmod({self.expr(sc, INT, d)}, {self.expr(sc, INT, d)}))",
        ]
        if self.callables(sc, GEN):
            c += [lambda: f"list({self.call_of(sc, GEN)}({self.small_int(sc)}))"] * 2
        if sc.of(ITER):
            c += [lambda: f"list({self.pick(sc.of(ITER))})", lambda: f"sorted({self.pick(sc.of(ITER))})"]
        return self.choose(c)

    def e_dict(self, sc, d):
        e = lambda ty=DICT: self.expr(sc, ty, d)
        return self.choose([
            lambda: "{" + ", ".join(f"{self.key(sc)}: {self.expr(sc, INT, d)}" for _ in range(self.int_in(0, 3))) + "}",
            lambda: f"dict({e()})",
            lambda: f"{{**{e()}, {self.key(sc)}: {self.expr(sc, INT, d)}}}",
            lambda: f"{{**{e()}, **{e()}}}",
            lambda: f"{{{(k := self.fresh('c'))}: {(v := self.fresh('c'))} * 2 for {k}, {v} in {e()}.items() if {v} {self.pick(['>', '!=', '<='])} {self.int_in(-1, 2)}}}",
            lambda: f"{{str({(v := self.fresh('c'))}): {v} for {v} in {self.expr(sc, LIST, d)}}}",
            lambda: f"dict(zip({self.expr(sc, STR, d)}, {self.expr(sc, LIST, d)}))",
            lambda: f"dict({self.pick(KEYS)}={self.expr(sc, INT, d)}, {self.pick(['x', 'y'])}={self.expr(sc, INT, d)})",
            lambda: f"({e()} | {e()})",
            lambda: f"dict.fromkeys({self.expr(sc, STR, d)}, {self.expr(sc, INT, d)})",
        ])

    def e_tuple(self, sc, d):
        e = lambda ty=TUPLE: self.expr(sc, ty, d)
        return self.choose([
            lambda: "(" + "".join(self.expr(sc, INT, d) + ", " for _ in range(self.int_in(0, 3))) + ")",
            lambda: f"tuple({e(LIST)})",
            lambda: f"divmod({self.expr(sc, INT, d)}, {self.expr(sc, INT, d)})",
            lambda: f"(*{e()}, {self.expr(sc, INT, d)})",
            lambda: f"({e()} + {e()})",
            lambda: f"{e()}[::{self.pick([1, -1, 2])}]",
            lambda: f"tuple(sorted({e(self.ty(SET, LIST))}))",
            lambda: f"tuple({self.genexp(sc, d)})",
        ])

    def e_set(self, sc, d):
        e = lambda ty=SET: self.expr(sc, ty, d)
        return self.choose([
            lambda: "{" + ", ".join(self.expr(sc, INT, d) for _ in range(self.int_in(1, 3))) + "}",
            lambda: f"set({self.expr(sc, self.ty(LIST, TUPLE), d)})",
            lambda: f"{{{self.comprehension(sc, d)}}}",
            lambda: f"({e()} {self.pick(['|', '&', '-', '^'])} {e()})",
            lambda: f"{{{(v := self.fresh('c'))} % {self.int_in(2, 4)} for {v} in {self.expr(sc, LIST, d)}}}",
        ])

    # -- statements -------------------------------------------------------------------------
    def block(self, sc, lo=1, hi=2) -> list[str]:
        lines: list[str] = []
        for _ in range(self.int_in(lo, hi)):
            stmt, terminal = self.statement(sc)
            lines += stmt
            if terminal:
                break
        return lines or ["pass"]

    def statement(self, sc) -> tuple[list[str], bool]:
        """One statement (maybe compound) and whether it always leaves the block."""
        cands = [self.s_assign, self.s_assign, self.s_reassign, self.s_augassign, self.s_mutate,
                 self.s_mutate, self.s_unpack, self.s_log, self.s_cond_raise, self.s_cond_return,
                 self.s_assert, self.s_call, self.s_walrus, self.s_iter]
        if sc.depth < self.MAX_DEPTH and (sc.depth == 0 or self.chance(4)):
            cands += [self.s_if, self.s_for, self.s_while, self.s_try, self.s_def, self.s_lambda,
                      self.s_gendef, self.s_recdef]
        if sc.loops:
            cands += [self.s_break_continue] * 2
        if sc.kind == "gen":
            cands += [self.s_yield] * 3
        if "G_N" in sc.assignable:
            cands.append(self.s_global)
        cands = [c for c in cands if c.__name__ not in SWARM_STATEMENTS or c.__name__ in self.stmts_on] or [self.s_assign]
        return self.pick(cands)(sc)

    def new_var(self, sc, ty) -> str:
        name = self.fresh()
        sc.vars[name] = ty
        sc.assignable.add(name)
        return name

    def s_assign(self, sc):
        ty = self.any_type()
        value = self.expr(sc, ty)
        return [f"{self.new_var(sc, ty)} = {value}"], False

    def s_walrus(self, sc):
        """An assignment expression: in an `if` (always bound after it) or a comprehension's
        condition (bound only if it ran: never read afterwards)."""
        if self.chance(4):
            v = self.fresh()
            line = f"if ({v} := {self.expr(sc, INT)}) {self.pick(['>', '==', '<='])} {self.int_in(-1, 3)}:"
            body = self.block(sc.child().with_vars(**{v: INT}), 1, 1)
            sc.vars[v] = INT
            sc.assignable.add(v)
            return [line, *indent(body)], False
        y, c = self.fresh("w"), self.fresh("c")
        line = f" = [{y} for {c} in {self.atom(sc, LIST)} if ({y} := {c} * 2) > {self.int_in(-1, 4)}]"
        return [self.new_var(sc, LIST) + line], False

    def bounded(self, sc, ty, value):
        """Under `repeat`, keep a value that feeds back into itself from growing without bound."""
        if not sc.repeat:
            return value
        if ty == INT:
            return f"({value}) % {self.pick([7, 97, 1000, -13])}"
        if ty == FLOAT:
            return f"float({value})"  # an int in a float variable would square itself huge
        if ty in (STR, LIST, TUPLE):
            return f"({value})[:{self.int_in(2, 8)}]"
        return value

    def s_reassign(self, sc):
        names = sorted(n for n in sc.assignable if sc.vars.get(n) in DATA)
        if not names:
            return self.s_assign(sc)
        name = self.pick(names)
        ty = sc.vars[name]
        return [f"{name} = {self.bounded(sc, ty, self.expr(sc, ty))}"], False

    def s_augassign(self, sc):
        names = sorted(n for n in sc.assignable if sc.vars.get(n) in (INT, FLOAT, STR, LIST, SET))
        if not names:
            return self.s_assign(sc)
        name = self.pick(names)
        ty = sc.vars[name]
        if ty == INT:
            op = self.pick(["+=", "-=", "*=", "//=", "%=", "|=", "^=", "<<="])
            if sc.repeat and op in ("*=", "<<="):
                return [f"{name} {op} {self.pick([2, -1, 1])}"], False
            return [f"{name} {op} {self.atom(sc, INT) if op != '<<=' else self.int_in(0, 3)}"], False
        if ty == FLOAT:
            op = self.pick(["+=", "-=", "*=", "/="])
            rhs = self.literal(FLOAT) if sc.repeat and op in ("*=", "/=") else self.atom(sc, self.ty(FLOAT, INT))
            return [f"{name} {op} {rhs}"], False
        if ty == STR:
            rhs = self.literal(STR) if sc.repeat else self.atom(sc, STR)
            return [f"{name} += {rhs}"], False
        if ty == SET:
            return [f"{name} {self.pick(['|=', '&=', '-=', '^='])} {self.expr(sc, SET, 1)}"], False
        rhs = f"[{self.atom(sc, INT)}]" if sc.repeat else self.expr(sc, LIST, 1)
        return [f"{name} += {rhs}"], False

    def s_mutate(self, sc):
        # containers made inside the function (v...) are preferred: the tracer replays mutation of those
        lists, dicts, sets = ([n for n in sc.of(ty) for _ in range(3 if n.startswith("v") else 1)]
                              for ty in (LIST, DICT, SET))
        i = lambda: self.expr(sc, INT, 1)
        c = []
        if lists:
            xs = lambda: self.pick(lists)
            c += [
                lambda: f"{xs()}.append({i()})",
                lambda: f"{xs()}.insert({self.int_in(-1, 2)}, {i()})",
                lambda: f"{xs()}[{i()}] = {i()}",
                lambda: f"{xs()}[{i()}] += {i()}",
                lambda: f"{xs()}.extend([{i()}, {i()}])",
                lambda: f"{xs()}.pop()",
                lambda: f"{xs()}.pop({self.int_in(-1, 1)})",
                lambda: f"{xs()}.remove({i()})",
                lambda: f"{xs()}.sort({self.pick(['', 'reverse=True', 'key=abs'])})",
                lambda: f"{xs()}.reverse()",
                lambda: f"del {xs()}[{self.int_in(-1, 1)}]",
                lambda: f"{xs()}[{self.int_in(0, 1)}:{self.int_in(1, 3)}] = [{i()}]",
                lambda: f"{xs()}.clear()",
            ]
        if dicts:
            dd = lambda: self.pick(dicts)
            c += [
                lambda: f"{dd()}[{self.key(sc)}] = {i()}",
                lambda: f"{(n := dd())}[{(k := self.key(sc))}] = {n}.get({k}, 0) + {i()}",
                lambda: f"{dd()}.pop({self.key(sc)}, None)",
                lambda: f"del {dd()}[{self.key(sc)}]",
                lambda: f"{dd()}.update({{{self.key(sc)}: {i()}}})",
                lambda: f"{dd()}.setdefault({self.key(sc)}, {i()})",
                lambda: f"{dd()}.popitem()",
            ]
        if sets:
            c += [lambda: f"{self.pick(sets)}.{self.pick(['add', 'discard'])}({i()})",
                  lambda: f"{self.pick(sets)}.remove({i()})"]
        if not c:
            return self.s_assign(sc)
        return [self.choose(c)], False

    def s_unpack(self, sc):
        a, b, c = self.fresh(), self.fresh(), self.fresh()
        cands = [
            lambda: (f"{a}, {b} = {self.expr(sc, INT)}, {self.expr(sc, INT)}", {a: INT, b: INT}),
            lambda: (f"{a}, {b} = divmod({self.expr(sc, INT)}, {self.expr(sc, INT)})", {a: INT, b: INT}),
            lambda: (f"{a}, *{b} = {self.expr(sc, LIST)} + [{self.expr(sc, INT, 1)}]", {a: INT, b: LIST}),
            lambda: (f"*{a}, {b} = {self.expr(sc, LIST)}", {a: LIST, b: INT}),
            lambda: (f"({a}, {b}), {c} = ({self.expr(sc, INT, 1)}, {self.expr(sc, STR, 1)}), {self.expr(sc, LIST, 1)}",
                     {a: INT, b: STR, c: LIST}),
            lambda: (f"{a}, {b} = {self.expr(sc, TUPLE)}", {a: INT, b: INT}),
            lambda: (f"{a}, {b}, *{c} = {self.expr(sc, STR)}", {a: STR, b: STR}),  # c: a list of strs
            lambda: (f"[{a}, {b}] = sorted({self.expr(sc, DICT)}.items())[:1] + [('z', {self.expr(sc, INT, 1)})]", {}),
            lambda: ((f"{(acc := self.fresh())} = ''\n"
                      f"for {a}, ({b}, {c}) in enumerate(zip({self.atom(sc, LIST)}, {self.atom(sc, STR)})):\n"
                      f"    {acc} += f'{{{a}}}{{{b}}}{{{c}}}'"), {acc: STR}),
        ]
        ints = sorted(n for n in sc.assignable if sc.vars.get(n) == INT)
        if len(ints) >= 2:
            x, y = self.pick(ints), self.pick(ints)
            cands.append(lambda: (f"{x}, {y} = {y}, {x}", {}))
        line, types_ = self.choose(cands)
        for n, ty in types_.items():
            sc.vars[n] = ty
            sc.assignable.add(n)
        return line.split("\n"), False

    def s_log(self, sc):
        return [f"LOG.append({self.expr(sc, self.any_type(), 1)})"], False

    def s_cond_raise(self, sc):
        exc = self.choose([
            lambda: f"ValueError({self.fstring(sc, 1)})",
            lambda: f"KeyError({self.key(sc)})",
            lambda: "ValueError",
            lambda: f"IndexError({self.expr(sc, INT, 1)})",
        ])
        return [f"if {self.expr(sc, BOOL)}:", f"    raise {exc}"], False

    def return_value(self, sc) -> str:
        """What follows `return` (with its leading space)."""
        if sc.kind == "inner":
            return " " + self.expr(sc, INT)
        if sc.kind == "gen":
            return ""
        value = self.choose([
            lambda: self.expr(sc, self.any_type()),
            lambda: "(" + ", ".join(self.expr(sc, self.any_type(), 1) for _ in range(self.int_in(2, 3))) + ")",
            lambda: "[" + ", ".join(self.expr(sc, self.any_type(), 1) for _ in range(self.int_in(0, 2))) + "]",
            lambda: "{" + ", ".join(f"{lit(k)}: {self.expr(sc, self.any_type(), 1)}" for k in KEYS[:self.int_in(0, 3)]) + "}",
            lambda: "None",
            lambda: self.pick(sorted(n for n, t in sc.vars.items() if t in DATA or n == "LOG")),
        ])
        if self.chance(7):  # the function's own variables too: a wrong value anywhere shows
            names = [n for n, t in sc.vars.items() if t in DATA and n not in PRELUDE_VARS]
            if names:
                value = f"{value}, [{', '.join(names)}]"
        return " " + value

    def s_cond_return(self, sc):
        return [f"if {self.expr(sc, BOOL)}:", f"    return{self.return_value(sc)}"], False

    def s_assert(self, sc):
        msg = f", {self.fstring(sc, 1)}" if self.chance(4) else ""
        return [f"assert {self.expr(sc, BOOL)}{msg}"], False

    def s_call(self, sc):
        if self.callables(sc, FUNC):
            return [self.call_func(sc, 1)], False
        return self.s_assign(sc)

    def s_global(self, sc):
        return [f"G_N += {self.atom(sc, INT)}"], False

    def s_break_continue(self, sc):
        word = self.pick(["break", "continue"])
        if self.chance(3):
            return [word], True
        return [f"if {self.expr(sc, BOOL)}:", f"    {word}"], False

    def s_yield(self, sc):
        return [self.choose([
            lambda: f"yield {self.expr(sc, INT)}",
            lambda: f"yield from range({self.small_int(sc)})",
            lambda: f"yield from {self.atom(sc, LIST)}[:3]",
            lambda: self.yield_assign(sc),
        ])], False

    def yield_assign(self, sc):
        value = self.atom(sc, INT)  # before the new name exists
        return f"{self.new_var(sc, INT)} = (yield {value})"

    def s_iter(self, sc):
        """A lazy iterator made now and consumed later: it sees what happens in between
        (appends to its list, rebinding of the variables its lambda reads, dict updates)."""
        xs = lambda: self.atom(sc, LIST)
        c = [
            lambda: f"iter({xs()})",
            lambda: f"map(lambda t: t {self.pick(['+', '*', '-'])} {self.atom(sc, INT)}, {xs()})",
            lambda: f"filter(lambda t: t > {self.atom(sc, INT)}, {xs()})",
            lambda: f"({(v := self.fresh('c'))} * {self.atom(sc.with_vars(**{v: INT}), INT)} for {v} in {xs()})",
            lambda: f"reversed({xs()})",
            lambda: f"{self.atom(sc, DICT)}.values()",
            lambda: f"iter(range({self.small_int(sc)}))",
        ]
        if self.callables(sc.child(weight=sc.weight * COMP), FUNC):
            c.append(lambda: f"map({self.call_of(sc.child(weight=sc.weight * COMP), FUNC)}, {xs()})")
        if self.callables(sc, GEN):
            c.append(lambda: f"{self.call_of(sc, GEN)}({self.small_int(sc)})")
        value = self.choose(c)
        name = self.fresh("it")
        sc.vars[name] = ITER
        return [f"{name} = {value}"], False

    def s_recdef(self, sc):
        """A recursive closure, at most a few levels deep."""
        name = self.fresh("fn")
        inner, decl = self.inner_scope(sc, {"p": INT, "q": INT}, "inner")
        inner.assignable.discard("q")  # the depth counter: rebinding it could recurse forever
        self.costs[name] = BUDGET + 1  # the body calls itself only in its tail

        def make():
            body = decl + [f"if q <= 0 or q > {self.int_in(1, 4)}:", f"    return {self.expr(inner, INT, 1)}"]
            if self.chance(4):
                body += self.block(inner, 1, 1)
            op = self.pick(["+", "-", "*", "%"])
            body.append(f"return {name}({self.expr(inner, INT, 1)}, q - 1) {op} {self.expr(inner, INT, 1)}")
            return body

        body, cost = self.function_body(make)
        sc.vars[name] = FUNC
        self.costs[name] = cost * 5
        return [f"def {name}(p, q={self.int_in(0, 4)}):", *indent(body)], False

    def s_if(self, sc):
        lines = [f"if {self.expr(sc, BOOL)}:", *indent(self.block(sc.child()))]
        for _ in range(self.int_in(0, 2)):
            lines += [f"elif {self.expr(sc, BOOL)}:", *indent(self.block(sc.child()))]
        if self.chance(4):
            lines += ["else:", *indent(self.block(sc.child()))]
        return lines, False

    def loop_scope(self, sc, **vars_):
        inner = sc.child(loops=sc.loops + 1, repeat=True, weight=sc.weight * LOOP)
        inner.vars.update(vars_)
        self.spend(inner.weight)
        return inner

    def s_for(self, sc):
        a, b = self.fresh("i"), self.fresh("i")
        c = [  # (head, loop variables, whether the iterable may grow while iterated or be long)
            lambda: (f"for {a} in range({self.small_int(sc)}):", {a: INT}, False),
            lambda: (f"for {a} in range({self.int_in(-1, 2)}, {self.int_in(0, 5)}):", {a: INT}, False),
            lambda: (f"for {a} in {self.atom(sc, LIST)}:", {a: INT}, True),
            lambda: (f"for {a}, {b} in enumerate({self.atom(sc, LIST)}):", {a: INT, b: INT}, True),
            lambda: (f"for {a}, {b} in zip({self.atom(sc, LIST)}, {self.atom(sc, self.ty(LIST, TUPLE))}):",
                     {a: INT, b: INT}, True),
            lambda: (f"for {a}, {b} in {self.atom(sc, DICT)}.items():", {a: STR, b: INT}, False),
            lambda: (f"for {a} in {self.atom(sc, DICT)}:", {a: STR}, False),
            lambda: (f"for {a} in {self.atom(sc, TUPLE)}:", {a: INT}, True),
            lambda: (f"for {a} in {self.atom(sc, STR)}:", {a: STR}, True),
            lambda: (f"for {a} in sorted({self.atom(sc, self.ty(SET, LIST))}):", {a: INT}, False),
            lambda: (f"for {a} in reversed({self.atom(sc, LIST)}):", {a: INT}, True),
        ]
        if sc.of(ITER):
            c.append(lambda: (f"for {a} in {self.pick(sc.of(ITER))}:", {a: INT}, True))
        if self.callables(sc.child(weight=sc.weight * LOOP), GEN):
            c.append(lambda: (f"for {a} in {self.call_of(sc, GEN)}({self.small_int(sc)}):", {a: INT}, False))
        head, vars_, needs_cap = self.choose(c)
        body_sc = self.loop_scope(sc, **vars_)
        lines, body = [], []
        if needs_cap:  # a list may grow while it is iterated: a hidden cap keeps the loop finite
            cap = self.fresh("n")
            lines.append(f"{cap} = 0")
            body += [f"{cap} += 1", f"if {cap} > {self.int_in(3, LOOP)}:", "    break"]
        body += self.block(body_sc)
        lines += [head, *indent(body)]
        if self.chance(2):
            lines += ["else:", *indent(self.block(sc.child()))]
        return lines, False

    def s_while(self, sc):
        w = self.fresh("w")
        body_sc = self.loop_scope(sc, **{w: INT})  # the counter is read, never rebound
        cond_sc = sc.child(depth=sc.depth, weight=body_sc.weight)
        if self.chance(4):
            extra = f" and {self.expr(cond_sc, BOOL, 1)}" if self.chance(3) else ""
            head = [f"{w} = 0", f"while {w} < {self.int_in(0, 4)}{extra}:", f"    {w} += 1"]
        else:
            extra = f" or {self.expr(body_sc, BOOL, 1)}" if self.chance(3) else ""
            head = [f"{w} = 0", "while True:", f"    {w} += 1", f"    if {w} > {self.int_in(1, 4)}{extra}:", "        break"]
        lines = head + indent(self.block(body_sc))
        if self.chance(2):
            lines += ["else:", *indent(self.block(sc.child()))]
        return lines, False

    def s_try(self, sc):
        body = self.block(sc.child(), 1, 3)
        if self.chance(2):
            body = [f"if {self.expr(sc, BOOL)}:",
                    f"    raise {self.pick(['ValueError', 'KeyError'])}({self.expr(sc, STR, 1)})", *body]
        lines = ["try:", *indent(body)]
        handlers = self.int_in(0, 2)
        finally_ = handlers == 0 or self.chance(3)
        for _ in range(handlers):
            exc = self.pick(["ValueError", "KeyError", "(KeyError, IndexError)", "ZeroDivisionError",
                             "LookupError", "ArithmeticError", "Exception", "TypeError"])
            hsc = sc.child()
            hbody = []
            e = None
            if self.chance(4):
                e = self.fresh("e")
                hbody.append(f"{self.new_var(hsc, STR)} = str({e})[:10]")
                head = f"except {exc} as {e}:"
            else:
                head = f"except {exc}:"
            hbody += self.block(hsc, 1, 2)
            if self.chance(1):
                hbody.append("raise")
            elif e is not None and self.chance(1):
                hbody.append(f"raise ValueError({self.literal(STR)}) from {e}")
            lines += [head, *indent(hbody)]
        if handlers and self.chance(2):
            lines += ["else:", *indent(self.block(sc.child(), 1, 2))]
        if finally_:
            lines += ["finally:", *indent(self.block(sc.child(), 1, 2))]
        return lines, False

    def inner_scope(self, sc, params: dict, kind: str) -> tuple[Scope, list[str]]:
        """The scope of a nested function's body: the enclosing names are free (read-only)
        unless declared nonlocal; its own parameters are its own."""
        inner = Scope({**sc.vars, **params}, set(params), set(sc.glob), kind, 0, True, sc.depth + 1, 1)
        decl = []
        candidates = sorted(n for n in sc.assignable
                            if sc.vars.get(n) in (INT, STR, LIST) and n not in sc.glob and n not in params)
        if candidates and self.chance(3):
            name = self.pick(candidates)
            decl.append(f"nonlocal {name}")
            inner.assignable.add(name)
        return inner, decl

    def function_body(self, make):
        self.work.append(1)
        try:
            lines = make()
        finally:
            cost = self.work.pop()
        return lines, cost

    def s_def(self, sc):
        name = self.fresh("fn")
        default = self.atom(sc, INT)  # a variable's value at definition time
        inner, decl = self.inner_scope(sc, {"p": INT, "q": INT}, "inner")
        body, cost = self.function_body(lambda: decl + self.block(inner, 1, 3) + [f"return {self.expr(inner, INT)}"])
        sc.vars[name] = FUNC
        self.costs[name] = cost
        return [f"def {name}(p, q={default}):", *indent(body)], False

    def s_lambda(self, sc):
        name = self.fresh("lm")
        inner = sc.with_vars(p=INT, q=INT)
        inner.weight = 1
        default = self.atom(sc, INT)
        body, cost = self.function_body(lambda: self.expr(inner, INT))
        sc.vars[name] = FUNC
        self.costs[name] = cost
        return [f"{name} = lambda p, q={default}: {body}"], False

    def s_gendef(self, sc):
        name = self.fresh("gen")
        inner, decl = self.inner_scope(sc, {"n": INT}, "gen")
        i = self.fresh("i")

        def make():
            body = decl + (self.block(inner, 1, 1) if decl else [])
            loop_sc = self.loop_scope(inner, **{i: INT})
            body += [f"for {i} in range(min(n, {self.int_in(1, 4)})):",
                     *indent(self.block(loop_sc, 1, 2) + [f"yield {self.expr(loop_sc, INT)}"])]
            if self.chance(3):
                body.append(f"yield {self.expr(inner, INT)}")
            return body

        body, cost = self.function_body(make)
        sc.vars[name] = GEN
        self.costs[name] = cost
        return [f"def {name}(n):", *indent(body)], False

    # -- the function and its call ------------------------------------------------------------
    def value(self, ty, pool):
        """An argument value of type `ty` (a list may be one already in `pool`: aliasing)."""
        small = SMALL_INTS
        if ty == INT:
            return self.draw(small)
        if ty == FLOAT:
            return self.draw(FLOATS)
        if ty == BOOL:
            return self.draw(st.booleans())
        if ty == STR:
            return self.draw(st.text(alphabet="ab, 1Z", max_size=5))
        if ty == LIST:
            if pool and self.chance(1):
                return self.pick(pool)
            xs = self.draw(st.lists(small, max_size=4))
            pool.append(xs)
            return xs
        if ty == DICT:
            keys = self.draw(st.lists(ARG_KEYS, max_size=3, unique=True))
            return {k: self.draw(small) for k in keys}
        if ty == TUPLE:
            return tuple(self.draw(st.lists(small, max_size=3)))
        if ty == SET:
            return set(self.draw(st.lists(st.integers(-3, 5), max_size=3)))
        raise AssertionError(ty)

    def alt_value(self, ty, pool):
        """Another argument of a compatible type: the guards see bools for ints, ints for floats."""
        if ty == INT and self.chance(1):
            return self.draw(st.booleans())
        if ty == FLOAT and self.chance(2):
            return self.draw(st.integers(-3, 3))
        return self.value(ty, pool)

    def program(self) -> PyProgram:
        params = []  # (name, type, default source or None)
        for i in range(self.int_in(0, 4)):
            params.append((f"a{i}", self.any_type(), None))
        n_defaults = self.int_in(0, len(params))
        for i in range(len(params) - n_defaults, len(params)):
            name, ty, _ = params[i]
            default = "[]" if ty == LIST and self.chance(3) else self.literal(ty)  # a shared mutable default
            params[i] = (name, ty, default)
        star = self.chance(2)
        kwonly = []
        for i in range(self.int_in(0, 2)):
            ty = self.ty(INT, STR, LIST, BOOL)
            kwonly.append((f"k{i}", ty, self.literal(ty) if self.chance(4) else None))
        dstar = self.chance(2)

        sig = [name if default is None else f"{name}={default}" for name, _, default in params]
        if star:
            sig.append("*args")
        elif kwonly:
            sig.append("*")
        sig += [name if default is None else f"{name}={default}" for name, _, default in kwonly]
        if dstar:
            sig.append("**kw")

        vars_ = dict(PRELUDE_VARS)
        vars_.update({name: ty for name, ty, _ in params + kwonly})
        if star:
            vars_["args"] = TUPLE
        if dstar:
            vars_["kw"] = DICT
        uses_global = self.chance(1)
        assignable = {name for name, _, _ in params + kwonly} | ({"G_N"} if uses_global else set())
        sc = Scope(vars_, assignable, set(PRELUDE_VARS), "main")
        body = ["global G_N"] if uses_global else []
        # local copies of container arguments: the tracer replays mutation of those
        for name, ty, _ in params + kwonly:
            if ty in (LIST, DICT, SET) and self.chance(5):
                body.append(f"{self.new_var(sc, ty)} = {ty}({name})")
        if self.chance(4):
            value = self.expr(sc, LIST)
            body.append(f"{self.new_var(sc, LIST)} = {value}")
        body += self.block(sc, 1, 5)
        if body[-1].split(" ", 1)[0] not in ("return", "raise"):
            body.append(f"return{self.return_value(sc)}")
        source = PRELUDE + f"def {FUNC_NAME}({', '.join(sig)}):\n" + "".join(f"    {line}\n" for line in body)

        calls = []
        for value in (self.value, self.alt_value):
            pool: list = []
            args, kwargs = [], {}
            by_name = False
            extra = [value(INT, pool) for _ in range(self.int_in(0, 2))] if star else []
            for name, ty, default in params:
                if default is not None and not extra and self.chance(3):
                    by_name = True  # omitted: the default is used; the rest must go by name
                    continue
                if by_name or (not extra and self.chance(1)):
                    by_name = True
                    kwargs[name] = value(ty, pool)
                else:
                    args.append(value(ty, pool))
            args += extra
            for name, ty, default in kwonly:
                if default is None or self.chance(4):
                    kwargs[name] = value(ty, pool)
            if dstar:
                for k in self.draw(st.lists(EXTRA_KWARGS, max_size=2, unique=True)):
                    kwargs[k] = value(INT, pool)
            calls.append((tuple(args), kwargs))
        if self.chance(5):  # the second set: the first one, nudged (what a guard must notice)
            calls[1] = self.nudge(*calls[0])
        return PyProgram(source, FUNC_NAME, *calls[0], *calls[1])

    def nudge(self, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        """A copy of one argument set with one or two small changes: 1 -> True, 0.0 -> -0.0,
        7.0 -> 7, one list item changed, a dict's keys reordered, two lists made one."""
        args, kwargs = copy.deepcopy((list(args), dict(kwargs)))
        slots = [(args, i) for i in range(len(args))] + [(kwargs, k) for k in kwargs]
        if not slots:
            return tuple(args), kwargs
        for _ in range(self.int_in(1, 2)):
            where, key = self.pick(slots)
            where[key] = self.nudged(where[key], [c[k] for c, k in slots if isinstance(c[k], list)])
        if len(kwargs) > 1 and self.chance(2):  # the same keyword arguments in another order
            kwargs = dict(reversed(list(kwargs.items())))
        return tuple(args), kwargs

    def nudged(self, v, lists):
        if isinstance(v, bool):
            return self.pick([int(v), not v])
        if isinstance(v, int):
            return self.pick([v + 1, -v, bool(v) if v in (0, 1) else v - 1, float(v)])
        if isinstance(v, float):
            if v == 0.0:
                return -v
            return self.pick([int(v) if v.is_integer() else v + 0.5, -v, float("nan")])
        if isinstance(v, str):
            return self.pick([v + "a", v[1:], v.upper(), " "])
        if isinstance(v, list):
            c = [lambda: v + [self.pick(INT_LITS[:9])], lambda: v[1:]]
            if v:
                c.append(lambda: [self.nudged(v[0], [])] + v[1:])
            others = [x for x in lists if x is not v]
            if others:
                c.append(lambda: self.pick(others))  # now the same list as another argument
            return self.choose(c)
        if isinstance(v, tuple):
            return tuple(self.nudged(list(v), []))
        if isinstance(v, dict):
            items = list(v.items())
            if len(items) > 1 and self.chance(4):
                return dict(reversed(items))  # equal, but iterates in another order
            return {**v, self.pick(KEYS + ["zz"]): self.pick(INT_LITS[:9])}
        if isinstance(v, set):
            return v | {self.int_in(-3, 5)}
        return v


@dataclasses.dataclass(frozen=True)
class PyProgram:
    source: str
    func_name: str
    args: tuple
    kwargs: dict
    alt_args: tuple = ()
    alt_kwargs: dict = dataclasses.field(default_factory=dict)

    def make_args(self, alt: bool = False) -> tuple[tuple, dict]:
        """Fresh deep copies of one argument set (shared containers stay shared)."""
        return copy.deepcopy((self.alt_args, self.alt_kwargs) if alt else (self.args, self.kwargs))

    def reproducer(self, calls=(False,), how: str = "jit") -> str:
        """A standalone script: the program run as written and then `how` ("jit": under
        rewrite.jit; "splice": every code object spliced with an always-missing prologue;
        "hook": instrumented as `python -m rewrite.hook` instruments a module) on
        the successive argument sets `calls` (False: the first set, True: the second),
        printing each call's outcome and the arguments after it."""
        lines = ["import rewrite", "from rewrite.fuzz.pyprograms import always_missing_slot, load, splice_all", "",
                 "src = '''\\", *self.source.splitlines(), "'''", "",
                 "def call(f, args, kwargs):",
                 "    try:",
                 "        return repr(f(*args, **kwargs)), args, kwargs",
                 "    except Exception as e:",
                 "        return f'{type(e).__name__}: {e}', args, kwargs", "",
                 f"for how in ('original', {how!r}):"]
        if how == "splice":
            lines += ["    slot, miss = always_missing_slot()",
                      (f"    f, ns = load(src, {self.func_name!r}, "
                       "(lambda code: splice_all(code, slot, miss)) if how == 'splice' else None)")]
        elif how == "hook":
            lines[1] += ", hook_all"
            lines += [f"    f, ns = load(src, {self.func_name!r}, hook_all if how == 'hook' else None)"]
        else:
            lines += [f"    f, ns = load(src, {self.func_name!r})", "    if how == 'jit':", "        rewrite.jit(f)"]
        for alt in calls:
            args, kwargs = (self.alt_args, self.alt_kwargs) if alt else (self.args, self.kwargs)
            lines += indent(render_call_args(args, kwargs).splitlines())
            lines.append("    print(how, *call(f, args, kwargs), ns.get('LOG'), ns.get('G_N'))")
        return "\n".join(lines) + "\n"


@st.composite
def program_cases(draw) -> PyProgram:
    """Strategy: a `PyProgram` (source, function name, two argument sets)."""
    return Gen(draw).program()


def python_programs():
    """Strategy: `(source, func_name, args, kwargs)`; deepcopy args/kwargs before each run."""
    return program_cases().map(lambda p: (p.source, p.func_name, p.args, p.kwargs))


# ------------------------------------------------------------------------------------------
# the oracle
# ------------------------------------------------------------------------------------------

def load(source: str, func_name: str = FUNC_NAME, transform=None, first_line: int = 1):
    """Exec `source` into a fresh namespace (`transform` may rewrite the module's code object
    first); returns (function, namespace). `first_line` numbers the source's first line."""
    filename = f"<pyprogram-{hashlib.sha1(source.encode()).hexdigest()[:10]}-{first_line}>"
    text = "\n" * (first_line - 1) + source
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    code = compile(text, filename, "exec")
    if transform is not None:
        code = transform(code)
    ns: dict = {"__name__": "pyprogram"}
    exec(code, ns)
    return ns[func_name], ns


def splice_all(code: types.CodeType, slot, miss) -> types.CodeType:
    """Every function code object inside `code` (nested ones, lambdas, comprehensions),
    spliced with the prologue; generator code is left as it is (its inner code is not)."""
    from rewrite.bytecode import splice_prologue  # (deferred: generating programs imports no torch)
    from rewrite.bytecode.compat import CO_GENERATOR_LIKE  # (deferred: generating programs imports no torch)

    consts = tuple(splice_all(c, slot, miss) if isinstance(c, types.CodeType) else c for c in code.co_consts)
    if consts != code.co_consts:
        code = code.replace(co_consts=consts)
    if code.co_name != "<module>" and not code.co_flags & CO_GENERATOR_LIKE:
        code = splice_prologue(code, slot, miss)
    return code


def hook_all(code: types.CodeType) -> types.CodeType:
    """The module's code instrumented as the import hook does it (raw splice, first-call decision)."""
    from rewrite.dispatch import Options  # (deferred: generating programs imports no torch)
    from rewrite.hook.instrument import instrument  # (deferred: generating programs imports no torch)
    return instrument(code, Options())


def always_missing_slot():
    from rewrite.dispatch import MISS, Slot  # (deferred: generating programs imports no torch)

    slot = Slot()
    slot.call, slot.name = (lambda *a: MISS), "fuzz"  # slot.entry: NEXT (no entries)
    return slot, MISS


def same(a, b) -> bool:
    """Equal values of identical types, containers recursively (dict order too), -0.0 is not
    0.0, nan equals nan."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return a == b


def _sharing(result, roots: dict) -> list:
    """Which containers of the result are argument/global objects, or repeat within it."""
    where: dict[int, str] = {}

    def index(v, path):
        if isinstance(v, (list, dict, set)) and id(v) not in where:
            where[id(v)] = path
        if isinstance(v, (list, tuple)):
            for i, x in enumerate(v):
                index(x, f"{path}[{i}]")
        elif isinstance(v, dict):
            for k, x in v.items():
                index(x, f"{path}[{k!r}]")

    for name, root in roots.items():
        index(root, name)
    out = []

    def walk(v, path):
        if isinstance(v, (list, dict, set)):
            if id(v) in where:
                out.append((path, where[id(v)]))
                return
            where[id(v)] = path
        if isinstance(v, (list, tuple)):
            for i, x in enumerate(v):
                walk(x, f"{path}[{i}]")
        elif isinstance(v, dict):
            for k, x in v.items():
                walk(x, f"{path}[{k!r}]")

    walk(result, "result")
    return out


@dataclasses.dataclass
class Outcome:
    kind: str  # "return" or "raise"
    value: object  # the result (deep-copied) or (exception type, message)
    sharing: list
    state: object  # deep copy of (args, kwargs, defaults, kwdefaults, LOG, G_N) after the call

    def describe(self) -> str:
        if self.kind == "raise":
            return f"raised {self.value[0].__name__}: {self.value[1]}"
        return f"returned {self.value!r} (type {type(self.value).__name__}; sharing {self.sharing})"

    def same_as(self, other: Outcome) -> bool:
        if self.kind != other.kind or not same(self.state, other.state):
            return False
        if self.kind == "raise":
            if self.value[0] is RecursionError:  # the message says where the limit was hit
                return other.value[0] is RecursionError
            return self.value[0] is other.value[0] and self.value[1] == other.value[1]
        return same(self.value, other.value) and self.sharing == other.sharing


def run_once(fn, ns: dict, args: tuple, kwargs: dict) -> Outcome:
    """Call `fn(*args, **kwargs)` (the caller passes fresh copies) and record what happened."""
    try:
        result = fn(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 -- every exception is an outcome to compare
        kind, value, sharing = "raise", (type(e), str(e)), []
    else:
        roots = {"args": args, "kwargs": kwargs, "LOG": ns.get("LOG")}
        kind, sharing = "return", _sharing(result, roots)
        value = copy.deepcopy(result)
    # the arguments after the call (mutated or not), the defaults, the module's globals
    state = copy.deepcopy((args, kwargs, fn.__defaults__, fn.__kwdefaults__, ns.get("LOG"), ns.get("G_N")))
    return Outcome(kind, value, sharing, state)


class KnownBug(Exception):
    """A difference `check_program` was told to expect (see its `known_bugs`)."""


_programs_loaded = itertools.count()


def check_program(prog: PyProgram, jit_calls=(False, False, True, False), known_bugs=()) -> None:
    """The differential oracle: original vs spliced vs jitted vs hooked (instrumented as the
    import hook does it), call by call. `jit_calls` are
    the argument sets of the jitted function's successive calls (False: the first set, True:
    the second); the original and the spliced function are called alongside each time.
    Raises AssertionError with a ready-to-paste reproducer on any difference -- or KnownBug
    where one of `known_bugs`, predicates `(who, expected, got) -> bool`, accepts it.

    Every run numbers the source from a new first line, so the code objects of two runs of
    one program never compare equal: rewrite caches by code object, code objects compare by
    value, and examples must not see each other (resume functions were once shared by equal
    code objects across modules)."""
    import rewrite  # (deferred: generating programs imports no torch)

    first_line = 1 + next(_programs_loaded) % 100_000
    slot, miss = always_missing_slot()
    original, ns_o = load(prog.source, prog.func_name, first_line=first_line)
    spliced, ns_s = load(prog.source, prog.func_name, lambda code: splice_all(code, slot, miss), first_line)
    jitted, ns_j = load(prog.source, prog.func_name, first_line=first_line)
    hooked, ns_h = load(prog.source, prog.func_name, hook_all, first_line)
    rewrite.jit(jitted)
    for i, alt in enumerate(jit_calls):
        expected = run_once(original, ns_o, *prog.make_args(alt))
        got = {"spliced": run_once(spliced, ns_s, *prog.make_args(alt)),
               "jitted": run_once(jitted, ns_j, *prog.make_args(alt)),
               "hooked": run_once(hooked, ns_h, *prog.make_args(alt))}
        for who, outcome in got.items():
            if outcome.same_as(expected):
                continue
            for bug in known_bugs:
                if bug(who, expected, outcome):
                    raise KnownBug(f"{bug.__doc__ or bug}: {outcome.describe()}")
            reasons = ""
            if who == "jitted":
                try:
                    reasons = "\njit entries: " + repr([e.reason for e in rewrite.dispatcher_of(jitted).entries])
                except ValueError:
                    pass
            calls = jit_calls[:i + 1]
            raise AssertionError(
                f"{who} function differs from the original on call {i + 1} "
                f"({'second' if alt else 'first'} argument set)\n"
                f"original: {expected.describe()}\n   state: {expected.state!r}\n"
                f"{who:>8}: {outcome.describe()}\n   state: {outcome.state!r}{reasons}\n"
                "   (state: args, kwargs, __defaults__, __kwdefaults__, LOG, G_N after the call)\n"
                f"--- reproducer ---\n{prog.reproducer(calls, {'jitted': 'jit', 'spliced': 'splice'}.get(who, 'hook'))}")
