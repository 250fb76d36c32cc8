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
