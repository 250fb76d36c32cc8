"""What the profile report says (bench/profile/report.py): the compiled program's
speedup beside the bytes ratio while memory-bound, and not when compute-bound; where the
roofs came from; the overhead's sign."""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")

from roofbench.bench.profile.compiled import Compiled  # noqa: E402
from roofbench.bench.profile.report import compiled_lines, sections  # noqa: E402

from .test_torch_program import run  # noqa: E402


def with_compiled(prof, median_s, fused_bytes):
    case = copy.deepcopy(prof.program)
    case.identity.variant, case.measurement.median_s = "compiled", median_s
    eager_bytes = prof.program.declaration.bytes["dram"]
    prof.compiled = Compiled(case, kernels=["cpp_fused_x_0"], eager_bytes=eager_bytes,
                             fused_bytes=fused_bytes)
    return prof


def test_memory_bound_speedup_is_set_beside_the_bytes_ratio():
    prof = run(lambda a, b: torch.sqrt(a * a + b * b), torch.randn(64), torch.randn(64))
    prof = with_compiled(prof, prof.program.measurement.median_s / 2, 12 * 64)
    first, second = compiled_lines(prof)[:2]  # then the 2x line, where it is off
    assert "generated 1 kernel(s): `cpp_fused_x_0`" in first
    assert "0.0833 -> 0.0833 FLOP/B" in second  # the copied case keeps the eager count
    assert "speedup 2x, against a bytes ratio of 3x (the bound while memory-bound)" in second


def test_compute_bound_program_is_not_held_to_the_bytes_ratio():
    a = torch.randn(128, 128)
    prof = run(torch.mm, a, a)
    assert prof.program.roofline.bound == "compute"
    prof = with_compiled(
        prof, prof.program.measurement.median_s, prof.program.declaration.bytes["dram"] // 2
    )
    second = compiled_lines(prof)[1]
    assert "but the program is compute-bound" in second and "against" not in second


def test_the_program_section_names_its_roofs_and_the_overhead():
    prof = run(lambda t: t * 2, torch.randn(32))
    items = next(b for b in sections(prof)[0].blocks if hasattr(b, "items")).items
    text = "\n".join(items)
    assert "roofs from a RoofSet given, DRAM 20 GB/s (dram stream)" in text
    assert "fp32 200 GFLOP/s (fp32 fma), ridge 10 FLOP/B" in text
    assert "framework and dispatch overhead (program - sum of ops): " in text
    assert "torch threads" in text


def test_a_group_more_than_2x_off_its_compiled_speedup_says_why():
    from roofbench.bench.profile.compiled import GroupTiming
    from roofbench.bench.profile.report import group_rows

    prof = run(lambda a, b: torch.sqrt(a * a + b * b), torch.randn(4096), torch.randn(4096))
    assert prof.groups
    g = prof.groups[0]
    g.eager_s = 1e-3  # its ops in the program
    eager, comp = copy.deepcopy(prof.program), copy.deepcopy(prof.program)
    eager.measurement.median_s, comp.measurement.median_s = 1e-4, 5e-5  # replayed: 2x
    prof.compiled = Compiled(copy.deepcopy(prof.program), kernels=["k"],
                             eager_bytes=1, fused_bytes=1)
    prof.compiled.groups = [GroupTiming(0, eager, comp, ["k"])]
    prof.extra["launch_s"] = 1e-6
    prof.compiled.call_s = 2e-6  # a compiled call's own cost
    row = group_rows(prof)[0]
    assert row["predicted bound"] == f"{g.bounded_speedup(prof.roofs, 1e-6):.3g}x"
    predicted = g.fused_roof_s(prof.roofs) + 2e-6
    assert predicted < 2.5e-5  # so the replay's 50 us is more than 2x off
    assert row["predicted / measured"] == f"{5e-5 / predicted:.3g}"
    assert "the compiled replay took 50 us against" in row["why not within 2x"]
    assert "+ 2 us for a compiled call" in row["why not within 2x"]
    assert "took 1 ms in the program, 100 us replayed alone" in row["why not within 2x"]
    assert "it computes sqrt, counted 0 FLOPs" in row["why not within 2x"]
    comp.measurement.median_s = predicted * 1.5  # within 2x: nothing to explain
    row = group_rows(prof)[0]
    assert row["predicted / measured"] == "1.5" and row["why not within 2x"] == "-"
