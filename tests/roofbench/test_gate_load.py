"""The gate's load rule and its paired (A/B) judgement, on synthetic samples with recorded
load: load bounds the excuse in both directions (load on A explains no slowdown; load on B
explains up to 1/(1-f)), pairs cancel a drift both sides shared, and roofbench runs,
pytest-benchmark JSON and A/B runs get the same verdicts from the same samples."""

from __future__ import annotations

import copy
import re

import pytest
from roofbench.roofs.probes.cpu_noise import NoiseReport, outside_load

from roofbench.gate import AB_KEY, FailOn, classify, paired_interval, ratio_interval
from roofbench.gate_load import load_bounds, load_share
from roofbench.pytest_benchmark import read_pytest_benchmark
from roofbench.records import CaseResult, Declaration, Identity, Measurement, Outcome, RunResult
from roofbench.timing import Timing

N = 40
BASE = [1e-3 * (1 + 0.01 * ((7 * i) % 10)) for i in range(N)]  # 1.00-1.09 ms, spread


def load_words(share: float) -> str:
    """The noise probe's own words for other processes taking ``share`` of the cores."""
    return outside_load(NoiseReport(wall_s=2.0, cores=2, other_busy=share, steal=0.0,
                                    minor_faults=0, major_faults=0, involuntary_switches=3,
                                    load_avg_1m=4.0))


def case(samples: list[float], load: str = "") -> CaseResult:
    import statistics

    return CaseResult(
        Identity(
            workload="test_add",
            variant="default",
            backend="cpu",
            dtype="fp32",
            size=[1024],
            precision="fp32",
            cores="simt",
        ),
        Declaration(flops=1024, bytes={"dram": 12288}, ai={"dram": 1 / 12}),
        Outcome(status="ok"),
        measurement=Measurement(
            timing=Timing(
                samples=list(samples), warmup_runs=1, stopped_by="budget", outside_load=load
            ),
            median_s=statistics.median(samples),
        ),
    )


def run(samples: list[float], load: str = "", ab: str | None = None) -> RunResult:
    r = RunResult(backend="cpu", device="Test CPU", roofs=None, cases=[case(samples, load)])
    if ab:
        r.environment[AB_KEY] = {"id": "one-job", "side": ab}
    return r


def verdict(a: RunResult, b: RunResult, t: float = 0.05):
    cmp = classify(a, b, t, FailOn(slower=True))
    (v,) = cmp.cases
    return v, cmp.failed


def slowed(factor: float) -> list[float]:
    return [x * factor for x in BASE[3:] + BASE[:3]]  # other samples' order: pairs differ


# -- the load's share and its bound ---------------------------------------------------------

def test_load_share_reads_the_probes_words():
    assert load_share(load_words(0.83)) == pytest.approx(0.83)
    assert load_share("") == 0.0
    assert load_share("40 page faults in the timed window (0 major): memory touched") == 0.0
    steal = outside_load(NoiseReport(2.0, 2, 0.5, 0.04, 0, 0, 0, 1.0))
    assert load_share(steal) == pytest.approx(0.54)
    assert load_share(load_words(1.0)) == 0.95  # never an infinite excuse
    assert load_bounds(0.0, 0.5) == (2.0, 1.0)
    assert load_bounds(0.8, 0.0) == pytest.approx((1.0, 5.0))
    assert load_bounds(0.5, 0.5) == (1.0, 1.0)


def test_load_on_b_explains_a_slowdown_only_up_to_its_bound():
    """B timed while others had half the cores: that stretches B by up to x2. A 1.5x slowdown
    is `uncertain` (within the bound, said); a 2.6x one is beyond it and beyond the samples'
    interval: `slower`, failing the gate with the load named beside it."""
    words = load_words(0.5)
    v, failed = verdict(run(BASE), run(slowed(1.5), words))
    assert v.verdict == "uncertain" and failed == []
    assert "slower by 50%" in v.reason and "up to x2.00" in v.reason and words in v.reason
    v, failed = verdict(run(BASE), run(slowed(2.6), words))
    assert v.verdict == "slower" and failed and v.ratio_lo > 2.0
    assert words in v.reason and "at most x2.00" in v.reason


def test_load_on_a_explains_no_slowdown():
    """The issue's case: a 2.9x slowdown whose base was timed while others used 83% of the
    cores. A's load stretched A, hiding a slowdown; it explains none: `slower`, exit 1, the
    load named. Before, any load on either side made it `uncertain` and the gate never fired."""
    words = load_words(0.83)
    v, failed = verdict(run(BASE, words), run(slowed(2.9)))
    assert v.verdict == "slower" and failed and "A was timed while" in v.reason
    v, _ = verdict(run(BASE, words), run(slowed(1.5), load_words(0.83)))
    assert v.verdict == "slower"  # the same load on both sides explains nothing either
    # ... while an apparent speedup is what load on A can explain (the mirror of the rule)
    v, _ = verdict(run(slowed(1.5), words), run(BASE))
    assert v.verdict == "uncertain" and "faster by" in v.reason


def test_both_sides_loaded_the_bound_is_their_ratio():
    """A at 20%, B at 60%: B stretched by up to (1-0.2)/(1-0.6) = 2x relative to A."""
    a, b = load_words(0.2), load_words(0.6)
    v, _ = verdict(run(BASE, a), run(slowed(1.8), b))
    assert v.verdict == "uncertain" and "up to x2.00" in v.reason
    v, _ = verdict(run(BASE, a), run(slowed(2.5), b))
    assert v.verdict == "slower"


# -- A/B pairs ------------------------------------------------------------------------------

def test_pairs_cancel_a_drift_both_sides_shared():
    """The machine's speed drifts 3x over the job (a neighbour comes and goes); B is 20%
    slower in every pair. Unpaired, the medians' interval holds 1 (the drift hides it);
    paired, the ratio is 1.2 to a tenth of a percent."""
    drift = [1 + 2 * (i % 13) / 12 for i in range(N)]
    a = [1e-3 * d for d in drift]
    b = [1.2e-3 * d * (1 + 0.001 * (i % 3)) for i, d in enumerate(drift)]
    unpaired = ratio_interval(a, b)
    assert unpaired.lo < 1.0 < unpaired.hi
    paired = paired_interval(a, b)
    assert paired.ratio == pytest.approx(1.2, rel=2e-3) and paired.lo > 1.19
    v, failed = verdict(run(a, ab="A"), run(b, ab="B"))
    assert v.verdict == "slower" and v.paired and failed
    v, _ = verdict(run(a), run(b))  # the same samples as two runs: not paired
    assert v.verdict == "uncertain" and not v.paired


def test_only_the_two_sides_of_one_job_are_paired():
    a, b = run(BASE, ab="A"), run(slowed(1.5), ab="B")
    assert verdict(a, b)[0].paired
    other = copy.deepcopy(b)
    other.environment[AB_KEY]["id"] = "another-job"
    assert not verdict(a, other)[0].paired
    assert not verdict(b, a)[0].paired  # B as the base: the sides' roles are not swapped
    with pytest.raises(ValueError, match="unequal"):
        paired_interval(BASE, BASE[:-1])


# -- one verdict whatever the input ---------------------------------------------------------

def bench_json(samples: list[float], load: str) -> dict:
    """A pytest-benchmark document (its own layout) of one entry, as the plugin writes it."""
    import statistics

    extra = {"flops": 1024, "bytes": {"dram": 12288}, "dtype": "fp32", "size": [1024],
             "workload": "test_add", "variant": "default", "backend": "cpu",
             "device": "Test CPU", "valid": True, "checked": False, "outside_load": load}
    return {"machine_info": {"node": "h", "cpu": {"brand_raw": "Test CPU", "count": 2}},
            "commit_info": {}, "datetime": "2026-12-02T09:00:00", "version": "5.3.1",
            "benchmarks": [{"name": "test_add", "fullname": "t.py::test_add",
                            "group": None, "options": {}, "extra_info": extra,
                            "stats": {"median": statistics.median(samples),
                                      "rounds": len(samples), "iterations": 1,
                                      "data": list(samples)}}]}


SCENARIOS = [  # (B's factor, A's load, B's load, the verdict every input must give)
    (1.0, 0.0, 0.0, "same"),
    (1.5, 0.0, 0.0, "slower"),
    (2.9, 0.83, 0.0, "slower"),  # load on A
    (1.5, 0.0, 0.5, "uncertain"),  # load on B, within its bound
    (2.6, 0.0, 0.5, "slower"),  # load on B, beyond it
    (1.056, 0.0, 0.5, "uncertain"),  # the unchanged test, its B timed under load
    (1 / 1.5, 0.0, 0.0, "faster"),
]


@pytest.mark.parametrize("factor,fa,fb,expected", SCENARIOS)
def test_three_input_kinds_one_verdict(factor, fa, fb, expected):
    wa, wb = (load_words(f) if f else "" for f in (fa, fb))
    b_samples = [x * factor for x in BASE] if factor == 1.0 else slowed(factor)
    runs = verdict(run(BASE, wa), run(b_samples, wb))[0]
    pb = verdict(read_pytest_benchmark(bench_json(BASE, wa)),
                 read_pytest_benchmark(bench_json(b_samples, wb)))[0]
    ab = verdict(run(BASE, wa, ab="A"), run(b_samples, wb, ab="B"))[0]
    assert (runs.verdict, pb.verdict, ab.verdict) == (expected,) * 3
    assert ab.paired and not runs.paired and not pb.paired
    assert runs.ratio == pb.ratio and runs.reason == pb.reason


def test_the_wait_for_a_core_is_the_share_read_when_given(tmp_path):
    """The noise probe measures the timed process's own wait for a core (schedstat, summed
    over its threads): the gate reads that, not the looser share of all cores' time."""
    from roofbench.roofs.probes.cpu_noise import NoiseProbe, run_and_wait_ns

    words = outside_load(NoiseReport(2.0, 2, 0.9, 0.0, 0, 0, 5, 9.0, waited=0.2))
    assert "waited for a core 20.0% of the time it could run" in words
    assert load_share(words) == pytest.approx(0.2)  # not 0.9
    assert load_share(load_words(0.9)) == pytest.approx(0.9)  # older words: the share
    for tid, (run_ns, wait_ns) in {"1": (300, 100), "2": (700, 0)}.items():
        (tmp_path / tid).mkdir()
        (tmp_path / tid / "schedstat").write_text(f"{run_ns} {wait_ns} 4\n")
    (tmp_path / "3").mkdir()  # a thread that ended between the listing and the read
    assert run_and_wait_ns(tmp_path) == (1000, 100)
    assert run_and_wait_ns(tmp_path / "none") is None
    probe = NoiseProbe()
    sum(range(200_000))
    r = probe.report()
    if run_and_wait_ns() is not None:
        assert r.waited is not None and 0.0 <= r.waited <= 1.0


# -- the load per sample: a bound matched to the median -------------------------------------

def timed(samples: list[float], waits: list[float], load: str = "") -> RunResult:
    r = run(samples, load)
    r.cases[0].measurement.timing.waits = list(waits)
    return r


def test_waits_that_explain_the_median_excuse_it():
    """Every B sample waited for a core a third of its time: without that wait B is A. The
    load explains the 1.5x: `uncertain`, the per-sample bound said; A's own waits (its
    apparent speedup over B) mirror it."""
    b = slowed(1.5)
    waits = [x - x / 1.5 for x in b]
    v, failed = verdict(timed(BASE, [0.0] * N), timed(b, waits, load_words(0.5)))
    assert v.verdict == "uncertain" and failed == []
    assert "up to x1.50" in v.reason and "less each one's wait" in v.reason
    v, _ = verdict(timed(b, waits, load_words(0.5)), timed(BASE, [0.0] * N))
    assert v.verdict == "uncertain" and "faster by" in v.reason
    v, _ = verdict(run(BASE), timed(b, waits, load_words(0.5)))  # A's file has no waits
    assert v.verdict == "uncertain" and "up to x1.50" in v.reason
    assert "B's samples less their waits, A's share" in v.reason
    v, _ = verdict(timed(BASE, [0.0] * N), timed(b, waits))  # waits, no probe words
    assert v.verdict == "uncertain" and "the samples waited for a core" in v.reason


def test_a_slowdown_beyond_the_waits_is_slower():
    """B 2.6x slower, its waits explaining 1.5x of it: beyond the bound and the interval."""
    b = slowed(2.6)
    waits = [x - x / 1.5 for x in b]
    v, failed = verdict(timed(BASE, [0.0] * N), timed(b, waits, load_words(0.5)))
    assert v.verdict == "slower" and failed and v.ratio_lo > 1.5
    assert "at most x1.50" in v.reason and "less each one's wait" in v.reason


def test_preempted_samples_do_not_excuse_a_slower_median():
    """The stored runs of issue 27: B does 1.3x the work and waited for a core 70% of the
    time it could run, in a few samples preempted whole (8 of 40, each 5 ms late); the median
    sample never waited. The mean-share bound, x3.33, excused it (`uncertain`, what an older
    file without waits still gets); the waits per sample show the load moved the median only
    by the late samples' ranks: `slower`, the bound under 1.05."""
    b = slowed(1.3)
    late = set(range(0, N, 5))
    samples = [x + 5e-3 if i in late else x for i, x in enumerate(b)]
    waits = [5e-3 if i in late else 0.0 for i in range(N)]
    words = outside_load(NoiseReport(2.0, 2, 0.9, 0.0, 0, 0, 40, 9.0, waited=0.7))
    v, failed = verdict(timed(BASE, [0.0] * N), timed(samples, waits, words))
    bound = float(re.search(r"at most x(\d+\.\d+)", v.reason).group(1))
    assert v.verdict == "slower" and failed and bound < 1.05 < v.ratio_lo
    v, failed = verdict(run(BASE), run(samples, words))  # the same samples, no waits
    assert v.verdict == "uncertain" and failed == [] and "up to x3.33" in v.reason
    assert "bound on the mean" in v.reason


def test_pairs_judge_the_load_on_the_pairs_ratios():
    """A/B pairs: every B sample waited a third of its time (the load hit B alone, say a
    neighbour in step with B): `uncertain`; a few pairs' B preempted whole: `slower`."""
    b = [x * 1.5 for x in BASE]
    v, _ = verdict(_ab(timed(BASE, [0.0] * N), "A"),
                   _ab(timed(b, [x - x / 1.6 for x in b]), "B"))
    assert v.paired and v.verdict == "uncertain" and "up to x1.60" in v.reason
    late = set(range(0, N, 5))
    b2 = [x + 5e-3 if i in late else x for i, x in enumerate(b)]
    v, failed = verdict(_ab(timed(BASE, [0.0] * N), "A"),
                        _ab(timed(b2, [5e-3 if i in late else 0.0 for i in range(N)]), "B"))
    assert v.paired and v.verdict == "slower" and failed


def _ab(r: RunResult, side: str) -> RunResult:
    r.environment[AB_KEY] = {"id": "one-job", "side": side}
    return r


def test_the_waits_are_recorded_per_sample_and_stored(tmp_path):
    """host_timer reads the waits just outside each sample (a fake counter: 500 ns from one
    read to the next), keeps the samples' and not the warm-up's; the file keeps them;
    ThreadWaits sums the threads' schedstat and sees a thread that starts."""
    from roofbench.roofs.probes.cpu_noise import ThreadWaits

    from roofbench.readers import read_timing
    from roofbench.timing import TimerConfig, host_timer

    ns = iter(range(0, 10**9, 500))
    cfg = TimerConfig(warmup_s=0.0, warmup_min_runs=3, min_samples=7, max_samples=7)
    t = host_timer(lambda: None, cfg, waits=lambda: next(ns))
    assert t.n == 7 and t.waits == pytest.approx([5e-7] * 7)
    assert read_timing(t.to_dict()).waits == t.waits
    assert "waits_s" not in Timing([1.0], 0, "budget").to_dict()  # none measured, none kept
    assert host_timer(lambda: None, cfg, waits=lambda: None).waits == []
    for tid, wait_ns in (("1", 100), ("2", 0)):
        (tmp_path / tid).mkdir()
        (tmp_path / tid / "schedstat").write_text(f"300 {wait_ns} 4\n")
    with ThreadWaits(tmp_path) as waits:
        assert waits() == 100
        (tmp_path / "3").mkdir()
        (tmp_path / "3" / "schedstat").write_text("5 20 1\n")
        assert waits() == 120  # a new thread: the files opened again
    with ThreadWaits() as waits:
        first = waits()
        if first is not None:  # where the kernel keeps schedstat: a counter that only grows
            sum(range(100_000))
            assert (waits() or 0) >= first
