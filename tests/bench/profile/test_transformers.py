"""roofbench.profile on transformers' GPT-2, built from a config in the test (random weights,
nothing downloaded; scripts/model_zoo.py at MODEL_ZOO_SCALE=tiny): the caller's cache and
weights untouched, the embedding charged its rows (a DynamicCache passed in:
test_dynamic_cache.py)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
# a dev dependency: an install whose transformers does not import (PyPI's `kernels` beside our
# kernels/ folder, scripts/setup_env.sh) fails here rather than skipping these tests
import transformers  # noqa: E402, F401
from tiny_zoo import zoo  # noqa: E402

import roofbench  # noqa: E402

from .test_caller_state import FAST, ROOFS  # noqa: E402


def test_gpt2_decode_leaves_the_cache_and_weights_and_counts_one_embedding_row(monkeypatch):
    step, (ids, past) = zoo(monkeypatch, "gpt2_decode")
    before = [t.clone() for t in past]
    weights = {k: v.clone() for k, v in step.state_dict().items()}
    with torch.no_grad():
        prof = roofbench.profile(step, ids, past, roofs=ROOFS, timer=FAST)
    assert all(torch.equal(a, b) for a, b in zip(before, past, strict=True))
    assert all(torch.equal(weights[k], v) for k, v in step.state_dict().items())
    emb = [p.op for p in prof.ops if p.op.packet == "embedding"]
    d = step.model.config.n_embd
    # token and position embeddings: one row each (d x 4 B) + one int64 index, one row out
    assert emb and all((e.reads, e.writes) == (d * 4 + 8, d * 4) for e in emb)
    assert prof.program.identity.dtype == "fp32"  # not int64 from input_ids
    assert all(p.case.evidence.extra["timed"].startswith("in the program") for p in prof.ops)


def test_a_gqa_llama_from_its_config_counts_attention_and_embedding_by_hand():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, vocab_size=128,
                      max_position_embeddings=64)
    cfg._attn_implementation = "sdpa"
    model = LlamaForCausalLM(cfg).eval()
    ids = torch.tensor([[11, 94, 80, 7, 35, 119, 57, 90]])
    with torch.no_grad():
        prof = roofbench.profile(lambda x: model(input_ids=x, use_cache=False).logits, ids,
                                 roofs=ROOFS, timer=FAST)
    by = {p.op.packet: p.op for p in prof.ops}
    emb = by["embedding"]
    assert (emb.reads, emb.writes) == (8 * 64 * 4 + 8 * 8, 8 * 64 * 4)  # 8 distinct rows
    sdpa = by["_scaled_dot_product_flash_attention_for_cpu"]
    # q 4 heads x 8 x 16, k and v 2 heads (GQA), fp32; out as q + logsumexp 4 x 8
    assert (sdpa.reads, sdpa.writes) == (2048 + 1024 + 1024, 2048 + 4 * 8 * 4)
    assert sdpa.flops == 2 * (2 * 4 * 8 * 8 * 16) and sdpa.calls == 2
    assert prof.program.identity.dtype == "fp32"
