"""One measurement core: the suite's runner, ``roofbench.measure`` (and so the pytest fixture)
and ``roofbench.profile`` validate, time and place through the same functions of
bench/measure/core.py; and a call of 0 FLOPs that moves bytes is placed by bandwidth."""

from __future__ import annotations

import numpy as np
import pytest
from cache_layouts import cache_roofset
from roofbench.bench.backends.cpu import CpuBackend
from roofbench.bench.measure import core
from roofbench.bench.present.plot import bandwidth_only, build_figure
from roofbench.bench.results import load_run
from roofbench.bench.suite import runner
from roofbench.bench.suite.runner import run_case
from roofbench.kernels.registry import workloads
from roofbench.kernels.spec import Case

import roofbench
from roofbench import timing as timing_module
from roofbench.records import CaseResult, Declaration, Identity, Outcome
from roofbench.roof_records import Roof, RoofSet
from roofbench.timing import TimerConfig, Timing

FAST = TimerConfig(warmup_s=0.0, warmup_min_runs=1, min_samples=3, max_samples=5,
                   budget_s=0.05)
SAMPLES = [2.0e-5, 2.2e-5, 2.1e-5, 2.4e-5, 2.05e-5]
N = 1 << 16  # fp32: 768 KiB in a, b and c, inside the stand-in's L2
PLACED = {"measurement": ("median_s",),
          "roofline": ("flop_per_s", "bytes_per_s", "placement", "attainable", "efficiency",
                       "bound", "limiting_roof"),
          "declaration": ("flops", "bytes", "ai"), "identity": ("precision",)}


class Spy:
    """Each core function replaced by one that notes its call and calls the real one; the
    timing entry answers the same samples to every caller (after one call of the function,
    so that what it times is exercised)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[str, str]] = []
        real_validate, real_fill = core.validate, core.fill_metrics

        def validate(*a, **k):
            self.calls.append(("validate", ""))
            return real_validate(*a, **k)

        def time_call(clock, fn, cfg, phases=None, phase="time", pair=None):
            self.calls.append(("time_call", phase))
            fn()
            return Timing(samples=list(SAMPLES), warmup_runs=0, stopped_by="noise")

        def fill_metrics(rec, t, roofs, working_set=None):
            self.calls.append(("fill_metrics", ""))
            return real_fill(rec, t, roofs, working_set)

        for name, fn in (("validate", validate), ("time_call", time_call),
                         ("fill_metrics", fill_metrics)):
            monkeypatch.setattr(core, name, fn)

    def take(self) -> list[tuple[str, str]]:
        got, self.calls = self.calls, []
        return got


def _suite_case() -> Case:
    w = workloads()["vector_add"]
    return Case(w, w.variants["scalar"], "fp32", (N,))


def test_the_runner_and_measure_validate_time_and_place_through_one_core(monkeypatch):
    spy = Spy(monkeypatch)
    roofs = cache_roofset()
    case = _suite_case()
    suite = run_case(case, CpuBackend(), roofs, FAST, np.random.default_rng(3))
    assert suite.outcome.status == "ok", suite.outcome.error
    assert spy.take() == [("validate", ""), ("time_call", "time"), ("fill_metrics", "")]

    rng = np.random.default_rng(4)
    a, b = (rng.uniform(-1, 1, N).astype(np.float32) for _ in range(2))
    c = np.empty_like(a)
    mine = roofbench.measure(np.add, a, b, out=c, flops=N, reads=[a, b], writes=c,
                             name="vector_add/scalar", roofs=roofs, output=c,
                             reference=lambda a, b, out: a.astype(np.float64) + b,
                             tolerance=case.workload.tolerance["fp32"])
    assert mine.outcome.status == "ok", mine.outcome.error
    assert spy.take() == [("validate", ""), ("time_call", "time"), ("fill_metrics", "")]
    # the same samples give the same record of where the case sits, field for field
    assert mine.key == suite.key
    assert mine.roofline.placement is not None and mine.roofline.placement.level == "l2"
    for group, fields in PLACED.items():
        for field in fields:
            got, want = getattr(mine, group), getattr(suite, group)
            assert getattr(got, field) == getattr(want, field), field
    assert mine.measurement.timing.samples == suite.measurement.timing.samples == SAMPLES
    assert mine.roofline.efficiency == pytest.approx(
        mine.roofline.flop_per_s / mine.roofline.attainable
    )


def test_both_sample_with_the_timers_loop(monkeypatch):
    """Without the spy: the runner's backend and measure's clock end in one sample loop."""
    seen: list[int] = []
    real = timing_module.sample_loop

    def sample_loop(one, cfg, *a, **k):
        seen.append(cfg.max_samples)
        return real(one, cfg, *a, **k)

    monkeypatch.setattr(timing_module, "sample_loop", sample_loop)
    run_case(_suite_case(), CpuBackend(), None, FAST, np.random.default_rng(5))
    assert seen == [FAST.max_samples]
    a = np.ones(N, np.float32)
    with roofbench.Session(roofs=cache_roofset(), timer=FAST) as s:
        s.measure(np.negative, a, flops=N, reads=a, writes=a.nbytes)
    assert seen == [FAST.max_samples] * 2


def test_a_validation_failure_is_the_same_words_on_both_paths(monkeypatch):
    """Half an output left unwritten: the core's one rule says so for a workload and for a
    callable alike (the poison is the core's first step)."""
    a = np.ones(1000, np.float32)
    c = np.empty_like(a)
    rec = roofbench.measure(lambda a, c: np.copyto(c[:500], a[:500]), a, c, flops=0,
                            reads=a, writes=c, output=c, reference=a, roofs=cache_roofset(),
                            name="half")
    assert rec.outcome.status == "invalid"
    assert (
        "500 element(s) of 'output' not written or not finite (first at (500,))"
        in rec.outcome.error
    )
    ok, err, why = runner.validate(_suite_case(), {}, {"c": np.zeros(3)})
    assert (ok, why) == (False, "output 'c' missing") and err == float("inf")


def dram_roofs() -> RoofSet:
    return RoofSet("test", [Roof("dram stream", "memory", 2e10, "measured", level="dram"),
                            Roof("fp32 peak", "compute", 2e11, "measured",
                                 precision="fp32")])


def test_a_copy_of_0_flops_is_valid_and_placed_by_bandwidth(tmp_path, capsys):
    n = 1 << 20
    src, dst = np.arange(n, dtype=np.float32), np.zeros(n, np.float32)
    with roofbench.Session(out=tmp_path / "run", roofs=dram_roofs(), quick=True) as s:
        rec = s.measure(np.copyto, dst, src, flops=0, reads=src, writes=dst, output=dst,
                        reference=lambda dst, src: src)
    assert rec.outcome.status == "ok" and rec.valid and rec.outcome.checked
    assert (
        rec.declaration.flops == 0
        and rec.declaration.bytes == {"dram": 8 * n}
        and rec.declaration.ai == {"dram": 0.0}
    )
    assert rec.roofline.flop_per_s == 0.0 and rec.roofline.attainable is None
    assert rec.roofline.bound == "memory" and rec.roofline.limiting_roof == "dram stream"
    assert rec.roofline.efficiency == pytest.approx(8 * n / rec.measurement.median_s / 2e10)
    assert rec.roofline.bytes_per_s["dram"] == pytest.approx(rec.roofline.efficiency * 2e10)
    out = tmp_path / "run"
    for f in ("results.json", "report.md", "report.html", "roofline.png"):
        assert (out / f).stat().st_size > 0, f
    row = next(ln for ln in (out / "report.md").read_text().splitlines()
               if "copyto" in ln and "|" in ln)
    cells = [x.strip() for x in row.strip("|").split("|")]
    assert cells[4] == "0" and cells[7] == "0"  # AI and FLOP/s: listed, by its bytes/s
    assert f"{rec.roofline.efficiency:.1%}" in row and "memory" in cells
    run = load_run(out)
    assert run.cases[0].roofline.efficiency == pytest.approx(rec.roofline.efficiency)
    fig = build_figure([run.roofs], [run.cases], "t")
    assert fig.xy == []  # intensity 0: never a point on the log axis, said in a note
    assert "1 case(s) of 0 FLOPs placed by bandwidth" in fig.note
    assert bandwidth_only([run.cases]) == 1


def test_a_copy_that_fits_a_cache_is_held_against_that_levels_roof():
    n = 1 << 15  # fp32: 256 KiB in two arrays, inside L2
    src, dst = np.ones(n, np.float32), np.zeros(n, np.float32)
    rec = roofbench.measure(np.copyto, dst, src, flops=0, reads=src, writes=dst,
                            roofs=cache_roofset(), name="copy/l2")
    assert rec.roofline.placement.level == "l2" and rec.roofline.limiting_roof == "l2 sweep-read"
    assert rec.roofline.efficiency == pytest.approx(8 * n / rec.measurement.median_s / 300e9)


def test_the_bandwidth_rule_holds_a_case_to_its_slowest_level():
    """As intensity goes to 0 the level whose bytes take longest bounds it: 1000 B at 50 B/s
    (20 s) beats 100 B at 10 B/s (10 s); a case that moves nothing is not placed."""
    rs = RoofSet("t", [Roof("dram", "memory", 10.0, "measured", level="dram"),
                       Roof("l2", "memory", 50.0, "measured", level="l2")])
    rec = CaseResult(
        Identity(workload="w", variant="v", backend="cpu", dtype="fp32", size=[1],
                 precision="fp32", cores="simt"),
        Declaration(flops=0, bytes={"dram": 100, "l2": 1000}, ai={"dram": 0.0, "l2": 0.0}),
        Outcome(status="ok"))
    core.fill_metrics(rec, Timing(samples=[40.0], warmup_runs=0, stopped_by="noise"), rs)
    assert (rec.roofline.bound, rec.roofline.limiting_roof, rec.roofline.attainable) == (
        "memory",
        "l2",
        None,
    )
    assert rec.roofline.efficiency == pytest.approx(1000 / 40 / 50)
    view = CaseResult(
        Identity(workload="w", variant="view", backend="cpu", dtype="fp32", size=[1],
                 precision="fp32", cores="simt"),
        Declaration(flops=0, bytes={}, ai={}),
        Outcome(status="ok"))
    core.fill_metrics(view, Timing(samples=[1e-6], warmup_runs=0, stopped_by="noise"), rs)
    assert (
        view.roofline.bound
        is view.roofline.limiting_roof
        is view.roofline.efficiency
        is view.roofline.flop_per_s
        is None
    )


def test_profile_times_and_places_through_the_core(monkeypatch):
    torch = pytest.importorskip("torch")
    spy = Spy(monkeypatch)
    x = torch.randn(64, 32)
    prof = roofbench.profile(lambda t: (t * 2).t().contiguous(), x, roofs=dram_roofs(),
                             timer=FAST)
    calls = spy.take()
    n = len(prof.ops)
    # timed by the core: each distinct op alone and the dispatch probe (the program's samples
    # are its eager runs paired with the in-program ones); placed: each op alone and in the
    # program, and the program
    assert calls.count(("time_call", "time")) == n + 1
    assert calls.count(("fill_metrics", "")) == 2 * n + 1
    copy = next(p for p in prof.ops if p.op.family == "copies/layout")
    assert copy.case.declaration.flops == 0 and copy.case.roofline.limiting_roof == "dram stream"
    assert copy.bandwidth_efficiency == copy.case.roofline.efficiency == pytest.approx(
        copy.case.declaration.bytes["dram"] / copy.case.measurement.median_s / 2e10)
