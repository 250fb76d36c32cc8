"""The regression gate's error rates on real work: false verdicts on A/A repeats and real
slowdowns caught, in A/B mode (one job, alternating) and from two stored runs.

    python scripts/gate_error_rates.py [--busy [--busy-loops N]] [--flip] [--factor 1.3]
        [--threshold 0.10] [--repeats 30] [--budget 0.5] [--mib 1] [--modes ab,runs]

The work is real: the base adds two fp32 arrays (``np.add``, --mib MiB each); the slow
version adds ``factor`` times as many elements (the same call on a longer slice): more work,
not edited samples. Each repeat measures

- A/B mode: one A/B job (bench/gate/ab_session.py) of two cases, base against base (A/A) and base
  against slow, stored (DIR/a, DIR/b), read back and judged by the gate (paired samples);
- stored runs: three runs, each in a fresh process with the regular timer (base, slow,
  base again), stored and read back: base vs base again is the A/A pair, base vs slow the
  slowdown, judged by the gate as `roofbench compare` judges them.

A false verdict is an A/A case judged `slower` or `faster` (a false alarm: `slower`, the
one a gate fails on); an A/A interval that does not hold 1 is counted beside it; a catch is a
slowdown case the gate fails. ``--busy`` runs ``nice -n 0 python -c 'while 1: pass'`` on
every core (``--busy-loops N``: N of them) for the whole measurement: a shared CI runner.
``--flip`` plants a change of the machine's memory bandwidth between the stored
runs: the second and third runs (slow, base again) are timed while another process streams a
large array (``numpy.copyto`` in a loop, one thread), the base alone; use DRAM-sized arrays
(``--mib 64``). The roofs file names the CPU's STREAM roof (``stream-add-nt``), so every
sample is paired with a sample of it (bench/measure/pairs.py) and the gate judges roof-
normalised times; ``--unpaired`` gives roofs no probe samples (the rule before pairs). Each
repeat's line gives the verdicts, ratios, the slowdown's interval's low end and the load
bound its reason names (roofbench/gate_load.py); the summary counts the A/A verdicts too.
The load average (``uptime``) before and after is printed: record it with the figures. Exit
0 always (the figures are the output; nothing here is a test).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from roofbench.bench.backends.cpu import cpu_model  # noqa: E402
from roofbench.bench.results import load_run  # noqa: E402

from roofbench.gate import FailOn, classify  # noqa: E402
from roofbench.timing import GATE_MIN_SAMPLES, TimerConfig  # noqa: E402


def arrays(mib: float, factor: float) -> tuple[int, tuple[np.ndarray, ...]]:
    n = int(mib * (1 << 20)) // 4
    big = int(n * max(factor, 1.0)) + 1
    a, b = np.full(big, 0.5, np.float32), np.full(big, 0.25, np.float32)
    return n, (a, b, np.empty_like(a))


def adder(n: int):
    def add(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
        np.add(a[:n], b[:n], out=c[:n])
    return add


def timer(budget: float) -> TimerConfig:
    return TimerConfig(warmup_s=0.05, min_samples=GATE_MIN_SAMPLES, max_samples=2000,
                       budget_s=budget)


def roofs_file(folder: Path, paired: bool) -> Path:
    """Fixed roofs (the gate reads times and pairs only): no calibration in any repeat;
    ``paired``: the DRAM roof is named as the STREAM probe's, which the pairs then sample."""
    p = folder / "roofs.json"
    ev = {"probe": "stream-add-nt", "array_elements": 1 << 24} if paired else {}
    p.write_text(json.dumps({"device": cpu_model(), "roofs": [
        {"name": "dram stream-add-nt" if paired else "dram", "kind": "memory",
         "level": "dram", "value": 2e10, "source": "measured", "evidence": ev},
        {"name": "fp32", "kind": "compute", "precision": "fp32", "value": 2e11,
         "source": "measured"}]}))
    return p


def child(out: Path, roofs: Path, work: float, mib: float, budget: float) -> None:
    """One stored run in this (fresh) process: the add at ``work`` times the base's size."""
    from roofbench.bench.measure.api import Session

    n, (a, b, c) = arrays(mib, work)
    sess = Session(out, roofs=roofs, timer=timer(budget))
    sess.measure(adder(int(n * work)), a, b, c, flops=n, reads=n * 8, writes=n * 4,
                 dtype="fp32", size=[n], name="add")  # base's counts: one key, both sides


HOG = ("import numpy as np\na = np.ones(1 << 26); b = np.empty_like(a)\n"
       "while True: np.copyto(b, a)")  # 512 MiB a side: DRAM traffic from another process


def stored_run(out: Path, roofs: Path, work: float, args: argparse.Namespace,
               hog: bool = False) -> Path:
    other = subprocess.Popen([sys.executable, "-c", HOG]) if hog else None
    try:
        if other is not None:
            time.sleep(1.0)  # its arrays touched: it streams while the run is timed
        _child_run(out, roofs, work, args)
    finally:
        if other is not None:
            other.terminate()
            other.wait(timeout=10)
    return out


def _child_run(out: Path, roofs: Path, work: float, args: argparse.Namespace) -> None:
    subprocess.run([sys.executable, __file__, "--child", str(out), "--roofs", str(roofs),
                    "--work", str(work), "--mib", str(args.mib), "--budget",
                    str(args.budget)], check=True, timeout=300)


def verdicts(a: Path, b: Path,
             threshold: float) -> dict[str, tuple[str, float, float, str, float]]:
    """Per case: verdict, ratio, the interval's low end, the load's bound the reason names
    (x..., or '-' where the reason names none), and the interval's high end."""
    cmp = classify(load_run(a), load_run(b), threshold, FailOn(slower=True))
    out = {}
    for v in cmp.cases:
        bound = re.search(r"(?:at most|up to) (x\d+\.\d+)", v.reason)
        out[v.key.split("/")[1]] = (v.verdict, v.ratio or float("nan"),
                                    v.ratio_lo or float("nan"),
                                    bound.group(1) if bound else "-",
                                    v.ratio_hi or float("nan"))
    return out


def ab_repeat(folder: Path, roofs: Path, args: argparse.Namespace) -> dict[str, tuple]:
    from roofbench.bench.gate.ab_session import AbSession

    n, (a, b, c) = arrays(args.mib, args.factor)
    base, slow = adder(n), adder(int(n * args.factor))
    kw = dict(flops=n, reads=n * 8, writes=n * 4, dtype="fp32", size=[n])
    ab = AbSession(folder, roofs=roofs, timer=timer(args.budget), threshold=args.threshold)
    ab.measure(base, base, a, b, c, name="aa", **kw)
    ab.measure(base, slow, a, b, c, name="slow", **kw)
    for s in ab.sides.values():
        s.save()  # results.json alone: the reports are not what is measured here
    return verdicts(folder / "a", folder / "b", args.threshold)


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def summary(name: str, rows: list[dict[str, tuple]]) -> str:
    aa = [r["aa"] for r in rows]
    sl = [r["slow"] for r in rows]
    alarms = sum(v[0] == "slower" for v in aa)
    false = sum(v[0] in ("slower", "faster") for v in aa)
    off = sum(not (v[2] <= 1.0 <= v[4]) for v in aa if v[2] == v[2] and v[4] == v[4])
    caught = sum(v[0] == "slower" for v in sl)
    other = {k: sum(v[0] == k for v in sl) for k in ("uncertain", "same", "faster")}
    aa_kinds = {k: sum(v[0] == k for v in aa) for k in dict.fromkeys(v[0] for v in aa)}
    return (f"{name}: false verdicts (faster or slower) {false}/{len(aa)}, of them false "
            f"alarms {alarms}; A/A intervals not holding 1: {off}/{len(aa)} (A/A ratios "
            f"{min(v[1] for v in aa):.3f}-{max(v[1] for v in aa):.3f}, verdicts {aa_kinds}); "
            f"slowdown caught "
            f"{caught}/{len(sl)} (ratios {min(v[1] for v in sl):.3f}-"
            f"{max(v[1] for v in sl):.3f}, median {statistics.median(v[1] for v in sl):.3f}; "
            f"missed as {other})")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--busy", action="store_true", help="busy loops for the duration")
    ap.add_argument("--busy-loops", type=int, default=os.cpu_count() or 1,
                    help="how many with --busy (default: one per core)")
    ap.add_argument("--flip", action="store_true",
                    help="stored runs 2 and 3 timed beside another process's DRAM stream")
    ap.add_argument("--unpaired", action="store_true", help="roofs no probe samples")
    ap.add_argument("--factor", type=float, default=1.3, help="the slow version's work")
    ap.add_argument("--threshold", type=float, default=0.10, help="the gate's (slower:N)")
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--budget", type=float, default=0.5, help="timer budget per side, s")
    ap.add_argument("--mib", type=float, default=1.0, help="MiB per array of the base")
    ap.add_argument("--modes", default="ab,runs", help="ab, runs or both")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--roofs", help=argparse.SUPPRESS)
    ap.add_argument("--work", type=float, default=1.0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(Path(args.child), Path(args.roofs), args.work, args.mib, args.budget)
        return 0
    modes = args.modes.split(",")
    busy = [subprocess.Popen(["nice", "-n", "0", sys.executable, "-c", "while 1: pass"])
            for _ in range(args.busy_loops if args.busy else 0)]
    print(f"before: {uptime()}", flush=True)
    print(f"factor {args.factor}, threshold {args.threshold:.0%}, {args.repeats} repeats, "
          f"busy loops: {len(busy)}, {args.mib} MiB arrays, budget "
          f"{args.budget} s, bandwidth flip planted: {'yes' if args.flip else 'no'}, "
          f"roof pairs: {'no' if args.unpaired else 'yes'}", flush=True)
    t0 = time.monotonic()
    rows: dict[str, list[dict[str, tuple]]] = {m: [] for m in modes}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            roofs = roofs_file(folder, not args.unpaired)
            for i in range(args.repeats):
                if "ab" in modes:
                    rows["ab"].append(ab_repeat(folder / f"ab{i}", roofs, args))
                if "runs" in modes:
                    r = [stored_run(folder / f"r{i}-{k}", roofs, w, args,
                                    hog=args.flip and k != "base")
                         for k, w in (("base", 1.0), ("slow", args.factor), ("again", 1.0))]
                    aa = verdicts(r[0], r[2], args.threshold)["add"]
                    sl = verdicts(r[0], r[1], args.threshold)["add"]
                    rows["runs"].append({"aa": aa, "slow": sl})
                print(f"repeat {i + 1}: " + "; ".join(
                    f"{m} A/A {rows[m][-1]['aa'][0]} {rows[m][-1]['aa'][1]:.3f} "
                    f"[{rows[m][-1]['aa'][2]:.3f}, {rows[m][-1]['aa'][4]:.3f}], slow "
                    f"{rows[m][-1]['slow'][0]} {rows[m][-1]['slow'][1]:.3f} "
                    f"[lo {rows[m][-1]['slow'][2]:.3f}, load bound {rows[m][-1]['slow'][3]}]"
                    for m in modes), flush=True)
    finally:
        for loop in busy:
            loop.terminate()
            loop.wait(timeout=10)
    print(f"after: {uptime()} ({time.monotonic() - t0:.0f} s)")
    for m in modes:
        print(summary({"ab": "A/B mode", "runs": "two stored runs"}[m], rows[m]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
