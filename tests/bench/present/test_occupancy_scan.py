"""The occupancy scan in the report: the plateau rule (the first level within 5% of the best),
the GPU's occupancy from the launch facts and ncu, a scan whose levels count different work
called out, and the figure."""

from __future__ import annotations

from roofbench.bench.present.occupancy_scan import (
    achieved,
    occupancy_section,
    plot_occupancy,
    scans,
    theoretical,
)
from roofbench.bench.present.report import render

from roofbench.records import (
    CaseResult,
    Declaration,
    Identity,
    LaunchCounters,
    LaunchFacts,
    LaunchResult,
    Measurement,
    Occupancy,
    OccupancyLevel,
    Outcome,
    RooflinePlace,
    RunResult,
)
from roofbench.roof_records import Roof, RoofSet

NBYTES = 8_000_000


def level(value: int, gbps: float, of: int = 8, flops: int = 2_000_000) -> CaseResult:
    """A gemv level whose DRAM bandwidth is ``gbps`` (time from the counted bytes)."""
    t = NBYTES / (gbps * 1e9)
    occ = Occupancy(256, 32, 0, value, 8 * value, 64, value / 8, "shared_memory")
    return CaseResult(
        Identity(
            workload="gemv",
            variant="rows",
            backend="cuda",
            dtype="fp16",
            size=[4000, 1000],
            precision="fp32",
            cores="simt",
            occupancy_level=OccupancyLevel("blocks_per_sm", value, of),
        ),
        Declaration(flops=flops, bytes={"dram": NBYTES}, ai={"dram": flops / NBYTES}),
        Outcome(status="ok"),
        measurement=Measurement(
            median_s=t,
            launches=[
                LaunchResult(
                    "rows",
                    "",
                    flops,
                    {"dram": NBYTES},
                    facts=LaunchFacts(function="gemv_warp_fp16", occupancy=occ),
                    counters=LaunchCounters("gemv_warp_fp16", achieved_occupancy=value / 8 * 0.9),
                )
            ],
        ),
        roofline=RooflinePlace(
            flop_per_s=flops / t,
            bytes_per_s={"dram": NBYTES / t},
            efficiency=gbps / 4000,
            limiting_roof="hbm",
        ),
    )


def run_of(cases: list[CaseResult]) -> RunResult:
    roofs = RoofSet("H200", [Roof("hbm", "memory", 4e12, "measured", level="dram")])
    return RunResult("cuda", "H200", roofs, cases)


# A rise that flattens: 3 blocks per SM is the first level within 5% of the best (8).
RISE = [(1, 900), (2, 2100), (3, 3850), (4, 3900), (8, 4000)]


def test_the_plateau_is_the_first_level_within_5_percent_of_the_best():
    (s,) = scans(run_of([level(v, g) for v, g in reversed(RISE)]))  # stored in any order
    assert [c.identity.occupancy_level.value for c in s.levels] == [1, 2, 3, 4, 8]
    assert s.best().identity.occupancy_level.value == 8
    assert s.reached().identity.occupancy_level.value == 3  # 3850 >= 0.95 x 4000; 2100 is not
    assert s.constant_counts()


def test_gpu_occupancy_comes_from_the_launch_facts_and_ncu():
    c = level(2, 2000)
    assert theoretical(c) == 0.25 and achieved(c) == 0.25 * 0.9


def test_the_report_states_the_plateau_and_a_planted_uneven_scan_is_called_out():
    md = render(run_of([level(v, g) for v, g in RISE]))
    assert "The plateau is reached at 3 of 8 blocks/SM (occupancy 38%)" in md
    assert "FLOPs and bytes are identical at every level." in md
    uneven = run_of([level(1, 900), level(2, 2000, flops=4_000_000)])
    (s,) = scans(uneven)
    assert not s.constant_counts()
    assert "this is not a scan" in render(uneven)


def test_a_run_without_levels_has_no_section_and_no_figure(tmp_path):
    plain = level(1, 900)
    plain.identity.occupancy_level = None
    assert occupancy_section(run_of([plain])) is None
    assert plot_occupancy(run_of([plain]), tmp_path / "occupancy") == []


def test_the_figure_is_written(tmp_path):
    paths = plot_occupancy(run_of([level(v, g) for v, g in RISE]), tmp_path / "occupancy")
    assert [p.name for p in paths] == ["occupancy.png", "occupancy.svg"]
    assert all(p.stat().st_size > 1000 for p in paths)
