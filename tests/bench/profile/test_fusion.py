"""Fusion groups from the recorded data flow (bench/profile/fusion.py) and the
eager -> compiled arrow of the book's example (profile/compiled.py): 0.083 -> 0.25 FLOP/B
in fp32."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from roofbench.bench.profile.compiled import generated_kernels  # noqa: E402

import roofbench  # noqa: E402

from .test_torch_program import FAST, ROOFS  # noqa: E402


def groups(fn, *args):
    with torch.no_grad():
        prof = roofbench.profile(fn, *args, roofs=ROOFS, timer=FAST)
    return prof, [(g.names, g.count, g.eager_bytes, g.fused_bytes) for g in prof.groups]


def test_the_book_example_is_one_group_of_four_ops_36_to_12_bytes():
    n = 1024
    _, got = groups(lambda a, b: torch.sqrt(a * a + b * b), torch.randn(n), torch.randn(n))
    assert got == [(["mul", "mul", "add", "sqrt"], 1, 36 * n, 12 * n)]


def test_row_wise_form_fuses_to_one_read_and_one_write():
    rows, hidden = 8, 64
    prof, got = groups(lambda x: x / torch.sqrt((x * x).sum(-1, keepdim=True) + 1e-6),
                       torch.randn(rows, hidden))
    (names, count, eager, fused), = got
    assert names == ["mul", "sum", "add", "sqrt", "div"] and count == 1
    n = rows * hidden
    # square 8 B, row-sum 4 B (+ the row), +eps and sqrt per row, scale 12 B per element
    assert eager == 8 * n + (4 * n + 4 * rows) + 8 * rows + 8 * rows + (8 * n + 4 * rows)
    assert fused == 8 * n  # x read once, y written once: the single-pass bound
    assert prof.program.declaration.flops == 3 * n + rows  # square, sum, scale; + eps per row


def test_a_group_reading_rows_of_a_table_moves_no_more_than_its_eager_ops():
    """An embedding of one token reads one row of a 4096 x 64 table (its rule: 256 B), not the
    table: the fused kernel's bytes are bounded by the eager ops' (GPT-2's token and position
    embeddings were predicted to move 158 MB fused, 21.5 kB eager)."""
    table, pos = torch.randn(4096, 64), torch.randn(1, 64)
    ids = torch.tensor([[7]])
    _, got = groups(lambda i: torch.nn.functional.embedding(i, table) * 2 + pos, ids)
    (names, count, eager, fused), = got
    assert names[0] == "embedding" and count == 1
    assert eager < 4096 * 64 * 4 // 100  # a row per token, not the table
    assert fused <= eager


def test_an_intermediate_read_twice_or_returned_breaks_the_group():
    a = torch.randn(256)
    def returned(x):
        t = x * 2
        return t, t + 1  # t returned: it must be written

    _, got = groups(returned, a)
    assert got == []
    _, got = groups(lambda x: (lambda t: t + t.exp())(x * 2), a)  # t read by two ops
    assert [g[0] for g in got] == [["exp", "add"]]


def test_identical_groups_are_one_row_counted():
    a = torch.randn(128)

    def prog(x):
        for _ in range(3):
            x = torch.sqrt(x * x + 1) @ torch.eye(128)  # mm between: three groups
        return x

    _, got = groups(prog, a)
    assert [(names, count) for names, count, *_ in got] == [(["mul", "add", "sqrt"], 3)]


def test_generated_kernels_are_read_from_inductor_code():
    code = ["cpp_fused_add_mul_sqrt_0 = async_compile.cpp_pybinding(['const float*'], '''",
            "extern_kernels.mm(buf0, arg1_1, out=buf1)\ntriton_poi_fused_0 = async_compile."
            "triton('x')"]
    assert generated_kernels(code) == (["cpp_fused_add_mul_sqrt_0", "triton_poi_fused_0"],
                                       ["mm"])


@pytest.mark.slow
def test_compiled_book_example_moves_from_0083_to_025_flop_per_byte():
    """torch.compile with inductor (the C++ build here): one kernel, 12 B per element."""
    n = 1 << 16
    a, b = torch.randn(n), torch.randn(n)
    with torch.no_grad():
        prof = roofbench.profile(lambda x, y: torch.sqrt(x * x + y * y), a, b, roofs=ROOFS,
                                 timer=FAST, compile=True)
    comp = prof.compiled
    assert comp.error is None, comp.error
    assert len(comp.kernels) == 1 and comp.kernels[0].startswith("cpp_fused")
    assert prof.program.declaration.ai["dram"] == pytest.approx(3 / 36)
    assert comp.case.declaration.ai["dram"] == pytest.approx(3 / 12)
    assert comp.case.declaration.arrow_from == "eager" and comp.case.measurement.median_s > 0
    assert comp.bytes_ratio == pytest.approx(3.0)
    (group,) = comp.groups  # the whole program is the one group: its arrow is the program's
    assert group.eager.declaration.ai["dram"] == pytest.approx(3 / 36)
    assert group.compiled.declaration.ai["dram"] == pytest.approx(3 / 12)
    assert group.compiled.measurement.median_s == comp.case.measurement.median_s


def test_a_group_replays_alone_on_its_first_calls_arguments():
    """The group function runs the members in order, an intermediate handed on as the view
    it was read as: the same values as the program (RMS norm's six ops)."""
    from roofbench.bench.profile.compiled import group_function
    from roofbench.bench.profile.torch_program import profile_torch

    x, w = torch.randn(4, 16), torch.randn(16)

    def rms(t):
        return t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + 1e-6) * w

    with torch.no_grad():
        prof = profile_torch(rms, (x,), {}, roofs=ROOFS, timer=FAST, name="rms")
        (g,) = prof.groups
        assert g.names == ["pow", "mean", "add", "rsqrt", "mul", "mul"]
        assert all(d.replay is None for d in prof.recording.distinct)  # freed once timed
        prof2 = profile_torch(rms, (x,), {}, roofs=ROOFS, timer=FAST, name="rms",
                              keep_replays=True)
        got = group_function(prof2, prof2.groups[0])()
    assert torch.allclose(got, rms(x))


def test_the_compiled_program_and_its_groups_are_timed_on_the_callers_threads(monkeypatch):
    """A roof sample beside a compiled sample (a Numba kernel's OpenMP region) moves torch's
    thread count; the compiled program and each group's replays are timed as the eager ops
    are (``held_paired_time``): every compiled call runs on the caller's count. torch.compile
    is stood in by a wrapper that reads the count at each call (no inductor build)."""
    import torch._inductor.utils as inductor_utils
    from roofbench.bench.measure import core, pairs

    from roofbench.timing import RoofPair

    seen: list[int] = []

    def compile_(f, *_a, **_k):
        def run(*args, **kwargs):
            seen.append(torch.get_num_threads())
            return f(*args, **kwargs)
        return run

    def moving_pair(*_a, **_k):
        def sample():  # as a Numba probe's OpenMP region does to the process
            torch.set_num_threads(caller + 1)
            return 1e9
        return RoofPair("memory:dram:moving", sample)

    monkeypatch.setattr(torch, "compile", compile_)
    monkeypatch.setattr(inductor_utils, "run_and_get_code",
                        lambda f, *a, **k: (f(*a, **k), []))
    monkeypatch.setattr(pairs, "pair_for", moving_pair)
    monkeypatch.setattr(core, "pair_for", moving_pair)
    before = torch.get_num_threads()
    caller = 1
    torch.set_num_threads(caller)
    try:
        x, w = torch.randn(8, 16), torch.randn(16, 16)
        with torch.no_grad():
            prof = roofbench.profile(lambda a, b: torch.relu(a @ b) * 2 + 1, x, w,
                                     roofs=ROOFS, timer=FAST, compile=True)
        assert torch.get_num_threads() == caller  # the caller's, after
    finally:
        torch.set_num_threads(before)
    comp = prof.compiled
    assert comp.error is None and comp.case.measurement.median_s > 0
    assert any(g.compiled is not None for g in comp.groups)  # a group replayed alone
    assert comp.case.measurement.timing.roof_probe == "memory:dram:moving"  # paired
    assert len(seen) > 10 and set(seen) == {caller}
