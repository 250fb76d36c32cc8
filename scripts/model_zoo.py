"""The acceptance programs of `roofbench model` (issue 26), each an entry of this script:

    roofbench model scripts/model_zoo.py --entry l2norm --compile

- ``l2norm``: the book's fusion example as eager PyTorch, ``torch.sqrt(a * a + b * b)`` fp32
  (4 ops, 36 B per element for 3 FLOPs: 0.083 FLOP/B; one fused kernel: 12 B, 0.25);
- ``rownorm``: its row-wise form ``x / torch.sqrt((x * x).sum(-1, keepdim=True) + eps)``;
- ``mlp``: an RMSNorm + SwiGLU MLP block (residual);
- ``decode`` / ``prefill``: a GPT-style decoder layer (RMSNorm, SDPA causal attention,
  SwiGLU MLP) at batch 1, one new token over a KV cache (its matmuls memory-bound), and at
  batch 32 over a prompt (compute-bound);
- ``conv``: conv + batchnorm + relu (inference);
- ``decoder12``: a 12-layer, ~100M-parameter decoder over a prompt (scripts/
  bench_profile_decoder.py times its profile);
- ``gpt2_prefill`` / ``gpt2_decode``, ``llama_gqa_prefill``: transformers' models built from
  their configs (issue 38's acceptance), ``gpt2_decode_cache`` the decode over a transformers
  DynamicCache passed in, ``bert_encoder`` a 4-layer BERT; ``resnet18``: torchvision's
  layout written out here.

Sizes come from MODEL_ZOO_SCALE (``full``, the default, for the committed runs;
``tiny`` for the tests). Every module is in eval mode; `roofbench model` adds no_grad.
"""

from __future__ import annotations

import os

import torch
import torch.nn.functional as F
from torch import nn

FULL = os.environ.get("MODEL_ZOO_SCALE", "full") != "tiny"


class RMSNorm(nn.Module):
    def __init__(self, d: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class SwiGLU(nn.Module):
    def __init__(self, d: int, hidden: int) -> None:
        super().__init__()
        self.w1 = nn.Linear(d, hidden, bias=False)
        self.w3 = nn.Linear(d, hidden, bias=False)
        self.w2 = nn.Linear(hidden, d, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class MLPBlock(nn.Module):
    def __init__(self, d: int, hidden: int) -> None:
        super().__init__()
        self.norm, self.mlp = RMSNorm(d), SwiGLU(d, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.mlp(self.norm(x))


class DecoderLayer(nn.Module):
    """Pre-norm: x + attn(norm(x)), then + mlp(norm(.)); attention by SDPA, causal over the
    prompt, or one new token over a KV cache (``past``)."""

    def __init__(self, d: int, heads: int, hidden: int) -> None:
        super().__init__()
        self.heads = heads
        self.attn_norm = RMSNorm(d)
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.out = nn.Linear(d, d, bias=False)
        self.block = MLPBlock(d, hidden)

    def forward(self, x: torch.Tensor, past: tuple[torch.Tensor, torch.Tensor] | None = None
                ) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.attn_norm(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2)
                   for z in (q, k, v))
        if past is not None:
            k, v = torch.cat([past[0], k], dim=2), torch.cat([past[1], v], dim=2)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=past is None)
        x = x + self.out(a.transpose(1, 2).reshape(b, t, d))
        return self.block(x)


class Decoder(nn.Module):
    def __init__(self, layers: int, d: int, heads: int, hidden: int, vocab: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList(DecoderLayer(d, heads, hidden) for _ in range(layers))
        self.norm = RMSNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.embed.weight  # tied

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids)
        for layer in self.layers:
            x = layer(x)
        return self.head(self.norm(x[:, -1:]))  # the next token's logits


def l2norm_fn(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.sqrt(a * a + b * b)


def rownorm_fn(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    return x / torch.sqrt((x * x).sum(-1, keepdim=True) + eps)


def _gen() -> torch.Generator:
    return torch.Generator().manual_seed(0)


def _randn(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=_gen())


# The decoder layer's shape: GPT-2 small's width (d 768, 12 heads), a SwiGLU of 2048.
D, HEADS, HIDDEN = (768, 12, 2048) if FULL else (64, 4, 256)


def l2norm():
    n = (1 << 24) if FULL else 4096
    return l2norm_fn, (_randn(n), _randn(n))


def rownorm():
    rows, hidden = (4096, 4096) if FULL else (16, 64)
    return rownorm_fn, (_randn(rows, hidden),)


def mlp():
    torch.manual_seed(0)
    tokens = 512 if FULL else 8
    return MLPBlock(D, HIDDEN).eval(), (_randn(1, tokens, D),)


def decode():
    """Batch 1: one new token over a KV cache of 512 (its matmuls are GEMVs)."""
    torch.manual_seed(0)
    past = 512 if FULL else 16
    layer = DecoderLayer(D, HEADS, HIDDEN).eval()
    kv = (_randn(1, HEADS, past, D // HEADS), _randn(1, HEADS, past, D // HEADS))
    return layer, (_randn(1, 1, D), kv)


def prefill():
    """Batch 32 prompts of 64 tokens (2048 rows per matmul)."""
    torch.manual_seed(0)
    seq = 64 if FULL else 16
    return DecoderLayer(D, HEADS, HIDDEN).eval(), (_randn(32, seq, D),)


def conv():
    torch.manual_seed(0)
    c, hw = (64, 56) if FULL else (8, 8)
    block = nn.Sequential(nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c),
                          nn.ReLU()).eval()
    return block, (_randn(8 if FULL else 2, c, hw, hw),)


def decoder12():
    """12 layers, d 768, SwiGLU 2048, vocab 32000 (tied head): ~110M parameters; a batch-1
    prompt of 128 tokens."""
    torch.manual_seed(0)
    layers, vocab, seq = (12, 32000, 128) if FULL else (2, 128, 8)
    model = Decoder(layers, D, HEADS, HIDDEN, vocab).eval()
    ids = torch.randint(0, vocab, (1, seq), generator=_gen())
    return model, (ids,)


# -- transformers' GPT-2, built from its config (random weights, nothing downloaded) -------

def _gpt2() -> nn.Module:
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    cfg = GPT2Config() if FULL else GPT2Config(n_layer=2, n_embd=64, n_head=4,
                                                 vocab_size=256, n_positions=64)
    cfg._attn_implementation = "sdpa"
    return GPT2LMHeadModel(cfg).eval()


def gpt2_prefill():
    """GPT-2 small (124M, fp32) over a 256-token prompt at batch 1 (8 tokens tiny)."""
    model = _gpt2()
    seq = 256 if FULL else 8
    ids = torch.randint(0, model.config.vocab_size, (1, seq), generator=_gen())
    return (lambda x: model(input_ids=x, use_cache=False).logits), (ids,)


class GPT2Step(nn.Module):
    """One decode step of GPT-2 over a key/value cache held as plain tensors: a fresh
    DynamicCache is built from them on every call, so the caller's cache never grows (the
    cache copies the step makes, torch.cat of the past and the new token, are counted)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, ids: torch.Tensor, past: list[torch.Tensor]) -> torch.Tensor:
        from transformers import DynamicCache

        pairs = [(past[2 * i], past[2 * i + 1]) for i in range(len(past) // 2)]
        cache = DynamicCache(ddp_cache_data=pairs, config=self.model.config)
        return self.model(input_ids=ids, cache=cache, use_cache=True).logits


def gpt2_decode():
    """One GPT-2 small decode step (batch 1) over a 256-token KV cache (8 tiny)."""
    model = _gpt2()
    c = model.config
    past_len = 256 if FULL else 8
    hd = c.n_embd // c.n_head
    past = [_randn(1, c.n_head, past_len, hd) for _ in range(2 * c.n_layer)]
    ids = torch.randint(0, c.vocab_size, (1, 1), generator=_gen())
    return GPT2Step(model), (ids, past)


def gpt2_decode_cache():
    """The same decode step as users write it: a transformers ``DynamicCache`` of 256 tokens
    (8 tiny), prefilled by the model, passed to the step; roofbench rewinds it before each
    run (bench/profile/caller_state.py ``Caches``) and leaves it as it was."""
    model = _gpt2()
    past_len = 256 if FULL else 8
    prompt = torch.randint(0, model.config.vocab_size, (1, past_len), generator=_gen())
    with torch.no_grad():
        cache = model(input_ids=prompt, use_cache=True).past_key_values
    ids = torch.randint(0, model.config.vocab_size, (1, 1), generator=_gen())
    return (lambda x, c: model(input_ids=x, cache=c, use_cache=True).logits), (ids, cache)


# -- transformers' Llama with grouped-query attention, built from its config ----------------

def llama_gqa_prefill():
    """A 4-layer Llama (hidden 1024, 16 query heads over 4 key/value heads, SwiGLU 2816,
    vocab 32000: 98M parameters, fp32, random weights) over a 256-token prompt (8 tiny)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = (LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=4,
                       num_attention_heads=16, num_key_value_heads=4, vocab_size=32000)
           if FULL else
           LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, vocab_size=256))
    cfg._attn_implementation = "sdpa"
    model = LlamaForCausalLM(cfg).eval()
    seq = 256 if FULL else 8
    ids = torch.randint(0, cfg.vocab_size, (1, seq), generator=_gen())
    return (lambda x: model(input_ids=x, use_cache=False).logits), (ids,)


# -- ResNet-18, written out here (torchvision does not import beside torch 2.13) ------------

class _Basic(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(cout)
        self.down = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                   nn.BatchNorm2d(cout)) if stride != 1 or cin != cout
                     else nn.Identity())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.b1(self.c1(x)))
        return F.relu(self.b2(self.c2(y)) + self.down(x))


class ResNet18(nn.Module):
    """torchvision's resnet18 layout: a 7x7 stem, four stages of two basic blocks
    (64-512 channels), average pool, a 1000-way linear layer (11.7M parameters)."""

    def __init__(self, width: int = 64, classes: int = 1000) -> None:
        super().__init__()
        w = width
        self.stem = nn.Sequential(nn.Conv2d(3, w, 7, 2, 3, bias=False), nn.BatchNorm2d(w),
                                  nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        chans = [w, w, 2 * w, 4 * w, 8 * w]
        self.stages = nn.Sequential(*[
            nn.Sequential(_Basic(chans[i], chans[i + 1], 1 if i == 0 else 2),
                          _Basic(chans[i + 1], chans[i + 1], 1)) for i in range(4)])
        self.fc = nn.Linear(8 * w, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stages(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def resnet18():
    """ResNet-18 inference at batch 1 on a 224x224 image (tiny: width 8, 32x32)."""
    torch.manual_seed(0)
    model = ResNet18() if FULL else ResNet18(width=8, classes=10)
    side = 224 if FULL else 32
    return model.eval(), (_randn(1, 3, side, side),)


# -- transformers' BERT encoder, built from its config ---------------------------------------

def bert_encoder():
    """A 4-layer BERT encoder (hidden 512, 8 heads, intermediate 2048: 29M parameters, fp32,
    random weights) over a 128-token sequence at batch 1 (8 tiny)."""
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    cfg = (BertConfig(hidden_size=512, num_hidden_layers=4, num_attention_heads=8,
                      intermediate_size=2048) if FULL else
           BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                      intermediate_size=128, vocab_size=256))
    cfg._attn_implementation = "sdpa"
    model = BertModel(cfg).eval()
    seq = 128 if FULL else 8
    ids = torch.randint(0, cfg.vocab_size, (1, seq), generator=_gen())
    return (lambda x: model(input_ids=x).last_hidden_state), (ids,)
