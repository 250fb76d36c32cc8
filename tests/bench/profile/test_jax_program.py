"""A jitted JAX function placed with XLA's cost_analysis() beside roofbench's count of its
jaxpr, timed with block_until_ready (bench/profile/jax_program.py)."""

from __future__ import annotations

import pytest

jax = pytest.importorskip("jax")
jnp = jax.numpy

from roofbench.bench.profile import jax_program  # noqa: E402

import roofbench  # noqa: E402

from .test_torch_program import FAST, ROOFS  # noqa: E402


def test_the_book_example_under_jit_is_placed_with_xla_counts():
    n = 4096
    f = jax.jit(lambda a, b: jnp.sqrt(a * a + b * b))
    a, b = jnp.ones(n, jnp.float32), jnp.full(n, 2.0, jnp.float32)
    prof = roofbench.profile(f, a, b, roofs=ROOFS, timer=FAST)
    j = prof.extra["jax"]
    assert j["xla_flops"] == 3 * n  # XLA counts sqrt as a transcendental, as the book
    assert j["xla_bytes"] == 12 * n  # the fused program: a, b read, out written
    assert (j["own_flops"], j["own_bytes_unfused"], j["own_bytes_io"]) == (3 * n, 36 * n,
                                                                          12 * n)
    assert prof.program.declaration.ai["dram"] == pytest.approx(0.25)
    assert prof.program.identity.backend == "jax" and prof.program.roofline.bound == "memory"
    assert prof.program.measurement.timing.n >= 2


def test_block_until_ready_is_what_the_timer_calls(monkeypatch):
    waited = []
    real = jax.block_until_ready
    monkeypatch.setattr(jax, "block_until_ready", lambda x: waited.append(1) or real(x))
    f = jax.jit(lambda x: x @ x)
    prof = roofbench.profile(f, jnp.ones((16, 16)), roofs=ROOFS, timer=FAST)
    assert (
        len(waited)
        >= prof.program.measurement.timing.n + prof.program.measurement.timing.warmup_runs
    )
    assert prof.extra["jax"]["own_flops"] == 2 * 16 ** 3 == prof.program.declaration.flops


def test_jax_is_recognised_only_for_jitted_functions_or_jax_arrays():
    assert jax_program.is_jax(jax.jit(lambda x: x), ())
    assert jax_program.is_jax(lambda x: x, (jnp.ones(2),))
    assert not jax_program.is_jax(lambda x: x, (1.0,))


def test_a_jax_profile_is_written_with_both_counts(tmp_path):
    f = jax.jit(lambda a: jnp.tanh(a) * 2.0)
    prof = roofbench.profile(f, jnp.ones(1024, jnp.float32), roofs=ROOFS, timer=FAST)
    prof.write(tmp_path)
    md = (tmp_path / "profile.md").read_text()
    assert "## JAX: XLA's count beside roofbench's" in md and "XLA cost_analysis()" in md
    assert "host clock after block_until_ready" in md


def test_a_jax_program_is_projected_whole_onto_the_stored_h200_roofs():
    """XLA compiles the program into one: it is projected as one op, its cost analysis'
    FLOPs over the H200's fp32 roof against its fused bytes over HBM (a planted projection
    of no ops would give 0 s)."""
    from pathlib import Path

    from roofbench.roofs.files import load_roofs

    h200_file = (Path(__file__).resolve().parents[3] / "results" / "nvidia-h200"
                 / "first-contact-ea800a6" / "gemm-4096" / "results.json")
    n = 128
    f = jax.jit(lambda a, b: a @ b)
    a = jnp.ones((n, n), jnp.float32)
    prof = roofbench.profile(f, a, a, roofs=ROOFS, timer=FAST)
    proj = prof.project(h200_file)
    h200 = load_roofs(h200_file)
    (op,) = proj.ops
    flops, nbytes = prof.program.declaration.flops, sum(prof.program.declaration.bytes.values())
    assert flops == 2 * n ** 3 and nbytes > 0
    want = max(flops / h200.compute("fp32").value, nbytes / h200.memory("dram").value)
    assert want > 0 and op.bound_s == pytest.approx(want) == proj.program_s
    assert op.calls == 1 and op.level == "dram" and "whole" in op.name
