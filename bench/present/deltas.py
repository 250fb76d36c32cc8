"""Compare two runs case by case: speedups, regressions, and both on one plot."""

from __future__ import annotations

from dataclasses import dataclass

from roofbench.gate import Comparison, classify
from roofbench.records import RunResult


@dataclass
class Delta:
    key: str
    time_a: float | None
    time_b: float | None
    speedup: float | None  # time_a / time_b: > 1 means B is faster
    verdict: str  # a roofbench.gate verdict: "faster", "slower", "same", "uncertain", ...


def compare(a: RunResult, b: RunResult, threshold: float = 0.05) -> list[Delta]:
    """Per-case speedup of B over A, each verdict the regression gate's (roofbench/gate.py:
    the ratio of medians and its distribution-free interval from the raw samples)."""
    return deltas(classify(a, b, threshold))


def deltas(cmp: Comparison) -> list[Delta]:
    return [Delta(v.key, v.median_a, v.median_b, v.speedup, v.verdict) for v in cmp.cases]
