"""One timing discipline for every backend, and the record it fills (``Timing``).

Warm up by a time budget (compilation, module load and first-touch stay out), then take samples
until the noise criterion is met after at least ``min_samples`` — the coefficient of variation
is under ``target_cv``, or the distribution-free 95% confidence interval of the median is
narrower than ``target_rel_ci`` of it — or a sample/time budget runs out. The second rule is
what converges on real GPU samples: memory-bound kernels can alternate between two modes or
throw rare slow outliers, so their CV never falls under the target while their median is
known to a fraction of a percent after a few hundred samples. Raw samples are kept as
measured, never rounded. A backend supplies only how to take one sample (host clock after a
synchronising call on the CPU, CUDA events on a GPU); the loop and the statistics are shared.
"""

from __future__ import annotations

import bisect
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any


@dataclass
class Timing:
    """The samples of one timed function and how sampling stopped (``sample_loop``)."""

    samples: list[float]  # seconds, raw
    warmup_runs: int
    stopped_by: str  # "noise", "median_ci", "budget", "max_samples" or "cap" (short of the minimum)
    config: dict[str, Any] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)
    # What else used the machine while this was timed (other processes, hypervisor steal,
    # page faults), in one line; empty when nothing was seen or the backend cannot tell.
    outside_load: str = ""
    # Seconds each sample waited for a core another process held (the timed process's
    # threads, schedstat; in sample order), where the backend measures it; empty otherwise.
    waits: list[float] = field(default_factory=list)
    # The paired roof (``sample_loop``'s ``pair``): its name, and its rate (bytes/s or
    # FLOP/s) measured right after each sample, in sample order; empty when not paired.
    roof_probe: str = ""
    roof_rates: list[float] = field(default_factory=list)

    @property
    def paired(self) -> bool:
        return bool(self.roof_rates) and len(self.roof_rates) == len(self.samples)

    def normalised(self) -> list[float]:
        """Each sample's time times its paired roof's rate (the work it would have moved at
        the roof as it was): a slower roof shortens nothing here, a slower kernel does."""
        return [t * r for t, r in zip(self.samples, self.roof_rates, strict=True)]

    @property
    def n(self) -> int:
        return len(self.samples)

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.samples)

    @property
    def stdev(self) -> float:
        return statistics.stdev(self.samples) if self.n > 1 else 0.0

    @property
    def cv(self) -> float:
        return self.stdev / self.mean if self.mean > 0 else 0.0

    @property
    def min(self) -> float:
        return min(self.samples)

    @property
    def max(self) -> float:
        return max(self.samples)

    def quantile(self, q: float) -> float:
        s = sorted(self.samples)
        if len(s) == 1:
            return s[0]
        pos = q * (len(s) - 1)
        lo = int(pos)
        hi = min(lo + 1, len(s) - 1)
        return s[lo] + (s[hi] - s[lo]) * (pos - lo)

    def summary(self) -> dict[str, Any]:
        return {"n": self.n, "median_s": self.median, "mean_s": self.mean, "min_s": self.min,
                "max_s": self.max, "p25_s": self.quantile(0.25), "p75_s": self.quantile(0.75),
                "stdev_s": self.stdev, "cv": self.cv, "warmup_runs": self.warmup_runs,
                "stopped_by": self.stopped_by, "flags": list(self.flags),
                **({"outside_load": self.outside_load} if self.outside_load else {})}

    def to_dict(self) -> dict[str, Any]:
        """The summary (derived, for a reader of the file) plus the raw samples."""
        d = self.summary()
        d["samples_s"] = list(self.samples)
        if self.waits:
            d["waits_s"] = list(self.waits)
        if self.roof_rates:
            d["roof_probe"] = self.roof_probe
            d["roof_rates"] = list(self.roof_rates)
        d["config"] = dict(self.config)
        return d



# The one minimum of samples a run, shared by the timer (which takes at least this many) and
# the regression gate (which needs it for an interval: 7 for one case, 12 with up to
# gate.JUDGED_AT_MINIMUM = 35 judged together; an A/B case takes twice as many pairs).
# docs/measure-api.md, "Enough samples for the gate", says it once.
GATE_MIN_SAMPLES = 12
# A long case keeps sampling past its budget until it has GATE_MIN_SAMPLES, up to this many
# seconds of sampling (--quick: the second figure); past the cap it stops with fewer, flagged.
MIN_SAMPLES_CAP_S = 60.0
QUICK_MIN_SAMPLES_CAP_S = 20.0


@dataclass(frozen=True)
class TimerConfig:
    warmup_s: float = 0.1
    warmup_min_runs: int = 1
    # What compare needs for an interval of each side's median: 7 for one case, 12 for 35
    # judged together (roofbench/gate.py, Bonferroni); a run stopped sooner could not be judged.
    min_samples: int = GATE_MIN_SAMPLES
    max_samples: int = 1000
    budget_s: float = 2.0  # sampling time budget per case (excluding warm-up)
    target_cv: float = 0.01  # stop once stdev/mean of the samples falls under this
    target_rel_ci: float = 0.005  # ... or the 95% CI of the median is within +-this of it
    noisy_cv: float = 0.05  # a result whose CV stays above this is flagged noisy
    cold: bool = False  # run the backend's cache flush before every sample, outside the window
    # A case reaching its budget before min_samples samples goes on to min_samples, until
    # this much sampling time (then it stops short, flagged: the gate cannot judge it).
    min_samples_cap_s: float = MIN_SAMPLES_CAP_S

    @classmethod
    def quick(cls) -> TimerConfig:
        return cls(warmup_s=0.02, warmup_min_runs=1, min_samples=GATE_MIN_SAMPLES, max_samples=50,
                   budget_s=0.3, target_cv=0.02, target_rel_ci=0.01,
                   min_samples_cap_s=QUICK_MIN_SAMPLES_CAP_S)

    def exactly(self, n: int) -> TimerConfig:
        """This config taking ``n`` samples, no more and no fewer (within its cap): a smoke
        run's cost, fixed; under GATE_MIN_SAMPLES compare cannot judge it (uncertain)."""
        return replace(self, min_samples=n, max_samples=n)

    def with_budget(self, budget_s: float) -> TimerConfig:
        return replace(self, budget_s=min(self.budget_s, budget_s))


# Sampling time per case on a GPU: a memory-bound kernel there takes ~0.3 ms, so half a
# second is over a thousand samples, and the median-CI rule usually stops far sooner.
GPU_CASE_BUDGET_S = 0.5
GPU_LAUNCH_BUDGET_S = 0.2


def timer_for(kind: str, timer: TimerConfig | None, quick: bool) -> TimerConfig:
    """``timer`` if given, else the default (or quick) one; on a GPU (``kind``) within the
    per-case budget of a run (``GPU_CASE_BUDGET_S``)."""
    if timer is not None:
        return timer
    cfg = TimerConfig.quick() if quick else TimerConfig()
    return cfg.with_budget(GPU_CASE_BUDGET_S) if kind == "gpu" else cfg


def probe_timers(quick: bool) -> tuple[TimerConfig, TimerConfig]:
    """(the timer of a figure a roof takes, the short timer of a configuration-search
    candidate or an ERT curve point). A full calibration's budget per figure is short:
    memory-bound samples on a GPU are bimodal and run to it (the calibration time model)."""
    full = TimerConfig.quick() if quick else TimerConfig(warmup_s=0.05, budget_s=0.3)
    search = TimerConfig(warmup_s=0.01, warmup_min_runs=1, min_samples=5, max_samples=40,
                         budget_s=0.04, target_cv=0.02, target_rel_ci=0.01)
    return full, search


@dataclass(frozen=True)
class RoofPair:
    """The roof sampled beside each timed sample: its key (``kind:key:name``, as
    ``memory:dram:stream-add-nt``; stored as ``Timing.roof_probe``) and the call that samples
    it (its rate now: bytes/s or FLOP/s). Chosen by bench/measure/pairs.py."""

    probe: str
    sample: Callable[[], float]
    # Run what is timed once, untimed, after each roof sample: the roof's data evicted the
    # case's from the cache it lives in (a case on L2 beside the L2 sweep, or a small one
    # held to DRAM), and a sample that refills it is not the case.
    rewarm: bool = False


def sample_loop(one: Callable[[], float], cfg: TimerConfig,
                clock: Callable[[], float] = time.perf_counter,
                pair: RoofPair | None = None,
                rewarm: Callable[[], object] | None = None) -> Timing:
    """Warm up, then sample ``one()`` (which returns the seconds of one timed run).

    ``pair``: the roof that bounds what is timed, sampled right after each sample (outside
    its window) so that both see the same machine state; its rates are kept in
    ``Timing.roof_rates`` and the stopping rule reads the samples normalised by them (a
    memory system that flips state moves both, not their product). ``rewarm`` (default:
    ``one``) runs after a roof sample whose pair asks for it."""
    rewarm = rewarm or one
    t_start = clock()
    warm = 0
    while warm < cfg.warmup_min_runs or clock() - t_start < cfg.warmup_s:
        one()
        warm += 1
        if warm >= 10_000:
            break
    if pair is not None:
        pair.sample()  # its first call allocates and touches what it streams: untimed
    samples: list[float] = []
    rates: list[float] = []
    judged = Moments()  # what the stopping rule reads: samples, or normalised ones
    ordered: list[float] = []
    t0 = clock()
    stopped = "max_samples"
    while len(samples) < cfg.max_samples:
        x = float(one())
        samples.append(x)
        if pair is not None:
            rate = float(pair.sample())
            rates.append(rate)
            x *= rate
            if pair.rewarm:
                rewarm()
        judged.add(x)
        bisect.insort(ordered, x)
        if len(samples) >= max(cfg.min_samples, 2):
            why = converged(judged, ordered, cfg)
            if why:
                stopped = why
                break
        # A long case (seconds per run) goes past its budget to min_samples (what the gate
        # needs to judge it), within the cap; past the cap it stops short, flagged below.
        elapsed = clock() - t0
        if elapsed >= cfg.budget_s and (len(samples) >= cfg.min_samples
                                        or elapsed >= cfg.min_samples_cap_s):
            stopped = "budget" if len(samples) >= cfg.min_samples else "cap"
            break
    t = Timing(samples=samples, warmup_runs=warm, stopped_by=stopped, config=asdict(cfg),
               roof_probe=pair.probe if pair is not None else "", roof_rates=rates)
    if stopped == "cap":
        t.flags.append(short_flag(t.n, cfg))
    if t.n > 1 and t.cv > cfg.noisy_cv:
        t.flags.append(f"noisy: cv {t.cv:.1%} > {cfg.noisy_cv:.0%}")
        if t.paired:
            t.flags.append(roof_moved(t))
    return t


def short_flag(n: int, cfg: TimerConfig) -> str:
    """The flag of a timing stopped at the cap before its minimum of samples."""
    return (f"too few samples for the gate: {n} < {cfg.min_samples} within the "
            f"{cfg.min_samples_cap_s:g} s cap (compare calls its changes uncertain)")


def spread(xs: list[float]) -> float:
    """Interquartile range over the median: a spread that a few pairs split by a state flip
    (between a sample and its roof's) do not blow up, as they do the CV."""
    s = sorted(xs)
    if len(s) < 2 or s[len(s) // 2] <= 0:
        return 0.0
    q = Timing(samples=s, warmup_runs=0, stopped_by="")
    return (q.quantile(0.75) - q.quantile(0.25)) / q.median


ROOF_MOVED = "noise cause: the machine's "
ROOF_STEADY = "noise cause: not the roof"
ROOF_CAUSES = (ROOF_MOVED, ROOF_STEADY)  # the pair's words, never an outside load


def roof_moved(t: Timing) -> str:
    """The noisy flag's cause from the paired roof: the roof moved with the samples, so
    their ratios spread much less than the samples (the machine's state), or not (the kernel,
    or a neighbour on its core: the CPU backend then names the counters' cause as well)."""
    lo, hi = min(t.roof_rates), max(t.roof_rates)
    unit = "B/s" if t.roof_probe.startswith("memory:") or not t.roof_probe else "FLOP/s"
    span = f"{t.roof_probe.rpartition(':')[2] or 'the roof'} {lo / 1e9:.3g}-{hi / 1e9:.3g} G{unit}"
    raw, paired = spread(t.samples), spread(t.normalised())
    if paired <= 0.5 * raw:  # the roof's moves explain most of the spread
        what = "memory bandwidth" if unit == "B/s" else "compute rate"
        return (f"{ROOF_MOVED}{what} moved ({span} while it ran): the samples spread "
                f"{raw:.0%} (interquartile), their ratios to the roof {paired:.0%}")
    return (f"{ROOF_STEADY} ({span} while it ran; the samples spread {raw:.0%}, "
            f"their ratios to the roof {paired:.0%})")


CI_MIN_SAMPLES = 30


def median_ci(ordered: list[float], z: float = 1.96) -> tuple[float, float]:
    """Distribution-free ~95% confidence interval of the median of sorted samples: the order
    statistics at ranks n/2 -+ z sqrt(n)/2 (normal approximation of the binomial), which
    assumes nothing of the samples' shape (bimodal or heavy-tailed alike)."""
    n = len(ordered)
    half = z * math.sqrt(n) / 2
    lo = max(int(math.floor(n / 2 - half)), 0)
    hi = min(int(math.ceil(n / 2 + half)), n - 1)
    return ordered[lo], ordered[hi]


@dataclass
class Moments:
    """The running mean and variance of the samples so far (Welford's update). The stopping
    rule reads them after every sample: an exact ``statistics.stdev`` over every sample each
    time is O(n) in Fractions, and past a few hundred samples it took longer than a GPU
    sample, so the loop timed the host's arithmetic more than the device."""

    n: int = 0
    mean: float = 0.0
    m2: float = 0.0

    def add(self, x: float) -> None:
        self.n += 1
        d = x - self.mean
        self.mean += d / self.n
        self.m2 += d * (x - self.mean)

    @classmethod
    def of(cls, xs: list[float]) -> Moments:
        m = cls()
        for x in xs:
            m.add(x)
        return m

    @property
    def cv(self) -> float | None:
        """Sample standard deviation over the mean; None under two samples or a mean <= 0."""
        if self.n < 2 or self.mean <= 0:
            return None
        return math.sqrt(max(self.m2, 0.0) / (self.n - 1)) / self.mean


def converged(moments: Moments, ordered: list[float], cfg: TimerConfig) -> str | None:
    """'noise' when the CV is under target, 'median_ci' when the median's CI is narrow
    (``ordered``: the same samples, sorted)."""
    cv = moments.cv
    if cv is not None and cv <= cfg.target_cv:
        return "noise"
    n = len(ordered)
    if n < CI_MIN_SAMPLES:  # a few early samples say little of a drifting device
        return None
    lo, hi = median_ci(ordered)
    med = ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2
    if med > 0 and (hi - lo) / 2 <= cfg.target_rel_ci * med:
        return "median_ci"
    return None


def host_timer(fn: Callable[[], None], cfg: TimerConfig,
               before: Callable[[], None] | None = None,
               sync: Callable[[], None] | None = None,
               waits: Callable[[], int | None] | None = None,
               pair: RoofPair | None = None) -> Timing:
    """Time ``fn`` with the host clock. ``before`` (cache flush) runs outside the window;
    ``sync`` waits for asynchronous work so the host clock sees it end; ``waits`` (ns the
    process has waited for a core so far, or None) is read just outside each sample's window,
    and each sample's wait kept in ``Timing.waits``; ``pair``: ``sample_loop``'s."""
    waited: list[float | None] = []

    def one() -> float:
        if before is not None:
            before()
        if sync is not None:
            sync()
        w0 = waits() if waits is not None else None
        t0 = time.perf_counter()
        fn()
        if sync is not None:
            sync()
        t1 = time.perf_counter()
        if waits is not None:
            w1 = waits()
            waited.append(None if w0 is None or w1 is None else max(w1 - w0, 0) * 1e-9)
        return t1 - t0

    def warm() -> None:  # untimed, unrecorded: the case's data back where it lives
        if before is not None:
            before()
        fn()
        if sync is not None:
            sync()

    t = sample_loop(one, cfg, pair=pair, rewarm=warm)
    mine = waited[t.warmup_runs:]
    if waits is not None and len(mine) == t.n:
        t.waits = [w for w in mine if w is not None]
        if len(t.waits) != t.n:  # a sample whose wait could not be read: none is kept
            t.waits = []
    return t
