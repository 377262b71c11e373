"""What makes a first call cheap changes nothing a call computes: the trace's own nodes name
as torch.fx's do, ops that write nothing run without the write check
(writes into inputs still found), the guard closure compiled only when first needed, the
REWRITE_LOGS=perf_hints report. Each against eager."""
import logging

import pytest
import torch

import rewrite
from rewrite import dispatcher_of, jit

from conftest import CompileCounter, assert_same, eager_copy


def _chain(x, w):
    y = torch.relu(x @ w) * 2 + x.sum(-1, keepdim=True)
    z = y.transpose(0, 1).reshape(-1)[:5]
    return torch.nn.functional.layer_norm(y, y.shape[-1:]), z.softmax(0)


def test_the_trace_names_its_nodes_as_torch_fx_names_them():
    """The trace's own nodes (rewrite.nodes) are named by fx's rules: its graph, handed to a
    backend, reads as the graph torch.fx makes of the same ops in the same order."""
    x, w = torch.randn(4, 4), torch.randn(4, 4)
    counter = CompileCounter()
    fn = jit(eager_copy(_chain), backend=counter)
    assert_same(fn(x, w), _chain(x, w))
    gm = counter.graphs[0]
    made, env = torch.fx.Graph(), {}
    for n in gm.graph.nodes:  # the same ops, named by torch.fx itself
        if n.op == "placeholder":
            env[n] = made.placeholder(n.target)
        elif n.op == "output":
            made.output(torch.fx.node.map_arg(n.args[0], env.__getitem__))
        else:
            env[n] = made.create_node(n.op, n.target, torch.fx.node.map_arg(n.args, env.__getitem__),
                                      torch.fx.node.map_arg(n.kwargs, env.__getitem__))
    assert torch.fx.GraphModule(torch.nn.Module(), made).code == gm.code
    assert_same(gm(x, w), _chain(x, w))


def test_pure_ops_on_inputs_and_writes_into_inputs():
    """Ops that write nothing read inputs without the write check; an in-place op on an input
    is still found (the trace runs again on copies) and the entry writes as eager does."""
    def f(x, p):
        y = torch.nn.functional.linear(x, p) + x.mean()
        x.add_(1)
        return y, x * 2
    for _ in range(2):
        args = (torch.randn(3, 3), torch.nn.Parameter(torch.randn(3, 3)))
        want_args = tuple(a.detach().clone() for a in args)
        with torch.no_grad():
            got = jit(f)(*args)
            want = eager_copy(f)(*want_args)
        assert_same(got, want)
        assert_same(args[0], want_args[0])


def test_the_guard_closure_is_compiled_when_first_needed():
    def f(x):
        return x * 2 + 1
    fn = jit(f)
    x = torch.randn(3)
    assert_same(fn(x), eager_copy(f)(x))
    entry = dispatcher_of(fn).entries[0]
    assert entry.guard._fn is None  # (the entry inlines the checks: the first call needs no closure)
    y = torch.randn(5, 2)
    assert_same(fn(y), eager_copy(f)(y))  # (a miss: the first entry's closure is asked)
    assert entry.guard._fn is not None and entry.guard(x) and not entry.guard(torch.randn(5, 2))


def test_perf_hints_report_the_phases():
    from rewrite import logs
    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record.getMessage())
    keep = Keep()
    logs.get("perf_hints").addHandler(keep)
    logs.set_logs("perf_hints")
    try:
        x, w = torch.randn(4, 4), torch.randn(4, 4)
        assert_same(jit(eager_copy(_chain))(x, w), _chain(x, w))
    finally:
        logs.set_logs("")
        logs.get("perf_hints").removeHandler(keep)
    assert records and all(phase in records[0] for phase in ("trace", "backend", "guards", "codegen", "load", "ops"))


@pytest.mark.parametrize("where", ["call", "jump", "step"])
def test_breaks_resume_at_their_instruction(where):
    """Checkpoints are kept only where a break may resume (calls, jumps, eager steps): a break
    at each kind still resumes there."""
    def at_call(x):
        y = x + 1
        print("", end="")
        return y * 2

    def at_jump(x):
        y = x * 3
        if y.sum() > 0:
            return y + 1
        return y - 1

    def at_step(x):
        y = x - 2
        y.unknown = 1  # (a tensor attribute set: the entry runs the store eagerly)
        return y * y

    fn = {"call": at_call, "jump": at_jump, "step": at_step}[where]
    counter = CompileCounter()
    compiled = jit(fn, backend=counter)
    for _ in range(2):
        x = torch.randn(4)
        assert_same(compiled(x.clone()), eager_copy(fn)(x.clone()))
    assert counter.frame_count >= 2  # (the graph before the break, and the resume function's)


def test_writes_into_inputs_no_op_read_go_on_on_copies(monkeypatch):
    """A BatchNorm in training writes its running stats in the op that first reads them: the
    trace goes on on copies from there (one trace, not two); an input read before it is
    written, or one sharing memory with such an input, still traces the call again on copies.
    Each against eager: results, and the inputs afterwards."""
    from rewrite import compile as compile_module
    made = []
    real = compile_module.Tracer

    def counting(*args, **kwargs):
        made.append(kwargs.get("clone_inputs", False))
        return real(*args, **kwargs)
    monkeypatch.setattr(compile_module, "Tracer", counting)

    torch.manual_seed(0)
    bn = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU()).train()
    twin = __import__("copy").deepcopy(bn)
    x = torch.randn(2, 3, 6, 6)
    assert_same(jit(bn)(x), twin(x))
    assert made == [False]  # (one trace: it went on on copies at the running stats' write)
    for a, b in zip(bn.buffers(), twin.buffers()):
        assert_same(a, b)

    def read_then_written(x, y):
        z = x * 2  # (x read: an op's result may view it)
        x.add_(y)
        return z + x

    def aliased_read_before(x, v):
        y = x + 1  # (x read, real)
        v.mul_(2)  # (v shares x's memory: the call is traced again on copies)
        return y, x * 1

    def aliased_read_after(x, v):
        v.mul_(2)  # (v's memory, unread: the trace goes on on copies here)
        return x + 1  # (x, first read now, is a copy sharing v's copied memory: it sees the write)
    cases = ((read_then_written, lambda: (torch.randn(3), torch.randn(3)), [False, True]),
             (aliased_read_before, lambda: (lambda b: (b, b[1:]))(torch.randn(4)), [False, True]),
             (aliased_read_after, lambda: (lambda b: (b, b[1:]))(torch.randn(4)), [False]))
    for fn, make, traces in cases:
        made.clear()
        rewrite.reset()
        torch.manual_seed(1)
        got_args = make()
        torch.manual_seed(1)
        want_args = make()
        assert_same(jit(eager_copy(fn))(*got_args), eager_copy(fn)(*want_args))
        for a, b in zip(got_args, want_args):
            assert_same(a, b)
        assert made == traces, fn.__name__


def test_an_input_sharing_memory_with_one_read_before_the_copies():
    """After the trace went on on copies, an input that shares memory with one read before stays
    the real one, as that one (the fuzzer, seed 5307: it raised out of the compile); a write into
    that memory then traces the call again on copies. Against eager: results and inputs after."""
    def reads(a, b, c):
        y = b * 2
        a.add_(1)  # (a, unread: on copies from here)
        return y, c + 1  # (c shares b's memory, read before: c stays real)

    def writes(a, b, c):
        y = b * 2
        a.add_(1)
        z = c + 1
        c.mul_(2)  # (into b's memory, read before: traced again on copies)
        return y, z, b
    for fn in (reads, writes):
        for n in (3, 4):
            rewrite.reset()
            made = []
            for _ in range(2):
                torch.manual_seed(n)
                base = torch.randn(2 * n)
                made.append((torch.randn(n), base[:n], base[n // 2:]))
            (got_args, want_args) = made
            assert_same(jit(eager_copy(fn))(*got_args), eager_copy(fn)(*want_args))
            for a, b in zip(got_args, want_args):
                assert_same(a, b)


def _bn_then_random(x, rm, rv):
    return torch.nn.functional.dropout(torch.nn.functional.batch_norm(x, rm, rv, None, None, True, 0.1, 1e-5), 0.5)


def _bn_after_a_write(x, rm, rv, w):
    w.add_(1)  # (on copies from here)
    return torch.batch_norm(x * w, rm, rv, None, None, True, 0.3, 1e-5, False)


def _bn_read_only_stats(x, rm, rv, w):
    w.mul_(2)  # (on copies from here: rm and rv, read after, are written by the batch norm)
    return torch.nn.functional.batch_norm(x, rm, rv, training=False) + torch.nn.functional.batch_norm(
        x, rm, rv, training=True, momentum=0.5)


@pytest.mark.parametrize("fn", [_bn_then_random, _bn_after_a_write, _bn_read_only_stats])
def test_a_batch_norm_in_training_updates_the_real_running_stats_once(fn):
    """ATen's `native_batch_norm` writes its running statistics without its schema saying so
    (`Tensor? running_mean`, not `Tensor(a!)`): the trace wrote into the real ones, and the
    compiling call's run of the graph (after a random op, or on copies) updated them again --
    the first call's statistics moved twice (the fuzzer's new batch-norm writes, seed 5451).
    Against eager: results and every input after each call, three calls."""
    compiled, eager = jit(eager_copy(fn)), eager_copy(fn)
    n = fn.__code__.co_argcount
    for call in range(3):
        made = []
        for _ in range(2):
            torch.manual_seed(call)
            made.append((torch.randn(4, 3, 5), torch.randn(3), torch.rand(3) + 0.5, torch.rand(1) + 1)[:n])
        got_args, want_args = made
        torch.manual_seed(7)
        got = compiled(*got_args)
        torch.manual_seed(7)
        assert_same(got, eager(*want_args))
        for a, b in zip(got_args, want_args):
            assert_same(a, b)
            assert a._version == b._version


@pytest.mark.parametrize("shape", ["loop", "calls", "generator"])
def test_a_trace_longer_than_the_limit_runs_eagerly(monkeypatch, shape):
    """config.max_trace_instructions stops a trace that loops (asked at each backward jump) or
    goes on through calls and generators (asked where a frame starts or resumes): the call
    breaks there or runs eagerly, with eager's result, and explain says why."""
    def step(x):
        return x * 1.01 + 0.5

    def gen(x):
        for _ in range(40):
            yield x

    def f(x):
        if shape == "loop":
            for _ in range(40):
                x = x * 1.01 + 0.5
        elif shape == "calls":
            x = step(step(step(step(step(step(step(step(x))))))))
        else:
            for y in gen(x):
                x = x + y
        return x

    monkeypatch.setattr(rewrite.config, "max_trace_instructions", 60)
    x = torch.randn(4)
    out = rewrite.explain(eager_copy(f))(x.clone())
    assert any("trace longer than 60 instructions" in str(b.reason) for b in out.break_reasons), out
    assert_same(jit(eager_copy(f))(x.clone()), f(x.clone()))


def test_an_operator_on_constants_keeps_no_checkpoint_yet_a_break_there_is_eager(monkeypatch):
    """Jumps on constants and operators on constants keep no checkpoint (nothing there breaks,
    as a rule): one that breaks after all runs the call eagerly, with eager's result and effects,
    the ops before it and after it included."""
    from rewrite.ops import operators
    monkeypatch.setattr(operators, "MAX_CHARS", 10)  # ("ab" * 8: a string longer than the trace makes)

    def f(x, log):
        y = x * 2
        log.append(len(log))
        k = 8
        s = "ab" * k  # (not folded by CPython's compiler: two constants at run time)
        return y + len(s), s

    x = torch.randn(4)
    eager_log, log = [], []
    expected = f(x.clone(), eager_log)
    compiled = jit(eager_copy(f))
    for _ in range(2):
        assert_same(compiled(x.clone(), log), expected)
    assert log == [0, 1]
    out = rewrite.explain(eager_copy(f))(x.clone(), [])
    assert any("items made while tracing" in str(r) for r in out.eager_reasons + out.break_reasons), out
