"""How far each case's efficiency moves between runs, by the paired rule and the old one.

    python scripts/pair_spread.py RUN_DIR_OR_RESULTS_JSON [...]

For every valid case found in all the runs: its efficiency in each run by the roof pairs (the
median of its samples' ratios to the roof sampled beside each, ``roofline.paired``) and by the
best-state rule (its median rate over the roof's best sustained figure, ``paired.of_ceiling``,
or the efficiency itself for a run without pairs), and the spread of each (max - min over the
runs), with the roof's median while each run's pairs were taken (GB/s or GFLOP/s): a case
whose paired efficiency moves with that state does not follow its roof all the way. A
Markdown table on stdout, then the largest spreads and the highest paired point. Exit 0
(the figures are the output; nothing here is a test), 2 for a file it cannot read.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from roofbench.bench.errors import UserError  # noqa: E402
from roofbench.bench.results import load_run  # noqa: E402

from roofbench.roofline import (  # noqa: E402
    STATE_FLOOR,
    STATE_STEP,
    pair_ratios,
    state_split,
)


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


def states(c) -> list[tuple[float, float]]:
    """(roof median G/s, efficiency) of each state of the roof the case's pairs met: two where
    they split (``roofline.state_split``, from the stored samples, so older files too), else
    the run's one."""
    p, t = c.roofline.paired, c.measurement.timing
    if p is None or t is None or p.of_ceiling is None:
        return []
    split = state_split(t.roof_rates, pair_ratios(t, p.of_ceiling, p.ceiling),
                        STATE_FLOOR * p.ceiling)
    if split:
        return [(x.roof_median / 1e9, x.efficiency) for x in split]
    return [(p.roof_median / 1e9, p.efficiency)]


def within_state(per_run: list[list[tuple[float, float]]]) -> float | None:
    """The largest spread of the efficiency among the runs' figures of one roof state (states
    apart by ``STATE_STEP`` are different ones); None: no state met in two runs."""
    flat = sorted(x for run in per_run for x in run)
    groups: list[list[float]] = []
    last = None
    for roof, eff in flat:
        if last is None or roof / last >= STATE_STEP:
            groups.append([])
        groups[-1].append(eff)
        last = roof
    spreads = [max(g) - min(g) for g in groups if len(g) > 1]
    return max(spreads) if spreads else None


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="pair_spread.py", description=__doc__.split("\n\n")[0],
                                 epilog=__doc__.split("\n\n", 2)[2])
    ap.add_argument("runs", nargs="+", metavar="RUN_DIR_OR_RESULTS_JSON")
    args = ap.parse_args(argv)
    try:
        runs = [load_run(Path(a)) for a in args.runs]
    except UserError as e:
        print(f"pair_spread.py: {e}", file=sys.stderr)
        return 2
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
        split = [states(c) for c in found if c is not None]
        rows.append((k, bound, level, new, old, state, split))
    print("| case | bound (level) | paired per run | spread | roof while paired, G/s | "
          "by roof state per run (efficiency@G/s) | spread within a state | "
          "best-state per run | spread |")
    print("|---|---|---|---|---|---|---|---|---|")

    def fmt(xs: list[float | None]) -> tuple[str, float | None]:
        vals = [x for x in xs if x is not None]
        spread = max(vals) - min(vals) if len(vals) == len(xs) and vals else None
        return " / ".join("-" if x is None else f"{x:.2f}" for x in xs), spread

    worst: dict[str, tuple[float, str]] = {}
    top: tuple[float, str] | None = None
    for k, bound, level, new, old, state, split in rows:
        tn, sn = fmt(new)
        to, so = fmt(old)
        ts = " / ".join("-" if x is None else f"{x:.3g}" for x in state)
        tb = " / ".join(", ".join(f"{e:.2f}@{r:.3g}" for r, e in run) or "-" for run in split)
        sw = within_state(split)
        print(f"| {k} | {bound} ({level}) | {tn} | {'-' if sn is None else f'{sn:.2f}'} | "
              f"{ts} | {tb} | {'-' if sw is None else f'{sw:.2f}'} | {to} | "
              f"{'-' if so is None else f'{so:.2f}'} |")
        if bound == "memory":
            for rule, s in (("paired", sn), ("within a roof state", sw), ("best-state", so)):
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
