"""Hugging Face transformers models under rewrite.jit beside torch.compile (backend="eager").

Run: .venv/bin/python benchmarks/transformers_models.py

Tiny random-init GPT-2, Llama, BERT and T5 (built from configs: no download), batch 1, 8 tokens
(T5: 4 decoder tokens), no_grad, after one small compile with each compiler (their imports). Printed side by side, measured in one process: graphs, graph breaks and ops captured
(rewrite.explain / torch._dynamo.explain), first-call time (fresh model each), the recompile
at a new sequence length (11 tokens: the call that makes the sizes dynamic), and the
steady-state time per forward against eager.
"""
from __future__ import annotations

import os
import platform
import time

os.environ.setdefault("REWRITE_PERSISTENT_CACHE", "off")  # (first calls traced: warm starts are warm_start.py's)

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
import torch._dynamo  # noqa: E402
import transformers  # noqa: E402

import rewrite  # noqa: E402
from rewrite import dispatch  # noqa: E402


def gpt2():
    cfg = transformers.GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=100, n_positions=64)
    return transformers.GPT2LMHeadModel(cfg).eval()


def llama():
    cfg = transformers.LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                                   num_key_value_heads=2, vocab_size=100, max_position_embeddings=64)
    return transformers.LlamaForCausalLM(cfg).eval()


def bert():
    cfg = transformers.BertConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                                  vocab_size=100, max_position_embeddings=64)
    return transformers.BertModel(cfg).eval()


def t5():
    cfg = transformers.T5Config(d_model=32, d_ff=64, num_layers=2, num_heads=2, vocab_size=100, d_kv=16,
                                decoder_start_token_id=0)
    return transformers.T5ForConditionalGeneration(cfg).eval()


def call(fn, ids):
    if ENCODER_DECODER:  # (the model being measured)
        return fn(input_ids=ids, decoder_input_ids=ids[:, :4])
    return fn(input_ids=ids)


ENCODER_DECODER = False


def timed_ms(fn, ids) -> float:
    t0 = time.perf_counter()
    call(fn, ids)
    return (time.perf_counter() - t0) * 1e3


def warm_up():
    """Each compiler's one-time imports, so that the first model's first call is not charged them."""
    x = torch.ones(2)
    rewrite.jit(lambda t: t * 2 + 1)(x)
    torch.compile(lambda t: t * 2 + 1, backend="eager")(x)
    torch._dynamo.reset()


def steady_ms(fns, ids, n=30, rounds=7) -> list:
    """Best time per call (ms) of each of `fns`, timed in turn round after round."""
    for fn in fns:
        call(fn, ids), call(fn, ids)
    best = [float("inf")] * len(fns)
    for _ in range(rounds):
        for i, fn in enumerate(fns):
            t0 = time.perf_counter()
            for _ in range(n):
                call(fn, ids)
            best[i] = min(best[i], (time.perf_counter() - t0) / n)
    return [t * 1e3 for t in best]


def main():
    torch.set_num_threads(1)
    transformers.logging.set_verbosity_error()
    print(f"transformers models -- {time.strftime('%Y-%m-%d')}, Python {platform.python_version()}, "
          f"torch {torch.__version__}, transformers {transformers.__version__}, {platform.machine()}\n")
    print(f"{'model':8} {'':14} {'graphs':>6} {'breaks':>6} {'ops':>5} {'eager entries':>13} "
          f"{'1st call ms':>11} {'new len ms':>10} {'steady ms':>9} {'eager ms':>8}")
    longer = torch.randint(0, 100, (1, 11))
    warm_up()
    global ENCODER_DECODER
    for name, make in (("gpt2", gpt2), ("llama", llama), ("bert", bert), ("t5", t5)):
        ENCODER_DECODER = make is t5
        torch.manual_seed(0)
        ids = torch.randint(0, 100, (1, 8))
        with torch.no_grad():
            eager_model = make()
            # rewrite (first calls before either explain: no warm caches)
            model = make()
            seen: list = []
            dispatch.OBSERVERS.append(seen)
            rewrite.jit(model)
            first = timed_ms(model, ids)
            relen = timed_ms(model, longer)
            dispatch.OBSERVERS.remove(seen)
            fallbacks = sum(e.reason is not None for _, e in seen)
            # torch.compile
            torch._dynamo.reset()
            compiled = torch.compile(make(), backend="eager")
            their_first, their_relen = timed_ms(compiled, ids), timed_ms(compiled, longer)
            out = call(rewrite.explain(make()), ids)
            ours = (out.graph_count, out.graph_break_count, out.op_count, fallbacks, first, relen)
            ex = call(torch._dynamo.explain(make()), ids)
            theirs = (ex.graph_count, ex.graph_break_count, ex.op_count, their_first, their_relen)
            # steady state, the three timed in turn (this machine drifts)
            t_eager, t_ours, t_theirs = steady_ms([eager_model, model, compiled], ids)
        g, b, o, f, first, relen = ours
        print(f"{name:8} {'rewrite.jit':14} {g:6d} {b:6d} {o:5d} {f:13d} {first:11.1f} {relen:10.1f} "
              f"{t_ours:9.2f} {t_eager:8.2f}")
        g, b, o, first, relen = theirs
        print(f"{'':8} {'torch.compile':14} {g:6d} {b:6d} {o:5d} {'-':>13} {first:11.1f} {relen:10.1f} "
              f"{t_theirs:9.2f} {t_eager:8.2f}")
        torch._dynamo.reset()
    train_row()


def roberta_mlm():
    cfg = transformers.RobertaConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=2, intermediate_size=64,
                                     vocab_size=100, max_position_embeddings=64)  # (dropout 0.1, as configs ship)
    return transformers.RobertaForMaskedLM(cfg).train()


def train_row():
    """Fine-tuning as the configs ship it: RoBERTa MLM in train mode (dropout 0.1), a step being
    the forward with labels and the backward; graphs (explain, in train mode), first step, steady
    step against eager, the three timed in turn."""
    ids = torch.randint(3, 100, (2, 8), generator=torch.Generator().manual_seed(0))

    def step(model):
        model(input_ids=ids, labels=ids).loss.backward()
        return ids

    def timed(model):
        t0 = time.perf_counter()
        step(model)
        return (time.perf_counter() - t0) * 1e3

    def steady(models, n=20, rounds=7):
        for m in models:
            step(m), step(m)
        best = [float("inf")] * len(models)
        for _ in range(rounds):
            for i, m in enumerate(models):
                t0 = time.perf_counter()
                for _ in range(n):
                    step(m)
                best[i] = min(best[i], (time.perf_counter() - t0) / n)
        return [t * 1e3 for t in best]

    torch.manual_seed(0)
    eager, ours, theirs = roberta_mlm(), roberta_mlm(), roberta_mlm()
    rewrite.jit(ours, fullgraph=True)
    first = timed(ours)
    torch._dynamo.reset()
    theirs = torch.compile(theirs, backend="eager", fullgraph=True)
    their_first = timed(theirs)
    out = rewrite.explain(roberta_mlm())(input_ids=ids, labels=ids)
    ex = torch._dynamo.explain(roberta_mlm())(input_ids=ids, labels=ids)
    t_eager, t_ours, t_theirs = steady([eager, ours, theirs])
    print(f"\ntrain mode (dropout 0.1), a step = forward with labels + backward, fullgraph=True\n"
          f"{'model':8} {'':14} {'graphs':>6} {'breaks':>6} {'ops':>5} {'1st step ms':>11} {'steady ms':>9} "
          f"{'eager ms':>8}")
    print(f"{'roberta':8} {'rewrite.jit':14} {out.graph_count:6d} {out.graph_break_count:6d} {out.op_count:5d} "
          f"{first:11.1f} {t_ours:9.2f} {t_eager:8.2f}")
    print(f"{'':8} {'torch.compile':14} {ex.graph_count:6d} {ex.graph_break_count:6d} {ex.op_count:5d} "
          f"{their_first:11.1f} {t_theirs:9.2f} {t_eager:8.2f}")
    torch._dynamo.reset()


if __name__ == "__main__":
    main()
