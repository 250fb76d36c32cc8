"""Issue 38's JAX acceptance model: a GPT-2-sized transformer block written with flax.linen's
own layers (LayerNorm, MultiHeadDotProductAttention, Dense), random weights, fp32, profiled
by ``roofbench.profile`` as the jitted program it is (XLA compiles the block into one
program: it is placed whole, with XLA's cost analysis beside roofbench's count of its jaxpr).

    pip install flax        # not a roofbench dependency: this script's alone
    .venv/bin/python scripts/profile_flax.py ROOFS OUT [SEQ]

Writes the profile to OUT and OUT/acceptance.json: XLA's and roofbench's FLOPs beside the
analytic count of the block, the program's time, its placement and efficiency, and its
projection onto the stored H200 roofs.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
H200 = ROOT / "results" / "nvidia-h200" / "first-contact-ea800a6" / "gemm-4096" / "results.json"
D, HEADS, HIDDEN = 768, 12, 3072


def block_module():  # type: ignore[no-untyped-def]
    import flax.linen as nn

    class Block(nn.Module):
        @nn.compact
        def __call__(self, x):  # type: ignore[no-untyped-def]
            h = nn.LayerNorm()(x)
            mask = nn.make_causal_mask(x[..., 0])
            x = x + nn.MultiHeadDotProductAttention(num_heads=HEADS)(h, h, mask=mask)
            h = nn.LayerNorm()(x)
            return x + nn.Dense(D)(nn.gelu(nn.Dense(HIDDEN)(h)))

    return Block()


def analytic_flops(seq: int) -> int:
    """Multiply-adds of the block's matmuls, 2 FLOPs each: q, k, v, out projections, the
    attention scores and their weighted sum (the whole seq x seq square, as XLA computes it
    under a mask), and the MLP's two layers."""
    proj = 4 * seq * D * D
    attn = 2 * seq * seq * D
    mlp = 2 * seq * D * HIDDEN
    return 2 * (proj + attn + mlp)


def main() -> int:
    sys.path.insert(0, str(ROOT))
    import jax
    import jax.numpy as jnp

    import roofbench

    roofs, out = sys.argv[1], sys.argv[2]
    seq = int(sys.argv[3]) if len(sys.argv) > 3 else 256
    model = block_module()
    x = jax.random.normal(jax.random.PRNGKey(0), (1, seq, D), jnp.float32)
    params = model.init(jax.random.PRNGKey(1), x)
    fn = jax.jit(model.apply)
    t0 = time.perf_counter()
    p = roofbench.profile(fn, params, x, roofs=roofs)
    wall = time.perf_counter() - t0
    p.project(H200)
    p.write(out)
    c = p.program
    j = p.extra["jax"]
    s = {"model": "flax.linen block (GPT-2 small width)", "seq": seq,
         "flax": __import__("flax").__version__, "jax": jax.__version__,
         "profile_wall_s": wall, "analytic_flops": analytic_flops(seq),
         "xla_flops": j["xla_flops"], "own_flops": j["own_flops"],
         "xla_over_analytic": (j["xla_flops"] or 0) / analytic_flops(seq),
         "own_over_analytic": j["own_flops"] / analytic_flops(seq),
         "xla_bytes": j["xla_bytes"], "own_bytes_io": j["own_bytes_io"],
         "own_bytes_unfused": j["own_bytes_unfused"],
         "program_median_s": c.measurement.median_s, "status": c.outcome.status,
         "level": c.roofline.placement.level if c.roofline.placement else None,
         "limiting_roof": c.roofline.limiting_roof, "efficiency": c.roofline.efficiency,
         "flags": c.measurement.timing.flags if c.measurement.timing else [],
         "h200_bound_s": p.extra["projection"]["program_bound_s"]}
    Path(out, "acceptance.json").write_text(json.dumps(s, indent=1, default=str))
    print(json.dumps(s, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
