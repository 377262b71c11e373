"""Hugging Face transformers models, built from tiny configs with random weights (no download),
under `jit(model)`: eager's logits, graphs captured, and `explain` naming what still runs
eagerly (the library code the next issue handles)."""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

import rewrite  # noqa: E402

transformers = pytest.importorskip("transformers")


def gpt2():
    cfg = transformers.GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=100, n_positions=64)
    return transformers.GPT2LMHeadModel(cfg).eval()


def llama():
    cfg = transformers.LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                                   num_key_value_heads=2, vocab_size=100, max_position_embeddings=64)
    return transformers.LlamaForCausalLM(cfg).eval()


@pytest.mark.parametrize("make", [gpt2, llama])
def test_forward_gives_eager_logits_and_captures_graphs(make):
    import copy
    torch.manual_seed(0)
    model = make()
    eager = copy.deepcopy(model)
    ids = torch.randint(0, 100, (1, 8))
    with torch.no_grad():
        out = rewrite.explain(model)(input_ids=ids)
    assert out.graph_count >= 1 and out.op_count >= 1
    assert out.break_reasons and all(str(r) for r in out.break_reasons)  # what still runs eagerly, and where
    rewrite.jit(model)
    with torch.no_grad():
        for n in (8, 8, 11):  # a hit, then a new sequence length
            ids = torch.randint(0, 100, (1, n))
            torch.testing.assert_close(model(input_ids=ids).logits, eager(input_ids=ids).logits)
