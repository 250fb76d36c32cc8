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
  bench_profile_decoder.py times its profile).

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
