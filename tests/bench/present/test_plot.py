"""The static roofline reads at a glance on real data: the H200 evidence runs and the CPU runs.

Geometry is checked from matplotlib's own extents (display pixels): no label over another
label or a point, the legend and the key outside the axes and clear of everything, every point
and every ridge inside the axes, one frame for two runs of one device."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
from matplotlib.text import Text
from roofbench.bench.present.figure_data import best_roofs, ridge_points
from roofbench.bench.present.plot import RooflineFigure, build_figure, plot_roofline, plot_run
from roofbench.bench.results import load_run
from testpaths import H200_RUNS, ROOT

from roofbench.records import RunResult

H200 = [H200_RUNS[k] for k in sorted(H200_RUNS)]
CPU = sorted((ROOT / "results" / "amd-epyc").glob("*/results.json"))
RUNS = H200 + CPU


@functools.cache
def _run(path: Path) -> RunResult:
    """Each stored run read once for the module (the figures only read it): reading them
    three times a test was a fifth of this file's time. A test that changes a run reads its
    own copy with load_run."""
    return load_run(path)


def _id(p: Path) -> str:
    return p.stem if p.stem != "results" else p.parent.name


def test_real_runs_are_there():
    assert len(H200) == 3 and len(CPU) >= 2


def _figure(path: Path, all_roofs: bool = False) -> RooflineFigure:
    run = _run(path)
    return build_figure([run.roofs], [run.cases], "test", all_roofs=all_roofs)


def _boxes(rf: RooflineFigure):
    rf.fig.draw_without_rendering()  # the layout, no raster: extents only
    r = rf.fig.canvas.get_renderer()
    points = [ln.get_window_extent(r) for ln in rf.points]
    # An annotation's own extent includes its leader line: the label is the text alone.
    labels = [(t.get_text(), Text.get_window_extent(t, r)) for t in rf.labels]
    return r, points, labels


@pytest.mark.parametrize("all_roofs", [False, True], ids=["default", "all-roofs"])
@pytest.mark.parametrize("path", RUNS, ids=_id)
def test_nothing_overlaps_and_everything_is_inside(path: Path, all_roofs: bool):
    rf = _figure(path, all_roofs)
    try:
        r, points, labels = _boxes(rf)
        legend = rf.legend.get_window_extent(r)
        key = rf.key.get_window_extent(r)
        axes = rf.ax.get_window_extent(r)
        n_valid = sum(1 for c in _run(path).cases if c.valid and c.outcome.status == "ok")
        assert len(rf.xy) >= n_valid  # every valid case is a point (+ hollow hw twins)
        for i, (ta, a) in enumerate(labels):
            for tb, b in labels[i + 1:]:
                assert not a.overlaps(b), f"label {ta!r} overlaps label {tb!r}"
            for j, p in enumerate(points):
                assert not a.overlaps(p), f"label {ta!r} hides point {j}"
            assert not a.overlaps(legend) and not a.overlaps(key)
            assert axes.contains(a.x0, a.y0) and axes.contains(a.x1, a.y1), ta
        for box in (legend, key):
            assert not box.overlaps(axes), "legend and key sit outside the axes"
            assert not any(box.overlaps(p) for p in points)
        assert not legend.overlaps(key)
        fig_box = rf.fig.bbox
        assert fig_box.contains(legend.x1, legend.y0) and fig_box.contains(key.x1, key.y0)
        (x0, x1), (y0, y1) = rf.ax.get_xlim(), rf.ax.get_ylim()
        for x, y in rf.xy:
            assert x0 < x < x1 and y0 < y < y1, f"point ({x}, {y}) outside the axes"
        run = _run(path)
        comp, _ = best_roofs(run.roofs, all_roofs=True)
        ridges = ridge_points(run.roofs, comp)
        assert ridges
        for roof, x in ridges:  # every ridge of the device, drawn or not
            assert x0 < x < x1 and y0 < roof.value < y1, f"ridge of {roof.name} outside"
        # Labels carry name and value; any that fit nowhere went to the legend, none is lost.
        texts = [t for t, _ in labels] + rf.legend_roofs
        for roof, _ln in rf.drawn_roofs:
            unit = "B/s" if roof.kind == "memory" else "FLOP/s"
            assert any(unit in t and t.split()[0] in roof.name + " DRAM/HBM L2 shared"
                       for t in texts), roof.name
    finally:
        import matplotlib.pyplot as plt

        plt.close(rf.fig)


def _drawn(rf: RooflineFigure) -> set[tuple[str, str, str]]:
    return {(r.kind, r.precision or r.level, r.source) for r, _ in rf.drawn_roofs}


def test_default_draws_only_the_roofs_the_points_use():
    path = H200_RUNS["gemm-4096"]
    run = _run(path)
    used = {c.identity.precision for c in run.cases if c.valid}
    rf, rf_all = _figure(path), _figure(path, all_roofs=True)
    drawn, every = _drawn(rf), _drawn(rf_all)
    assert {p for k, p, _ in drawn if k == "compute"} == used
    assert {p for k, p, _ in drawn if k == "memory"} == {"dram"}  # all GEMMs compute-bound
    assert {s for *_, s in drawn} == {"measured", "datasheet"}
    # One line per (source, precision) and per (source, level): 27 roofs -> 24 lines, the
    # default far fewer (the issue counted 25 legend entries for this run's 9 points).
    assert len(run.roofs.roofs) == 27 and len(every) == len(rf_all.drawn_roofs) == 24
    assert len(drawn) == 2 + 2 * len(used)  # DRAM and each used precision, measured + sheet
    assert {"l2", "smem"} <= {p for k, p, _ in every if k == "memory"}
    assert "theoretical" in {s for *_, s in every}
    assert len(drawn) < len(every)


def test_memory_bound_points_bring_their_level_and_nothing_else():
    run = _run(H200_RUNS["rownorm-default"])
    rf = build_figure([run.roofs], [run.cases], "t")
    assert _drawn(rf) == {("memory", "dram", "measured"), ("memory", "dram", "datasheet"),
                          ("compute", "fp32", "measured"), ("compute", "fp32", "datasheet")}


def test_no_valid_point_draws_every_roof():
    run = _run(H200_RUNS["numba-quick"])
    assert not any(c.valid for c in run.cases)
    rf = build_figure([run.roofs], [run.cases], "t")
    assert rf.points == [] and "no valid point" in rf.key.get_text()
    assert {"l2", "smem"} <= {p for k, p, _ in _drawn(rf) if k == "memory"}


def test_styles_measured_solid_datasheet_faint_dashed_level_by_style():
    rf = _figure(H200[0], all_roofs=True)
    for roof, ln in rf.drawn_roofs:
        if roof.source == "measured":
            assert ln.get_alpha() in (None, 1.0)
            if roof.kind == "memory":
                assert ln.get_linestyle() == {"dram": "-", "l2": "-.", "smem": ":"}[roof.level]
            else:
                assert ln.get_linestyle() == "-"
        else:
            assert ln.get_linestyle() == "--" and ln.get_alpha() < 0.6
    colours = {r.precision: ln.get_color() for r, ln in rf.drawn_roofs if r.kind == "compute"}
    assert len(set(colours.values())) == len(colours)  # one colour per precision


def test_two_runs_of_one_device_share_one_frame():
    for pair in ((H200[0], H200[2]), (CPU[0], CPU[1])):
        a, b = (_figure(p) for p in pair)
        assert a.ax.get_xlim() == b.ax.get_xlim() and a.ax.get_ylim() == b.ax.get_ylim()


def test_compare_of_two_runs_keeps_labels_clear(tmp_path: Path):
    a, b = _run(CPU[0]), _run(CPU[1])
    rf = build_figure([a.roofs, b.roofs], [a.cases, b.cases], "A vs B", tags=["A: ", "B: "])
    _, points, labels = _boxes(rf)
    assert len(points) == 2 * sum(1 for c in a.cases if c.valid)
    for i, (_, x) in enumerate(labels):
        assert not any(x.overlaps(p) for p in points)
        assert not any(x.overlaps(y) for _, y in labels[i + 1:])
    assert "A: " in rf.key.get_text() and "B: " in rf.key.get_text()
    assert rf.joins == 20  # every case of A joined to the same case of B
    paths = plot_roofline([a.roofs, b.roofs], [a.cases, b.cases], tmp_path / "cmp", "A vs B",
                          tags=["A: ", "B: "])
    assert [p.suffix for p in paths] == [".png", ".svg"]


def test_plot_run_writes_png_and_svg(tmp_path: Path):
    paths = plot_run(_run(H200[0]), tmp_path / "roofline")
    png, svg = paths
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000
    text = svg.read_text()
    assert "<svg" in text and "FP32" in text


def test_hardware_intensity_is_a_hollow_twin_of_the_point():
    """A case with Nsight Compute counters gets a hollow marker at the intensity
    the hardware moved. The counters here are made up for the test (5% fewer bytes than the
    model, as the H200 evidence shows for writes), attached to a real H200 rownorm run."""
    from roofbench.ncu_checks import hw_dram_ai
    from roofbench.records import LaunchCounters

    run = load_run(H200_RUNS["rownorm-default"])
    case = next(c for c in run.cases if c.identity.variant == "naive" and c.valid)
    for la in case.measurement.launches:
        b = la.bytes["dram"] * 0.95
        la.counters = LaunchCounters(kernel=la.kernel, dram_read=b * 0.6, dram_write=b * 0.4)
    hw = hw_dram_ai(case)
    assert hw == pytest.approx(case.declaration.ai["dram"] / 0.95)
    rf = build_figure([run.roofs], [run.cases], "t")
    hollow = [ln for ln in rf.points if ln.get_markerfacecolor() == "none"]
    assert len(hollow) == 1 and hollow[0].get_xdata()[0] == pytest.approx(hw)
    assert len(rf.points) == sum(c.valid for c in run.cases) + 1
    _, points, labels = _boxes(rf)
    for _, box in labels:
        assert not any(box.overlaps(p) for p in points)
    assert "hardware-measured DRAM AI (ncu)" in [t.get_text() for t in rf.legend.get_texts()]


def test_a_sweep_draws_one_fusion_arrow_per_size():
    """attention's naive -> flash arrow is drawn for every N of a sweep, each from the naive
    point of that N to the flash point of the same N."""
    import numpy as np
    from roofbench.bench.backends.cpu import CpuBackend
    from roofbench.bench.suite.runner import run_case
    from roofbench.kernels.registry import workloads
    from roofbench.kernels.spec import Case

    from roofbench.roof_records import Roof, RoofSet
    from roofbench.timing import TimerConfig

    rs = RoofSet("test", [Roof("dram", "memory", 1e10, "measured", level="dram"),
                          Roof("fp32", "compute", 1e11, "measured", precision="fp32")])
    cfg = TimerConfig(warmup_s=0.0, min_samples=3, max_samples=3, budget_s=0.01)
    w = workloads()["attention"]
    cases = [run_case(Case(w, w.variants[v], "fp32", (1, 1, n, 16)), CpuBackend(), rs, cfg,
                      np.random.default_rng(0), per_launch=False)
             for n in (64, 256) for v in ("naive", "flash")]
    assert all(c.valid for c in cases)
    rf = build_figure([rs], [cases], "sweep")
    at = {
        (c.identity.variant, c.identity.size[2]): (c.declaration.ai["dram"], c.roofline.flop_per_s)
        for c in cases
    }
    want = {(at[("naive", n)], at[("flash", n)]) for n in (64, 256)}
    assert set(rf.arrows) == want and len(rf.arrows) == 2


def test_a_key_too_long_for_the_figure_grows_it_and_keeps_the_axes():
    """Three times the points of the largest CPU run: the key is set smaller, then the figure
    grows downwards; the key stays inside and the axes keep their size in pixels."""
    import dataclasses

    run = _run(max(CPU, key=lambda p: len(_run(p).cases)))
    many = [
        dataclasses.replace(c, identity=dataclasses.replace(c.identity, size=[*c.identity.size, k]))
        for k in (1, 2, 3)
        for c in run.cases
    ]
    small = build_figure([run.roofs], [run.cases[:3]], "test")
    big = build_figure([run.roofs], [many], "test", dense_above=len(many))  # every one numbered
    big.fig.canvas.draw()
    r = big.fig.canvas.get_renderer()
    key = big.key.get_window_extent(r)
    assert key.y0 >= 0 and big.fig.bbox.contains(key.x1, key.y0)
    assert big.fig.get_figheight() > small.fig.get_figheight()
    a, b = small.ax.get_window_extent(), big.ax.get_window_extent()
    assert (round(a.width), round(a.height)) == (round(b.width), round(b.height))
    assert not big.legend.get_window_extent(r).overlaps(key)


def test_many_points_are_dots_with_a_key_by_group_and_say_so():
    """Past DENSE_POINTS valid points: no numbers, one artist per glyph, the key one line per
    group with its count, and a note on the plot (a 20,000-case file: tests/bench_plot.py)."""
    import dataclasses

    from roofbench.bench.present.plot_dense import DENSE_POINTS

    run = _run(max(CPU, key=lambda p: len(_run(p).cases)))
    valid = [c for c in run.cases if c.valid and c.outcome.status == "ok"]
    reps = DENSE_POINTS // len(valid) + 2
    many = [
        dataclasses.replace(c, identity=dataclasses.replace(c.identity, size=[*c.identity.size, k]))
        for k in range(reps)
        for c in valid
    ]
    rf = build_figure([run.roofs], [many], "test")
    assert len(rf.xy) == len(many) > DENSE_POINTS and rf.note.startswith(f"{len(many)} points")
    assert len(rf.points) < 20 and not rf.arrows  # one artist per glyph, not per point
    texts = [t.get_text() for t in rf.ax.texts]
    assert rf.note in texts
    lines = rf.key.get_text().splitlines()[1:]
    groups = {f"{c.identity.workload}/{c.identity.variant} {c.identity.dtype}" for c in valid}
    assert len(lines) == len(groups)
    assert sum(int(ln.split(" x ")[0]) for ln in lines) == len(many)
