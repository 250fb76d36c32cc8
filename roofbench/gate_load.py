"""The regression gate's load rule: how far the outside load measured while two sides were
timed can explain a change of the statistic the gate compares (see roofbench/gate.py).

A sample that waited w seconds for a core another process held (``Timing.waits``, measured
per sample by the CPU backend and the A/B timer: schedstat, this process's threads) would have
taken about s - w without that load. So the load's effect on the compared statistic is read
off the same statistic of the samples less their waits: for two runs, r = median(B) /
median(A) against r_u = median(B - w_B) / median(A - w_A); for A/B pairs, the median of the
per-pair ratios against the median of the wait-free ratios. The load can have made B slower
than A by at most E = max(1, r / r_u), and A slower than B by max(1, r_u / r): a bound matched
to the median the gate compares. A short sample is mostly preempted whole or not at all, so a
heavy load that stretches the mean time by 1/(1-f) can leave the median untouched; then the
load excuses nothing of a median's change, and the bound says so.

Where no per-sample waits were recorded (older files, pytest-benchmark JSON), a side's
stretch is 1/(1-f), f the share of the timing's time it waited for a core (or, older still,
the share of all cores others used): a bound on the mean, the only one such a file allows,
and looser. Hypervisor steal is not in the waits; the steal share over the timing stretches a
side by 1/(1-steal) on top. Either way load on A only stretches A (it hides a slowdown and
explains none), and the same load on both explains nothing.
"""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass

import numpy as np

from .timing import Timing
from .units import si

_OTHERS = re.compile(r"other processes used (\d+(?:\.\d+)?)% of")
_WAITED = re.compile(r"waited for a core (\d+(?:\.\d+)?)% of")
_STEAL = re.compile(r"hypervisor stole (\d+(?:\.\d+)?)%")
MAX_SHARE = 0.95  # a share read as more than this is taken as this (a bound, not infinity)


def steal_share(outside_load: str) -> float:
    """The hypervisor's steal share named in ``Timing.outside_load`` (0 when none)."""
    return min(sum(float(m.group(1)) / 100 for m in _STEAL.finditer(outside_load or "")),
               MAX_SHARE)


def load_share(outside_load: str) -> float:
    """f: the share of the time the timed code could run that other processes (and the
    hypervisor) took while a case was timed, read from ``Timing.outside_load`` (the noise
    probe's words, the form every stored file has): the wait for a core that the probe
    measured on the timed process itself when the words give it, else (older files) the
    share of all cores' time others used, a looser bound; plus the hypervisor's steal. 0
    when it names no share (page faults alone, nothing)."""
    text = outside_load or ""
    own = [float(m.group(1)) / 100 for m in _WAITED.finditer(text)]
    f = sum(own) if own else sum(float(m.group(1)) / 100 for m in _OTHERS.finditer(text))
    return min(max(f + steal_share(text), 0.0), MAX_SHARE)


def load_bounds(fa: float, fb: float) -> tuple[float, float]:
    """(the most the load can have made B slower than A, ... A slower than B), from each
    side's share f alone (no per-sample waits): a share f stretches a time by about 1/(1-f)."""
    return max(1.0, (1.0 - fa) / (1.0 - fb)), max(1.0, (1.0 - fb) / (1.0 - fa))


def block_ratios(a: list[float], b: list[float]) -> list[float]:
    """A/B pairs in alternating order (A B, then B A: bench/gate/ab_session.py) taken as ABBA
    blocks of two pairs, each block's ratio sqrt(b1 b2 / (a1 a2)). Whatever the second of a
    pair gains from the first (its caches, clocks, the scheduler's slice) B gains in the
    first pair and A in the second, so the block's ratio holds it once each way: a pair's
    ratio alone carries it, and their median sits on one side of 1 when the pairs do not
    split evenly. A last pair without its partner is left out."""
    n = min(len(a), len(b)) // 2 * 2
    return [math.sqrt((b[i] * b[i + 1]) / (a[i] * a[i + 1])) for i in range(0, n, 2)]


def wait_free(t: Timing) -> list[float] | None:
    """Each sample less the time it waited for a core (never below 1 - MAX_SHARE of it);
    None when the timing recorded no wait per sample."""
    if not t.waits or len(t.waits) != t.n:
        return None
    return [max(s - max(w, 0.0), s * (1.0 - MAX_SHARE)) for s, w in zip(t.samples, t.waits,
                                                                      strict=True)]


PER_SAMPLE = "the median of the samples less each one's wait for a core"
SHARES = "the share of the timing it waited: a bound on the mean time"


@dataclass(frozen=True)
class Excuse:
    """What the outside load can explain of a change between A and B."""

    slow: float  # the most the load can have made B slower than A (>= 1)
    fast: float  # ... A slower than B
    how: str  # what the bound was taken from, in words


def stretch(t: Timing | None) -> tuple[float, bool]:
    """(how much the load stretched the median of a side's samples, from per-sample waits?):
    median(s) / median(s - w) and the steal on top, else 1/(1-f) from the shares."""
    if t is None:
        return 1.0, False
    u = wait_free(t)
    if u is None:
        return 1.0 / (1.0 - load_share(t.outside_load)), False
    return (float(np.median(t.samples)) / float(np.median(u))
            / (1.0 - steal_share(t.outside_load))), True


def excuses(ta: Timing | None, tb: Timing | None, paired: bool = False) -> Excuse:
    """The load's bounds for A and B (see the module doc); ``paired``: A/B samples in pairs."""
    (sa, wa), (sb, wb) = stretch(ta), stretch(tb)
    rel = sb / sa  # how much more the load stretched B's statistic than A's
    if paired and wa and wb and ta is not None and tb is not None and ta.n == tb.n:
        ua, ub = wait_free(ta), wait_free(tb)
        assert ua is not None and ub is not None
        ratios, freed = block_ratios(ta.samples, tb.samples), block_ratios(ua, ub)
        if not ratios:  # a single pair: no block
            ratios, freed = [tb.samples[0] / ta.samples[0]], [ub[0] / ua[0]]
        r, r_u = statistics.median(ratios), statistics.median(freed)
        rel = r / r_u * (1.0 - steal_share(ta.outside_load)) / (
            1.0 - steal_share(tb.outside_load))
    how = (PER_SAMPLE if wa and wb else SHARES if not (wa or wb) else
           f"{'A' if wa else 'B'}'s samples less their waits, {'B' if wa else 'A'}'s share of "
           "the timing it waited (a bound on the mean)")
    return Excuse(max(1.0, rel), max(1.0, 1.0 / rel), how)


def roof_normalised(ta: Timing | None, tb: Timing | None) -> bool:
    """Whether a case is judged on roof-normalised times: both sides paired every sample with
    a sample of the same roof (``Timing.roof_rates``). Each sample times its roof's rate is
    the work the roof would have done meanwhile: a memory system that got slower between the
    runs, or within one, stretches the time and shrinks the rate alike, a slower kernel only
    the time. Otherwise the raw times, as before."""
    return (ta is not None and tb is not None and ta.paired and tb.paired
            and bool(ta.roof_probe) and ta.roof_probe == tb.roof_probe)


def roof_span(t: Timing) -> str:
    unit = "B/s" if t.roof_probe.startswith("memory:") else "FLOP/s"
    return f"{si(min(t.roof_rates), unit)} to {si(max(t.roof_rates), unit)}"


def normalised_notes(normalised: list[bool]) -> list[str]:
    """The comparison's note on which statistic judged its timed cases."""
    if not normalised:
        return []
    k, n = sum(normalised), len(normalised)
    raw = f"; {n - k} on raw times (a run without roof pairs)" if k < n else ""
    return [f"{k} of {n} cases judged on roof-normalised times (both runs sampled the roof "
            "that bounds them beside each sample: a machine whose memory or clock moved moves "
            f"both){raw}"]
