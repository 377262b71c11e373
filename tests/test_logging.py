"""Log records from compiled code (issue 19, item 3: transformers' `logger.warning_once` in
the loss): a Logger's emitting methods are nodes of the graph, called where eager calls them,
at the user's line (the record's filename, line and function are eager's), with eager's
arguments; `warning_once` still warns once."""
import functools
import logging

import pytest
import torch

import rewrite
from conftest import assert_same, eager_copy

log = logging.getLogger("rewrite_tests.logging")


@functools.lru_cache(None)
def warning_once(self, *args):
    self.warning(*args)


class Records(logging.Handler):
    def __init__(self):
        super().__init__()
        self.records = []

    def emit(self, record):
        self.records.append((record.levelname, record.getMessage(), record.filename, record.lineno, record.funcName))


def capture():
    handler = Records()
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False
    return handler


def records_as_eager(f, **options):
    """`f` jitted with `options` gives eager's results and eager's records, call after call
    (the compiling one too); the jitted function."""
    handler = capture()
    try:
        x = torch.randn(3)
        expected = f(x)
        eager_records = list(handler.records)
        handler.records.clear()
        compiled = rewrite.jit(eager_copy(f), **options)
        for _ in range(2):
            assert_same(compiled(x), expected)
            assert handler.records == eager_records
            handler.records.clear()
        return compiled
    finally:
        log.removeHandler(handler)


@pytest.mark.parametrize("backend", ["python", "eager", "aot_eager"])
def test_log_records_come_from_the_graph_in_order_at_the_users_line(backend):
    """Under every backend: the `eager` backend runs fx's code for the graph, which writes a
    log node's logger method as an attribute read, not as its repr (a SyntaxError once);
    torch's backends trace a graph by running it, so its records are made by the entry after
    their code ran (once on the compiling call, and on every call after it)."""
    def f(x):
        y = x * 2
        log.info("scaled by %d", 2)
        z = y.relu()
        log.warning("shape %s", tuple(z.shape))
        return z + 1

    records_as_eager(f, fullgraph=True, backend=backend)


def test_warning_once_as_transformers_adds_it_warns_once():
    saved = logging.Logger.__dict__.get("warning_once")  # (transformers puts its own there)
    logging.Logger.warning_once = warning_once
    try:
        def f(x):
            log.warning_once("loss type unrecognised")
            return x.sum()

        handler = capture()
        compiled = rewrite.jit(eager_copy(f), fullgraph=True)
        for _ in range(3):
            assert_same(compiled(torch.ones(2)), torch.tensor(2.0))
        assert [r[1] for r in handler.records] == ["loss type unrecognised"]
        log.removeHandler(handler)
    finally:
        if saved is None:
            del logging.Logger.warning_once
        else:
            logging.Logger.warning_once = saved
        warning_once.cache_clear()


def test_a_logger_that_is_another_object_next_call_recompiles():
    other = logging.getLogger("rewrite_tests.logging.other")

    def f(logger, x):
        logger.info("hi")
        return x + 1

    handler, other_handler = capture(), Records()
    other.addHandler(other_handler)
    other.setLevel(logging.INFO)
    other.propagate = False
    compiled = rewrite.jit(eager_copy(f))
    compiled(log, torch.ones(1))
    compiled(other, torch.ones(1))
    assert [r[1] for r in handler.records] == ["hi"] and [r[1] for r in other_handler.records] == ["hi"]
    log.removeHandler(handler)
    other.removeHandler(other_handler)


def test_torch_logs_is_an_alias_of_rewrite_logs():
    """TORCH_LOGS="graph_breaks,recompiles,guards,graph_code" prints what REWRITE_LOGS with
    rewrite's names prints (torch's own names rewrite has no category for are left to torch)."""
    import os
    import subprocess
    import sys
    code = ("import torch, rewrite\n"
            "@rewrite.jit\n"
            "def f(x):\n"
            "    print('hi')\n"
            "    return x + 1\n"
            "f(torch.ones(2)); f(torch.ones(2, 2))\n")
    env = {k: v for k, v in os.environ.items() if k not in ("TORCH_LOGS", "REWRITE_LOGS")}
    env["REWRITE_PERSISTENT_CACHE"] = "off"  # (both runs compile: the second would load the first's entries)

    def run(**extra):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                             env={**env, **extra})
        return [line for line in out.stderr.splitlines() if line.startswith("[rewrite.")]
    torch_named = run(TORCH_LOGS="+graph_breaks,recompiles,guards,graph_code,inductor")
    ours = run(REWRITE_LOGS="graph_breaks,recompiles,guards,output_code")
    assert torch_named == ours
    assert {line.split("]")[0] for line in ours} >= {"[rewrite.graph_breaks", "[rewrite.recompiles",
                                                     "[rewrite.guards", "[rewrite.output_code"}


def test_a_record_of_a_value_the_graph_computes_under_torchs_backend_runs_eagerly():
    """A record of a tensor cannot wait for the graph's end (its value may change before it):
    for a backend of torch's, the call runs eagerly, with eager's records."""
    def f(x):
        y = x * 2
        log.warning("sum %s", y.sum())
        return y + 1

    compiled = records_as_eager(f, backend="aot_eager")
    assert "log record of a value the graph computes" in rewrite.dispatcher_of(compiled).entries[0].reason
