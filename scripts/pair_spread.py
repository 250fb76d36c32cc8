"""How far each case's efficiency moves between runs, by the paired rule and the old one.

    python scripts/pair_spread.py RUN_DIR_OR_RESULTS_JSON [...]

For every valid case found in all the runs: its efficiency in each run by the roof pairs (the
median of its samples' ratios to the roof sampled beside each, ``roofline.paired``) and by the
best-state rule (its median rate over the roof's best sustained figure, ``paired.of_ceiling``,
or the efficiency itself for a run without pairs), and the spread of each (max - min over the
runs), with the roof's median while each run's pairs were taken (GB/s or GFLOP/s): a case
whose paired efficiency moves with that state does not follow its roof all the way. A
Markdown table on stdout, then the largest spreads and the highest paired point. Exit 0
always (the figures are the output; nothing here is a test).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from roofbench.bench.results import load_run  # noqa: E402


def rules(c) -> tuple[float | None, float | None]:
    """(paired efficiency, best-state efficiency) of a case."""
    p = c.roofline.paired
    if p is None:
        return None, c.roofline.efficiency
    return p.efficiency, p.of_ceiling


def roof_state(c) -> float | None:
    """The paired roof's median rate while the case ran, in G(B|FLOP)/s, or None."""
    p = c.roofline.paired
    return p.roof_median / 1e9 if p is not None and p.roof_median else None


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.split("\n\n")[1].strip())
        return 0
    runs = [load_run(Path(a)) for a in argv]
    keys = [c.key for c in runs[0].cases if c.valid]
    rows = []
    for k in keys:
        found = [next((c for c in r.cases if c.key == k and c.valid), None) for r in runs]
        if any(c is None for c in found):
            continue
        pairs = [rules(c) for c in found if c is not None]
        new = [p for p, _ in pairs]
        old = [o for _, o in pairs]
        bound = found[0].roofline.bound if found[0] is not None else None
        level = (found[0].roofline.placement.level if found[0] is not None
                 and found[0].roofline.placement is not None else "dram")
        state = [roof_state(c) for c in found if c is not None]
        rows.append((k, bound, level, new, old, state))
    print("| case | bound (level) | paired per run | spread | roof while paired, G/s | "
          "best-state per run | spread |")
    print("|---|---|---|---|---|---|---|")

    def fmt(xs: list[float | None]) -> tuple[str, float | None]:
        vals = [x for x in xs if x is not None]
        spread = max(vals) - min(vals) if len(vals) == len(xs) and vals else None
        return " / ".join("-" if x is None else f"{x:.2f}" for x in xs), spread

    worst: dict[str, tuple[float, str]] = {}
    top: tuple[float, str] | None = None
    for k, bound, level, new, old, state in rows:
        tn, sn = fmt(new)
        to, so = fmt(old)
        ts = " / ".join("-" if x is None else f"{x:.3g}" for x in state)
        print(f"| {k} | {bound} ({level}) | {tn} | {'-' if sn is None else f'{sn:.2f}'} | "
              f"{ts} | {to} | {'-' if so is None else f'{so:.2f}'} |")
        if bound == "memory":
            for rule, s in (("paired", sn), ("best-state", so)):
                if s is not None and s > worst.get(rule, (-1.0, ""))[0]:
                    worst[rule] = (s, k)
        for x in new:
            if x is not None and (top is None or x > top[0]):
                top = (x, k)
    for rule, (s, k) in worst.items():
        print(f"largest spread of a memory-bound case, {rule}: {s:.2f} ({k})")
    if top is not None:
        print(f"highest paired efficiency: {top[0]:.3f} ({top[1]})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
