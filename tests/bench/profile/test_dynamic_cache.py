"""Decode as users write it (bench/profile/caller_state.py ``Caches``): a transformers
``DynamicCache`` or ``StaticCache`` passed to the profiled step is accepted, rewound before
every run instead of rebuilt, so the bytes counted are decode's own (the cat of one new
key/value onto the cache), and the caller's cache is left as it was. A tiny GPT-2 built
from its config: random weights, nothing downloaded."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import roofbench  # noqa: E402

from .test_caller_state import FAST, ROOFS  # noqa: E402

LAYERS, DIM, HEADS, PAST = 2, 32, 2, 8


@pytest.fixture(scope="module")
def model():
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=LAYERS, n_embd=DIM, n_head=HEADS, vocab_size=64, n_positions=64,
                     bos_token_id=0, eos_token_id=0)
    return GPT2LMHeadModel(cfg).eval()


def _prefilled(model, cache=None):
    prompt = torch.randint(0, 64, (1, PAST), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        out = model(input_ids=prompt, cache=cache, use_cache=True)
    return cache if cache is not None else out.past_key_values


def _contents(cache):
    return [(layer.keys.clone(), layer.values.clone()) for layer in cache.layers]


def _same(cache, before) -> bool:
    return all(torch.equal(k, layer.keys) and torch.equal(v, layer.values)
               for (k, v), layer in zip(before, cache.layers, strict=True))


def test_a_dynamic_cache_decode_is_accepted_and_its_bytes_are_decodes_own(model):
    from transformers import DynamicCache

    cache = _prefilled(model)
    assert isinstance(cache, DynamicCache) and cache.get_seq_length() == PAST
    before = _contents(cache)
    ids = torch.tensor([[5]])
    with torch.no_grad():
        prof = roofbench.profile(
            lambda x, c: model(input_ids=x, cache=c, use_cache=True).logits, ids, cache,
            roofs=ROOFS, timer=FAST)
    # every timed run repeated the recorded step over the same 8 cached tokens
    assert prof.extra["in_program_runs"] == 2
    assert cache.get_seq_length() == PAST and _same(cache, before)
    cats = [d for d in prof.recording.distinct if d.packet == "cat"]
    # one key and one value cat per layer, each reading the 8 cached rows and the new one
    row = HEADS * (DIM // HEADS) * 4
    assert sum(d.calls for d in cats) == 2 * LAYERS
    assert all((d.reads, d.writes) == ((PAST + 1) * row, (PAST + 1) * row) for d in cats)
    # nothing copies the cache: no clone or copy_ among the step's ops
    assert not {"clone", "copy_", "_to_copy"} & {d.packet for d in prof.recording.distinct}


def test_a_static_cache_decode_is_accepted_and_left_as_it_was(model):
    from transformers import StaticCache

    cache = _prefilled(model, StaticCache(config=model.config, max_cache_len=16))
    before = _contents(cache)
    ids, pos = torch.tensor([[5]]), torch.tensor([PAST])
    with torch.no_grad():
        prof = roofbench.profile(
            lambda x, c: model(input_ids=x, cache=c, use_cache=True,
                               cache_position=pos).logits, ids, cache,
            roofs=ROOFS, timer=FAST)
    assert prof.extra["in_program_runs"] == 2
    assert _same(cache, before)  # the slot each run wrote put back at the end
    copies = [d for d in prof.recording.distinct if d.packet == "index_copy_"]
    assert sum(d.calls for d in copies) == 2 * LAYERS
    # each writes the new token's slot (heads x head dim fp32), not the 16-slot cache
    row = HEADS * (DIM // HEADS) * 4
    assert all((d.reads, d.writes) == (8 + row, row) for d in copies)


def test_the_cache_is_rewound_before_every_run_not_rebuilt(model):
    """The step sees the same cache length in every run (recording, warm-up, timed, eager)."""
    cache = _prefilled(model)
    seen: list[int] = []

    def step(x, c):
        seen.append(c.get_seq_length())
        return model(input_ids=x, cache=c, use_cache=True).logits

    with torch.no_grad():
        roofbench.profile(step, torch.tensor([[5]]), cache, roofs=ROOFS, timer=FAST)
    assert len(seen) >= 4 and set(seen) == {PAST}
