"""The tensor-parallel GEMM model against hand-computed numbers, the book's ridge shift, the
interconnect roof records, the `distributed` CLI, and the GPU link probes (gpu marker)."""

from __future__ import annotations

import json
import math

import pytest
from roofbench.bench.cli import main
from roofbench.roofs import distributed as dist
from roofbench.roofs.probes import gpu_links as gl
from roofbench.roofs.probes import links as ic

from roofbench.readers import read_roofset
from roofbench.roof_records import Roof, RoofSet

MiB = 1 << 20


# ----------------------------------------------------------------------- accounting


def test_single_gpu_gemm_matches_rooflines_formula():
    pt = dist.tp_gemm_counts(1024, 1024, 1024, 1, "single", "bf16")
    assert pt.flops_per_gpu == 2 * 1024**3 == 2_147_483_648
    assert pt.hbm_bytes_per_gpu == 3 * 1024**2 * 2 == 6_291_456
    assert pt.link_bytes_per_gpu == 0 and math.isinf(pt.ai_link)
    assert pt.ai_hbm == pytest.approx(1024 / 3)  # 2n / (3 x 2 bytes)
    # square FP32 n = 4096: 2n^3 / (3 n^2 x 4 bytes) = n / 6 -> ~683 FLOP/byte
    assert dist.tp_gemm_counts(4096, 4096, 4096, 1, "single", "fp32").ai_hbm == \
        pytest.approx(682.67, abs=0.01)


def test_row_split_hand_counts():
    # K split over p = 2: A 1024x512, B 512x1024 per GPU, partial C 1024x1024, all-reduced.
    pt = dist.tp_gemm_counts(1024, 1024, 1024, 2, "row", "bf16")
    assert pt.collective == "allreduce"
    assert pt.flops_per_gpu == 2**30
    assert pt.hbm_bytes_per_gpu == (512 * 1024 + 512 * 1024 + 1024 * 1024) * 2 == 4 * MiB
    assert pt.link_bytes_per_gpu == 2 * (1 / 2) * 1024 * 1024 * 2 == 2 * MiB  # 2(p-1)/p x MN
    assert pt.ai_hbm == 256.0 and pt.ai_link == 512.0
    # AI_link = K / ((p - 1) x bytes) for the row split
    assert dist.tp_gemm_counts(64, 64, 4096, 8, "row", "fp16").ai_link == \
        pytest.approx(4096 / (7 * 2))


def test_column_split_hand_counts():
    # N split over p = 4: B 1024x256, C 1024x256 per GPU, A whole; C all-gathered.
    pt = dist.tp_gemm_counts(1024, 1024, 1024, 4, "column", "bf16")
    assert pt.collective == "allgather"
    assert pt.flops_per_gpu == 2**29
    assert pt.hbm_bytes_per_gpu == (1024 * 1024 + 1024 * 256 + 1024 * 256) * 2 == 3 * MiB
    assert pt.link_bytes_per_gpu == 0.75 * 1024 * 1024 * 2 == 1.5 * MiB  # (p-1)/p x MN
    assert pt.ai_link == pytest.approx(2**29 / (1.5 * MiB))  # = 2K / ((p-1) x bytes)
    assert pt.ai_link == pytest.approx(2 * 1024 / (3 * 2))


def test_bad_model_input():
    with pytest.raises(ValueError, match="split"):
        dist.tp_gemm_counts(8, 8, 8, 2, "diagonal", "bf16")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=">= 1"):
        dist.tp_gemm_counts(8, 0, 8, 2, "row", "bf16")
    with pytest.raises(ValueError, match="dtype"):
        dist.tp_gemm_counts(8, 8, 8, 2, "row", "fp7")


# ------------------------------------------------------------------------ the book


def test_book_ridge_shift():
    shift, roofs, rows = dist.book_example()
    assert shift.ridge_hbm == pytest.approx(156.0)  # 312 T / 2 T
    assert shift.ridge_link == pytest.approx(520.0)  # 312 T / 0.6 T: the ridge moves right
    assert shift.ai == pytest.approx(341.333, abs=1e-3)
    # compute-bound against HBM, bandwidth-bound once the bytes cross the link
    assert shift.bound_hbm == "compute" and shift.attainable_hbm == 312e12
    assert shift.bound_link == "bandwidth"
    assert shift.attainable_link == pytest.approx(0.6e12 * 1024 / 3)  # 204.8 TFLOP/s
    assert roofs.ridges() == {"hbm": pytest.approx(156.0), "link": pytest.approx(520.0)}
    by = {(r.split, r.p): r for r in rows}
    assert by[("single", 1)].bound == "compute"
    assert by[("single", 1)].attainable_per_gpu == 312e12
    row2 = by[("row", 2)]  # AI_link 512 < 520: the same GEMM split two ways turns link-bound
    assert row2.bound == "interconnect"
    assert row2.attainable_per_gpu == pytest.approx(0.6e12 * 512)  # 307.2 TFLOP/s
    assert by[("row", 4)].attainable_per_gpu == pytest.approx(0.6e12 * 1024 / 6)  # 102.4 T
    assert by[("column", 2)].bound == "compute"  # AI_link 1024 > 520


def test_same_point_is_compute_bound_without_the_link():
    _, roofs, _ = dist.book_example()
    pt = dist.tp_gemm_counts(1024, 1024, 1024, 2, "row", "bf16")
    b = roofs.roofs.bound({"dram": pt.ai_hbm}, "bf16_tc")  # no link intensity given
    assert b.limiter == "compute"  # AI_hbm 256 > ridge 156


# ------------------------------------------------------------------- roof sources


def _measured(levels: dict[str, float]) -> RoofSet:
    rs = RoofSet(device="Test GPU")
    rs.add(Roof("bf16 gemm", "compute", 800e12, "measured", precision="bf16_tc"))
    rs.add(Roof("triad", "memory", 4e12, "measured", level="dram"))
    for lvl, v in levels.items():
        rs.add(Roof(f"{lvl} roof", "interconnect", v, "measured", level=lvl))
    return rs


def test_measured_link_wins_and_says_so():
    rs = _measured({"nccl_allreduce": 370e9, "nccl_allgather": 350e9, "mpi_p2p": 20e9})
    row = dist.resolve_roofs("bf16_tc", "row", rs, "f.json", link=1e9)
    assert row.link == 370e9 and "measured nccl_allreduce" in row.provenance["link"]
    assert "--link-bw ignored" in row.provenance["note"]
    col = dist.resolve_roofs("bf16_tc", "column", rs, "f.json")
    assert col.link == 350e9 and "nccl_allgather" in col.provenance["link"]


def test_user_link_used_without_measured_one():
    rs = _measured({})
    r = dist.resolve_roofs("bf16_tc", "row", rs, "f.json", link=450e9)
    assert r.link == 450e9 and r.provenance["link"].startswith("user-given --link-bw")
    assert r.peak == 800e12 and "measured" in r.provenance["compute"]
    with pytest.raises(KeyError, match="--link-bw"):
        dist.resolve_roofs("bf16_tc", "row", rs, "f.json")
    with pytest.raises(KeyError, match="--peak"):
        dist.resolve_roofs("fp8_tc", "row", rs, "f.json", link=1e9)


# ------------------------------------------------------------------------ interconnect


def test_bus_factors_are_nccl_tests():
    assert ic.bus_factor("allreduce", 8) == pytest.approx(2 * 7 / 8)
    assert ic.bus_factor("allgather", 8) == pytest.approx(7 / 8)
    assert ic.bus_factor("reducescatter", 4) == pytest.approx(3 / 4)
    assert ic.bus_factor("allreduce", 2) == 1.0
    assert ic.bus_factor("allreduce", 1) == 0.0


def test_link_measurement_roof_takes_best_busbw():
    m = ic.LinkMeasurement(op="allreduce", library="MPI", level="mpi_allreduce", ranks=4)
    for size, t in ((MiB, 1e-3), (16 * MiB, 8e-3)):
        pt = ic.SizePoint(bytes=size, iters=3, samples_s=[t, t * 1.1, t * 0.9])
        pt.algbw = size / pt.median_s
        pt.busbw = pt.algbw * ic.bus_factor("allreduce", 4)
        m.points.append(pt)
    roof = m.to_roof()
    assert roof is not None and roof.kind == "interconnect" and roof.level == "mpi_allreduce"
    assert roof.value == pytest.approx(16 * MiB / 8e-3 * 1.5)
    assert roof.evidence["best_size_bytes"] == 16 * MiB
    assert read_roofset({"device": "x", "roofs": [roof.to_dict()]}).interconnect(
        "mpi_allreduce").value == roof.value
    one = ic.LinkMeasurement(op="allreduce", library="NCCL", level="nccl_allreduce", ranks=1)
    one.points.append(ic.SizePoint(bytes=MiB, iters=1, samples_s=[1e-4], algbw=1e10, busbw=0))
    assert one.to_roof() is None  # one rank: nothing crossed a link


def test_gpu_probes_say_no_gpu_cleanly():
    if gl.gpu_count() > 0:
        pytest.skip("a GPU is present: covered by the gpu tests")
    with pytest.raises(gl.GpuUnavailable, match="no GPU"):
        gl.nccl_collectives(sizes=[MiB])
    with pytest.raises(gl.GpuUnavailable, match="no GPU"):
        gl.p2p_matrix(size=MiB)


@pytest.mark.gpu
def test_nccl_collectives_on_this_machine():
    res = gl.nccl_collectives(sizes=[MiB, 16 * MiB], samples=3)
    assert [m.op for m in res] == ["allreduce", "allgather", "reducescatter"]
    for m in res:
        assert all(p.algbw > 0 for p in m.points)
        if m.ranks == 1:
            assert "one device" in m.note and m.to_roof() is None
        else:
            assert m.to_roof().value == m.peak_busbw > 0


@pytest.mark.gpu
def test_p2p_matrix_on_this_machine():
    res = gl.p2p_matrix(size=64 * MiB, samples=3)
    if res.devices == 1:
        assert res.note == "one device: no peer pairs to measure" and res.to_roof() is None
    else:
        assert all(res.bandwidth[i][j] > 0 for i in range(res.devices)
                   for j in range(res.devices) if i != j)
        assert res.to_roof().level == "gpu_p2p"


# ----------------------------------------------------------------------------- CLI


def test_cli_book(capsys):
    assert main(["distributed", "--book"]) == 0
    out = capsys.readouterr().out
    assert "156.0 FLOP/B" in out and "520.0 FLOP/B" in out
    assert "(compute-bound)" in out and "(bandwidth-bound)" in out
    assert "assumed: A100" in out


def test_cli_user_link_and_outputs(tmp_path, capsys):
    js, png = tmp_path / "tp.json", tmp_path / "tp.png"
    assert main(["tp", "-m", "1024", "-n", "1024", "-k", "1024", "-p", "2", "--peak", "312T",
                 "--hbm-bw", "2TB/s", "--link-bw", "600G", "--json", str(js),
                 "--plot", str(png)]) == 0
    out = capsys.readouterr().out
    assert "user-given --link-bw 600 GB/s" in out
    d = json.loads(js.read_text())
    row2 = next(r for r in d["rows"] if r["split"] == "row")
    assert row2["bound"] == "interconnect" and row2["attainable_per_gpu"] == pytest.approx(307.2e12)
    assert png.stat().st_size > 1000 and not list(tmp_path.glob(".*tmp*"))


def test_cli_measured_roofs_file(tmp_path, capsys):
    f = tmp_path / "rank0.json"
    f.write_text(json.dumps(_measured({"mpi_allreduce": 5e9}).to_dict()))
    assert main(["tp", "--roofs", str(f), "-p", "2", "--split", "row", "--link-bw", "1T"]) == 0
    out = capsys.readouterr().out
    assert "measured mpi_allreduce roof 5 GB/s" in out and "--link-bw ignored" in out


def _rc(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as e:  # argparse errors exit(2) with one line
        return int(e.code)


@pytest.mark.parametrize("argv, msg", [
    (["tp", "--peak", "1T", "--hbm-bw", "1T"], "no link bandwidth"),
    (["tp", "--link-bw", "fast"], "not a rate"),
    (["tp", "--link-bw", "0"], "must be > 0"),
    (["tp", "-p", "0"], "GPU counts must be >= 1"),
    (["tp", "--roofs", "/nonexistent/roofs.json", "--link-bw", "1G"], "no such roofs file"),
])
def test_cli_bad_input(argv, msg, capsys):
    assert _rc(argv) == 2
    err = capsys.readouterr().err
    assert msg in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_cli_corrupt_roofs_file(tmp_path, capsys):
    f = tmp_path / "bad.json"
    f.write_text("{not json")
    assert _rc(["tp", "--roofs", str(f), "--link-bw", "1G"]) == 2
    err = capsys.readouterr().err
    assert f"{f}: corrupt roofs file" in err and len(err.splitlines()) == 1
