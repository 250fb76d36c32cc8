"""Why the two-session compares of this run had intervals like [0.033, 17.1] (issue 57 b):
per compare, the raw and roof-normalised ratio intervals the gate takes, the ranks they read,
the spread of each side's samples, how many samples ran unpreempted (under 5 ms: the add
alone takes ~3 ms here) and how many recorded a wait longer than the sample itself.
Usage: python width.py (from the checkout's root)."""
import math
from pathlib import Path

import numpy as np
from roofbench.bench.results import load_run

from roofbench.gate import median_rank, ratio_interval

D = Path(__file__).parent


def timing(run: str, side: str):
    return load_run(D / run / side / "results.json").cases[0].measurement.timing


def log_iqr(x) -> float:
    q = np.percentile(np.log(np.asarray(x)), [25, 75])
    return float(q[1] - q[0])


for run in ("run1", "run2", "run3"):
    a = timing(run, "rbase")
    for side in ("rnew", "rslow"):
        b = timing(run, side)
        raw = ratio_interval(a.samples, b.samples)
        nrm = ratio_interval(a.normalised(), b.normalised())
        k = [median_rank(t.n, math.sqrt(0.95)) for t in (a, b)]
        fast = [sum(s < 5e-3 for s in t.samples) for t in (a, b)]
        over = [sum(w > s for s, w in zip(t.samples, t.waits, strict=True)) for t in (a, b)]
        print(f"{run} rbase/{side}: n {a.n}/{b.n}, ranks {k}; raw {raw.ratio:.3f} "
              f"[{raw.lo:.3f}, {raw.hi:.3f}] (log width {math.log(raw.hi / raw.lo):.2f}); "
              f"normalised {nrm.ratio:.3f} [{nrm.lo:.3f}, {nrm.hi:.3f}] (log width "
              f"{math.log(nrm.hi / nrm.lo):.2f}); samples ms A {min(a.samples)*1e3:.1f}-"
              f"{max(a.samples)*1e3:.1f}, B {min(b.samples)*1e3:.1f}-{max(b.samples)*1e3:.1f}; "
              f"log IQR raw A {log_iqr(a.samples):.2f} B {log_iqr(b.samples):.2f}, normalised "
              f"A {log_iqr(a.normalised()):.2f} B {log_iqr(b.normalised()):.2f}, roof rates A "
              f"{log_iqr(a.roof_rates):.2f} B {log_iqr(b.roof_rates):.2f}; under 5 ms A "
              f"{fast[0]} B {fast[1]}; wait > sample A {over[0]} B {over[1]}")
