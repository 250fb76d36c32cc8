"""Paired roof samples (issue 37): a simulated machine whose memory bandwidth flips between two
states at random sample boundaries (a fake clock and a fake roof probe), the efficiency the
pairs give against the truth and against the bracket rule, the gate across a flip, an
early-stopped run judged, which roof a case is paired with, and the real samplers' rates."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from roofbench.bench.measure import pairs
from roofbench.bench.measure.core import paired_time, time_call
from roofbench.roofs.probes.cpu_pairs import FmaPair, ReadPass, StreamPair, SweepPair
from roofbench.roofs.probes.cpu_stream import StreamBracket

from roofbench.cache_records import CacheSweep, SweepPoint
from roofbench.gate import classify, min_samples
from roofbench.readers import read_run
from roofbench.records import (
    BufferFacts,
    CaseResult,
    Declaration,
    Identity,
    LaunchResult,
    Outcome,
    RunResult,
)
from roofbench.roof_records import Roof, RoofSet
from roofbench.roofline import apply_roofs
from roofbench.timing import (
    CI_MIN_SAMPLES,
    GATE_MIN_SAMPLES,
    ROOF_MOVED,
    RoofPair,
    TimerConfig,
    sample_loop,
)

SLOW, FAST = 45e9, 95e9  # the two states of the simulated VM's memory (B/s)
NBYTES = 64 << 20  # the case's DRAM bytes (its working set: far beyond any cache)
DEVICE = "Simulated VM"


class FlippingMachine:
    """A memory system in one of two states, flipping at random sample boundaries (a Markov
    chain: slow two thirds of the time); time is virtual (``now``)."""

    def __init__(self, seed: int, p_up: float = 0.3, p_down: float = 0.6) -> None:
        self.rng = random.Random(seed)
        self.fast, self.now = False, 0.0
        self.p_up, self.p_down = p_up, p_down

    def boundary(self) -> None:
        if self.rng.random() < (self.p_down if self.fast else self.p_up):
            self.fast = not self.fast

    @property
    def bw(self) -> float:
        return FAST if self.fast else SLOW

    def kernel(self, efficiency: float) -> float:
        """One timed sample of a kernel that streams at ``efficiency`` of the state's rate
        (1% jitter); the state may flip after it."""
        t = NBYTES / (efficiency * self.bw) * self.rng.gauss(1.0, 0.01)
        self.now += t
        self.boundary()
        return t

    def probe(self) -> float:
        """One sample of the roof: the state's rate (1% jitter); may flip after it."""
        rate = self.bw * self.rng.gauss(1.0, 0.01)
        self.now += 0.005
        self.boundary()
        return rate


def dram_roofs(best: float = FAST) -> RoofSet:
    return RoofSet(device=DEVICE, roofs=[
        Roof("dram stream-add-nt", "memory", best, "measured", level="dram",
             evidence={"probe": "stream-add-nt", "array_elements": 1 << 20}),
        Roof("fp32 FMA peak", "compute", 1e12, "measured", precision="fp32",
             evidence={"probe": "fma-peak"})])


def case(timing=None, flops: int = NBYTES // 12) -> CaseResult:
    rec = CaseResult(
        Identity(workload="vector_add", variant="numba", backend="cpu", dtype="fp32",
                 size=[NBYTES // 12], precision="fp32", cores="simt"),
        Declaration(flops=flops, bytes={"dram": NBYTES}, ai={"dram": flops / NBYTES}),
        Outcome(status="ok"))
    if timing is not None:
        rec.measurement.timing, rec.measurement.median_s = timing, timing.median
        rec.roofline.flop_per_s = flops / timing.median
        rec.roofline.bytes_per_s = {"dram": NBYTES / timing.median}
    return rec


def simulated_timing(m: FlippingMachine, efficiency: float, cfg: TimerConfig | None = None):
    return sample_loop(lambda: m.kernel(efficiency), cfg or TimerConfig(budget_s=2.0),
                       clock=lambda: m.now, pair=RoofPair("memory:dram:stream-add-nt", m.probe))


@pytest.mark.parametrize("seed", range(6))
def test_pair_ratios_give_the_true_efficiency_where_the_best_state_does_not(seed):
    """The kernel streams at 0.9 of whatever state the memory is in. Against the machine's best
    state (the bracket rule: the run's DRAM roof is the best state seen) it reads about half
    that; the median of the pairs' ratios is within 3% of 0.9."""
    m = FlippingMachine(seed)
    t = simulated_timing(m, 0.9)
    assert t.paired and t.n >= GATE_MIN_SAMPLES
    assert min(t.roof_rates) < 0.6 * FAST < max(t.roof_rates)  # it did flip while timed
    rec = case(t)
    apply_roofs(rec, dram_roofs())
    p = rec.roofline.paired
    assert p is not None and p.pairs == t.n and p.ceiling == FAST
    assert rec.roofline.efficiency == p.efficiency
    assert abs(p.efficiency - 0.9) <= 0.03 * 0.9
    assert p.lo <= p.efficiency <= p.hi
    assert p.of_ceiling is not None and p.of_ceiling < 0.6  # the unpaired rule: off by ~2x
    assert p.roof_low < 0.6 * FAST and p.roof_high > 0.9 * FAST


def test_without_pairs_the_efficiency_is_the_old_rule():
    m = FlippingMachine(1)
    t = sample_loop(lambda: m.kernel(0.9), TimerConfig(budget_s=2.0), clock=lambda: m.now)
    assert not t.paired and not t.roof_rates
    rec = case(t)
    apply_roofs(rec, dram_roofs())
    assert rec.roofline.paired is None
    assert rec.roofline.efficiency == pytest.approx(rec.roofline.flop_per_s
                                                    / rec.roofline.attainable)


def test_pairs_of_another_roof_are_not_used():
    """Pairs taken with the L2 roof, read under roofs that hold the case to DRAM: not a ratio
    of this case's roof, so none is given."""
    m = FlippingMachine(2)
    t = simulated_timing(m, 0.9)
    t.roof_probe = "memory:l2:l2 sweep-read"
    rec = case(t)
    apply_roofs(rec, dram_roofs())
    assert rec.roofline.paired is None


def run_of(*timings, name: str = "run") -> RunResult:
    cases = []
    for i, t in enumerate(timings):
        c = case(t)
        c.identity.size = [NBYTES // 12 + i]
        apply_roofs(c, dram_roofs())
        cases.append(c)
    return RunResult(device=DEVICE, backend="cpu", roofs=None, created=name, cases=cases)


def test_the_gate_passes_an_unchanged_program_across_a_flip_and_catches_a_slowdown():
    """A ran in the fast state (mostly), B in the slow one: raw times 2x apart. Judged on
    roof-normalised times the unchanged program is `same`; a kernel 1.3x slower in B is
    `slower` however the memory moved."""
    fast_machine = FlippingMachine(3, p_up=0.9, p_down=0.02)
    fast_machine.fast = True
    a = run_of(simulated_timing(fast_machine, 0.9), name="a")
    same = run_of(simulated_timing(FlippingMachine(4), 0.9), name="b")
    assert same.cases[0].measurement.median_s > 1.5 * a.cases[0].measurement.median_s
    cmp = classify(a, same, 0.05)
    assert [c.verdict for c in cmp.cases] == ["same"], cmp.cases
    assert cmp.cases[0].normalised
    assert any("1 of 1 cases judged on roof-normalised" in n for n in cmp.notes)
    slower = run_of(simulated_timing(FlippingMachine(5), 0.9 / 1.3), name="b")
    cmp = classify(a, slower, 0.05)
    v = cmp.cases[0]
    assert v.verdict == "slower" and v.normalised and 1.2 < v.ratio < 1.4, v
    assert "roof-normalised" in v.reason
    # the same files read without their pairs: the raw rule, and it is fooled by the flip
    for run in (a, same):
        for c in run.cases:
            c.measurement.timing.roof_rates = []
    raw = classify(a, same, 0.05)
    assert raw.cases[0].verdict == "slower" and not raw.cases[0].normalised
    assert any("on raw times" in n for n in raw.notes)


def test_an_early_stopped_run_is_one_the_gate_can_judge():
    """The timer's minimum is what the gate needs for an interval of each median when 35
    cases are judged together; a quick run that stops on its noise rule at that minimum, 1.5x
    apart, is `slower`, not `uncertain`."""
    assert min_samples(math.sqrt(1 - 0.05 / 35)) <= GATE_MIN_SAMPLES
    assert TimerConfig().min_samples == TimerConfig.quick().min_samples == GATE_MIN_SAMPLES
    assert GATE_MIN_SAMPLES < CI_MIN_SAMPLES  # it still stops early when the CV is low
    rng = random.Random(8)
    now = [0.0]

    def quick(scale: float):
        def one() -> float:
            t = 1e-3 * scale * rng.gauss(1.0, 0.002)
            now[0] += t
            return t
        return sample_loop(one, TimerConfig.quick(), clock=lambda: now[0])

    ta, tb = quick(1.0), quick(1.5)
    assert ta.stopped_by == tb.stopped_by == "noise" and ta.n == tb.n == GATE_MIN_SAMPLES
    cmp = classify(run_of(*[quick(1.0) for _ in range(34)], ta, name="a"),
                   run_of(*[quick(1.0) for _ in range(34)], tb, name="b"), 0.05)
    verdicts = [c.verdict for c in cmp.cases]
    assert verdicts[-1] == "slower" and verdicts[:-1] == ["same"] * 34


def test_noise_is_named_by_the_roof_when_the_roof_moved():
    m = FlippingMachine(6)
    t = simulated_timing(m, 0.9)
    assert any(f.startswith("noisy") for f in t.flags)
    cause = next(f for f in t.flags if f.startswith("noise cause"))
    assert cause.startswith(ROOF_MOVED + "memory bandwidth moved"), cause
    assert "GB/s" in cause
    # a kernel that is noisy on its own (the roof steady): not the roof
    rng = random.Random(9)
    t = sample_loop(lambda: rng.choice([1e-3, 2e-3]), TimerConfig(budget_s=0.05),
                    pair=RoofPair("memory:dram:stream-add-nt",
                                  lambda: 50e9 * rng.gauss(1.0, 0.005)))
    assert any(f.startswith("noise cause: not the roof") for f in t.flags), t.flags


def test_paired_records_round_trip():
    m = FlippingMachine(7)
    run = run_of(simulated_timing(m, 0.9))
    run.roofs = dram_roofs()
    again = read_run(run.to_dict())
    c, c0 = again.cases[0], run.cases[0]
    assert c.measurement.timing.roof_rates == c0.measurement.timing.roof_rates
    assert c.measurement.timing.roof_probe == "memory:dram:stream-add-nt"
    assert c.roofline.paired == c0.roofline.paired
    assert again.to_dict() == run.to_dict()


# -- which roof a case is paired with ------------------------------------------------------

class FakeClock:
    kind = "cpu"
    pairs_roofs = True

    def __init__(self, device: str = DEVICE) -> None:
        self.device = device

    def device_name(self) -> str:
        return self.device

    def time(self, fn, cfg, pair=None):
        raise AssertionError("not timed here")


def cache_roofs() -> RoofSet:
    rs = dram_roofs(20e9)
    pts = [SweepPoint("l2", 256 << 10, "read", 200e9, 190e9)]
    rs.roofs.append(Roof("l2 sweep-read", "memory", 200e9, "measured", level="l2",
                         cache=CacheSweep("l2", "read", 1 << 20, 1, 1, 1, "sysfs",
                                          [128 << 10, 512 << 10], pts),
                         evidence={"best_working_set_bytes": 256 << 10}))
    return rs


def test_the_pair_is_the_roof_that_bounds_the_case():
    dram = pairs.pair_for(case(), dram_roofs(), FakeClock())
    assert dram is not None and dram.probe == "memory:dram:stream-add-nt"
    assert isinstance(dram.sample, StreamPair)
    l2 = pairs.pair_for(case(), cache_roofs(), FakeClock(), working_set=300 << 10)
    assert l2 is not None and l2.probe == "memory:l2:l2 sweep-read"
    assert isinstance(l2.sample, SweepPair) and l2.sample.working_set == 256 << 10
    gemm = case(flops=NBYTES * 100)  # 100 FLOP/byte: compute-bound
    fma = pairs.pair_for(gemm, dram_roofs(), FakeClock())
    assert fma is not None and fma.probe == "compute:fp32:fma"
    assert isinstance(fma.sample, FmaPair) and not fma.rewarm
    assert l2.rewarm  # the sweep's pass evicts the case's data from L2
    scaled = dram_roofs()
    scaled.roofs[1].evidence["scaled_from"] = {"threads": 2, "value": 2e12}
    assert pairs.pair_for(gemm, scaled, FakeClock()) is None  # one thread's share of the FMA
    big = case()
    big.declaration.buffers = {"x": BufferFacts("input", 1 << 40)}
    assert not pairs.pair_for(big, dram_roofs(), FakeClock()).rewarm  # streams from DRAM
    pairs.close()


def test_no_pair_for_roofs_it_cannot_sample():
    assert pairs.pair_for(case(), dram_roofs(), FakeClock("another CPU")) is None
    assert pairs.pair_for(case(), None, FakeClock()) is None
    sheet = dram_roofs()
    sheet.roofs[0].source = "datasheet"
    assert pairs.pair_for(case(), sheet, FakeClock()) is None
    gpu = FakeClock()
    gpu.pairs_roofs = False
    assert pairs.pair_for(case(), dram_roofs(), gpu) is None

    class OldTimer(FakeClock):  # a backend whose time() takes no pair (a plug-in's)
        def time(self, fn, cfg):
            return None

    assert pairs.pair_for(case(), dram_roofs(), OldTimer()) is None


def test_a_timed_pair_stores_the_probe_beside_the_rates():
    class Clock(FakeClock):
        def time(self, fn, cfg, pair=None):
            return sample_loop(lambda: 1e-3, cfg, pair=pair)

    pair = RoofPair("memory:dram:stream-add-nt", lambda: 40e9)
    t = time_call(Clock(), lambda: None, TimerConfig.quick(), pair=pair)
    assert t.roof_probe == "memory:dram:stream-add-nt" and t.roof_rates == [40e9] * t.n
    # a clock without pairs times as before
    rec = case()
    t = paired_time(Clock("another CPU"), lambda: None, TimerConfig.quick(), rec, dram_roofs())
    assert not t.roof_rates and not t.roof_probe


# -- the real samplers (small, real work) --------------------------------------------------

def test_the_real_samplers_measure_their_roofs():
    """Each sampler's rate is the roof's kind of figure, positive and finite; the DRAM pair
    runs the bracket's own kernel on its arrays."""
    b = StreamBracket(1 << 18, "add-nt")
    s = StreamPair(b)
    rates = [s() for _ in range(3)]
    assert b.arrays is not None and all(np.isfinite(r) and r > 1e8 for r in rates)
    b.close()
    sweep = cache_roofs().roofs[-1]
    sp = SweepPair(sweep)
    assert all(np.isfinite(r) and r > 1e8 for r in (sp(), sp()))
    sp.close()
    fp = FmaPair("fp64", target_s=0.001)
    assert all(np.isfinite(r) and r > 1e8 for r in (fp(), fp()))


# -- through the entry points, with the real probe on this machine --------------------------

def stream_roofs(device: str) -> RoofSet:
    """This machine's roofs as the CPU probes name them: a STREAM DRAM roof (its evidence says
    which kernel and arrays), so the pairs sample it for real."""
    return RoofSet(device=device, roofs=[
        Roof("dram stream-add-nt", "memory", 2e10, "measured", level="dram",
             evidence={"probe": "stream-add-nt", "array_elements": 1 << 18}),
        Roof("fp32 FMA peak", "compute", 2e11, "measured", precision="fp32",
             evidence={"probe": "fma-peak"})])


def test_measure_pairs_each_sample_with_the_real_roof(capsys):
    from roofbench.bench.backends.cpu import cpu_model

    import roofbench

    n = 1 << 18
    a, b = np.full(n, 0.5, np.float32), np.full(n, 0.25, np.float32)
    c = np.empty_like(a)
    rec = roofbench.measure(np.add, a, b, c, flops=n, reads=[a, b], writes=c,
                            roofs=stream_roofs(cpu_model()), reference=np.full(n, 0.75),
                            output=c, name="add_paired")
    t, p = rec.measurement.timing, rec.roofline.paired
    assert t.paired and t.roof_probe == "memory:dram:stream-add-nt"
    assert all(math.isfinite(q) and q > 0 for q in t.roof_rates)
    assert p is not None and p.pairs == t.n and rec.roofline.efficiency == p.efficiency
    assert p.of_ceiling == pytest.approx(rec.roofline.flop_per_s / rec.roofline.attainable)
    assert p.roof_low == min(t.roof_rates) and p.roof_high == max(t.roof_rates)
    assert "as it was while it ran" in capsys.readouterr().err
    pairs.close()


@pytest.mark.parametrize(("reads", "writes", "probe"), [
    ("x", None, "memory:dram:read"),  # a sum: one array read
    ("x", "y", "memory:dram:stream-square-nt"),  # one read, one written
    ("x", "x", "memory:dram:stream-square-nt"),  # in place: read and written, two streams
    ("x y", "z", "memory:dram:stream-add-nt"),
    ("bytes", None, "memory:dram:stream-add-nt"),  # a byte count: its arrays unknown
])
def test_measure_pairs_a_call_with_the_probe_of_its_declared_streams(reads, writes, probe):
    """``measure`` declares no launches: the arrays given as reads=/writes= pick the DRAM
    probe (a one-array read once paired with STREAM's three read 1.051 of its roof, Zen 4,
    12-06); bytes given as a number keep STREAM add-nt."""
    from roofbench.bench.backends.cpu import cpu_model

    import roofbench

    n = 1 << 18
    arrays = {k: np.full(n, 0.5, np.float32) for k in "xyz"}

    def given(names):
        if names is None:
            return 0
        if names == "bytes":
            return arrays["x"].nbytes
        found = [arrays[k] for k in names.split()]
        return found[0] if len(found) == 1 else found

    rec = roofbench.measure(lambda: float(arrays["x"].sum()), flops=n, reads=given(reads),
                            writes=given(writes), dtype="fp32",
                            roofs=stream_roofs(cpu_model()), name="streams")
    assert rec.measurement.timing.roof_probe == probe
    assert rec.roofline.paired is not None and rec.roofline.paired.probe == probe
    pairs.close()


def test_a_callables_arrays_counted_once_a_side_and_unknown_behind_a_number():
    from roofbench.bench.measure.declared import declared_arrays

    a, b = np.zeros(1000), np.zeros(10)
    assert declared_arrays([a, b, a], a) == (8000, 80, 8000)  # read once, written once
    assert declared_arrays(a, 0) == (8000,)
    assert declared_arrays([a, 80], 0) == ()  # bytes behind a number: not known
    assert pairs.stream_count((8000, 80)) == 1  # b is under 1/64 of the bytes
    assert pairs.stream_count((8000, 80, 8000)) == 2
    assert pairs.stream_shares(case(), (8000, 80)) == {1: 1.0}
    assert pairs.stream_shares(case(), ()) == {3: 1.0}


def test_the_suite_runner_pairs_its_cases():
    from roofbench.bench.backends.cpu import CpuBackend, cpu_model
    from roofbench.bench.suite.runner import run_case
    from roofbench.kernels.registry import workloads
    from roofbench.kernels.spec import Case

    w = workloads()["vector_add"]
    case = Case(w, w.variants["scalar"], "fp32", (1 << 16,))
    rec = run_case(case, CpuBackend(), stream_roofs(cpu_model()), TimerConfig.quick(),
                   np.random.default_rng(1))
    assert rec.outcome.status == "ok", rec.outcome.error
    assert rec.measurement.timing.paired and rec.roofline.paired is not None
    assert rec.roofline.paired.probe == "memory:dram:stream-add-nt"
    pairs.close()


def test_the_report_says_the_roof_as_it_was_and_the_best_state():
    from roofbench.bench.present.report import render
    from roofbench.bench.present.roof_state import paired_text

    run = run_of(simulated_timing(FlippingMachine(0), 0.9))
    run.roofs = dram_roofs()
    c = run.cases[0]
    p = c.roofline.paired
    text = paired_text(c)
    assert text is not None and text.startswith(f"{p.efficiency:.0%} [{p.lo:.0%}, {p.hi:.0%}]")
    assert "of the DRAM roof as it was while it ran (stream-add-nt: " in text
    assert "the machine's best state 95 GB/s" in text and f"({p.of_ceiling:.0%} of it)" in text
    md = render(run)
    assert "Efficiency from paired samples" in md and text in md
    c.roofline.paired = None
    assert paired_text(c) is None


def test_a_profiled_programs_eager_runs_are_paired():
    torch = pytest.importorskip("torch")
    from roofbench.bench.backends.cpu import cpu_model

    import roofbench

    x = torch.full((1 << 18,), 0.5)
    y = torch.full((1 << 18,), 0.25)
    prof = roofbench.profile(lambda a, b: (a + b) * 2.0, x, y, roofs=stream_roofs(cpu_model()),
                             timer=TimerConfig.quick())
    t = prof.program.measurement.timing
    # its bytes by its ops' streams: the add's three arrays (60%), the multiply's two (40%)
    assert t.paired and t.roof_probe == ("memory:dram:stream-add-nt 60% + "
                                         "stream-square-nt 40%")
    assert prof.program.roofline.paired is not None
    assert prof.program.roofline.efficiency == prof.program.roofline.paired.efficiency
    # the report says so, with the probe the runs were paired with
    from roofbench.bench.present.blocks import Items
    from roofbench.bench.present.roof_state import paired_text
    from roofbench.bench.profile.report import sections

    text = "\n".join(i for sec in sections(prof) for b in sec.blocks if isinstance(b, Items)
                     for i in b.items)
    assert f"eager, paired: {paired_text(prof.program)}" in text
    assert "of the DRAM roof as it was while it ran (stream-add-nt 60% + " in text
    pairs.close()


def test_a_profiled_programs_ops_alone_are_paired():
    """Each op replayed alone samples its roof beside each sample, as measure() does: its
    alone summary names the probe (the in-program time is the op's own, with no pair)."""
    torch = pytest.importorskip("torch")
    from roofbench.bench.backends.cpu import cpu_model

    import roofbench

    x = torch.full((1 << 18,), 0.5)
    y = torch.full((1 << 18,), 0.25)
    prof = roofbench.profile(lambda a, b: (a + b) * 2.0, x, y, roofs=stream_roofs(cpu_model()),
                             timer=TimerConfig.quick())
    alone = [p.case.evidence.extra["alone"] for p in prof.ops]
    assert [p.op.packet for p in prof.ops] == ["add", "mul"]
    # each op against the probe of as many streams as it moves: a + b three, (.) * 2.0 two
    assert [a["roof_probe"] for a in alone] == ["memory:dram:stream-add-nt",
                                                "memory:dram:stream-square-nt"]
    pairs.close()


def test_an_ops_arrays_are_the_storages_it_reads_then_writes():
    """``Distinct.arrays``: each storage read, then each written (an op in place: its
    tensor twice), the scalar a multiply wraps among them (too small to be a stream), none
    for a view or an indexed op (its rule counts what it touches, not whole arrays)."""
    torch = pytest.importorskip("torch")
    from roofbench.bench.profile.recording import record_program

    def prog(a, b, idx):
        s = a.sum()  # one stream
        c = a * 2.0  # two
        c.add_(b)  # in place: c read and written, b read
        v = c.view(-1)  # a view
        g = a.index_select(0, idx)  # indexed
        return s, v, g

    a, b = torch.ones(4096), torch.ones(4096)
    idx = torch.arange(0, 4096, 8)
    rec, _ = record_program(prog, (a, b, idx), {})
    by = {d.packet: d for d in rec.distinct}
    kb = 4096 * 4
    assert by["sum"].arrays == (kb, 4)
    assert [x for x in by["mul"].arrays if x >= kb] == [kb, kb]
    assert sorted(by["add_"].arrays) == [kb, kb, kb]
    assert by["view"].arrays == () and by["index_select"].arrays == ()
    assert pairs.stream_count(by["sum"].arrays) == 1
    assert pairs.stream_count(by["mul"].arrays) == 2
    assert pairs.mixed_shares([(by["sum"].arrays, 1.0), (by["add_"].arrays, 3.0),
                               ((), 1.0)]) == pytest.approx({1: 0.2, 3: 0.8})
    assert pairs.mixed_shares([]) == {3: 1.0}
    # a part under 1/64 of the bytes gets no probe sample of its own (nor a "0%" in its name)
    assert pairs.mixed_shares([(by["sum"].arrays, 1000.0), (by["add_"].arrays, 10.0)]) == {
        1: 1.0}


def test_a_profiled_reduction_is_paired_with_the_read_pass():
    """A one-array op (a sum over a DRAM-sized tensor) alone, and the program of it alone,
    against the read pass: not add-nt, which a one-array read outruns on one core."""
    torch = pytest.importorskip("torch")
    from roofbench.bench.backends.cpu import cpu_model

    import roofbench

    x = torch.full((1 << 18,), 0.5)
    prof = roofbench.profile(lambda a: a.sum(), x, roofs=stream_roofs(cpu_model()),
                             timer=TimerConfig.quick())
    assert [p.case.evidence.extra["alone"]["roof_probe"] for p in prof.ops] == [
        "memory:dram:read"]
    assert prof.program.measurement.timing.roof_probe == "memory:dram:read"
    pairs.close()


def test_the_dram_pair_samples_the_non_temporal_kernel_where_it_was_measured():
    """A run whose best DRAM roof is triad's (a plain-store kernel that swings between two
    rates on a VM) still pairs with STREAM add-nt when the set measured it."""
    rs = dram_roofs(40e9)
    rs.roofs.insert(0, Roof("dram stream-triad", "memory", 50e9, "measured", level="dram",
                            evidence={"probe": "stream-triad", "array_elements": 1 << 20}))
    assert rs.memory("dram").name == "dram stream-triad"
    assert pairs.dram_bracket(rs).kernel == "add-nt"
    only_triad = RoofSet(device=DEVICE, roofs=rs.roofs[:1])
    assert pairs.dram_bracket(only_triad).kernel == "triad"
    pairs.close()


# -- a case's read-only bytes paired with a read pass ---------------------------------------

def launched(*launches: tuple[str, list[str], list[str]], **buffers: int) -> CaseResult:
    """A declared case (not timed) of ``launches`` (kernel, reads, writes) over ``buffers``
    (name: bytes), its bytes their sum as the workloads count them."""
    rec = case()
    rec.declaration.buffers = {n: BufferFacts("input", b) for n, b in buffers.items()}
    rec.measurement.launches = [LaunchResult(k, "", 0, {}, reads=r, writes=w)
                                for k, r, w in launches]
    return rec


GEMV = launched(("rows", ["W", "x"], ["y"]), W=NBYTES, x=16 << 10, y=32 << 10)
ROWNORM = launched(("square", ["x"], ["sq"]), ("rowsum", ["sq"], ["sums"]),
                   ("scale", ["x", "sums"], ["y"]), x=NBYTES, sq=NBYTES, y=NBYTES, sums=64)
L2NORM3 = launched(("square", ["a"], ["t"]), ("add", ["a", "t"], ["u"]), a=NBYTES, t=NBYTES,
                   u=NBYTES)


def test_each_launch_is_paired_with_a_probe_of_as_many_streams():
    """gemv streams W alone (x and y are 1/4096 and 1/2048 of it): the read pass; rownorm
    naive: its squares and scale stream two arrays, its row sum one (a fifth of the bytes);
    l2norm: two and three; a callable timed whole declares no launches: STREAM add-nt alone,
    as before."""
    assert pairs.stream_shares(GEMV) == {1: 1.0}
    assert pairs.stream_shares(ROWNORM) == pytest.approx({1: 0.2, 2: 0.8}, abs=1e-6)
    assert pairs.stream_shares(L2NORM3) == pytest.approx({2: 0.4, 3: 0.6})
    assert pairs.stream_shares(case()) == {3: 1.0}
    probes = {name: pairs.pair_for(rec, dram_roofs(), FakeClock())
              for name, rec in (("gemv", GEMV), ("rownorm", ROWNORM), ("l2norm", L2NORM3),
                                ("whole", case()))}
    assert probes["gemv"].probe == "memory:dram:read"
    assert probes["rownorm"].probe == "memory:dram:stream-square-nt 80% + read 20%"
    assert probes["l2norm"].probe == "memory:dram:stream-add-nt 60% + stream-square-nt 40%"
    assert probes["whole"].probe == "memory:dram:stream-add-nt"
    gemv, rownorm = probes["gemv"].sample, probes["rownorm"].sample
    assert isinstance(gemv, StreamPair) and gemv.reads is rownorm.reads  # one read buffer
    pairs.close()


@pytest.mark.parametrize(("workload", "variant", "size", "shares"), [
    ("gemv", "rows", (8192, 4096), {1: 1.0}),
    ("rownorm", "naive", (8192, 4096), {1: 0.2, 2: 0.8}),  # the row sums' 32 KiB left out
    ("rownorm", "fused", (8192, 4096), {2: 1.0}),
    ("l2norm", "naive", (1 << 24,), {2: 2 / 3, 3: 1 / 3}),
    ("l2norm", "fused", (1 << 24,), {3: 1.0}),
    ("vector_add", "scalar", (1 << 24,), {3: 1.0}),
])
def test_the_workloads_streams_pick_their_probes(workload, variant, size, shares):
    """The suite's records, as the runner writes them, give each case's DRAM probe mix."""
    from types import SimpleNamespace

    from roofbench.bench.suite.case_record import case_record
    from roofbench.kernels.registry import workloads
    from roofbench.kernels.spec import Case

    w = workloads()[workload]
    rec = case_record(Case(w, w.variants[variant], "fp32", size),
                      SimpleNamespace(name="cpu", kind="cpu"), status="ok")
    assert pairs.stream_shares(rec) == pytest.approx(shares, abs=1e-4)


class TwoMixMachine:
    """A VM whose fast memory state lifts STREAM's three streams more than one (the Zen 4 VM,
    12-06: STREAM add-nt 47 -> 66 GB/s, a read-only stream 42 -> 51); held in one state."""

    STATES = {"slow": (47e9, 42e9), "fast": (66e9, 51e9)}

    def __init__(self, state: str) -> None:
        self.mixed, self.read = self.STATES[state]
        self.now = 0.0

    def kernel(self, efficiency: float, share: float) -> float:
        """A case moving ``share`` of its bytes in read-only launches, at ``efficiency`` of
        each part's rate now."""
        t = NBYTES * (share / self.read + (1 - share) / self.mixed) / efficiency
        self.now += t
        return t


def mixed_pair_efficiency(monkeypatch, state: str, share: float, read_share: float) -> float:
    """A case of ``share`` read-only bytes at 0.8 of each part's rate, on the machine held in
    ``state``, paired by the real StreamPair of ``read_share`` (its STREAM call timed on the
    machine's clock, its read pass a stub): the paired efficiency."""
    m = TwoMixMachine(state)

    class Arrays:
        def call(self, kernel):
            def run():
                m.now += 24 * bracket.n / m.mixed
            return run

    bracket = StreamBracket(1 << 20, "add-nt")
    bracket.arrays = Arrays()
    with monkeypatch.context() as mp:
        mp.setattr("roofbench.roofs.probes.cpu_pairs.time.perf_counter", lambda: m.now)
        sampler = StreamPair(bracket, {1: read_share, 3: 1 - read_share}, lambda: m.read)
        t = sample_loop(lambda: m.kernel(0.8, share), TimerConfig(budget_s=2.0),
                        clock=lambda: m.now, pair=RoofPair("memory:dram:x", sampler))
    rec = case(t)
    apply_roofs(rec, dram_roofs())
    assert rec.roofline.paired is not None
    return rec.roofline.paired.efficiency


@pytest.mark.parametrize("share", [1.0, 0.2])
def test_a_read_heavy_case_holds_its_efficiency_across_memory_states(monkeypatch, share):
    """The StreamPair mixes the two rates as the case's bytes split: the same efficiency in
    both states (within 3% of the truth), where STREAM alone moves with the state."""
    out = {(state, rs): mixed_pair_efficiency(monkeypatch, state, share, rs)
           for state in ("slow", "fast") for rs in (share, 0.0)}
    for state in ("slow", "fast"):
        assert abs(out[state, share] - 0.8) <= 0.03 * 0.8, out
    stream_only = abs(out["slow", 0.0] - out["fast", 0.0])
    assert stream_only > (0.08 if share == 1.0 else 0.015), out  # add-nt alone: state-bound


def test_a_mixed_sample_is_the_rate_both_roofs_give_the_bytes(monkeypatch):
    """Half the bytes at 40 GB/s (reads), half at 80 (STREAM): 53.3 GB/s, the harmonic mix
    (time adds up), not the 60 of an average of rates."""
    now = [0.0]
    bracket = StreamBracket(1 << 20, "add-nt")

    class Arrays:
        def call(self, kernel):
            def run():
                now[0] += 24 * bracket.n / 80e9
            return run

    bracket.arrays = Arrays()
    monkeypatch.setattr("roofbench.roofs.probes.cpu_pairs.time.perf_counter", lambda: now[0])
    half = StreamPair(bracket, {1: 0.5, 3: 0.5}, lambda: 40e9)
    assert half() == pytest.approx(1 / (0.5 / 40e9 + 0.5 / 80e9))
    assert StreamPair(bracket, {1: 1.0}, lambda: 40e9)() == 40e9
    assert StreamPair(bracket)() == pytest.approx(80e9)
    for bad in ({1: 0.5, 3: 0.4}, {4: 1.0}, {}):
        with pytest.raises(ValueError):
            StreamPair(bracket, bad, lambda: 40e9)
    with pytest.raises(ValueError):
        StreamPair(bracket, {1: 1.0})  # a read share with no read pass to time it


def test_the_real_read_pass_and_mixed_pair_measure():
    b = StreamBracket(1 << 18, "add-nt")
    reads = ReadPass(8 * b.n)
    mixed = StreamPair(b, {1: 0.25, 2: 0.25, 3: 0.5}, reads)
    rates = [reads(), mixed(), mixed()]
    assert all(np.isfinite(r) and r > 0 for r in rates)
    assert mixed.name == "stream-add-nt 50% + stream-square-nt 25% + read 25%"
    assert mixed.squared  # square-nt's output was checked once against numpy
    b.close()
    reads.close()


# -- a case that does not follow its roof all the way -----------------------------------------

def test_a_case_that_does_not_follow_its_roof_is_reported_by_state():
    """A kernel at 0.9 of the slow memory but only 0.6 of the fast one (a reduction partly
    bound by its adds): its one efficiency depends on the mix of states it met, so the pairs
    are also given by state, each within 3% of the truth, and the report says so; a kernel
    that follows (0.9 in both) has two equal states and no such words. The states survive
    the record's round trip."""
    from roofbench.bench.present.roof_state import paired_text

    from roofbench.readers import read_case

    def run_with(slow_eff: float, fast_eff: float) -> CaseResult:
        m = FlippingMachine(3, p_up=0.05, p_down=0.1)  # states hold for many samples
        t = sample_loop(lambda: m.kernel(fast_eff if m.fast else slow_eff),
                        TimerConfig(budget_s=2.0), clock=lambda: m.now,
                        pair=RoofPair("memory:dram:stream-add-nt", m.probe))
        rec = case(t)
        apply_roofs(rec, dram_roofs())
        return rec

    partial = run_with(0.9, 0.6)
    p = partial.roofline.paired
    assert p is not None and len(p.states) == 2
    slow, fast = p.states
    assert abs(slow.efficiency - 0.9) <= 0.03 * 0.9 and abs(fast.efficiency - 0.6) <= 0.03 * 0.6
    assert abs(slow.roof_median / SLOW - 1) < 0.03 and abs(fast.roof_median / FAST - 1) < 0.03
    assert slow.pairs + fast.pairs == p.pairs
    text = paired_text(partial)
    assert text is not None and "by the roof's state: 90% at 45 GB/s" in text
    assert "60% at 95 GB/s" in text and "does not follow its roof" in text
    assert read_case(partial.to_dict()).roofline.paired == p

    follows = run_with(0.9, 0.9)
    q = follows.roofline.paired
    assert q is not None and len(q.states) == 2
    assert abs(q.states[0].efficiency - q.states[1].efficiency) < 0.03
    assert "by the roof's state" not in (paired_text(follows) or "")


def test_one_state_is_no_split():
    from roofbench.roofline import state_split

    assert state_split([40e9, 41e9, 39e9, 40.5e9, 40e9, 39.5e9, 40e9], [0.9] * 7) == ()
    assert state_split([40e9, 70e9], [0.9, 0.8]) == ()  # too few pairs for two states
    two = state_split([40e9] * 5 + [70e9] * 5, [0.9] * 5 + [0.6] * 5)
    assert [(s.roof_median, s.efficiency, s.pairs) for s in two] == [(40e9, 0.9, 5),
                                                                     (70e9, 0.6, 5)]
    # three samples of a probe starved of CPU (a busy core) are no state of the memory
    starved = [1e9, 1.2e9, 1.5e9] + [30e9] * 19
    assert len(state_split(starved, [20.0] * 3 + [0.76] * 19)) == 2
    assert state_split(starved, [20.0] * 3 + [0.76] * 19, floor=0.25 * 32e9) == ()


def test_a_profiled_jax_program_is_paired_with_its_arrays_streams():
    """A JAX program on a CPU against the DRAM probe of as many streams as its arguments and
    results: a sum reads one array (its scalar result is no stream), a * b + a three."""
    jax = pytest.importorskip("jax")
    from roofbench.bench.backends.cpu import cpu_model

    import roofbench

    x = jax.numpy.full((1 << 18,), 0.5, dtype=jax.numpy.float32)
    y = jax.numpy.full((1 << 18,), 0.25, dtype=jax.numpy.float32)
    rs = stream_roofs(cpu_model())
    probes = [roofbench.profile(jax.jit(f), *a, roofs=rs, timer=TimerConfig.quick())
              .program.measurement.timing.roof_probe
              for f, a in ((lambda a: a.sum(), (x,)), (lambda a, b: a * b + a, (x, y)))]
    assert probes == ["memory:dram:read", "memory:dram:stream-add-nt"]
    pairs.close()
