"""Where the tests find the checkout, the stand-ins and the real files every reader is tested
on (each stored once: the H200's results in results/nvidia-h200/, its ncu CSVs in
tests/fixtures/)."""

from __future__ import annotations

from pathlib import Path

STANDINS = Path(__file__).resolve().parent
TESTS = STANDINS.parent
ROOT = TESTS.parent
FIXTURES = TESTS / "fixtures"
FAKE_CUPY = STANDINS / "fake_cupy"
FAKE_NCU = STANDINS / "fake_ncu"
CUDA_EMU = STANDINS / "cuda_emu"
# The H200's first-contact runs (results.json byte for byte as the H200 wrote them)
H200_DIR = ROOT / "results" / "nvidia-h200" / "first-contact-ea800a6"
H200_RUNS = {p.parent.name: p for p in sorted(H200_DIR.glob("*/results.json"))}
# The ncu CSVs recorded around those runs (details pages)
H200_NCU = {name: FIXTURES / "h200-2026-11-30" / f"ncu-{name}.csv"
            for name in ("naive", "fused", "vadd")}
# A real CPU run (AMD EPYC, 2026-12-01) the CLI's hostile tests and the plot benchmark start from
REAL_CPU_RUN = ROOT / "results" / "amd-epyc" / "20261201T205416Z" / "results.json"
