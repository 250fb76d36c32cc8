"""Compare two runs case by case: speedups, regressions, and both on one plot."""

from __future__ import annotations

from dataclasses import dataclass

from roofbench.records import CaseResult, RunResult


@dataclass
class Delta:
    key: str
    time_a: float | None
    time_b: float | None
    speedup: float | None  # time_a / time_b: > 1 means B is faster
    verdict: str  # "faster", "slower", "same", "regression", "only in A", "only in B", ...


def _key(c: CaseResult) -> str:
    return f"{c.backend}/{c.workload}/{c.variant}/{c.dtype}/{'x'.join(map(str, c.size))}"


def _noise(c: CaseResult) -> float:
    t = c.timing
    if t is None or not t.median:
        return 0.0
    return (t.quantile(0.75) - t.quantile(0.25)) / t.median


def compare(a: RunResult, b: RunResult, threshold: float = 0.05) -> list[Delta]:
    """Per-case speedup of B over A. A slowdown beyond ``threshold`` and beyond both runs'
    interquartile spread is a regression; a case valid in A and invalid in B is one too."""
    ia = {_key(c): c for c in a.cases}
    ib = {_key(c): c for c in b.cases}
    out = []
    for k in list(ia) + [k for k in ib if k not in ia]:
        ca, cb = ia.get(k), ib.get(k)
        if ca is None or cb is None:
            out.append(Delta(k, None if ca is None else ca.median_s,
                             None if cb is None else cb.median_s, None,
                             "only in A" if cb is None else "only in B"))
            continue
        if not (ca.valid and cb.valid and ca.median_s and cb.median_s):
            verdict = ("regression (invalid in B)" if ca.valid and not cb.valid
                       else "fixed (valid in B)" if cb.valid and not ca.valid
                       else "not measured")
            out.append(Delta(k, ca.median_s, cb.median_s, None, verdict))
            continue
        s = ca.median_s / cb.median_s
        margin = max(threshold, _noise(ca), _noise(cb))
        verdict = ("regression" if s < 1 - margin else "faster" if s > 1 + margin else "same")
        out.append(Delta(k, ca.median_s, cb.median_s, s, verdict))
    return out
