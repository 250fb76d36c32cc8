"""The gpu-check Triton table (scripts/gpu_check_triton.py): a pure function of case records,
checked on fixture records, and its command on a stored H200 run (the first contact's GEMM
run as the CUDA C and library side, its wgmma case re-labelled as the Triton side)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from testpaths import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import gpu_check_triton as gt  # noqa: E402

H200_GEMM = ROOT / "results" / "nvidia-h200" / "first-contact-ea800a6" / "gemm-4096"
S = (4096, 4096, 4096)


def e(variant: str, backend: str, dtype: str = "fp16", *, size=S, status: str = "ok",
      t: float | None = 1e-3, eff: float | None = 0.5, error: str | None = None,
      workload: str = "gemm") -> gt.Entry:
    return gt.Entry(workload, variant, backend, dtype, size, status, t, eff, error)


def test_each_triton_case_beside_its_cuda_c_variant_and_the_library():
    triton = [e("tensor", "triton", t=2e-3, eff=0.25),
              e("flash", "triton", "bf16", workload="attention", size=(4, 16, 4096, 128))]
    cuda = [e("tensor", "cuda", t=1e-3, eff=0.5), e("library", "cuda", t=0.5e-3, eff=0.9),
            e("tensor", "cuda", "bf16", t=9.0), e("naive", "cuda", t=9.0),
            e("flash", "cuda", "bf16", workload="attention", size=(4, 16, 4096, 128),
              status="error", error="CUDA_ERROR_ILLEGAL_ADDRESS | line two\nmore")]
    rows = gt.table_rows(triton, cuda)
    assert [(r.workload, r.variant, r.dtype) for r in rows] == [
        ("gemm", "tensor", "fp16"), ("attention", "flash", "bf16")]
    assert rows[0].cuda == cuda[0] and rows[0].library == cuda[1]  # same dtype only
    assert rows[1].library is None
    lines = gt.render(rows).splitlines()
    assert lines[0] == ("| workload | variant | dtype | size | Triton | CUDA C | library "
                        "| Triton vs CUDA C |")
    assert lines[2] == ("| gemm | tensor | fp16 | 4096x4096x4096 | 2.000 ms, 25% of roof, ok "
                        "| 1.000 ms, 50% of roof, ok | 0.500 ms, 90% of roof, ok | 0.50x |")
    # a failed case: its status and the first line of its error, no column broken by a '|'
    assert lines[3] == ("| attention | flash | bf16 | 4x16x4096x128 | 1.000 ms, 50% of roof, "
                        "ok | error: CUDA_ERROR_ILLEGAL_ADDRESS / line two | - | - |")
    assert all(ln.count("|") == 9 for ln in lines)


def test_not_run_unsupported_and_other_sizes_are_said():
    triton = [e("scalar", "triton", "fp8", workload="vector_add", size=(1000,)),
              e("scalar", "triton", "fp64", workload="vector_add", status="unsupported"),
              e("scalar", "triton", "fp32", workload="vector_add", size=(1000,),
                status="invalid", t=None, eff=None)]
    cuda = [e("scalar", "cuda", "fp32", workload="vector_add", size=(500,), t=1e-3),
            e("scalar", "cuda", "fp32", workload="vector_add", size=(250,), t=1e-3)]
    rows = gt.table_rows(triton, cuda)
    assert [r.dtype for r in rows] == ["fp8", "fp32"]  # an unsupported case is no row
    assert rows[0].cuda is None and gt.cell(rows[0].cuda, (1000,)) == "-"
    assert rows[1].cuda == cuda[0]  # no case at its size: the largest, its size named
    assert gt.cell(rows[1].cuda, (1000,)) == "1.000 ms, 50% of roof, ok (at 500)"
    assert gt.cell(rows[1].triton, (1000,)) == "invalid"
    assert gt.ratio(rows[1].cuda, rows[1].triton) == "-"  # never across sizes or failures
    assert gt.ratio(e("x", "cuda", t=3e-3), e("x", "triton", t=1e-3)) == "3.00x"
    assert gt.ratio(e("x", "cuda", size=(1,)), e("x", "triton")) == "-"


def _triton_run(tmp: Path) -> Path:
    """The stored run with only its wgmma fp16 case, named a Triton run's, twice as slow."""
    d = json.loads((H200_GEMM / "results.json").read_text())
    d["backend"] = "triton"
    d["cases"] = [dict(c, backend="triton", median_s=c["median_s"] * 2,
                       flop_per_s=c["flop_per_s"] / 2, efficiency=c["efficiency"] / 2)
                  for c in d["cases"] if c["variant"] == "tensor"]  # twice as slow
    (tmp / "run").mkdir(parents=True)
    (tmp / "run" / "results.json").write_text(json.dumps(d))
    return tmp


def test_command_reads_stored_runs_and_writes_the_table(tmp_path, capsys):
    out, log = tmp_path / "t.md", tmp_path / "gpu_check.log"
    log.write_text("== make-bench ...\n")
    assert gt.main([str(_triton_run(tmp_path / "triton")), str(H200_GEMM),
                    "--out", str(out), "--append", str(log)]) == 0
    text = out.read_text()
    assert capsys.readouterr().out == text
    assert log.read_text() == f"== make-bench ...\n== Triton vs CUDA C vs library\n{text}"
    rows = text.splitlines()[2:]
    assert len(rows) == 1
    cells = [c.strip() for c in rows[0].strip("|").split("|")]
    assert cells[:4] == ["gemm", "tensor", "fp16", "4096x4096x4096"]
    assert cells[4] == "1.925 ms, 10% of roof, ok"
    assert cells[5] == "0.962 ms, 20% of roof, ok"  # the stored wgmma case
    assert cells[6] == "0.274 ms, 71% of roof, ok"  # cuBLAS fp16, placed by the reader
    assert cells[7] == "0.50x"


def test_no_triton_case_fails_naming_the_runs_error(tmp_path, capsys):
    log = tmp_path / "triton.log"
    log.write_text("x\nroofbench: error: backend 'triton' is unavailable: no CUDA device\n")
    assert gt.main([str(tmp_path / "none"), str(H200_GEMM), "--log", str(log),
                    "--append", str(log)]) == 1
    assert log.read_text().count("\n") == 2  # nothing appended
    assert capsys.readouterr().out == (
        f"gpu_check_triton: no Triton case recorded under {tmp_path / 'none'}; triton.log: "
        "roofbench: error: backend 'triton' is unavailable: no CUDA device\n")


def test_entry_of_reads_a_case_record():
    from roofbench.bench.results import load_run

    case = load_run(H200_GEMM / "results.json").cases[0]
    got = gt.entry_of(case)
    assert (got.workload, got.variant, got.backend, got.dtype, got.size, got.status) == (
        "gemm", "naive", "cuda", "fp32", S, "ok")
    assert (got.median_s, got.efficiency) == (case.measurement.median_s,
                                              case.roofline.efficiency)
