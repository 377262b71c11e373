"""Training as people run it (issue 39): fine-tuning with the default dropout, switching between
train and eval, gradient checkpointing, library code -- one graph under `fullgraph=True`, each
step compared with an eager copy of the same model under the same seed (the dropout masks, the
losses and the parameters after the optimizer: bit for bit)."""
import copy
import logging
import os
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

import rewrite  # noqa: E402
from conftest import assert_same, eager_copy  # noqa: E402


# --- the root frame's own **kwargs: made by the call, held by nobody else ---------------------------
def test_popping_the_calls_own_kwargs_is_no_side_effect():
    def f(x, **kwargs):
        scale = kwargs.pop("scale", 2)
        return torch.nn.functional.dropout(x, 0.5) * scale, sorted(kwargs)

    g = rewrite.jit(f, fullgraph=True)
    for i in range(3):
        torch.manual_seed(i)
        want = f(torch.ones(8), scale=3, tag=i)
        torch.manual_seed(i)
        assert_same(g(torch.ones(8), scale=3, tag=i), want)
    assert rewrite.dispatcher_of(g).entries[0].ops > 0


def test_the_calls_own_kwargs_returned_stored_or_at_a_break_are_as_eager_left_them():
    class Box:
        pass

    def stored(x, box, **kwargs):
        kwargs.pop("a")
        kwargs["b"] = x + 1
        box.kept = kwargs
        return kwargs, x * 2

    def broken(x, box, **kwargs):
        kwargs.pop("a")
        print("", end="")  # (a graph break: the resume function takes kwargs as they are then)
        kwargs["c"] = x
        return kwargs

    for fn in (stored, broken):
        eager, compiled = eager_copy(fn), rewrite.jit(fn)
        for i in range(3):
            box, eager_box = Box(), Box()
            got = compiled(torch.ones(2) * i, box, a=1, b=2)
            want = eager(torch.ones(2) * i, eager_box, a=1, b=2)
            assert_same(got, want)
            assert_same(vars(box).get("kept"), vars(eager_box).get("kept"))
            if fn is stored:  # (one dict: the one returned is the one stored)
                assert got[0] is box.kept and want[0] is eager_box.kept


# --- ops whose size is data's only for tensor arguments --------------------------------------------
def test_repeat_interleave_by_an_int_has_a_known_size():
    def f(x):
        y = x.repeat_interleave(2, dim=1)  # (GPT-J's rotary embedding)
        return y * y.shape[1], torch.repeat_interleave(x, 3).shape[0]

    def by_tensor(x, r):  # (repeats in a tensor: data, recorded as such)
        return torch.repeat_interleave(x, r, dim=0)

    g, h = rewrite.jit(f, fullgraph=True, dynamic=True), rewrite.jit(by_tensor, fullgraph=True)
    for n in (2, 3, 5):
        x = torch.randn(n, n + 1)
        assert_same(g(x), f(x))
        assert_same(h(x, torch.arange(n) % 3), by_tensor(x, torch.arange(n) % 3))
    assert len(rewrite.dispatcher_of(g).entries) == 1  # (one entry over every size: a shape rule)


# --- Hugging Face models in train mode, default dropout, fullgraph ------------------------------------
transformers = pytest.importorskip("transformers")
T = transformers


def roberta():
    return T.RobertaForMaskedLM(T.RobertaConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=2,
                                                intermediate_size=64, vocab_size=100, max_position_embeddings=64))


def electra():
    return T.ElectraForMaskedLM(T.ElectraConfig(num_hidden_layers=2, hidden_size=32, embedding_size=16,
                                                num_attention_heads=2, intermediate_size=64, vocab_size=100,
                                                max_position_embeddings=64))


def gemma2_checkpointed():
    model = T.Gemma2ForCausalLM(T.Gemma2Config(num_hidden_layers=2, hidden_size=32, num_attention_heads=2,
                                               num_key_value_heads=1, head_dim=16, intermediate_size=64,
                                               vocab_size=100, max_position_embeddings=64))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.gradient_checkpointing_enable()
    return model


def bart():
    return T.BartForConditionalGeneration(T.BartConfig(encoder_layers=1, decoder_layers=1, d_model=32,
                                                       encoder_attention_heads=2, decoder_attention_heads=2,
                                                       encoder_ffn_dim=64, decoder_ffn_dim=64, vocab_size=100,
                                                       max_position_embeddings=64))


def deberta():
    return T.DebertaV2ForMaskedLM(T.DebertaV2Config(num_hidden_layers=2, hidden_size=32, num_attention_heads=2,
                                                    intermediate_size=64, vocab_size=100, max_position_embeddings=64))


def gptj():
    return T.GPTJForCausalLM(T.GPTJConfig(n_layer=2, n_embd=32, n_head=2, rotary_dim=8, vocab_size=100, n_positions=64))


def _batch(make, step):
    ids = torch.randint(3, 100, (2, 8), generator=torch.Generator().manual_seed(step))
    return dict(input_ids=ids, decoder_input_ids=ids, labels=ids) if make is bart else dict(input_ids=ids, labels=ids)


def _steps(make, modes, optimizer=None):
    """Eager and jit(fullgraph=True) copies of the model, a step each per mode (True: train),
    under the same seed; their losses (and with an optimizer, the parameters after) are equal."""
    torch.manual_seed(0)
    eager = make().train()
    model = copy.deepcopy(eager)
    with warnings.catch_warnings():
        warnings.simplefilter("error", rewrite.EagerWarning)
        rewrite.jit(model, fullgraph=True)
        opts = [optimizer(m.parameters()) for m in (eager, model)] if optimizer else [None, None]
        for step, train in enumerate(modes):
            losses = []
            for m, opt in zip((eager, model), opts):
                m.train(train)
                torch.manual_seed(100 + step)
                loss = m(**_batch(make, step)).loss
                if opt is not None:
                    loss.backward()
                    opt.step()
                    opt.zero_grad()
                losses.append(loss.detach())
            assert torch.equal(losses[0], losses[1]), (step, losses)
    for a, b in zip(eager.parameters(), model.parameters()):
        assert torch.equal(a, b)
    return model


def test_roberta_fine_tuning_with_its_dropout_is_one_graph_and_eagers_steps():
    model = _steps(roberta, [True] * 4, lambda ps: torch.optim.AdamW(ps, lr=1e-2))
    entries = rewrite.dispatcher_of(model).entries
    assert len(entries) == 1 and entries[0].ops > 0 and entries[0].eager_reason is None


@pytest.mark.parametrize("make", [electra, gemma2_checkpointed, bart, deberta, gptj],
                         ids=["electra-train-eval-train", "gemma2-checkpointed", "bart", "deberta-v2", "gpt-j"])
def test_families_in_train_mode_under_fullgraph(make):
    modes = [True, False, True] if make is electra else [True, True]
    model = _steps(make, modes)
    assert all(e.ops > 0 and e.eager_reason is None for e in rewrite.dispatcher_of(model).entries)


def test_an_installed_packages_module_made_in_forward_is_made_once_while_tracing():
    """DeBERTa-v2's pooler makes `ACT2FN["gelu"]` (a GELUActivation) in its forward."""
    cfg = T.DebertaV2Config(num_hidden_layers=2, hidden_size=32, num_attention_heads=2, intermediate_size=64,
                            vocab_size=100, max_position_embeddings=64, num_labels=3)
    torch.manual_seed(0)
    model = T.DebertaV2ForSequenceClassification(cfg).train()
    eager = copy.deepcopy(model)
    rewrite.jit(model, fullgraph=True)
    ids = torch.randint(3, 100, (2, 8))
    for step in range(2):
        torch.manual_seed(step)
        want = eager(input_ids=ids).logits
        torch.manual_seed(step)
        assert torch.equal(model(input_ids=ids).logits, want)


def test_type_expressions_are_constants():
    import typing

    def f(x, kind=int | None):
        args = typing.get_args(kind)
        return x * len(args), typing.get_origin(typing.Optional[int]) is typing.Union, (list[int]).__args__

    g = rewrite.jit(f, fullgraph=True)
    assert_same(g(torch.ones(2)), f(torch.ones(2)))


# --- random graphs can run again: the generators put back first ---------------------------------------
def test_a_random_graph_that_raises_runs_again_drawing_what_eager_draws():
    """The graph raises after a dropout (an index out of range under `try`): the call runs again
    eagerly from the generator state the graph started with, so the mask is eager's, and the
    next draw after the call is eager's too."""
    def f(x, idx):
        y = torch.nn.functional.dropout(x, 0.5)
        try:
            z = y[idx]
        except IndexError:
            z = y.sum() * 0
        return y, z

    g = rewrite.jit(f, fullgraph=True)
    for idx in (torch.tensor([0, 1]), torch.tensor([0, 9]), torch.tensor([3]), torch.tensor([9])):
        torch.manual_seed(5)
        want, want_next = f(torch.ones(16), idx), torch.rand(2)
        torch.manual_seed(5)
        got, got_next = g(torch.ones(16), idx), torch.rand(2)
        assert_same(got, want)
        assert torch.equal(got_next, want_next)
    assert all(e.ops > 0 for e in rewrite.dispatcher_of(g).entries)


def test_the_compiling_call_of_a_random_graph_advances_the_generator_as_eager():
    def f(x):
        return torch.nn.functional.dropout(x, 0.3) + torch.rand_like(x)

    g = rewrite.jit(f)
    for _ in range(2):  # (the call that compiles, then a hit)
        torch.manual_seed(1)
        want, want_next = f(torch.ones(8)), torch.randn(3)
        torch.manual_seed(1)
        got, got_next = g(torch.ones(8)), torch.randn(3)
        assert torch.equal(got, want) and torch.equal(got_next, want_next)


def test_a_random_graph_saves_the_generators_only_where_its_call_may_run_again():
    def plain(x):
        return torch.nn.functional.dropout(x, 0.5)

    def guarded(x, i):
        y = torch.nn.functional.dropout(x, 0.5)
        try:
            return y[i]
        except IndexError:
            return y

    a, b = rewrite.jit(plain), rewrite.jit(guarded)
    a(torch.ones(4)), b(torch.ones(4), torch.tensor([1]))
    assert "___rng" not in rewrite.dispatcher_of(a).entries[0].source  # (no cost on its cache hits)
    assert "___rng.save()" in rewrite.dispatcher_of(b).entries[0].source


# --- log records do not keep a graph from running again: they wait for its end ---------------------------
_log = logging.getLogger("rewrite.tests.training_as_run")


class _Records(logging.Handler):
    def __init__(self):
        super().__init__()
        self.made = []

    def emit(self, record):
        self.made.append((record.getMessage(), record.lineno, record.funcName, record.pathname))


class _State:
    pass


def _logs_then_writes(state, table, ids):
    _log.warning("step %d of %s", 3, "train")  # (gradient checkpointing's warning_once, in transformers)
    state.calls = 1  # a side effect, replayed after the graph
    h = torch.nn.functional.embedding(ids, table)  # (raises on an index out of range)
    return torch.nn.functional.dropout(h, 0.5).sum(-1)


def _logs_then_tries(state, table, ids):
    _log.warning("looking up %d ids", ids.shape[0])
    try:
        h = torch.nn.functional.embedding(ids, table)
    except IndexError:
        h = table[:1] * 0
    state.kind = "lookup"
    return torch.nn.functional.dropout(h, 0.5), h.sum()


@pytest.mark.parametrize("fn", [_logs_then_writes, _logs_then_tries])
def test_log_records_wait_for_the_graphs_end_where_its_call_may_run_again(fn):
    """A graph that logs, draws, replays side effects after ops that may raise (or runs them under
    a `try`) compiles -- no EagerWarning -- with its records made once it ran to its end; where it
    raises part-way, the eager run makes eager's records, once: records, results, masks and
    side effects as eager's."""
    handler = _Records()
    _log.addHandler(handler)
    _log.propagate = False
    eager, compiled = eager_copy(fn), rewrite.jit(fn)
    table = torch.randn(10, 4)
    try:
        for ids in (torch.tensor([1, 2]), torch.tensor([3, 4]), torch.tensor([3, 40]), torch.tensor([5, 6])):
            outcomes = []
            for f in (eager, compiled):
                handler.made.clear()
                state = _State()
                torch.manual_seed(0)
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    try:
                        out = ("value", f(state, table, ids))
                    except IndexError as e:
                        out = ("raise", str(e))
                outcomes.append((out, list(handler.made), vars(state), torch.rand(2)))
                assert not [w for w in caught if issubclass(w.category, rewrite.EagerWarning)]
            (got, got_logs, got_state, got_next), (want, want_logs, want_state, want_next) = outcomes[1], outcomes[0]
            assert got[0] == want[0] and got_logs == want_logs and torch.equal(got_next, want_next)
            assert_same(got[1], want[1])
            assert_same(got_state, want_state)
    finally:
        _log.removeHandler(handler)
        _log.propagate = True
    entries = rewrite.dispatcher_of(compiled).entries
    assert entries and all(e.ops > 0 for e in entries) and "___records.begin()" in entries[0].source


def test_log_records_are_made_where_eager_makes_them_where_the_call_never_runs_again():
    def f(x):
        _log.warning("before")
        return torch.nn.functional.dropout(x, 0.5)

    g = rewrite.jit(f)
    g(torch.ones(3))
    assert "___records" not in rewrite.dispatcher_of(g).entries[0].source


# --- a static cache: writes into buffers under `try: ... except NotImplementedError` ------------------------
def test_an_except_that_cannot_match_an_ops_error_is_no_try_for_it():
    """transformers' StaticCache wraps `index_copy_` in `except NotImplementedError:` (a device
    without the kernel): no error the op raises on other values is one, so the op is not "in a try"."""
    def f(cache, pos, value):
        try:
            cache.index_copy_(0, pos, value)
        except NotImplementedError:
            cache[pos] = value
        try:
            out = cache[pos * 2]
        except (KeyError, NotImplementedError):
            out = None
        return cache * 2, out

    g = rewrite.jit(f, fullgraph=True)
    for i in range(3):
        args = torch.zeros(6, 2), torch.tensor([i]), torch.ones(1, 2) * i
        want_args = [a.clone() for a in args]
        assert_same(g(*args), f(*want_args))
        assert_same(args[0], want_args[0])
    assert rewrite.dispatcher_of(g).entries[0].ops > 0


def test_phi3_static_cache_generate_under_fullgraph():
    cfg = T.Phi3Config(num_hidden_layers=2, hidden_size=32, num_attention_heads=2, num_key_value_heads=2,
                       intermediate_size=64, vocab_size=100, max_position_embeddings=64, pad_token_id=0)
    torch.manual_seed(0)
    model = T.Phi3ForCausalLM(cfg).eval()
    eager, dynamo = copy.deepcopy(model), copy.deepcopy(model)
    ids = torch.randint(3, 100, (1, 5))
    options = dict(max_new_tokens=6, do_sample=False, cache_implementation="static")
    theirs = []
    dynamo.forward = torch.compile(dynamo.forward, backend=lambda gm, example: theirs.append(gm) or gm.forward,
                                   fullgraph=True)
    with torch.no_grad():
        want = eager.generate(ids, **options)
        dynamo.generate(ids, **options)
        rewrite.jit(model, fullgraph=True)
        got = model.generate(ids, **options)
    assert torch.equal(got, want)
    graphs = [e for e in rewrite.dispatcher_of(model).entries if e.ops]
    assert 1 <= len(graphs) <= len(theirs)  # (no more graphs than torch.compile's: prefill and decode)
