"""Fuzz the rewrite itself (issue 3, item 6): random plain-Python programs from
`fuzz.pyprograms`, each run three ways -- as written, with every code object spliced with
an always-missing dispatcher prologue, and under `rewrite.jit` -- must agree call by call:
the result (value, type, identity with the arguments), the exception (type and message),
and the final state of the arguments, the defaults and the module's globals."""
from __future__ import annotations

from hypothesis import HealthCheck, given, note, settings

import rewrite
from fuzz.pyprograms import check_program, program_cases


@settings(max_examples=600, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(program_cases())
def test_random_programs_behave_the_same(prog):
    note(prog.reproducer())
    rewrite.reset()
    check_program(prog)
