"""scripts/pair_spread.py: the per-case spread of efficiency over runs, paired and by the best
state, on simulated runs whose memory flipped, and on real stored runs without pairs."""

from __future__ import annotations

import json
import sys

from testpaths import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "tests" / "bench" / "measure"))
import pair_spread  # noqa: E402
from test_pairs import FlippingMachine, dram_roofs, run_of, simulated_timing  # noqa: E402


def test_three_flipping_runs_spread_little_paired_and_much_by_the_best_state(tmp_path, capsys):
    paths = []
    for seed in (10, 11, 12):
        m = FlippingMachine(seed, p_up=0.3 if seed != 11 else 0.9, p_down=0.6)
        run = run_of(simulated_timing(m, 0.9))
        run.roofs = dram_roofs()
        p = tmp_path / f"r{seed}.json"
        p.write_text(json.dumps(run.to_dict()))
        paths.append(str(p))
    assert pair_spread.main(paths) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if "paired:" in x)
    assert float(line.split(": ")[1].split()[0]) <= 0.08
    line = next(x for x in out.splitlines() if "best-state:" in x)
    assert float(line.split(": ")[1].split()[0]) > 0.08
    assert "highest paired efficiency: 0.9" in out
    # the roof's median while each run's pairs were taken: one of the two states, GB/s
    row = next(x for x in out.splitlines() if x.startswith("| vector_add"))
    states = [float(v) for v in row.split(" | ")[4].split(" / ")]
    assert len(states) == 3
    assert all(min(abs(v - 45), abs(v - 95)) < 3 for v in states), states


def test_runs_without_pairs_show_the_old_rule_only(capsys):
    # runs from before the pairs (2026-12-04 on, the Xeon's runs carry them)
    xeon = ROOT / "results" / "intel-r-xeon-r-processor"
    real = sorted(xeon.glob("2026120[1-3]*/results.json"))
    assert len(real) >= 2
    assert pair_spread.main([str(p) for p in real[-2:]]) == 0
    out = capsys.readouterr().out
    assert "| - / - |" in out and "highest paired" not in out
