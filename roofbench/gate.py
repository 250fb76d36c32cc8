"""The regression gate of `roofbench compare`: each common case of two runs classified from
its raw samples, and the classification as a typed record (``compare.json``).

The interval is for the ratio of medians, time B / time A, and is distribution-free: each
run's median gets the order-statistic interval of exact binomial ranks (the sample median's
rank is Binomial(n, 1/2) whatever the distribution); both at confidence sqrt(c) cover their
true medians together with probability >= c (the runs are independent), and the ratio
interval is [lo_B / hi_A, hi_B / lo_A]. The intervals are simultaneous over the m cases
judged (Bonferroni: c = 1 - 0.05 / m per case), so two repeats of one run fail the gate in at
most 5% of comparisons however many cases they hold, where per-case 95% intervals would let
one of 35 noisy cases fail now and then (it happened on resampled real CPU runs). Order
statistics rather than a bootstrap: they assume nothing of the samples' shape (the H200's
memory-bound samples are bimodal with rare slow outliers, where a bootstrap of the median is
coarse and unstable for small n), need no seed, cost one sort per case, and are the rule the
timer already stops on. The price is stated: a run with too few samples for the per-case
confidence (7 for one case, 12 for 35) has no interval, and its cases are `uncertain`.

Verdicts, with t the threshold (0.05 = 5%) and r = median B / median A:

- ``slower``: r > 1 + t and the interval lies above 1 (slower by more than t, beyond noise);
- ``faster``: r < 1 / (1 + t) and the interval lies below 1;
- ``same``: the whole interval lies within [1 / (1 + t), 1 + t]: a change larger than the
  threshold is excluded, not merely unseen (a gate that passed on the median alone passed a
  planted 1.5x as `same` 0.989 [0.611, 2.606] between two sessions under load);
- ``uncertain``: r within the threshold but the interval wider than it (a change up to its
  far end is not excluded: named in the reason), r beyond the threshold but the interval
  holds 1 (the noise cannot tell), or
  no interval, whatever r (too few samples, or no raw samples stored: a median of one sample
  a side bounds nothing, so it is never ``same``), or a slowdown that the outside load
  measured during the samples can explain (below);
- ``unreadable``: a time that is not a positive finite number (NaN, inf, <= 0): never `same`;
- ``invalid in B`` / ``fixed in B`` / ``not measured``: valid in A only / in B only / neither;
- ``only in A`` / ``only in B``: a case of one run alone; ``other device``: the runs measured
  different devices, so no case is compared.

**Load bounds the excuse** (roofbench/gate_load.py). A timing records what else used the
machine while it ran: each sample's wait for a core another process held (``Timing.waits``,
schedstat, where the CPU backend or the A/B timer measured it) and the words of the noise
probe (``Timing.outside_load``: the share f of the time it waited, others' share of the cores,
hypervisor steal). Without that wait a sample would have taken about s - w; so the load can
have made B slower than A by at most E = max(1, r / r_u), r_u the gate's statistic of the
samples less their waits: a bound on the median the gate compares (a short sample is mostly
preempted whole or not at all, so a load that stretches the mean by 1/(1-f) can leave the
median where it was). Files without waits give each side 1/(1-f), a bound on the mean:
E = max(1, (1 - f_A) / (1 - f_B)). Load on A only stretches A (it hides a slowdown, explains
none); A faster than B mirrors it. A slowdown whose interval lies above E is ``slower``, with
the load named in the reason; one whose interval reaches below E (but above 1) is
``uncertain``, with the bound said. The same rule holds for every input: roofbench runs,
pytest-benchmark JSON (the plugin records the load during pytest-benchmark's timing; no
waits per sample) and A/B runs (both sides see the same load, so E is about 1).

**Roof-normalised times.** Where both runs sampled the roof that bounds a case beside each
of its samples (``Timing.roof_rates``, the same roof: bench/measure/pairs.py), each sample is
judged as its time times its roof's rate at that moment (``Timing.normalised``: the work the
roof did meanwhile): a memory system that flipped to half speed between the runs, or within
one, doubles the time and halves the rate, so the product stays; a slower kernel moves the
time alone. The statistics are the same order-statistic intervals on those products, and the
comparison's notes say how many cases were judged so and how many on raw times (a run
without pairs: older files, a GPU, a roof no probe here can sample).

**A/B runs** (``roofbench ab``, the ``roofline_ab`` fixture: base and new measured
alternately, sample by sample, in one job) store two runs that name each other
(``environment["ab"]``: one id, sides A and B); their cases are judged on the paired
samples, taken A B then B A: r is the median of the ABBA blocks' ratios
sqrt(b_1 b_2 / (a_1 a_2)) (two pairs each, so that a side's gain from running second counts
once each way: ``gate_load.block_ratios``) and its interval the order-statistic interval of
that median at the per-case confidence (one sample of ratios, so no sqrt). The pairing
cancels what both sides shared: the load, the clock, the drift; the blocks, the order.

**The minimum.** ``timing.GATE_MIN_SAMPLES`` (12) is the one figure the timer guarantees and
the gate needs: a run of 12 samples has an interval with up to ``JUDGED_AT_MINIMUM`` cases
judged together (7 would do for one case), and an A/B job takes twice as many pairs (12
blocks). A run with fewer (a case stopped at the timer's cap) is ``uncertain``.

The gate fails on the verdicts named by ``--fail-on`` (``slower:N%``, ``invalid``,
``uncertain``: a case the gate could not judge, so that a gate of noisy runs never passes in
silence) and, whatever it names, on a case whose times B holds but that cannot be read
(``unreadable`` in B). ``Comparison.judged_line`` says how many cases were judged; when most
were not, it says so and why.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import Any, Literal

import numpy as np

from .gate_load import (
    block_ratios,
    excuses,
    normalised_notes,
    roof_normalised,
    roof_span,
)
from .records import CaseResult, RunResult
from .timing import GATE_MIN_SAMPLES

Verdict = Literal["faster", "slower", "same", "uncertain", "unreadable", "invalid in B",
                  "fixed in B", "not measured", "only in A", "only in B", "other device"]
VERDICTS: tuple[str, ...] = Verdict.__args__  # type: ignore[attr-defined]

CONFIDENCE = 0.95  # of all the ratio intervals of a comparison together
METHOD = ("ratio of medians, distribution-free: order-statistic interval of each median at "
          "exact binomial ranks, confidence sqrt(c) each, ratio [lo_B/hi_A, hi_B/lo_A]; "
          "c = 1 - 0.05/m over the m cases judged (simultaneous, Bonferroni)")
COMPARE_SCHEMA = "roofbench.compare"
COMPARE_SCHEMA_VERSION = 1


EXACT_UP_TO = 2048  # samples: median_rank in integers up to here, in floats beyond


@lru_cache(maxsize=4096)
def median_rank(n: int, confidence: float) -> int:
    """The largest k (1-based) such that [x_(k), x_(n+1-k)] covers the median with at least
    ``confidence``: P(Binomial(n, 1/2) <= k - 1) <= (1 - confidence) / 2. 0 when n is too
    small for any such interval. Exact in integers up to ``EXACT_UP_TO`` samples; beyond, the
    integers are n bits wide and the walk n/2 steps long (a run of 10^6 samples took minutes),
    so the tail is summed in floating point near k alone and k found by bisection."""
    alpha = (1.0 - confidence) / 2.0
    if n > EXACT_UP_TO:
        return _median_rank_float(n, alpha)
    total = 1 << n
    term, cdf, k = 1, 0, 0  # term = C(n, j)
    for j in range(n // 2 + 1):
        cdf += term
        if cdf / total > alpha:
            break
        k = j + 1
        term = term * (n - j) // (j + 1)
    return k


TAIL_TERMS = [0]  # terms summed by _binomial_tail since import (a test reads the work done)


def _binomial_tail(n: int, j: int) -> float:
    """P(Binomial(n, 1/2) <= j), summed down from j: the terms shrink by j/(n-j+1) a step, so
    within a few sqrt(n) of n/2 a few hundred terms reach 1e-17 of the sum."""
    log_half_n = n * math.log(2.0)
    lg_n = math.lgamma(n + 1)
    term = math.exp(lg_n - math.lgamma(j + 1) - math.lgamma(n - j + 1) - log_half_n)
    total = 0.0
    while j >= 0 and term > 0.0:
        TAIL_TERMS[0] += 1
        total += term
        if term < 1e-17 * total:
            break
        term *= j / (n - j + 1)
        j -= 1
    return total


def _median_rank_float(n: int, alpha: float) -> int:
    """median_rank for large n: the largest k with P(Bin(n, 1/2) <= k - 1) <= alpha, by
    bisection on k (the tail grows with k); relative error ~1e-12 in the tail, so k can differ
    from the exact rank only where the tail lies within that of alpha."""
    lo, hi = 0, n // 2 + 1  # tail(lo - 1) <= alpha holds for lo = 0 (an empty tail)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if _binomial_tail(n, mid - 1) <= alpha:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _sorted(xs: list[float]) -> np.ndarray:
    """The samples sorted as float64 (numpy: a million samples in a few milliseconds)."""
    return np.sort(np.asarray(xs, dtype=np.float64))


def _median_of(s: np.ndarray) -> float:
    """The median of sorted samples, as statistics.median takes it (the middle two's mean)."""
    n = len(s)
    return float(s[n // 2]) if n % 2 else float((s[n // 2 - 1] + s[n // 2]) / 2)


def median_interval(samples: list[float], confidence: float) -> tuple[float, float] | None:
    """Distribution-free interval of the median of ``samples`` (None: too few samples)."""
    return _interval_of(_sorted(samples), confidence)


def _interval_of(s: np.ndarray, confidence: float) -> tuple[float, float] | None:
    k = median_rank(len(s), confidence)
    if k == 0:
        return None
    return float(s[k - 1]), float(s[len(s) - k])


def min_samples(confidence: float = math.sqrt(CONFIDENCE)) -> int:
    """The fewest samples for which a run's median has an interval at ``confidence``."""
    n = 1
    while median_rank(n, confidence) == 0:
        n += 1
    return n


# The most cases judged together (Bonferroni) for which a run of the timer's minimum of
# samples still has an interval (tests/roofbench/test_gate_minimum.py ties the two).
JUDGED_AT_MINIMUM = 35
MIN_PAIRS = 2 * GATE_MIN_SAMPLES  # an A/B case: as many ABBA blocks as a run's samples


@dataclass(frozen=True)
class RatioInterval:
    """time B / time A: the ratio of the medians and its interval."""

    ratio: float
    lo: float | None
    hi: float | None

    @property
    def bounded(self) -> bool:
        return self.lo is not None and self.hi is not None


def ratio_interval(a: list[float], b: list[float],
                   confidence: float = CONFIDENCE) -> RatioInterval:
    """Median(b) / median(a) and its distribution-free interval at ``confidence``."""
    sa, sb = _sorted(a), _sorted(b)  # one sort a side: median and interval both read it
    ratio = _median_of(sb) / _median_of(sa)
    per_side = math.sqrt(confidence)  # independent runs: the joint coverage is the product
    ia, ib = _interval_of(sa, per_side), _interval_of(sb, per_side)
    if ia is None or ib is None:
        return RatioInterval(ratio, None, None)
    return RatioInterval(ratio, ib[0] / ia[1], ib[1] / ia[0])


def paired_interval(a: list[float], b: list[float],
                    confidence: float = CONFIDENCE) -> RatioInterval:
    """A/B samples taken in pairs (a[i] beside b[i]), the order alternating (A B, then B A):
    the median of the ABBA blocks' ratios (``gate_load.block_ratios``: a side that gains from
    running second gains in one pair of a block and loses in the other) and its
    distribution-free interval at ``confidence``."""
    if len(a) != len(b):
        raise ValueError(f"paired samples of unequal counts ({len(a)}, {len(b)})")
    s = _sorted(block_ratios(a, b))
    if not len(s):
        return RatioInterval(float(np.median(np.asarray(b) / np.asarray(a))), None, None)
    iv = _interval_of(s, confidence)
    return RatioInterval(_median_of(s), *(iv if iv else (None, None)))


def judge(iv: RatioInterval, threshold: float, slow_excuse: float = 1.0,
          fast_excuse: float = 1.0) -> Verdict:
    """The verdict of a ratio interval; ``*_excuse``: the factor outside load explains (see
    the module doc)."""
    up, down = 1.0 + threshold, 1.0 / (1.0 + threshold)
    if not iv.bounded:  # no interval: a median within the threshold proves nothing either
        return "uncertain"
    assert iv.lo is not None and iv.hi is not None
    if down <= iv.ratio <= up:  # same only where the interval excludes a larger change
        return "same" if down <= iv.lo and iv.hi <= up else "uncertain"
    if iv.ratio > up and iv.lo > slow_excuse:
        return "slower"
    if iv.ratio < down and iv.hi * fast_excuse < 1.0:
        return "faster"
    return "uncertain"


@dataclass(frozen=True)
class CaseVerdict:
    """One case of the comparison: what was compared and what the gate concluded."""

    key: str
    verdict: Verdict
    median_a: float | None = None  # seconds
    median_b: float | None = None
    ratio: float | None = None  # median B / median A (> 1: B is slower)
    ratio_lo: float | None = None
    ratio_hi: float | None = None
    n_a: int = 0  # raw samples of each side
    n_b: int = 0
    reason: str = ""
    paired: bool = False  # judged on A/B pairs (one job, alternating)
    normalised: bool = False  # judged on times x the paired roof's rate (roof_normalised)
    side: str = ""  # `unreadable`: the side whose times cannot be read ("A", "B", "A, B")

    @property
    def statistic(self) -> str:
        """What the ratio was judged on, in words (the table's label)."""
        return (("roof-normalised" if self.normalised else "raw")
                + (" ABBA pairs" if self.paired else " medians"))

    @property
    def speedup(self) -> float | None:
        """median A / median B (> 1: B is faster)."""
        return 1.0 / self.ratio if self.ratio else None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CaseVerdict:
        if d.get("verdict") not in VERDICTS:
            raise ValueError(f"unknown verdict {d.get('verdict')!r}")
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


@dataclass(frozen=True)
class FailOn:
    """What makes the gate fail: cases ``slower`` beyond the comparison's threshold, cases
    valid in A and invalid in B, cases not judged (``uncertain``, or unreadable in A); and,
    under any gate, a case whose times B holds unreadable (a gate must not pass on a B it
    could not read)."""

    slower: bool = False
    invalid: bool = False
    uncertain: bool = False

    @property
    def active(self) -> bool:
        return self.slower or self.invalid or self.uncertain

    def describe(self, threshold: float) -> list[str]:
        return ([f"slower:{threshold * 100:g}%"] if self.slower else []) + \
            (["invalid"] if self.invalid else []) + (["uncertain"] if self.uncertain else [])

    def fails(self, v: CaseVerdict) -> bool:
        return ((self.slower and v.verdict == "slower")
                or (self.invalid and v.verdict == "invalid in B")
                or (self.uncertain and v.verdict in ("uncertain", "unreadable"))
                or (self.active and v.verdict == "unreadable" and "B" in v.side))


@dataclass(frozen=True)
class RunRef:
    """Which run a side of the comparison is."""

    path: str
    device: str
    backend: str
    created: str
    git_commit: str | None

    @classmethod
    def of(cls, run: RunResult, path: str) -> RunRef:
        return cls(path, run.device, run.backend, run.created, run.git_commit)


@dataclass
class Comparison:
    """Every case of two runs, classified (``roofbench.compare`` version 1)."""

    a: RunRef
    b: RunRef
    threshold: float
    cases: list[CaseVerdict]
    fail_on: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # keys that make the gate fail
    notes: list[str] = field(default_factory=list)
    compared: int = 0  # common cases whose times were judged
    method: str = METHOD
    confidence: float = CONFIDENCE  # of every interval together
    case_confidence: float = CONFIDENCE  # of each case's interval (Bonferroni)

    def judged_line(self) -> str:
        """How many of the cases with times on both sides were judged (same, faster or
        slower); when most were not (uncertain, unreadable), why and what to do."""
        timed = [c for c in self.cases if c.verdict in (
            "faster", "slower", "same", "uncertain", "unreadable")]
        done = sum(c.verdict in ("faster", "slower", "same") for c in timed)
        line = f"judged {done} of {len(timed)} cases"
        if not timed or done * 2 > len(timed):
            return line
        few = [c for c in timed if c.verdict == "uncertain" and c.ratio_lo is None]
        t = self.threshold  # uncertain though the median is within t: the interval is wider
        wide = sum(c.verdict == "uncertain" and c.ratio_lo is not None and c.ratio is not None
                   and 1.0 / (1.0 + t) <= c.ratio <= 1.0 + t for c in timed)
        paired = any(c.paired for c in timed)
        why = ("the pairs are too noisy or too few" if paired else
               "the runs are too noisy or too short")
        fix = ("rerun where fewer processes share the cores" if paired else
               "rerun with `roofbench ab` (base and new alternately, in one job)")
        unread = sum(c.verdict == "unreadable" for c in timed)
        detail = ", ".join(x for x in (
            f"{len(timed) - done - unread} uncertain" if len(timed) - done - unread else "",
            f"{len(few)} of them without an interval: too few samples" if few else "",
            f"{wide} of them with the median within {t:.0%} but an interval wider than "
            "that: a larger change is not excluded" if wide else "",
            f"{unread} unreadable" if unread else "") if x)
        return f"{line} ({detail}): {why}; {fix}"

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for c in self.cases:
            out[c.verdict] = out.get(c.verdict, 0) + 1
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"schema": COMPARE_SCHEMA, "schema_version": COMPARE_SCHEMA_VERSION,
                "a": asdict(self.a), "b": asdict(self.b), "threshold": self.threshold,
                "method": self.method, "confidence": self.confidence,
                "case_confidence": self.case_confidence,
                "fail_on": list(self.fail_on), "failed": list(self.failed),
                "compared": self.compared, "counts": self.counts(),
                "notes": list(self.notes), "cases": [c.to_dict() for c in self.cases]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Comparison:
        if not isinstance(d, dict) or d.get("schema") != COMPARE_SCHEMA:
            raise ValueError("not a roofbench comparison (schema missing or wrong)")
        if d.get("schema_version") != COMPARE_SCHEMA_VERSION:
            raise ValueError(f"comparison schema version {d.get('schema_version')!r}; this "
                             f"roofbench reads {COMPARE_SCHEMA_VERSION}")
        return cls(a=RunRef(**d["a"]), b=RunRef(**d["b"]), threshold=float(d["threshold"]),
                   cases=[CaseVerdict.from_dict(c) for c in d["cases"]],
                   fail_on=list(d.get("fail_on") or []), failed=list(d.get("failed") or []),
                   notes=list(d.get("notes") or []), compared=int(d.get("compared", 0)),
                   method=str(d.get("method", METHOD)),
                   confidence=float(d.get("confidence", CONFIDENCE)),
                   case_confidence=float(d.get("case_confidence", CONFIDENCE)))


def case_key(c: CaseResult) -> str:
    i = c.identity
    return f"{i.backend}/{i.workload}/{i.variant}/{i.dtype}/{'x'.join(map(str, i.size))}"


def _positive(x: float | None) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x) and x > 0


def _not_positive(xs: list[float]) -> list[Any]:
    """The samples that are not a positive finite time: one vectorised pass over floats
    (a million samples, checked one by one in Python, took seconds a look)."""
    if all(type(x) is float for x in xs):
        arr = np.asarray(xs, dtype=np.float64)
        if bool(np.isfinite(arr).all()) and bool((arr > 0).all()):
            return []
    return [x for x in xs if not _positive(x)]


def _unreadable(c: CaseResult) -> str | None:
    """Why the times of a valid case cannot be read, or None."""
    if not _positive(c.measurement.median_s):
        return f"median time {c.measurement.median_s!r}"
    if c.measurement.timing is not None:
        bad = _not_positive(c.measurement.timing.samples)
        if bad:
            return (f"{len(bad)} of {c.measurement.timing.n} samples not a positive finite time "
                    f"({bad[0]!r})")
    return None


def classify_case(key: str, ca: CaseResult, cb: CaseResult, threshold: float,
                  confidence: float = CONFIDENCE, paired: bool = False) -> CaseVerdict:
    """The verdict of one case that both runs hold (``paired``: A/B samples in pairs)."""
    ma, mb = ca.measurement.median_s, cb.measurement.median_s
    ta, tb = ca.measurement.timing, cb.measurement.timing
    if not (ca.valid and cb.valid):
        verdict: Verdict = ("invalid in B" if ca.valid else "fixed in B" if cb.valid
                            else "not measured")
        ea, eb = ca.outcome.error, cb.outcome.error
        why = eb if ca.valid else ea if cb.valid else (eb or ea)
        return CaseVerdict(key, verdict, ma, mb, reason=str(why or ""))
    na = ta.n if ta else 0
    nb = tb.n if tb else 0
    unread = {side: why for side, c in (("A", ca), ("B", cb)) if (why := _unreadable(c))}
    if unread:
        return CaseVerdict(key, "unreadable", ma, mb, n_a=na, n_b=nb,
                           reason="; ".join(f"{sd}: {why}" for sd, why in unread.items()),
                           side=", ".join(unread))
    assert ma is not None and mb is not None
    paired = paired and ta is not None and tb is not None and na == nb
    norm = roof_normalised(ta, tb)
    if ta is None or tb is None:
        side = "A" if ta is None else "B"
        iv = RatioInterval(mb / ma, None, None)
        reason = f"{side} stores no raw samples: no interval"
    else:
        xa, xb = (ta.normalised(), tb.normalised()) if norm else (ta.samples, tb.samples)
        iv = (paired_interval(xa, xb, confidence) if paired
              else ratio_interval(xa, xb, confidence))
        reason = "" if iv.bounded else (
            f"fewer than {2 * min_samples(confidence)} pairs (ABBA blocks of two)" if paired
            else f"fewer than {min_samples(math.sqrt(confidence))} samples in a run"
        ) + ": no interval" + (
            f" (the timer takes {GATE_MIN_SAMPLES} a run, {MIN_PAIRS} pairs an A/B case, "
            "unless a case reaches its cap, or an older roofbench took the run)"
            if min(na, nb) < (MIN_PAIRS if paired else GATE_MIN_SAMPLES) else "")
    loads = {sd: t.outside_load for sd, t in (("A", ta), ("B", tb))
             if t is not None and t.outside_load}
    ex = excuses(ta, tb, paired)
    slow_excuse, fast_excuse = ex.slow, ex.fast
    verdict = judge(iv, threshold, slow_excuse, fast_excuse)
    named = "; ".join(f"{sd} was timed while {why}" for sd, why in loads.items()) or (
        "the samples waited for a core another process held")  # waits under the probe's 5%
    if verdict == "uncertain" and iv.bounded and iv.lo is not None and iv.hi is not None:
        slow = iv.ratio > 1.0 + threshold and iv.lo > 1.0
        fast = iv.ratio < 1.0 / (1.0 + threshold) and iv.hi < 1.0
        if slow or fast:  # beyond the noise, within what the load explains
            excuse = slow_excuse if slow else fast_excuse
            reason = (f"{'slower' if slow else 'faster'} by {abs(iv.ratio - 1):.0%}, but "
                      f"{named}: that load can stretch a time by up to x{excuse:.2f} "
                      f"({ex.how}), and the interval reaches "
                      f"{'below' if slow else 'above'} it: rerun on a "
                      "quiet machine, or measure base and new in one job (roofbench ab)")
        else:
            reason = "beyond the threshold, within the noise"
    elif verdict in ("slower", "faster") and loads:  # the load named beside the verdict
        excuse = slow_excuse if verdict == "slower" else fast_excuse
        reason = (f"beyond what the outside load explains (at most x{excuse:.2f}, from "
                  f"{ex.how}: {named})")
    if (verdict == "uncertain" and iv.lo is not None and iv.hi is not None
            and 1.0 / (1.0 + threshold) <= iv.ratio <= 1.0 + threshold):
        reason = (f"the median is within {threshold:.0%}, but the 95% interval [{iv.lo:.3f}, "
                  f"{iv.hi:.3f}] is wider than the threshold: a change up to "
                  f"x{max(iv.hi, 1.0 / iv.lo):.2f} is not excluded")
    if norm and verdict != "same" and ta is not None and tb is not None:
        reason = "; ".join(x for x in (reason, f"judged on roof-normalised times ({ta.roof_probe}"
                                       f" while A ran: {roof_span(ta)}, B: {roof_span(tb)})") if x)
    return CaseVerdict(key, verdict, ma, mb, iv.ratio, iv.lo, iv.hi, na, nb,
                       reason if verdict != "same" else "", paired,
                       norm)


AB_KEY = "ab"  # RunResult.environment[AB_KEY]: {"id": ..., "side": "A" or "B", ...}


def paired_runs(a: RunResult, b: RunResult) -> bool:
    """Whether A and B are the two sides of one A/B run (measured alternately in one job)."""
    ea, eb = a.environment.get(AB_KEY), b.environment.get(AB_KEY)
    return (isinstance(ea, dict) and isinstance(eb, dict) and bool(ea.get("id"))
            and ea.get("id") == eb.get("id") and (ea.get("side"), eb.get("side")) == ("A", "B"))


def judged(ca: CaseResult, cb: CaseResult) -> bool:
    """Whether the times of a common case are compared (both valid, readable, sampled)."""
    return (ca.valid and cb.valid and ca.measurement.timing is not None
            and cb.measurement.timing is not None
            and _unreadable(ca) is None and _unreadable(cb) is None)


def classify(a: RunResult, b: RunResult, threshold: float = 0.05,
             fail_on: FailOn | None = None, paths: tuple[str, str] = ("A", "B"),
             confidence: float = CONFIDENCE, simultaneous: bool = True) -> Comparison:
    """Every case of A and B: common cases judged, the others named (see the module doc).
    ``simultaneous=False`` gives each case an interval at ``confidence`` of its own (the
    weaker rule the docs measure the gate against)."""
    if not (math.isfinite(threshold) and threshold >= 0):
        raise ValueError(f"threshold must be a finite number >= 0, got {threshold!r}")
    fail_on = fail_on or FailOn()
    ia = {case_key(c): c for c in a.cases}
    ib = {case_key(c): c for c in b.cases}
    bad = {"A": a.unreadable, "B": b.unreadable}  # cases a reader left out, with why
    keys = list(dict.fromkeys([*ia, *ib, *bad["A"], *bad["B"]]))
    same_device = a.device == b.device
    m = sum(judged(ia[k], ib[k]) for k in keys if k in ia and k in ib) if same_device else 0
    per_case = 1.0 - (1.0 - confidence) / max(m, 1) if simultaneous else confidence
    paired = paired_runs(a, b)
    out = Comparison(RunRef.of(a, paths[0]), RunRef.of(b, paths[1]), threshold, [],
                     fail_on=fail_on.describe(threshold), confidence=confidence,
                     case_confidence=per_case)
    for k in keys:
        ca, cb = ia.get(k), ib.get(k)
        sides = [sd for sd in ("A", "B") if k in bad[sd]]
        if sides:  # never `same`, never `only in`: named with the reader's reason
            out.cases.append(CaseVerdict(k, "unreadable", ca.measurement.median_s if ca else None,
                                         cb.measurement.median_s if cb else None,
                                         reason="; ".join(f"{sd}: {bad[sd][k]}" for sd in sides),
                                         side=", ".join(sides)))
        elif ca is None or cb is None:
            out.cases.append(CaseVerdict(k, "only in A" if cb is None else "only in B",
                                         ca.measurement.median_s if ca else None,
                                         cb.measurement.median_s if cb else None))
        elif not same_device:
            out.cases.append(CaseVerdict(k, "other device", ca.measurement.median_s,
                                         cb.measurement.median_s,
                                         reason=f"A ran on {a.device}, B on {b.device}"))
        else:
            out.cases.append(classify_case(k, ca, cb, threshold, per_case, paired))
    common = [c for c in out.cases if c.verdict not in ("only in A", "only in B")]
    out.compared = sum(c.verdict in ("faster", "slower", "same", "uncertain")
                       for c in out.cases)
    if not same_device:
        out.notes.append(f"nothing compared: A ran on {a.device!r}, B on {b.device!r} "
                         "(a gate compares runs of one device)")
    elif not common:
        out.notes.append("nothing compared: the runs have no case in common")
    if paired:
        out.notes.append("an A/B run (base and new alternately, in one job): each case is "
                         "judged on its paired samples")
    out.notes += normalised_notes([c.normalised for c in out.cases if c.verdict in (
        "faster", "slower", "same", "uncertain")])
    out.failed = [c.key for c in out.cases if fail_on.fails(c)]
    return out
