"""rewrite.patch_torch_compile (issue 43): torch.compile and nn.Module.compile compile with
rewrite where a library calls them -- every result checked against an eager run of the same code."""
import copy
import functools
import logging
import os
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch

import rewrite
from rewrite import dispatcher_of, logs
from rewrite.patching import MODULE_COMPILE, TORCH_COMPILE

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(autouse=True)
def _restored():
    yield
    rewrite.unpatch_torch_compile()
    rewrite.reset()


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)
        self.norm = torch.nn.LayerNorm(8)

    def forward(self, x):
        return self.norm(self.lin(x).relu()) * 2


def ops_compiled(fn) -> int:
    """The graph ops in the cache entries of a jitted function (or module)."""
    return sum(e.ops for e in dispatcher_of(fn).entries)


def f(x, y):
    return (x * y).sin() + y.cos().sum()


def test_function_is_compiled_as_a_copy():
    x, y = torch.randn(4, 4), torch.randn(4, 4)
    with rewrite.patch_torch_compile():
        compiled = torch.compile(f)
    torch.testing.assert_close(compiled(x, y), f(x, y), rtol=0, atol=0)
    assert ops_compiled(compiled) > 0
    with pytest.raises(ValueError):  # the original stays eager, as under torch.compile
        dispatcher_of(f)
    assert torch.compile is TORCH_COMPILE


def test_decorator_with_and_without_arguments():
    x = torch.randn(3, 5)
    with rewrite.patch_torch_compile():
        @torch.compile
        def g(x):
            return x.exp() - x

        @torch.compile(backend="python", fullgraph=True, dynamic=False)
        def h(x):
            return x.tanh() * 3

    torch.testing.assert_close(g(x), x.exp() - x, rtol=0, atol=0)
    torch.testing.assert_close(h(x), x.tanh() * 3, rtol=0, atol=0)
    assert ops_compiled(g) > 0 and ops_compiled(h) > 0
    assert dispatcher_of(h).options.fullgraph


def test_module_is_returned_itself_with_orig_mod():
    torch.manual_seed(0)
    m = Block()
    ref = copy.deepcopy(m)
    keys = list(m.state_dict())
    x = torch.randn(2, 8)
    with rewrite.patch_torch_compile():
        out = torch.compile(m)
    assert out is m and m._orig_mod is m
    assert list(m.state_dict()) == keys  # unprefixed, as the Trainer's saving needs
    torch.testing.assert_close(m(x), ref(x), rtol=0, atol=0)
    assert ops_compiled(m) > 0


def test_module_compile_method():
    torch.manual_seed(0)
    m = Block()
    ref = copy.deepcopy(m)
    x = torch.randn(2, 8)
    rewrite.patch_torch_compile()
    assert m.compile() is None  # (as torch's: it compiles in place)
    torch.testing.assert_close(m(x), ref(x), rtol=0, atol=0)
    assert ops_compiled(m) > 0
    other = Block()  # nn.Module._call_impl itself is untouched: another module runs eagerly
    other(x)
    with pytest.raises(ValueError):
        dispatcher_of(other)
    rewrite.unpatch_torch_compile()
    assert torch.nn.Module.compile is MODULE_COMPILE


def test_bound_method_partial_and_callable_object():
    torch.manual_seed(0)
    m = Block()
    x = torch.randn(2, 8)

    class Scaler:
        def __init__(self, k):
            self.k = k

        def __call__(self, t):
            return t * self.k + 1

    part = functools.partial(f, y=torch.ones(2, 8))
    with rewrite.patch_torch_compile():
        method = torch.compile(m.forward)
        partial = torch.compile(part)
        obj = torch.compile(Scaler(3.0))
    torch.testing.assert_close(method(x), m.forward(x), rtol=0, atol=0)
    torch.testing.assert_close(partial(x), part(x), rtol=0, atol=0)
    torch.testing.assert_close(obj(x), x * 3.0 + 1, rtol=0, atol=0)
    assert ops_compiled(method) > 0 and ops_compiled(partial.func) > 0 and ops_compiled(obj) > 0
    with pytest.raises(ValueError):  # the class's forward itself is left as it was
        dispatcher_of(Block.forward)


def test_module_call_impl_maps_to_the_module():
    torch.manual_seed(0)
    m = Block()
    ref = copy.deepcopy(m)
    x = torch.randn(2, 8)
    with rewrite.patch_torch_compile():
        compiled = torch.compile(m._call_impl)
    torch.testing.assert_close(compiled(x), ref(x), rtol=0, atol=0)
    assert ops_compiled(m) > 0
    with pytest.raises(ValueError):  # never nn.Module._call_impl for every module
        dispatcher_of(torch.nn.Module._call_impl)


def test_inductor_by_name():
    x = torch.randn(16)
    with rewrite.patch_torch_compile():
        compiled = torch.compile(lambda t: (t * 2).sigmoid(), backend="inductor")
    torch.testing.assert_close(compiled(x), (x * 2).sigmoid())
    assert ops_compiled(compiled) > 0


def test_disable_and_unknown_backend_as_torch():
    with rewrite.patch_torch_compile():
        assert torch.compile(f, disable=True) is f
        with pytest.raises(Exception) as ours:
            torch.compile(f, backend="no_such_backend")
    with pytest.raises(Exception) as theirs:
        torch.compile(f, backend="no_such_backend")
    assert type(ours.value) is type(theirs.value)


def test_keywords_not_applied_warn():
    with rewrite.patch_torch_compile():
        with pytest.warns(UserWarning, match="recompile_limit"):
            g = torch.compile(f, recompile_limit=4)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            torch.compile(f, name="label", recompile_limit=None)
    x = torch.randn(3)
    torch.testing.assert_close(g(x, x), f(x, x), rtol=0, atol=0)


def test_torch_callers_keep_torchs_compile():
    """torch's own uses of torch.compile (code of the torch package) are not redirected."""
    namespace = {"__name__": "torch._higher_order_ops.fake_caller", "torch": torch, "f": f}
    with rewrite.patch_torch_compile():
        exec("made = torch.compile(f, backend='eager')", namespace)
    with pytest.raises(ValueError):
        dispatcher_of(namespace["made"])
    x = torch.randn(3)
    torch.testing.assert_close(namespace["made"](x, x), f(x, x))


def test_call_context_and_decorator_forms():
    patch = rewrite.patch_torch_compile()  # a call: in force now
    assert torch.compile is not TORCH_COMPILE
    patch.close()
    assert torch.compile is TORCH_COMPILE
    with rewrite.patch_torch_compile():
        with rewrite.patch_torch_compile():  # (nested: the outer one still holds)
            pass
        assert torch.compile is not TORCH_COMPILE
    assert torch.compile is TORCH_COMPILE

    seen = []

    @rewrite.patch_torch_compile()
    def build():
        seen.append(torch.compile is not TORCH_COMPILE)
        return torch.compile(f)

    assert torch.compile is TORCH_COMPILE  # (a decorator: in force during its calls only)
    compiled = build()
    assert seen == [True] and torch.compile is TORCH_COMPILE
    x = torch.randn(3)
    torch.testing.assert_close(compiled(x, x), f(x, x), rtol=0, atol=0)


def test_logs_and_explain(caplog):
    logs.set_logs("torch_compile")  # (REWRITE_LOGS=torch_compile)
    try:
        with caplog.at_level(logging.DEBUG, logger="rewrite"):
            rewrite.logs._root.propagate = True
            with rewrite.patch_torch_compile():
                compiled = torch.compile(f)
    finally:
        logs.set_logs("")
        rewrite.logs._root.propagate = False
    assert "torch.compile(f) compiles with rewrite (backend=None" in caplog.text
    x = torch.randn(3)
    out = rewrite.explain(compiled)(x, x)
    assert out.graph_count == 1 and out.graph_break_count == 0


SCRIPT = textwrap.dedent("""
    import torch
    compiled = torch.compile(lambda x: x.sin() * 2)
    x = torch.linspace(-1, 1, 5)
    assert torch.equal(compiled(x), x.sin() * 2)
    import rewrite
    print("entries", len(rewrite.dispatcher_of(compiled).entries), rewrite.patching.patched())
""")


def _run(tmp_path, argv, env=None):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    return subprocess.run([sys.executable, *argv, str(script)], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": REPO, **(env or {})}, timeout=300)


@pytest.mark.parametrize("flag", ["--torch-compile", "--torch-compile-only"])
def test_hook_flag(tmp_path, flag):
    done = _run(tmp_path, ["-m", "rewrite.hook", flag])
    assert done.returncode == 0, done.stderr
    assert "entries 1 True" in done.stdout


def test_environment_variable(tmp_path):
    """REWRITE_TORCH_COMPILE=1 acts where rewrite is imported: here, before torch.compile is called."""
    script = tmp_path / "train.py"
    script.write_text("import rewrite\n" + SCRIPT)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": REPO, "REWRITE_TORCH_COMPILE": "1"}, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "entries 1 True" in done.stdout


def test_trainer_with_torch_compile(tmp_path):
    """A transformers Trainer with torch_compile=True trains with rewrite's entries, with the
    losses of the same Trainer without compiling."""
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate")

    def train(compile_: bool):
        torch.manual_seed(0)
        config = transformers.GPT2Config(vocab_size=64, n_positions=32, n_embd=32, n_layer=2, n_head=2)
        model = transformers.GPT2LMHeadModel(config)
        gen = torch.Generator().manual_seed(1)
        data = [{"input_ids": ids, "labels": ids} for ids in torch.randint(0, 64, (12, 16), generator=gen)]
        args = transformers.TrainingArguments(
            output_dir=str(tmp_path / f"out{int(compile_)}"), max_steps=3, per_device_train_batch_size=4,
            use_cpu=True, torch_compile=compile_, torch_compile_backend="eager" if compile_ else None,
            report_to=[], logging_steps=1, save_strategy="no", disable_tqdm=True, seed=0, data_seed=0,
            dataloader_num_workers=0)
        trainer = transformers.Trainer(model=model, args=args, train_dataset=data)
        trainer.train()
        return trainer, [h["loss"] for h in trainer.state.log_history if "loss" in h]

    eager_trainer, eager_losses = train(False)
    with rewrite.patch_torch_compile():
        trainer, losses = train(True)
    assert len(losses) == 3
    assert losses == pytest.approx(eager_losses, rel=1e-5)
    trained, reference = trainer.model.state_dict(), eager_trainer.model.state_dict()
    assert list(trained) == list(reference)  # (unprefixed keys: the module itself came back)
    for name, value in trained.items():  # the weights after 3 steps (with dropout): eager's
        torch.testing.assert_close(value, reference[name], rtol=1e-5, atol=1e-6)
    assert ops_compiled(trainer.model) > 0  # rewrite's entries, with graphs of ops
