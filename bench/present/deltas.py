"""Compare two runs case by case: speedups, regressions, and both on one plot.

One table for the terminal (`roofbench compare`) and for compare.html: the same columns, the
same labels and the same figures, so that the raw medians are never read as the ratio the
verdict judged (roof-normalised where both runs sampled the roof: "77.467 ms | 89.760 ms |
1.234x" read as a contradiction while both were unlabelled, issue 57)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from roofbench.gate import CaseVerdict, Comparison, classify
from roofbench.records import RunResult

# The columns: the raw medians as measured, then what the verdict judged and its ratio.
COLUMNS = ("case", "A: raw median", "B: raw median", "judged on", "B/A judged, 95% interval",
           "speedup A/B judged", "verdict")
CAPTION = ("raw median: the times as measured; judged: the statistic the verdict read "
           "(roof-normalised: each time x its roof's rate beside it)")


@dataclass(frozen=True)
class Delta:
    key: str
    time_a: float | None  # raw median of A, seconds
    time_b: float | None
    verdict: str  # a roofbench.gate verdict: "faster", "slower", "same", "uncertain", ...
    statistic: str = "raw medians"  # what the ratio was judged on (CaseVerdict.statistic)
    ratio: float | None = None  # judged B / A (> 1: B is slower)
    ratio_lo: float | None = None
    ratio_hi: float | None = None
    reason: str = ""

    @property
    def speedup(self) -> float | None:
        """The judged speedup A / B (> 1 means B is faster): not the raw medians' ratio."""
        return 1.0 / self.ratio if self.ratio else None


def compare(a: RunResult, b: RunResult, threshold: float = 0.05) -> list[Delta]:
    """Per-case speedup of B over A, each verdict the regression gate's (roofbench/gate.py:
    the ratio of medians and its distribution-free interval from the raw samples)."""
    return deltas(classify(a, b, threshold))


def of_verdict(v: CaseVerdict) -> Delta:
    return Delta(v.key, v.median_a, v.median_b, v.verdict, v.statistic, v.ratio, v.ratio_lo,
                 v.ratio_hi, v.reason)


def deltas(cmp: Comparison) -> list[Delta]:
    return [of_verdict(v) for v in cmp.cases]


def ms(x: float | None) -> str:
    if x is None or not isinstance(x, (int, float)):
        return "-"
    return f"{x * 1e3:.3f} ms" if math.isfinite(x) else str(x)


def cells(d: Delta) -> dict[str, str]:
    """One row of the table, keyed by COLUMNS, as plain text (the caller escapes it)."""
    if d.ratio and d.ratio_lo is not None and d.ratio_hi is not None:
        interval = f"{d.ratio:.3f} [{d.ratio_lo:.3f}, {d.ratio_hi:.3f}]"
    else:
        interval = f"{d.ratio:.3f}" if d.ratio else "-"
    return dict(zip(COLUMNS, (
        d.key, ms(d.time_a), ms(d.time_b), d.statistic if d.ratio else "-", interval,
        f"{d.speedup:.3f}x" if d.speedup else "-",
        d.verdict + (f" ({d.reason})" if d.reason else "")), strict=True))
