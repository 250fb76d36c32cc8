"""Paired samples on a GPU (issue 37): which roof a GPU case is paired with
(bench/measure/pairs.py), its samples and the roof's alternating through the CUDA-event
timer (cuda_time), and the efficiency the pairs give while the device's clocks change under
the case — on a virtual GPU (tests/standins/virtual_gpu.py) whose launches advance a virtual
clock: the case and the roof's kernels slow down together when the clocks drop, as on a
power- or thermal-limited GPU. Also the fall-backs that give no pair."""

from __future__ import annotations

import random

import pytest
import virtual_gpu as vg
from roofbench.bench.backends.cuda_timer import cuda_time
from roofbench.bench.measure import core, pairs
from roofbench.roofs.probes.gpu_pairs import FmaPair, HbmPair, L2Pair

from roofbench.records import BufferFacts, CaseResult, Declaration, Identity, Outcome
from roofbench.roofline import apply_roofs
from roofbench.timing import RoofPair, TimerConfig

N = 1 << 27  # elements of the case's arrays: 512 MiB each in FP32, far beyond L2
# Samples until max_samples: the stopping rule never ends the loop early (no CV target, no
# interval narrow enough), and the budget is never reached (virtual time costs no wall time)
CFG = TimerConfig(warmup_s=0.0, warmup_min_runs=1, min_samples=40, max_samples=40,
                  budget_s=60.0, target_cv=0.0, target_rel_ci=0.0)


class GpuClock:
    """A GPU backend as pair_for sees it: CUDA events on the virtual GPU's clock."""

    kind = "gpu"
    pairs_roofs = True

    def __init__(self, gpu: vg.VirtualGpu, name: str = vg.NAME) -> None:
        self.gpu, self.name = gpu, name
        self.devices = 0

    def device_name(self) -> str:
        return self.name

    def pair_device(self):
        self.devices += 1
        return self.gpu.device()

    def time(self, fn, cfg, pair=None):
        return cuda_time(fn, cfg, self.gpu.ops(), snapshot=lambda: {}, pair=pair)


def case(flops: float, dram: int, l2: int = 0, precision: str = "fp32",
         nbytes: int = 3 * 4 * N) -> CaseResult:
    moved = {"dram": dram, **({"l2": l2} if l2 else {})}
    return CaseResult(
        Identity(workload="w", variant="v", backend="cuda", dtype="fp32", size=[N],
                 precision=precision, cores="simt"),
        Declaration(flops=int(flops), bytes=moved, ai={k: flops / b for k, b in moved.items()},
                    buffers={"x": BufferFacts("input", nbytes)}),
        Outcome(status="ok"))


def hbm_case() -> CaseResult:  # vector_add: 1 FLOP per 12 bytes
    return case(N, 12 * N)


def l2_case() -> CaseResult:  # a re-read served by L2: ten times its DRAM bytes through L2
    return case(N, 12 * N, l2=120 * N, nbytes=8 * vg.MiB)


def fma_case(precision: str = "fp32", ai: int = 100) -> CaseResult:  # compute-bound
    return case(12 * ai * N, 12 * N, precision=precision)


@pytest.fixture(autouse=True)
def _close():
    yield
    pairs.close()


def test_a_case_on_hbm_l2_or_the_fma_roof_gets_that_roofs_sampler():
    clock = GpuClock(vg.VirtualGpu())
    rs = vg.roofs()
    hbm = pairs.pair_for(hbm_case(), rs, clock)
    assert hbm is not None and hbm.probe == "memory:dram:stream triad fp32"
    assert isinstance(hbm.sample, HbmPair) and not hbm.rewarm  # it streams from HBM
    rec = l2_case()
    l2 = pairs.pair_for(rec, rs, clock)
    assert rec.roofline.limiting_roof.startswith("L2") and rec.roofline.placement is None
    assert l2 is not None and l2.probe == "memory:l2:l2_read_na_ilp8"
    assert isinstance(l2.sample, L2Pair) and l2.rewarm  # the sample evicts the case's data
    fma = pairs.pair_for(fma_case(), rs, clock)
    assert fma is not None and fma.probe == "compute:fp32:fma_fp32"
    assert isinstance(fma.sample, FmaPair) and not fma.rewarm
    small = case(N, 12 * N, nbytes=vg.L2_BYTES)  # on HBM by its counts, but L2 can hold it
    assert pairs.pair_for(small, rs, clock).rewarm
    # one sampler per roof for the process: a second case pays no allocation or compile
    again = pairs.pair_for(hbm_case(), rs, clock)
    assert again is not None and again.sample is hbm.sample
    assert clock.gpu.compiled == ["stream.cu", "cache.cu", "fma.cu"]


def test_no_pair_where_no_sampler_can_sample_the_roof(capsys):
    gpu = vg.VirtualGpu()
    rs = vg.roofs()
    assert pairs.pair_for(hbm_case(), rs, GpuClock(gpu, "another GPU")) is None
    assert pairs.pair_for(hbm_case(), None, GpuClock(gpu)) is None
    tensor = fma_case("fp16_tc", ai=1000)
    assert pairs.pair_for(tensor, rs, GpuClock(gpu)) is None  # a tensor-core roof
    assert tensor.roofline.bound == "compute"
    sheet = vg.roofs()
    sheet.roofs = [r for r in sheet.roofs if not r.name.startswith("HBM (stream")]
    assert pairs.pair_for(hbm_case(), sheet, GpuClock(gpu)) is None  # the datasheet's HBM
    off = GpuClock(gpu)
    off.pairs_roofs = False
    assert pairs.pair_for(hbm_case(), rs, off) is None

    class NoCupy(GpuClock):  # a backend whose samplers cannot run here (no CuPy)
        def pair_device(self):
            return None

    assert pairs.pair_for(hbm_case(), rs, NoCupy(gpu)) is None

    class Unpaired(GpuClock):  # a plug-in's backend: time() takes no pair
        def time(self, fn, cfg):
            return cuda_time(fn, cfg, self.gpu.ops(), snapshot=lambda: {})

    assert pairs.pair_for(hbm_case(), rs, Unpaired(gpu)) is None
    assert gpu.launches == [] and capsys.readouterr().err == ""


def test_a_sampler_that_fails_its_first_call_gives_no_pair_said_once(capsys):
    small = vg.VirtualGpu(free_bytes=vg.L2_BYTES)  # no room for the HBM roof's arrays
    clock = GpuClock(small)
    assert pairs.pair_for(hbm_case(), vg.roofs(), clock) is None
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no paired samples of HBM (stream triad fp32)" in err
    assert "not enough free memory" in err and "timed unpaired" in err
    assert pairs.pair_for(hbm_case(), vg.roofs(), clock) is None  # not tried again
    assert capsys.readouterr().err == ""
    assert pairs.pair_for(fma_case(), vg.roofs(), clock) is not None  # other roofs still pair


class Clocks:
    """The device's clocks: between two samples of the case they may drop to ``low`` of the
    calibration's (a power or thermal limit) or come back, a Markov chain (low two thirds
    of the time); the case's launch and the roof's that follows it see the same state."""

    def __init__(self, gpu: vg.VirtualGpu, seed: int, low: float = 0.5) -> None:
        self.gpu, self.rng, self.low = gpu, random.Random(seed), low

    def step(self) -> None:
        slow = self.gpu.speed < 1.0
        if self.rng.random() < (0.3 if slow else 0.6):
            self.gpu.speed = 1.0 if slow else self.low


def timed_case(rec: CaseResult, efficiency: float, seed: int,
               pair_of=pairs.pair_for) -> tuple[CaseResult, vg.VirtualGpu]:
    """``rec`` run at ``efficiency`` of the roof that bounds it (as its clocks are), timed and
    placed as the suite's runner does (``core.paired_time``, ``core.fill_metrics``)."""
    gpu = vg.VirtualGpu()
    clock, clocks, rs = GpuClock(gpu), Clocks(gpu, seed), vg.roofs()
    apply_roofs(rec, rs)
    work = rec.declaration.flops / rec.roofline.attainable  # seconds at the roof, speed 1
    jitter = random.Random(seed + 1)

    def one() -> None:
        clocks.step()
        gpu.run("case", work / efficiency * jitter.gauss(1.0, 0.005) / gpu.speed)

    timing = core.time_call(clock, one, CFG, pair=pair_of(rec, rs, clock))
    core.fill_metrics(rec, timing, rs)
    return rec, gpu


@pytest.mark.parametrize("make", [hbm_case, l2_case, fma_case], ids=["hbm", "l2", "fma"])
@pytest.mark.parametrize("seed", range(3))
def test_the_efficiency_holds_while_the_clocks_change(make, seed):
    """The case runs at 0.8 of its roof whatever the clocks: the median of its pairs' ratios
    is 0.8 (within 2%); its rate over the calibration's roof, the unpaired rule, is not."""
    rec, _ = timed_case(make(), 0.8, seed)
    t, p = rec.measurement.timing, rec.roofline.paired
    assert t.paired and t.n == CFG.max_samples and min(t.roof_rates) < 0.6 * max(t.roof_rates)
    assert p is not None and p.probe == t.roof_probe and p.pairs == t.n
    assert rec.roofline.efficiency == p.efficiency == pytest.approx(0.8, rel=0.02)
    assert p.lo <= p.efficiency <= p.hi
    # the unpaired rule: the median sample (clocks low) over the calibration's roof
    assert p.of_ceiling == pytest.approx(0.8 * 0.5, rel=0.05)
    assert p.roof_low == pytest.approx(0.5 * p.ceiling, rel=0.01)
    assert p.roof_high == pytest.approx(p.ceiling, rel=0.01)


def test_the_roof_is_sampled_right_after_each_sample_of_the_case():
    rec, gpu = timed_case(l2_case(), 0.8, 0)
    t = rec.measurement.timing
    roof = ["l2_read_na_ilp8"] * 2  # one sample: the launch that refills L2, the timed one
    # the trial (pair_for), the warm-up, the untimed first sample (sample_loop), then per
    # sample: the case, the roof, the case again untimed (its data back in L2)
    assert gpu.launches == roof + ["case"] * t.warmup_runs + roof + (
        ["case", *roof, "case"] * t.n)


def test_planted_a_roof_sampled_once_does_not_hold_the_efficiency():
    """The check above fails when the roof is not sampled after each sample: a pair whose
    rate was read once, before the case (the bracket rule), gives the unpaired answer."""

    def sampled_once(rec, rs, clock):
        pair = pairs.pair_for(rec, rs, clock)
        assert pair is not None
        rate = pair.sample()
        return RoofPair(pair.probe, lambda: rate, pair.rewarm)

    rec, _ = timed_case(fma_case(), 0.8, 0, pair_of=sampled_once)
    assert rec.roofline.paired is not None
    with pytest.raises(AssertionError):
        assert rec.roofline.efficiency == pytest.approx(0.8, rel=0.02)


def test_cuda_time_keeps_one_clock_reading_per_sample_with_a_pair():
    gpu = vg.VirtualGpu()
    reads: list[int] = []

    def snapshot():
        reads.append(len(gpu.launches))
        return {"sm_clock_mhz": 1980, "max_sm_clock_mhz": 1980}

    t = cuda_time(lambda: gpu.case(1e9, vg.HBM), CFG, gpu.ops(), snapshot=snapshot,
                  pair=RoofPair("memory:dram:x", lambda: 3e12, rewarm=True))
    assert t.roof_rates == [3e12] * t.n
    assert t.config["clocks"]["sm_clock_mhz_samples"] == [1980] * t.n
    # read after each timed sample and before and after the loop; the rewarm reads none
    assert len(reads) == 2 + t.n + t.warmup_runs
    assert gpu.launches.count("case") == t.warmup_runs + 2 * t.n
