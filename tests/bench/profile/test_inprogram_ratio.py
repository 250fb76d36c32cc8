"""Σ ops over the program taken from the same run (bench/profile/inprogram.py), on a
simulated busy machine: a virtual clock that the program's ops and the Python between them
advance, one run of which (a random one: timed or eager) is stretched 3x, as a time slice
taken by another process stretches it. Each run's ratio must stay within 10% of the truth;
the old pairing of a timed run with the eager run after it does not. The mode's own entry
into Python for each call (untimed by its clock reads) is simulated too: measured in the
run on an empty op and taken out of the program's time, named as the profiler's overhead."""

from __future__ import annotations

import random

import pytest

torch = pytest.importorskip("torch")

from roofbench.bench.profile.inprogram import time_in_program, timed_mode  # noqa: E402
from roofbench.bench.profile.recording import record_program  # noqa: E402

from .test_caller_state import FAST  # noqa: E402

OP_S = (0.004, 0.002)  # two ops' seconds
PY_S = (0.001, 0.0005)  # the Python after each
READ_S = 1e-6  # a clock read: the timing mode's own cost
TRUTH = sum(OP_S) / (sum(OP_S) + sum(PY_S))


class VirtualClock:
    """Seconds advanced by what the program does; every advance of the stretched run of
    the program (its ``stretched``-th run) counts 3x."""

    def __init__(self, stretched: int) -> None:
        self.t, self.runs, self.stretched = 0.0, -1, stretched

    def advance(self, s: float) -> None:
        self.t += s * (3.0 if self.runs == self.stretched else 1.0)

    def __call__(self) -> float:
        now = self.t
        self.advance(READ_S)
        return now


CLOCK: list[VirtualClock] = []


@torch.library.custom_op("roofbench_test::work", mutates_args=())
def work(x: torch.Tensor, cost: float) -> torch.Tensor:
    CLOCK[-1].advance(cost)
    return x.clone()


@work.register_fake
def _(x: torch.Tensor, cost: float) -> torch.Tensor:
    return torch.empty_like(x)


def prog(a: torch.Tensor) -> torch.Tensor:
    clock = CLOCK[-1]
    clock.runs += 1
    for cost, py in zip(OP_S, PY_S, strict=True):
        a = work(a, cost)
        clock.advance(py)
    return a


@pytest.mark.parametrize("seed", range(6))
def test_the_ratio_of_each_run_holds_when_a_random_run_is_stretched(seed):
    # runs of the program: 0 the recording, 1 the warm-up, then timed and eager in turn
    stretched = random.Random(seed).randrange(1, 6)
    CLOCK.append(VirtualClock(stretched))
    x = torch.ones(4)
    rec, _ = record_program(prog, (x,), {}, clone=False)
    got = time_in_program(lambda: prog(x), rec, FAST, clock=CLOCK[-1])
    assert len(got.run_s) == 2
    for r in got.in_run_ratios():
        assert r == pytest.approx(TRUTH, rel=0.10)
    assert got.in_run_ratio() == pytest.approx(TRUTH, rel=0.10)
    # the mode's own seconds are taken out of the run, not left in the program's
    assert all(b > 0 for b in got.book_s)
    if stretched >= 2:  # a timed run or an eager one stretched: the pairing is off
        assert abs(got.paired_ratio() / TRUTH - 1) > 0.3


ENTRY_S = 0.002  # the mode's entry into Python and back, per call: untimed by its reads


@pytest.mark.parametrize("seed", range(4))
def test_the_modes_untimed_entry_is_measured_in_the_run_and_taken_out(seed, monkeypatch):
    stretched = random.Random(seed).randrange(1, 6)
    CLOCK.append(VirtualClock(stretched))
    mode = timed_mode()
    real = mode.__torch_dispatch__

    def entered(self, func, types, args=(), kwargs=None):
        CLOCK[-1].advance(ENTRY_S / 2)  # into Python, before the mode's first clock read
        out = real(self, func, types, args, kwargs)
        CLOCK[-1].advance(ENTRY_S / 2)  # and back, after its last
        return out

    monkeypatch.setattr(mode, "__torch_dispatch__", entered)
    x = torch.ones(4)
    rec, _ = record_program(prog, (x,), {}, clone=False)
    got = time_in_program(lambda: prog(x), rec, FAST, clock=CLOCK[-1])
    # left in the program's time, the entries would read 0.52 for 0.8
    untaken = [o / (w - b) for o, w, b in zip(got.ops_s, got.run_s, got.book_s, strict=True)]
    assert all(r < 0.7 * TRUTH for r in untaken)
    for r in got.in_run_ratios():
        assert r == pytest.approx(TRUTH, rel=0.10)
    # measured per call in each run (3x in a stretched one), named per run: x its 2 calls
    assert all(ENTRY_S * 0.95 <= c <= 3 * ENTRY_S * 1.05 for c in got.overhead_call_s)
    assert got.overhead_s == [c * 2 for c in got.overhead_call_s]


def test_a_program_with_no_untimed_entry_loses_nothing_to_the_measure():
    """Where the mode adds nothing untimed, the measure finds (next to) nothing: the ratio
    is not pushed above the truth by taking out what was not there."""
    CLOCK.append(VirtualClock(stretched=-1))
    x = torch.ones(4)
    rec, _ = record_program(prog, (x,), {}, clone=False)
    got = time_in_program(lambda: prog(x), rec, FAST, clock=CLOCK[-1])
    assert all(c <= 4 * READ_S for c in got.overhead_call_s)
    assert got.in_run_ratio() == pytest.approx(TRUTH, rel=0.01)
