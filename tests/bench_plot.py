"""Benchmark, run by hand (not collected by pytest): `roofbench plot` of a 20,000-case file.

    .venv/bin/python tests/bench_plot.py [N]      # default N = 20000; target: under 30 s

The file is a real run's results.json (results/amd-epyc/...) whose valid cases are repeated
N times over, each copy at its own size so that no two coincide: a load for the plot only,
never a measurement (it is written to a temporary folder and removed).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "results" / "amd-epyc" / "20261201T205416Z" / "results.json"


def many_cases(n: int) -> dict:
    d = json.loads(SOURCE.read_text())
    ok = [c for c in d["cases"] if c["status"] == "ok"]
    cases = []
    for i in range(n):
        c = json.loads(json.dumps(ok[i % len(ok)]))
        c["size"] = [*c["size"][:-1], c["size"][-1] + i]  # its own key
        scale = 1.0 + (i % 97) / 200  # spread the copies over the plot a little
        c["median_s"] *= scale
        c["flop_per_s"] /= scale
        for t in [c.get("timing")] + [la.get("timing") for la in c.get("launches", [])]:
            if t:  # a 20,000-case file of the size (~50 MB), not ~250 MB of samples
                t["samples_s"] = t["samples_s"][:20]
        cases.append(c)
    d["cases"] = cases
    return d


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        run.mkdir()
        (run / "results.json").write_text(json.dumps(many_cases(n)))
        size_mb = (run / "results.json").stat().st_size / 1e6
        t0 = time.perf_counter()
        p = subprocess.run([sys.executable, "-m", "roofbench.bench.cli", "plot", str(run)],
                           cwd=ROOT, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if p.returncode != 0:
            print(p.stderr, file=sys.stderr)
            return 1
        print(f"plot of {n} cases ({size_mb:.0f} MB results.json): {wall:.1f} s wall "
              "(target: under 30 s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
