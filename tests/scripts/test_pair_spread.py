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


def spread_of(tmp_path, timings) -> None:
    """pair_spread over one stored run of each timing (one case, the simulated DRAM roofs)."""
    paths = []
    for i, t in enumerate(timings):
        run = run_of(t)
        run.roofs = dram_roofs()
        p = tmp_path / f"r{i}.json"
        p.write_text(json.dumps(run.to_dict()))
        paths.append(str(p))
    assert pair_spread.main(paths) == 0


def test_three_flipping_runs_spread_little_paired_and_much_by_the_best_state(tmp_path, capsys):
    spread_of(tmp_path, [simulated_timing(FlippingMachine(seed, p_up=0.3 if seed != 11 else 0.9,
                                                          p_down=0.6), 0.9)
                         for seed in (10, 11, 12)])
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


def test_a_case_that_does_not_follow_its_roof_is_compared_state_by_state(tmp_path, capsys):
    """0.9 of the slow memory, 0.6 of the fast one: a run held slow, one held fast and one
    flipping read 0.9, 0.6 and between, a spread of 0.3 paired; state by state the runs
    agree (0.9 at ~45 GB/s, 0.6 at ~95), and the flipping run shows both states."""
    from roofbench.timing import RoofPair, TimerConfig, sample_loop

    timings = []
    for seed, (p_up, p_down) in {20: (0.0, 1.0), 21: (1.0, 0.0), 22: (0.05, 0.1)}.items():
        m = FlippingMachine(seed, p_up=p_up, p_down=p_down)
        if p_down == 0.0:
            m.fast = True  # held in the fast state from the start
        timings.append(sample_loop(lambda m=m: m.kernel(0.6 if m.fast else 0.9),
                                   TimerConfig(budget_s=2.0), clock=lambda m=m: m.now,
                                   pair=RoofPair("memory:dram:stream-add-nt", m.probe)))
    spread_of(tmp_path, timings)
    out = capsys.readouterr().out
    paired = next(x for x in out.splitlines() if "paired:" in x)
    assert float(paired.split(": ")[1].split()[0]) > 0.25
    within = next(x for x in out.splitlines() if "within a roof state:" in x)
    assert float(within.split(": ")[1].split()[0]) <= 0.05
    row = next(x for x in out.splitlines() if x.startswith("| vector_add"))
    by_state = row.split(" | ")[5].split(" / ")
    assert by_state[0].startswith("0.9") and by_state[1].startswith("0.6")
    assert len(by_state[2].split(", ")) == 2  # the flipping run met both states


def test_help_and_a_path_without_results_are_one_clear_answer(tmp_path, capsys):
    import pytest

    with pytest.raises(SystemExit) as e:
        pair_spread.main(["--help"])
    assert e.value.code == 0 and "RUN_DIR_OR_RESULTS_JSON" in capsys.readouterr().out
    assert pair_spread.main([str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("pair_spread.py: no results at") and err.count("\n") == 1
