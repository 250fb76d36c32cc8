"""A profile projected onto another device's roofs (bench/profile/project.py): the
stored H200 roofs file, each op's bound by hand, marked as a projection."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from roof_sets import model_files  # noqa: E402
from roofbench.bench.profile.project import MARK  # noqa: E402
from roofbench.roofs.files import load_roofs  # noqa: E402

import roofbench  # noqa: E402

from .test_caller_state import FAST, ROOFS  # noqa: E402

H200 = (Path(__file__).resolve().parents[3] / "results" / "nvidia-h200"
        / "first-contact-ea800a6" / "gemm-4096" / "results.json")


def test_projection_onto_the_stored_h200_roofs_is_each_ops_bound_there():
    w, x = torch.randn(512, 512, dtype=torch.bfloat16), torch.randn(16, 512,
                                                                    dtype=torch.bfloat16)
    with torch.no_grad():
        prof = roofbench.profile(lambda a: torch.relu(a @ w), x, roofs=ROOFS, timer=FAST)
    proj = prof.project(H200)
    h200 = load_roofs(H200)
    hbm, tc = h200.memory("dram").value, h200.compute("bf16_tc").value
    by = {p.name: p for p in proj.ops}
    mm = by["aten.mm.default"]
    flops, nbytes = 2 * 16 * 512 * 512, (16 * 512 + 512 * 512 + 16 * 512) * 2
    assert (mm.flops, mm.bytes, mm.precision) == (flops, nbytes, "bf16_tc")
    # 16 rows: far left of the ridge, the weight from HBM bounds it
    assert mm.bound_s == pytest.approx(max(flops / tc, nbytes / hbm))
    assert mm.limiting_roof == h200.memory("dram").name and mm.level == "dram"
    relu = by["aten.relu.default"]
    assert relu.bound_s == pytest.approx(16 * 512 * 2 * 2 / hbm)
    assert proj.program_s == pytest.approx(mm.bound_s + relu.bound_s)
    assert proj.device == "NVIDIA H200" and proj.mark == MARK
    assert prof.extra["projection"]["program_bound_s"] == proj.program_s


def test_the_cli_projects_with_on_and_says_a_bad_file_in_one_line(tmp_path, capsys):
    from roofbench.bench.cli import main

    script, roofs = model_files(tmp_path, "(lambda a: a * 2), (torch.randn(256),)",
                                ROOFS.to_dict())
    out = tmp_path / "o"
    assert main(["model", str(script), "--roofs", str(roofs), "--out", str(out),
                 "--on", str(H200)]) == 0
    said = capsys.readouterr().out
    assert "projected onto NVIDIA H200 (projection" in said
    assert "Projected onto NVIDIA H200: a projection" in (out / "profile.md").read_text()
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    code = main(["model", str(script), "--roofs", str(roofs), "--out", str(tmp_path / "p"),
                 "--on", str(bad)])
    err = capsys.readouterr().err
    assert code != 0 and err.count("\n") == 1 and "--on:" in err
