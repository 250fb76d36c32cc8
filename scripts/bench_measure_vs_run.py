"""`roofbench.measure` against `roofbench run` on the same kernel, machine and moment.

    python scripts/bench_measure_vs_run.py [--rounds 9] [--mib 64] [--roofs FILE] [--out FILE]

The kernel is a numpy add, c = a + b, of float32 arrays of ``--mib`` MiB each. `roofbench run`
measures it as a plug-in workload (scripts/numpy_add_workload.py through $ROOFBENCH_PLUGINS:
the CPU backend, the run's validation and timer) in a child process; `roofbench.measure`
times the same ``np.add(a, b, out=c)`` in a child process of its own (so that neither side
inherits this process's heap). Rounds alternate the two (which goes first alternates too) so
both see the same load; the verdict is the median over rounds of the paired ratios
measure / run of the median times, with the target |ratio - 1| <= 5%, and a distribution-free
interval for that median (order statistics of the rounds' ratios, >= 90% coverage): on a
shared machine one round's ratio moves by 10% with the neighbours' load, and the interval
says how far the median can be trusted. The ratio of the fastest samples is shown for
information. The load average before and after is printed.
Exit 0 when the target holds, 1 otherwise. Both sides are placed under one roofs file
(``--roofs``, default: the newest stored run of this CPU under results/).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the checkout, importable without an install

from roofbench.bench.backends.cpu import cpu_model  # noqa: E402

import roofbench  # noqa: E402
from roofbench.roofline import device_slug  # noqa: E402


def newest_roofs() -> Path | None:
    runs = sorted((ROOT / "results" / device_slug(cpu_model())).glob("*/results.json"))
    return runs[-1] if runs else None


def via_run(n: int, roofs: Path, out: Path) -> tuple[float, int, str, float]:
    env = dict(os.environ, ROOFBENCH_PLUGINS="numpy_add_workload",
               PYTHONPATH=os.pathsep.join([str(ROOT / "scripts"), str(ROOT),
                                           os.environ.get("PYTHONPATH", "")]))
    cmd = [sys.executable, "-m", "roofbench.bench.cli", "run", "--backend", "cpu",
           "--kernel", "numpy_add", "--dtype", "fp32", "--size", str(n), "--roofs", str(roofs),
           "--out", str(out)]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    if p.returncode != 0:
        raise SystemExit(f"roofbench run failed: {p.stderr.strip().splitlines()[-1:]}")
    (res,) = out.glob("*/*/results.json")
    (case,) = json.loads(res.read_text())["cases"]
    assert case["status"] == "ok", case["error"]
    t = case["timing"]
    return float(case["median_s"]), t["n"], t["stopped_by"], float(t["min_s"])


def measure_here(n: int, roofs: Path) -> tuple[float, int, str, float]:
    rng = np.random.default_rng(0)
    a, b = (rng.uniform(0.25, 1.0, n).astype(np.float32) for _ in range(2))
    c = np.empty_like(a)
    rec = roofbench.measure(np.add, a, b, c, flops=n, reads=[a, b], writes=c, name="numpy_add",
                            reference=a.astype(np.float64) + b, output=c, roofs=roofs)
    assert rec.status == "ok", rec.error
    return float(rec.median_s), rec.timing.n, rec.timing.stopped_by, rec.timing.min


def via_measure(n: int, roofs: Path) -> tuple[float, int, str, float]:
    # A fresh process, as the run's: both sides start from the same interpreter and heap
    # state (a long-lived parent's allocations place a new array elsewhere).
    cmd = [sys.executable, __file__, "--child-measure", str(n), "--roofs", str(roofs)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise SystemExit(f"roofbench.measure failed: {p.stderr.strip().splitlines()[-1:]}")
    med, k, stop, lo = json.loads(p.stdout.strip().splitlines()[-1])
    return float(med), int(k), str(stop), float(lo)


def median_interval(xs: list[float], coverage: float = 0.90) -> tuple[float, float]:
    """The narrowest order-statistic interval (x_(j), x_(n+1-j)) that holds the median with at
    least ``coverage`` whatever the distribution (the sign test's binomial tail)."""
    v, n = sorted(xs), len(xs)
    best = (v[0], v[-1])
    for j in range(1, n // 2 + 1):
        tail = sum(math.comb(n, i) for i in range(j)) / 2 ** n  # P(Bin(n, 1/2) < j)
        if 1 - 2 * tail < coverage:
            break
        best = (v[j - 1], v[n - j])
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--mib", type=int, default=64, help="MiB of each of a, b and c")
    ap.add_argument("--roofs", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=None, help="write the figures as JSON here")
    ap.add_argument("--child-measure", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child_measure:
        print(json.dumps(measure_here(args.child_measure, args.roofs)))
        return 0
    roofs = args.roofs or newest_roofs()
    if roofs is None:
        raise SystemExit("no stored run of this CPU to take roofs from: pass --roofs FILE")
    n = args.mib * (1 << 20) // 4
    load0 = os.getloadavg()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            sides = [("run", lambda r=r: via_run(n, roofs, Path(tmp) / f"round-{r}")),
                     ("measure", lambda: via_measure(n, roofs))]
            if r % 2:
                sides.reverse()
            got = {name: fn() for name, fn in sides}
            rows.append(got)
            print(f"round {r + 1}: run {got['run'][0] * 1e3:.3f} ms ({got['run'][1]} samples, "
                  f"{got['run'][2]}), measure {got['measure'][0] * 1e3:.3f} ms "
                  f"({got['measure'][1]} samples, {got['measure'][2]}), ratio "
                  f"{got['measure'][0] / got['run'][0]:.4f}", flush=True)
    load1 = os.getloadavg()
    ratios = [g["measure"][0] / g["run"][0] for g in rows]
    mins = [g["measure"][3] / g["run"][3] for g in rows]
    verdict = statistics.median(ratios)
    lo, hi = median_interval(ratios)
    ok = abs(verdict - 1) <= 0.05
    print(f"{cpu_model()}, {os.cpu_count()} CPUs, {args.mib} MiB per array, roofs {roofs}")
    print(f"load average before {load0[0]:.2f} {load0[1]:.2f}, after {load1[0]:.2f} "
          f"{load1[1]:.2f}")
    print(f"measure / run, median over {len(ratios)} rounds: {verdict:.4f} "
          f"({'within' if ok else 'NOT within'} 5%), >= 90% interval {lo:.4f}-{hi:.4f}; "
          f"fastest samples' ratio, median over rounds: {statistics.median(mins):.4f}")
    if args.out:
        args.out.write_text(json.dumps({"device": cpu_model(), "mib": args.mib,
                                        "rounds": rows, "ratios": ratios, "verdict": verdict,
                                        "interval_90": [lo, hi],
                                        "min_ratios": mins,
                                        "load_before": load0, "load_after": load1}, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
