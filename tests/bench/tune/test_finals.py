"""The finals (bench/tune/finals.py) on the simulated machine (tests/bench/tune/conftest.py):
a machine that drifts between two near-equal configurations' timings misleads the loop and
not the finals; a tie keeps the loop's best; the finals' cost is bounded; a finalist (or the
champion) that fails validation in the finals; the record, tune.md and the CLI say it all."""

from __future__ import annotations

import json

import pytest
from cli_run import run_cli
from roofbench.bench.gate.ab_session import alternate
from roofbench.bench.tune import finals as fin
from roofbench.bench.tune.output import render
from roofbench.bench.tune.search import TuneError, tune

# Two configurations 1.25% apart in truth (B=2 the faster); the machine runs 2% faster while
# only the first has been built (a drift the DRAM roof's samples do not see: the kernel's own
# speed), so the loop times B=1 fast and ranks it first, its interval tied with B=2's.
TRUE = {1: 0.80, 2: 0.81}


def kw(s, **extra):
    """The simulation's keywords with the finals' pairing loop (the CLI gives it)."""
    return s.kw(alternate=alternate, **extra)


def drifting(s, table=TRUE, amp=0.02, **builder):
    m = s.machine
    return s.builder(lambda c: table[c["B"]] * (1 + amp if len(m.built) == 1 else 1.0),
                     **builder)


def test_the_finals_choose_the_faster_of_two_the_drift_misranked(sim):
    s = sim(seed=0, jitter=0.01)
    rec = tune(drifting(s), {"B": [1, 2]}, s.a, s.out, **kw(s, target=0.99))
    top, second = rec.ranking
    assert rec.trial(top.index).config == {"B": 1}, "the loop was not misled: no test"
    assert second.ties_best
    f = rec.finals
    assert f is not None and f.opener == top.index and f.finalists == (second.index,)
    (m,) = f.meetings
    assert (m.champion_label, m.rival_label, m.outcome) == ("B=1", "B=2", "rival wins")
    assert m.verdict == "faster" and m.hi is not None and m.hi < 1.0
    assert m.ratio == pytest.approx(0.80 / 0.81, abs=0.006)  # the truth, not the drift
    assert m.statistic == "raw ABBA pairs" and m.pairs >= 24
    assert rec.config == {"B": 2} and f.chosen == second.index
    doc = rec.to_dict()
    assert doc["version"] == 2 and doc["best"] == {"B": 2}
    assert doc["finals"]["meetings"][0]["outcome"] == "rival wins"
    assert doc["finals"]["meetings"][0]["interval"] == [m.lo, m.hi]
    md = render(rec)
    assert "| B=2 **(chosen)** |" in md and "B=2 chosen over the loop's best B=1" in md
    assert "| B=1 | B=2 | " in md and "| rival wins |" in md
    # the same tune without finals keeps the loop's (wrong) choice
    s = sim(seed=0, jitter=0.01)
    rec = tune(drifting(s), {"B": [1, 2]}, s.a, s.out, **kw(s, target=0.99, finalists=0))
    assert rec.finals is None and rec.config == {"B": 1}


def test_the_exhaustive_holds_the_same_finals(sim):
    s = sim(seed=4, jitter=0.01)
    rec = tune(drifting(s), {"B": [1, 2]}, s.a, s.out, **kw(s, target=0.99, exhaustive=True))
    assert rec.trial(rec.ranking[0].index).config == {"B": 1} and rec.ranking[1].ties_best
    assert rec.finals is not None and rec.config == {"B": 2}


def test_a_drift_beyond_the_intervals_escapes_the_finals(sim):
    """What the finals cannot mend: the drift moved B=1's interval wholly below B=2's (seed
    0, exhaustive: no screen), so they do not tie, no finals are held and B=1 stays."""
    s = sim(seed=0, jitter=0.01)
    rec = tune(drifting(s), {"B": [1, 2]}, s.a, s.out, **kw(s, target=0.99, exhaustive=True))
    assert not rec.ranking[1].ties_best
    assert rec.finals is None and rec.config == {"B": 1}


def test_a_tie_stays_the_loops_best(sim):
    """Two configurations alike in truth, on a steady machine: the finals find neither
    faster (their interval straddles 1) and the loop's best is chosen, said as a tie."""
    s = sim(seed=3, jitter=0.01)
    rec = tune(s.builder(lambda c: 0.8), {"B": [1, 2]}, s.a, s.out, **kw(s, target=0.99))
    f = rec.finals
    assert f is not None
    (m,) = f.meetings
    assert m.outcome == "champion stays" and m.verdict not in ("faster", "slower")
    assert m.lo is not None and m.hi is not None and m.lo <= 1.0 <= m.hi
    assert rec.best is not None and rec.best.index == rec.ranking[0].index == f.chosen
    assert "stays: no tied configuration was found faster" in f.verdict


def test_the_finals_are_bounded_in_finalists_and_seconds(sim, consts):
    """Six alike and tied, each sample 50 virtual ms (the cap binds before the gate's 24
    pairs): 2 finalists met, 3 named as left out, each meeting within its cap."""
    s = sim(seed=1, jitter=0.01)
    slow = consts.NBYTES * 40  # 40 ms at the roof: 50 ms at 0.8 of it
    rec = tune(s.builder(lambda c: 0.8, lambda c: slow), {"B": [1, 2, 3, 4, 5, 6]}, s.a,
               s.out, **kw(s, bytes={"dram": slow}, target=0.99, drop_at=None, finalists=2))
    f = rec.finals
    assert f is not None and len(f.meetings) == 2 and len(f.finalists) == 2
    assert len(f.left_out) == 3 and "3 more tied configuration(s) past the 2 met" in f.verdict
    sample = slow / (0.8 * consts.ROOF_BW)
    for m in f.meetings:
        # the warm-up and the pairs within the cap, a block (4 samples) past it at most,
        # and the two validations (a run each) and the warm-up's last runs
        assert m.wall_s <= 2 * (fin.CAP_S + fin.WARMUP_S) + 8 * sample * 1.1
        assert m.pairs <= fin.CAP_S / sample + 2 < 24  # the cap, not the gate's 24 pairs
    assert f.wall_s == pytest.approx(sum(m.wall_s for m in f.meetings), rel=0.01)
    assert rec.wall_s >= f.wall_s  # counted in the tune's wall


def test_no_finals_once_the_budget_is_spent(sim):
    s = sim(seed=0, jitter=0.01)
    rec = tune(drifting(s), {"B": [1, 2]}, s.a, s.out, **kw(s, target=0.99, budget_s=0.01))
    assert rec.stop == "budget" and rec.finals is None
    assert "Finals: not held: the budget was spent." in render(rec)


def test_no_finals_without_a_pairing_loop_and_the_record_says_so(sim):
    s = sim(seed=0, jitter=0.01)
    rec = tune(drifting(s), {"B": [1, 2]}, s.a, s.out, **s.kw(target=0.99))
    assert rec.finals is None and rec.config == {"B": 1}
    assert rec.to_dict()["finals_note"].startswith("not held: no pairing loop given")
    s = sim(seed=0, jitter=0.01)
    rec = tune(drifting(s), {"B": [1, 2]}, s.a, s.out,
               **kw(s, target=0.99, finalists=0))
    assert rec.finals is None and rec.finals_note == "not held: finalists=0"


@pytest.mark.parametrize("wrong,outcome,verdict,chosen", [
    (2, "rival invalid", "invalid in B", 1),  # B=2 right in the loop, wrong built again
    (1, "champion invalid", "invalid in A", 2),
])
def test_a_finalist_failing_validation_loses(sim, wrong, outcome, verdict, chosen):
    """The configuration that computes wrong when built again for the finals loses them."""
    s = sim(seed=0, jitter=0.01)
    built = s.machine.built
    b = drifting(s, wrong=lambda c: c["B"] == wrong and built.count({"B": wrong}) > 1)
    rec = tune(b, {"B": [1, 2]}, s.a, s.out, **kw(s, target=0.99))
    (m,) = rec.finals.meetings
    assert (m.outcome, m.verdict) == (outcome, verdict)
    assert rec.config == {"B": chosen}
    if wrong == 2:
        assert "validation failed" in m.why and m.ratio is None
        assert "rival invalid: " in render(rec)


def test_both_failing_validation_in_the_finals_is_said(sim):
    s = sim(seed=0, jitter=0.01)
    built = s.machine.built
    b = drifting(s, wrong=lambda c: built.count(dict(c)) > 1)
    rec = tune(b, {"B": [1, 2]}, s.a, s.out, **kw(s, target=0.99))
    (m,) = rec.finals.meetings
    assert m.outcome == "both invalid" and m.why.startswith("champion: validation failed")
    assert "; rival: validation failed" in m.why and rec.config == {"B": 1}


@pytest.mark.parametrize("bad", [-1, 1.5, True, "3"])
def test_finalists_must_be_a_count(sim, bad):
    s = sim()
    with pytest.raises(TuneError, match="finalists= must be a whole number"):
        tune(s.builder(lambda c: 0.8), {"B": [1]}, s.a, s.out, **s.kw(finalists=bad))


SCRIPT = '''
import numpy as np
import tune_simulated as ts

m = ts.Machine(0, 0.01)
a = np.arange(ts.N, dtype=np.float32)
s = ts.Sim(m, ts.SimClock(m), a, np.zeros_like(a))
EFF = {1: 0.80, 2: 0.81}
build = s.builder(lambda c: EFF[c["B"]] * (1.02 if len(m.built) == 1 else 1.0))
TUNE = dict(build=build, space={"B": [1, 2]}, args=(a, s.out), **s.kw(target=0.99))
'''


def test_the_cli_says_the_finals_and_takes_finalists(tmp_path, capsys):
    (tmp_path / "k.py").write_text(SCRIPT)
    rc, text, err = run_cli(["tune", str(tmp_path / "k.py"), "--out", str(tmp_path / "t")],
                            capsys)
    assert rc == 0, err
    assert "final: B=2 against B=1: time 0." in text and "rival wins" in text
    assert "chosen: B=2" in text
    doc = json.loads((tmp_path / "t" / "tune.json").read_text())
    assert doc["best"] == {"B": 2} and doc["finals"]["chosen"] == 1
    run = json.loads((tmp_path / "t" / "results.json").read_text())
    note = next(n for n in run["notes"] if "finals:" in n)
    assert "B=2 chosen over the loop's best B=1: B=2 against B=1 0." in note
    assert note.endswith(": rival wins")
    chosen = [c["evidence"]["extra"]["tune"]["config"] for c in run["cases"]
              if c["evidence"]["extra"]["tune"]["chosen"]]
    assert chosen == [{"B": 2}]
    rc, text, err = run_cli(["tune", str(tmp_path / "k.py"), "--out", str(tmp_path / "u"),
                             "--finalists", "0"], capsys)
    assert rc == 0 and "chosen: B=1" in text and "final:" not in text
    rc, _, err = run_cli(["tune", str(tmp_path / "k.py"), "--finalists", "-1"], capsys)
    assert rc == 2 and "whole number >= 0" in err


def test_an_interrupt_in_the_finals_keeps_the_meetings_that_ended(sim, tmp_path):
    """Ctrl-C as the second meeting builds its sides (the 6th build: 3 in the loop, 2 in the
    first meeting): tune.json keeps the first meeting, the loop's best chosen, and the
    interrupt goes on."""
    s = sim(seed=1, jitter=0.01)
    inner = s.builder(lambda c: 0.8)
    built = s.machine.built

    def build(**cfg):
        if len(built) == 5:
            raise KeyboardInterrupt
        return inner(**cfg)

    with pytest.raises(KeyboardInterrupt):
        tune(build, {"B": [1, 2, 3]}, s.a, s.out,
             **kw(s, target=0.99, drop_at=None, out=tmp_path / "t"))
    doc = json.loads((tmp_path / "t" / "tune.json").read_text())
    assert doc["stop"] == "interrupted"
    assert all(r["ties_best"] for r in doc["ranking"]), "not all tied: no second meeting"
    f = doc["finals"]
    assert len(f["meetings"]) == 1 and f["verdict"].startswith("interrupted after 1 meeting")
    assert f["chosen"] == doc["ranking"][0]["index"] and doc["best"] == \
        next(t["config"] for t in doc["trials"] if t["index"] == f["chosen"])
