"""A profile's plot (bench/present/plot.py through bench/profile/report.py): its key one
line per point numbered as profile.md ranks it, never cut at the figure's edge nor set below
6 pt with 60 points, one legend entry per kind of point (no repeated identical markers),
0-FLOP ops listed with their time share, a point above its roof named with its cause."""

from __future__ import annotations

import re

import pytest

torch = pytest.importorskip("torch")

from roofbench.bench.present.plot import KEY_MIN_PT, build_figure  # noqa: E402
from roofbench.bench.profile.report import _key_order, annotate, op_rows, sections  # noqa: E402

from .test_torch_program import run  # noqa: E402


def sixty_ops():
    """A program of 60 distinct ops with FLOPs: 20 layers, each of its own shapes (matmul,
    mul, add), beside 0-FLOP ops (each layer's relu, one cat)."""
    ws = [torch.randn(8 + i, 9 + i) for i in range(20)]

    def prog(x):
        outs = []
        for w in ws:
            y = x[:, : w.shape[0]] @ w
            y = y * 0.5 + 1.0
            outs.append(torch.relu(y))
        return torch.cat(outs, 1)

    return prog, torch.randn(4, 40)


@pytest.fixture(scope="module")
def sixty():
    fn, x = sixty_ops()
    prof = run(fn, x, name="sixty")
    annotate(prof)
    return prof


def _figure(prof):
    cases = sorted([p.case for p in prof.ops] + [prof.program], key=_key_order)
    return build_figure([prof.roofs], [cases], "sixty")


def test_sixty_points_numbered_by_their_rank_in_the_report(sixty):
    rf = _figure(sixty)
    drawn = [c for c in (p.case for p in sixty.ops) if c.declaration.flops > 0
             and c.valid]
    assert len(drawn) >= 60
    ranks = {p.op.index: r["rank"] for p, r in zip(sixty.ranking(), op_rows(sixty),
                                                    strict=True)}
    key = rf.key.get_text().splitlines()
    for p in sixty.ops:
        c = p.case
        if c.declaration.flops == 0 or not c.valid:
            continue
        num = c.evidence.extra["plot_number"]
        assert num == ranks[p.op.index]
        assert any(re.match(rf"\s*{num}\s+{re.escape(p.op.packet)} ", ln) for ln in key)
    # every number on the plot is a row of profile.md's ranking (not cut at 25 rows)
    table = next(s for s in sections(sixty) if s.title.startswith("Ops")).blocks[1].rows
    assert {r["rank"] for r in table} >= {c.evidence.extra["plot_number"] for c in drawn}
    # the numbers on the points are those of the key, each once
    numbers = [t.get_text() for t in rf.labels if t.get_text().isdigit() or t.get_text() == "P"]
    assert len(numbers) == len(set(numbers))


def test_the_key_is_inside_the_figure_and_readable_at_sixty_points(sixty):
    rf = _figure(sixty)
    r = rf.fig.canvas.get_renderer()
    key = rf.key.get_window_extent(r)
    fig = rf.fig.bbox
    assert key.x1 <= fig.x1 and key.y0 >= 0 and key.x0 >= 0, "the key is never cut"
    assert rf.key.get_fontsize() >= KEY_MIN_PT
    assert not rf.legend.get_window_extent(r).overlaps(key)


def test_one_legend_entry_per_kind_never_one_per_op(sixty):
    rf = _figure(sixty)
    texts = [t.get_text() for t in rf.legend.get_texts()]
    kinds = [t for t in texts if t.startswith(("op ", "program"))]
    assert kinds == ["op (number: its rank in profile.md)", "program, eager -> compiled"]
    assert not any(t.startswith("aten.") for t in texts)


def test_zero_flop_ops_are_listed_with_their_time_share(sixty):
    rf = _figure(sixty)
    text = rf.key.get_text()
    assert "0 FLOPs: placed by bandwidth, not on this axis" in text
    zero = [p for p in sixty.ops if p.case.declaration.flops == 0 and p.op.bytes]
    assert {p.op.packet for p in zero} >= {"relu", "cat"}
    entries: list[str] = []  # the key's lines with their wrapped pieces joined back
    for ln in text.splitlines():
        if ln.startswith(" " * 7) and entries:
            entries[-1] += " " + ln.strip()
        else:
            entries.append(ln)
    for p in zero:
        share = p.case.evidence.extra["time_share"]
        num = p.case.evidence.extra["plot_number"]
        assert any(re.fullmatch(rf"{num} {p.op.packet} .* of dram stream, "
                                rf"{re.escape(share)} of the time( \(noisy\))?",
                                " ".join(e.split())) for e in entries), p.op.packet


def test_a_point_above_its_roof_is_named_not_drawn(sixty):
    import copy

    prog = copy.deepcopy(sixty.program)
    prog.outcome.status = "invalid"
    prog.outcome.error = "374% of fp32 fma, above its roof: likely cause: the compute roof"
    rf = build_figure([sixty.roofs], [[prog]], "one")
    assert rf.points == []
    text = " ".join(rf.key.get_text().split())  # its lines wrapped to the figure's edge
    assert "not drawn, not valid" in text
    assert "P program (eager): 374% of fp32 fma, above its roof: likely cause: the compute" \
        in text


def test_a_noisy_point_says_so_in_the_key(sixty):
    import copy

    prog = copy.deepcopy(sixty.program)
    prog.measurement.timing.flags = ["noisy: cv 40.0% > 5%", "noise cause: the machine's x"]
    rf = build_figure([sixty.roofs], [[prog]], "one")
    assert "P  program (eager)" in rf.key.get_text() and "(noisy)" in rf.key.get_text()


def test_a_run_taken_under_load_is_marked_on_its_plot(sixty, monkeypatch, tmp_path):
    from roofbench.bench.present import plot

    from roofbench.records import RunResult

    mark = "taken under load: other processes used 76% of the 2 cores"
    rf = build_figure([sixty.roofs], [[sixty.program]], "one", mark=mark)
    assert [t.get_text() for t in rf.ax.texts if t.get_color() == "#b00000"] == [mark]
    seen = {}
    monkeypatch.setattr(plot, "plot_roofline", lambda *a, **k: seen.update(k) or [])
    run_ = RunResult(backend="cpu", device="d", roofs=sixty.roofs, cases=[sixty.program],
                     notes=["other", mark])
    plot.plot_run(run_, tmp_path / "r")
    assert seen["mark"] == mark
