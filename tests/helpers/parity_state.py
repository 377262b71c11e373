"""A module whose globals a test's helper writes with `global` (tests/test_parity.py)."""
FLAG = 0.0


def set_flag(value):
    global FLAG
    FLAG = value


def read_flag():
    return FLAG


KINDS = frozenset({int, float})  # (a global frozenset, as dataclasses' _ATOMIC_TYPES)


def is_kind(v):
    return type(v) in KINDS
