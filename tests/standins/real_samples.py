"""Real runs and their raw samples, resampled or slowed: what the regression gate's tests
(tests/roofbench/test_gate.py, tests/bench/cli/test_compare.py) compare."""

from __future__ import annotations

import copy
import json
import math
import random
import statistics

from testpaths import ROOT

from roofbench.gate import median_interval
from roofbench.records import RunResult

# Every stored real run whose cases carry raw samples (CPU runs and the H200's first contact).
REAL = sorted(p for p in (ROOT / "results").rglob("results.json")
              if any(c.get("timing") for c in json.loads(p.read_text())["cases"]))
PER_SIDE = math.sqrt(0.95)


def with_samples(run: RunResult, fn) -> RunResult:
    """A copy of ``run`` whose valid cases' samples are ``fn(key, samples)``. The run, its
    case list and each case are copied, and a resampled case's measurement and timing; the
    rest (roofs, launches, evidence) is shared, to be read only: a deep copy of the whole run
    per call was three quarters of test_gate.py's CPU (1,336 calls)."""
    out = copy.copy(run)
    out.cases = []
    for c in run.cases:
        c = copy.copy(c)
        t = c.measurement.timing
        if t is not None and c.valid:
            c.measurement = copy.copy(c.measurement)
            c.measurement.timing = copy.copy(t)
            c.measurement.timing.samples = list(fn(c.key, list(t.samples)))
            c.measurement.median_s = statistics.median(c.measurement.timing.samples)
        out.cases.append(c)
    return out


def halves(run: RunResult, seed: float | None) -> tuple[RunResult, RunResult]:
    """Two runs from one: each case's samples in two halves, interleaved by pairs (seed None:
    samples 0-1 to the first, 2-3 to the second, ...) or shuffled by the seed first. Pairs, not
    single samples: a 2-thread torch op on a loaded VM alternates fast, slow (every other call
    waits for its second thread: results/*/20261202T095109Z-model-prefill), and two real
    repeats each see both phases, never one phase each."""
    order: dict[str, list[float]] = {}

    def pick(key: str, s: list[float], first: bool) -> list[float]:
        if key not in order:
            order[key] = s[:]
            if seed is not None:
                random.Random(f"{seed}{key}").shuffle(order[key])
        pairs = [order[key][i:i + 2] for i in range(0, len(order[key]), 2)]
        return [x for p in pairs[0 if first else 1::2] for x in p]

    return (with_samples(run, lambda k, s: pick(k, s, True)),
            with_samples(run, lambda k, s: pick(k, s, False)))


def narrow(c, run: RunResult) -> bool:
    """Whether the median of ``c`` is known to +-4% at the per-case confidence of a
    comparison of ``run`` with itself (simultaneous over its sampled cases)."""
    m = sum(1 for x in run.cases if x.valid and x.measurement.timing)
    iv = median_interval(c.measurement.timing.samples, math.sqrt(1 - 0.05 / m))
    return iv is not None and (iv[1] - iv[0]) / 2 <= 0.04 * c.measurement.median_s
