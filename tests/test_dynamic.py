"""Dynamic shapes (issue 6): the recompile policy, symbolic sizes through ops, shape guards.
Every result is compared with eager; compile counts follow Dynamo's policy."""
import torch
import torch.nn.functional as F

from rewrite import dispatcher_of, jit, mark_dynamic, mark_static

from conftest import CompileCounter, assert_same, eager_copy


def run_sizes(fn, make, sizes, **options):
    """Call a jitted fn and its eager copy for each size; returns the dispatcher."""
    eager = eager_copy(fn)
    jit(fn, **options)
    for n in sizes:
        torch.manual_seed(n)
        args = make(n)
        torch.manual_seed(n)
        assert_same(fn(*args), eager(*make(n)))
    return dispatcher_of(fn)


def test_seed_example_compiles_twice_and_the_second_graph_is_symbolic():
    def f(x):
        return x + 1

    cnt = CompileCounter()
    d = run_sizes(f, lambda n: (torch.randn(n),), [2, 3, 4, 5, 6], backend=cnt)
    assert d.compiles == 2 and cnt.frame_count == 2
    placeholder = next(n for n in cnt.graphs[1].graph.nodes if n.op == "placeholder")
    assert str(placeholder.meta["sym_shape"][0]) == "s0"
    guard = d.entries[0].guard.source  # (the size read once, into a local the entry reads too)
    assert "___s0 = x.shape[0]" in guard and "___s0 >= 2" in guard


def test_dynamic_true_false_and_sizes_zero_and_one():
    def f(x):
        return x * 2

    assert run_sizes(f, lambda n: (torch.randn(n, 3),), [2, 5, 9], dynamic=True).compiles == 1
    def g(x):
        return x * 2

    assert run_sizes(g, lambda n: (torch.randn(n, 3),), [2, 5, 9], dynamic=False).compiles == 3

    def h(x):
        return x * 2

    d = run_sizes(h, lambda n: (torch.randn(n, 3),), [4, 5, 1, 0, 7], )
    assert d.compiles == 4  # 4 static, then dynamic (5, 7); 1 and 0 are specialized


def test_mark_dynamic_and_mark_static():
    def f(x):
        return x.sum(0)

    x = torch.randn(4, 3)
    mark_dynamic(x, 0)
    jit(f)
    assert_same(f(x), x.sum(0))
    assert "x.shape[0] >= 2" in dispatcher_of(f).entries[0].guard.source
    x6 = torch.randn(6, 3)
    assert_same(f(x6), x6.sum(0))
    assert dispatcher_of(f).compiles == 1

    def g(x):
        return x.sum(0)

    jit(g)
    for n in (2, 3, 4):
        y = torch.randn(n, 3)
        mark_static(y, 0)
        assert_same(g(y), y.sum(0))
    assert dispatcher_of(g).compiles == 3


def test_branch_on_a_size_installs_a_guard_and_flips():
    def f(x):
        if x.shape[0] > 4:
            return x.sum(0)
        return x.mean(0)

    d = run_sizes(f, lambda n: (torch.randn(n, 2),), [2, 3, 4, 5, 6, 3, 7])
    assert d.compiles == 3  # static 2; dynamic n <= 4; dynamic n > 4
    assert any("> 4" in e.guard.source or "<= 4" in e.guard.source for e in d.entries)


def test_symbolic_sizes_through_shape_ops():
    def f(x, w):
        n, t, c = x.shape
        y = x.reshape(n * t, c) @ w  # (n*t, 5)
        y = y.view(n, t, -1).permute(0, 2, 1).flatten(1)
        z = torch.cat([y, y[:, : t]], dim=1).unsqueeze(0).squeeze(0)
        s = torch.stack([z, z]).softmax(-1).sum(dim=(0, 2), keepdim=True)
        pos = torch.arange(t) + torch.zeros(t, dtype=torch.long)
        return s, z[: n - 1], pos, n * t, x.size(), x.numel(), len(x)

    d = run_sizes(f, lambda n: (torch.randn(n, n + 1, 4), torch.randn(4, 5)), [2, 3, 4, 6, 9])
    assert d.compiles == 2


def test_size_arithmetic_and_creation_from_sizes():
    def f(x):
        b = x.size(0)
        half = b // 2
        ones = torch.ones(b, half + 1)
        return x[:half], ones, b % 3, -b, x.new_zeros(b * 2).shape

    d = run_sizes(f, lambda n: (torch.randn(n, 2),), [4, 6, 8, 10, 12])
    assert d.compiles == 2


def test_an_op_without_a_rule_specializes_and_stays_correct():
    def f(x):
        return x.unfold(0, 2, 1).sum(), x.shape[0]  # unfold has no symbolic rule

    d = run_sizes(f, lambda n: (torch.randn(n),), [3, 4, 5, 6])
    assert all("== " in e.guard.source for e in d.entries[:-1])  # the dynamic entries are pinned


def test_range_bound_and_python_use_specialize():
    def f(x):
        total = x[0]
        for i in range(x.shape[0]):  # a range bound: specialized, guarded
            total = total + x[i]
        return total

    d = run_sizes(f, lambda n: (torch.randn(n),), [2, 3, 4, 3])
    assert d.compiles == 3


def test_transformer_block_over_ten_sequence_lengths_compiles_at_most_twice():
    torch.manual_seed(0)
    d_model, heads = 16, 2

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = torch.nn.Linear(d_model, 3 * d_model)
            self.proj = torch.nn.Linear(d_model, d_model)
            self.ln = torch.nn.LayerNorm(d_model)
            self.register_buffer("mask", torch.tril(torch.ones(32, 32)).view(1, 1, 32, 32))

        def forward(self, x):
            b, t, c = x.size()
            q, k, v = self.qkv(self.ln(x)).split(d_model, dim=2)
            q = q.view(b, t, heads, c // heads).transpose(1, 2)
            k = k.view(b, t, heads, c // heads).transpose(1, 2)
            v = v.view(b, t, heads, c // heads).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / (c // heads) ** 0.5)
            att = att.masked_fill(self.mask[:, :, :t, :t] == 0, float("-inf"))
            y = F.softmax(att, dim=-1) @ v
            y = y.transpose(1, 2).contiguous().view(b, t, c)
            return x + self.proj(y)

    block = Block()
    import copy
    ref = copy.deepcopy(block)
    cnt = CompileCounter()
    jit(block, backend=cnt)
    for t in range(3, 13):
        x = torch.randn(2, t, d_model)
        assert_same(block(x), ref(x))
    assert cnt.frame_count <= 2


def test_int_arguments_become_symbolic_when_they_change():
    def f(x, n):
        return x[:n] * n + torch.zeros(n).sum(), n * 2, min(n, x.size(0)), max(n - 1, 2)

    d = run_sizes(f, lambda n: (torch.randn(8), n), [2, 3, 4, 5, 7])
    assert d.compiles == 2

    def g(x, n):
        if n > 3:  # an int in a branch stays specialized: one entry per value
            return x + n
        return x - n

    assert run_sizes(g, lambda n: (torch.randn(2), n), [2, 3, 4, 5, 6]).compiles == 5


def test_recompile_reasons_and_dynamic_log_name_the_dimension():
    import logging
    from rewrite import logs

    class Collect(logging.Handler):
        def __init__(self):
            super().__init__()
            self.lines = []

        def emit(self, record):
            self.lines.append(record.getMessage())

    def f(x):
        if x.size(0) > 3:
            return x.sum()
        return x.mean()

    handler = Collect()
    logging.getLogger("rewrite").addHandler(handler)
    logs.set_logs("dynamic,recompiles")
    try:
        jit(f)
        f(torch.randn(2, 3))
        f(torch.randn(5, 3))
    finally:
        logs.set_logs(None)
        logging.getLogger("rewrite").removeHandler(handler)
    text = "\n".join(handler.lines)
    assert "tensor 'x' size mismatch at index 0: expected 2, actual 5" in text  # the recompile reason
    assert "x.size(0) is dynamic from now on: 2 in the first compile, 5 now" in text
    assert "create symbol s0 = 5 for x.size(0)" in text and "guard s0 > 3" in text
    assert dispatcher_of(f).compiles == 2
    reason = dispatcher_of(f)._recompile_reason((torch.randn(3, 3),))
    assert "x.size(0) >= 4 is false (x.size(0) = 3)" in reason  # the dynamic entry's guard, in user terms


def test_in_place_size_changes_and_max_of_one_size_once_dynamic():
    def f(x):
        n = max(x.shape)
        x.add_(1)
        x.t_()
        a = x.shape
        x.unsqueeze_(0)
        return n, a, x.shape

    d = run_sizes(f, lambda n: (torch.zeros(n, 4),), [2, 3, 5])
    assert d.compiles <= 3

    def g(x):
        x.resize_(0)
        return x.shape

    run_sizes(g, lambda n: (torch.zeros(n),), [2, 3, 4])

    def h(x, y):  # fuzz finding: out= resized a dynamic input, whose symbolic sizes were then stale
        torch.mul(y, 2, out=x)
        return x.shape, x.unsqueeze(0).expand(2, *x.shape)

    run_sizes(h, lambda n: (torch.zeros(n, n), torch.ones(())), [2, 3, 4])


def test_transposes_and_a_view_with_a_divided_size_stay_symbolic():
    """`x.t()` and `x.view(n // 2, -1)` have rules (they specialized before): two compiles over
    five sizes, the view guarded on the division being exact."""
    def f(x):
        return (x @ x.t()).relu()

    def g(x):
        return x.view(x.shape[0] // 2, -1).sum(1)

    assert run_sizes(f, lambda n: (torch.randn(n, 8),), [2, 3, 4, 5, 6]).compiles == 2
    d = run_sizes(g, lambda n: (torch.randn(2 * n, 3),), [2, 3, 4, 5, 6])
    assert d.compiles == 2 and "% (" in d.entries[0].guard.source
