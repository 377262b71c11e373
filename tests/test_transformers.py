"""Hugging Face transformers models, built from tiny configs with random weights (no download),
under `jit(model)` (issue 18): one graph per forward with no graph break where torch.compile
gets one (fullgraph=True), eager's logits at a new sequence length, a greedy decode loop with
the KV cache, and `generate()` -- each compared with an eager copy of the same model."""
import copy
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

import rewrite  # noqa: E402
from conftest import CompileCounter  # noqa: E402

transformers = pytest.importorskip("transformers")


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


def pair(make):
    torch.manual_seed(0)
    model = make()
    return model, copy.deepcopy(model)


def output(out):
    return out.logits if hasattr(out, "logits") else out.last_hidden_state


def inputs(make, ids):
    return dict(input_ids=ids, decoder_input_ids=ids[:, :4]) if make is t5 else dict(input_ids=ids)


@pytest.mark.parametrize("make", [gpt2, llama, bert, t5], ids=["gpt2", "llama", "bert", "t5"])
def test_forward_is_one_graph_with_eager_logits(make):
    model, eager = pair(make)
    ids = torch.randint(0, 100, (1, 8))
    with torch.no_grad():
        out = rewrite.explain(copy.deepcopy(model))(**inputs(make, ids))
    assert out.graph_count == 1 and out.graph_break_count == 0, str(out)
    cnt = CompileCounter()
    rewrite.jit(model, fullgraph=True, backend=cnt)  # any break would raise
    with torch.no_grad():
        for n in (8, 8, 11, 12):  # a hit, a new sequence length (dynamic from then on), a hit
            ids = torch.randint(0, 100, (1, n))
            torch.testing.assert_close(output(model(**inputs(make, ids))), output(eager(**inputs(make, ids))))
    assert cnt.frame_count == 2, cnt.frame_count  # (guards that held still hold: no recompile per call)
    ids = torch.randint(0, 100, (2, 5))  # with grad, another batch
    torch.testing.assert_close(output(model(**inputs(make, ids))), output(eager(**inputs(make, ids))))


T = transformers
SMALL = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2, vocab_size=100,
             max_position_embeddings=64)
FAMILIES = {  # more of the families transformers ships, as a new user would try them next
    "mistral": lambda: T.MistralForCausalLM(T.MistralConfig(num_key_value_heads=2, **SMALL)),
    "qwen2": lambda: T.Qwen2ForCausalLM(T.Qwen2Config(num_key_value_heads=2, **SMALL)),
    "phi": lambda: T.PhiForCausalLM(T.PhiConfig(**SMALL)),
    "gemma": lambda: T.GemmaForCausalLM(T.GemmaConfig(num_key_value_heads=2, head_dim=16, **SMALL)),
    "opt": lambda: T.OPTForCausalLM(T.OPTConfig(hidden_size=32, ffn_dim=64, num_hidden_layers=2, num_attention_heads=2,
                                                vocab_size=100, max_position_embeddings=64, word_embed_proj_dim=32)),
    "gpt_neox": lambda: T.GPTNeoXForCausalLM(T.GPTNeoXConfig(**SMALL)),
    "distilbert": lambda: T.DistilBertModel(T.DistilBertConfig(dim=32, hidden_dim=64, n_layers=2, n_heads=2,
                                                               vocab_size=100, max_position_embeddings=64)),
    "roberta": lambda: T.RobertaModel(T.RobertaConfig(**SMALL)),
    "bloom": lambda: T.BloomForCausalLM(T.BloomConfig(hidden_size=32, n_layer=2, n_head=2, vocab_size=100)),
    "falcon": lambda: T.FalconForCausalLM(T.FalconConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                                         vocab_size=100)),
}


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_other_families_compile_whole_under_fullgraph(name):
    model, eager = pair(lambda: FAMILIES[name]().eval())
    rewrite.jit(model, fullgraph=True)
    with torch.no_grad():
        for n in (8, 11):
            ids = torch.randint(0, 100, (1, n))
            torch.testing.assert_close(output(model(input_ids=ids)), output(eager(input_ids=ids)))


@pytest.mark.parametrize("make", [gpt2, llama, t5], ids=["gpt2", "llama", "t5"])
def test_greedy_decode_with_the_kv_cache(make):
    model, eager = pair(make)
    rewrite.jit(model)

    def decode(m, ids, steps=8):
        with torch.no_grad():
            if make is t5:  # the encoder once, then the decoder token by token
                enc = m.get_encoder()(input_ids=ids)
                first = dict(encoder_outputs=enc, decoder_input_ids=torch.zeros(1, 1, dtype=torch.long))
                step = lambda nxt, past: dict(encoder_outputs=enc, decoder_input_ids=nxt, cache=past)
            else:
                first = dict(input_ids=ids)
                step = lambda nxt, past: dict(input_ids=nxt, cache=past)
            out = m(**first, use_cache=True)
            past, tokens = out.cache, []
            for _ in range(steps):
                nxt = out.logits[:, -1].argmax(-1, keepdim=True)
                tokens.append(nxt)
                out = m(**step(nxt, past), use_cache=True)
                past = out.cache
        return torch.cat(tokens, 1), out.logits, past

    ids = torch.randint(0, 100, (1, 6))
    got, want = decode(model, ids), decode(eager, ids)
    torch.testing.assert_close(got[0], want[0])
    torch.testing.assert_close(got[1], want[1])
    for (k1, v1), (k2, v2) in zip(cache_tensors(got[2]), cache_tensors(want[2])):
        torch.testing.assert_close(k1, k2)
        torch.testing.assert_close(v1, v2)


def cache_tensors(cache):
    if hasattr(cache, "self_attention_cache"):  # encoder-decoder: both caches
        return cache_tensors(cache.self_attention_cache) + cache_tensors(cache.cross_attention_cache)
    return [(layer.keys, layer.values) for layer in cache.layers]


@pytest.mark.parametrize("make", [gpt2, llama, t5], ids=["gpt2", "llama", "t5"])
def test_generate_gives_eager_tokens(make):
    model, eager = pair(make)
    rewrite.jit(model)
    ids = torch.randint(1, 100, (1, 5))
    kw = dict(max_new_tokens=8, do_sample=False, pad_token_id=0)
    with torch.no_grad():
        torch.testing.assert_close(model.generate(ids, **kw), eager.generate(ids, **kw))
    forward = rewrite.dispatcher_of(model)  # the prompt, the first step, then the cache's length dynamic
    assert forward.compiles <= 3 and all(e.reason is None for e in forward.entries), \
        [e.reason for e in forward.entries]


def test_generate_with_a_pad_token_in_the_prompt_keeps_the_mask_length_dynamic():
    """A pad token makes generate pass an attention mask that grows each step; the padding mask
    is read with index tensors (`mask[batch_idx, kv_idx]`), whose result size follows them."""
    model, eager = pair(gpt2)
    rewrite.jit(model)
    ids = torch.randint(1, 100, (1, 6))
    ids[0, 2] = 0
    kw = dict(max_new_tokens=8, do_sample=False, pad_token_id=0)
    with torch.no_grad():
        torch.testing.assert_close(model.generate(ids, **kw), eager.generate(ids, **kw))
    forward = rewrite.dispatcher_of(model)
    assert forward.compiles <= 4 and all(e.reason is None for e in forward.entries), \
        [e.reason for e in forward.entries]
