"""How often the regression gate fails on repeats that cannot differ, and how often it catches
a planted slowdown, on every stored real run under results/.

    python scripts/gate_resampled_repeats.py [--splits 300] [--seed 3] [--per-case]

A repeat pair is one run's samples split in two random halves per case (same device, code
and moment); the gate at 5% must never fail on it. A planted pair is a run against itself
with one case's samples x 1.10. ``--per-case`` uses per-case 95% intervals instead of the
gate's simultaneous ones (what the docs compare). Prints both counts.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.append(str(ROOT / "tests" / "standins"))  # the gate tests' resampling, reused

from real_samples import with_samples  # noqa: E402
from roofbench.bench.results import load_run  # noqa: E402

from roofbench.gate import FailOn, classify  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--splits", type=int, default=300)
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--per-case", action="store_true")
    args = ap.parse_args()
    gate = FailOn(slower=True)
    pairs = failed = planted = caught = 0
    for path in sorted((ROOT / "results").rglob("results.json")):
        run = load_run(path)
        if not any(c.valid and c.measurement.timing for c in run.cases):
            continue

        def judge(a, b):
            return classify(a, b, 0.05, gate, simultaneous=not args.per_case)

        rng = random.Random(args.seed)
        for _ in range(args.splits):
            perm: dict[str, list[float]] = {}

            def half(k, s, first, perm=perm, rng=rng):
                if k not in perm:
                    perm[k] = s[:]
                    rng.shuffle(perm[k])
                return perm[k][0::2] if first else perm[k][1::2]

            a = with_samples(run, lambda k, s, half=half: half(k, s, True))
            b = with_samples(run, lambda k, s, half=half: half(k, s, False))
            pairs += 1
            failed += bool(judge(a, b).failed)
        for c in run.cases:
            if c.valid and c.measurement.timing:
                slow = with_samples(run, lambda k, s, key=c.key: [x * 1.1 for x in s]
                                    if k == key else s)
                planted += 1
                caught += bool(judge(run, slow).failed)
    kind = "per-case 95%" if args.per_case else "simultaneous 95% (the gate's)"
    print(f"intervals: {kind}")
    print(f"resampled repeats: {failed} of {pairs} comparisons failed the gate at 5%")
    print(f"planted 10% slowdowns: {caught} of {planted} cases caught")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
