"""Noise named in a profile as in the suite (bench/profile/inprogram.py ``marked``,
place.py ``mark_ranks``): each op's and the program's in-program timing flagged noisy with
its cause in the same ``Timing.flags`` and ``outside_load`` a suite case carries; a rank
whose interval overlaps the next one's marked not significant; a profile taken while other
processes held the cores marked under load. The machine's counters are faked."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from roofbench.bench.present.amdahl import Share  # noqa: E402
from roofbench.bench.profile.inprogram import InProgram  # noqa: E402
from roofbench.bench.profile.place import mark_ranks  # noqa: E402
from roofbench.roofs.probes import cpu_noise  # noqa: E402

import roofbench  # noqa: E402
from roofbench.timing import Timing  # noqa: E402

from .test_caller_state import FAST, ROOFS  # noqa: E402

BUSY = cpu_noise.NoiseReport(wall_s=1.0, cores=2, other_busy=0.6, steal=0.0, minor_faults=0,
                             major_faults=0, involuntary_switches=120, load_avg_1m=6.5,
                             waited=0.4)
QUIET = cpu_noise.NoiseReport(wall_s=1.0, cores=2, other_busy=0.0, steal=0.0,
                              minor_faults=0, major_faults=0, involuntary_switches=0,
                              load_avg_1m=0.1, waited=0.0)


def test_a_spread_timing_is_flagged_noisy_with_the_counters_cause():
    got = InProgram(noise=BUSY).marked(Timing([1.0, 1.5, 3.0], 1, "runs"))
    assert got.flags[0].startswith("noisy: cv")
    assert got.flags[1].startswith("noise cause: other processes used 60%")
    assert "preempted 120 times" in got.outside_load
    steady = InProgram(noise=QUIET).marked(Timing([1.0, 1.001, 1.0], 1, "runs"))
    assert steady.flags == [] and steady.outside_load == ""


def test_a_paired_timing_names_the_roof_that_moved():
    t = Timing([1.0, 2.0, 3.0], 1, "runs", roof_probe="memory:dram:stream-add-nt",
               roof_rates=[30e9, 15e9, 10e9])
    got = InProgram(noise=QUIET).marked(t)
    assert any(f.startswith("noise cause: the machine's memory bandwidth moved")
               for f in got.flags)


def test_under_load_only_when_others_held_the_cores():
    assert "other processes used 60%" in InProgram(noise=BUSY).under_load()
    assert InProgram(noise=QUIET).under_load() == ""
    assert InProgram().under_load() == ""  # a GPU: no counters, nothing claimed


class _Case:
    def __init__(self) -> None:
        self.evidence = type("E", (), {"extra": {}})()


class _Op:
    def __init__(self, index: int) -> None:
        self.index = index


class _Place:
    def __init__(self, index: int, total: float, roof: float) -> None:
        self.op, self.case, self.total_s = _Op(index), _Case(), total
        self.share = Share(f"op{index}", total, total / 10, roof)


def test_an_op_that_overlaps_the_next_is_not_a_significant_first():
    a, b, c = _Place(0, 5.0, 1.0), _Place(1, 4.0, 1.0), _Place(2, 1.0, 0.5)
    mark_ranks([a, b, c], {0: [3.0, 5.0, 7.0], 1: [3.5, 4.0, 4.5], 2: [0.9, 1.0, 1.1]})
    ea, eb, ec = (p.case.evidence.extra for p in (a, b, c))
    assert ea["rank"] == 1 and ea["rank_tie_with"] == [2] and not ea["rank_significant"]
    assert eb["rank_tie_with"] == [1] and ec["rank_significant"]
    assert ea["rank_interval_s"] == [2.0, 6.0]  # seconds beyond its roof time, per run


def test_a_profile_under_load_is_marked_and_its_timings_carry_the_load(monkeypatch, tmp_path):
    class Busy:
        def report(self):
            return BUSY

    monkeypatch.setattr(cpu_noise, "NoiseProbe", Busy)
    w = torch.randn(32, 32)
    with torch.no_grad():
        prof = roofbench.profile(lambda a: torch.tanh(a @ w), torch.randn(4, 32),
                                 roofs=ROOFS, timer=FAST)
    assert "other processes used 60%" in prof.extra["under_load"]
    assert prof.program.evidence.extra["under_load"] == prof.extra["under_load"]
    assert any(n.startswith("taken under load: ") for n in prof.notes)
    assert all("preempted 120 times" in p.case.measurement.timing.outside_load
               for p in prof.ops if p.case.measurement.timing is not None)
    assert all("rank_significant" in p.case.evidence.extra for p in prof.ops if p.share)
    prof.write(tmp_path / "p")
    run = json.loads((tmp_path / "p" / "results.json").read_text())
    assert any(n.startswith("taken under load") for n in run["notes"])
    prog = next(c for c in run["cases"] if c["identity"]["workload"] == "program")
    assert "other processes used 60%" in prog["evidence"]["extra"]["under_load"]
