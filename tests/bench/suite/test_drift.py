"""The roof state tracked through a CPU run: a simulated bracket probe whose bandwidth changes
state mid-run, cases timed by a fixed clock (behaviour, not speed)."""

from __future__ import annotations

import pytest
from roofbench.bench.backends.cpu import CpuBackend
from roofbench.bench.present.roof_state import drift_band, roof_context_lines
from roofbench.bench.present.sections import roofs_section
from roofbench.bench.results import load_run
from roofbench.bench.suite import drift
from roofbench.bench.suite.session import RunOptions, RunSession

from roofbench.roof_records import Roof, RoofSet
from roofbench.timing import Timing

CASE_BW = 15e9  # every case streams its DRAM bytes at this rate


class FixedClockCpu(CpuBackend):
    """The CPU backend whose timer reports each case at CASE_BW (the kernel still runs and is
    validated)."""

    def prepare(self, case, inputs):
        self.case = case
        return super().prepare(case, inputs)

    def time(self, fn, cfg):
        fn()
        t = self.case.bytes()["dram"] / CASE_BW
        return Timing(samples=[t] * 5, warmup_runs=1, stopped_by="noise")


class StateProbe:
    """A bracket whose bandwidth is slow for its first ``slow`` calls, then fast."""

    name = "stream-add-nt"

    def __init__(self, slow: int, slow_bw: float = 10e9, fast_bw: float = 20e9) -> None:
        self.calls, self.slow, self.slow_bw, self.fast_bw = 0, slow, slow_bw, fast_bw
        self.closed = False

    def __call__(self):
        self.calls += 1
        bw = self.slow_bw if self.calls <= self.slow else self.fast_bw
        return bw, 0.95 * bw

    def close(self):
        self.closed = True


def slow_roofs(device: str) -> RoofSet:
    """Roofs measured in the slow state: DRAM at 10 GB/s, so each case (15 GB/s) is above."""
    return RoofSet(device=device, roofs=[
        Roof("dram stream-add-nt", "memory", 10e9, "measured", level="dram", median=9e9,
             evidence={"probe": "stream-add-nt", "array_elements": 1 << 20}),
        Roof("fp64 FMA peak", "compute", 1e12, "measured", precision="fp64"),
        Roof("fp32 FMA peak", "compute", 2e12, "measured", precision="fp32")])


class Quiet:
    def start(self, key):
        pass

    def say(self, line):
        pass


def run_with(probe: StateProbe | None, tmp_path):
    be = FixedClockCpu()
    opts = RunOptions(workloads=("vector_add",), dtypes=("fp64", "fp32"), size="65536",
                      quick=True, seed=1)
    s = RunSession(opts, be, tmp_path)
    s.set_roofs(slow_roofs(be.device_name()))
    if probe is not None:
        s.tracker = drift.RoofTracker(s.run.roofs, probe)
    s.run_cases(Quiet())
    return s


def test_a_case_is_never_above_its_roof_because_the_roof_was_measured_slow(tmp_path):
    probe = StateProbe(slow=2)  # the state changes after the first case
    s = run_with(probe, tmp_path)
    ok = [c for c in s.run.cases if c.outcome.status == "ok"]
    assert len(ok) >= 2 and probe.closed
    assert all(c.roofline.bytes_per_s["dram"] == pytest.approx(CASE_BW) for c in ok)
    # the run's DRAM roof is the best state seen, and every case is placed under it
    assert s.run.roofs.memory("dram").value == pytest.approx(20e9)
    assert s.run.roofs.memory("dram").name == f"dram stream-add-nt {drift.BRACKET_ROOF}"
    for c in ok:
        assert c.roofline.limiting_roof == s.run.roofs.memory("dram").name
        assert c.roofline.efficiency == pytest.approx(CASE_BW / 20e9)
        before, after = c.roofline.roof_states  # the brackets next to it
        assert before.at_s <= after.at_s and before.probe == "stream-add-nt"
    assert [st.bytes_per_s for st in ok[0].roofline.roof_states] == [10e9, 10e9]
    assert [st.bytes_per_s for st in ok[1].roofline.roof_states] == [10e9, 20e9]
    assert len(s.run.roofs.context.states) == len(ok) + 1  # one before, one after each
    (note,) = [n for n in s.run.notes if "moved by" in n]
    assert "100%" in note and "best state seen" in note
    # stored, read back, reported and drawn
    run = load_run(s.out)
    assert [st.bytes_per_s for st in run.cases[0].roofline.roof_states] == [10e9, 10e9]
    assert drift_band(run.roofs) == (10e9, 20e9)
    text = "\n".join(roof_context_lines(run.roofs))
    assert "moved by 100%" in text and "band on the DRAM diagonal" in text
    assert "a roof is the best sustained figure" in text and "median" in text
    assert roofs_section(run).blocks  # the section renders


class PairedFastCpu(FixedClockCpu):
    """Each case timed in a state the brackets never see: its samples are paired with the
    DRAM read probe, which ran at PAIRED_BW beside them."""

    def time(self, fn, cfg):
        t = super().time(fn, cfg)
        t.roof_probe, t.roof_rates = "memory:dram:read", [PAIRED_BW] * len(t.samples)
        return t


PAIRED_BW = 30e9


def test_a_case_timed_in_a_state_the_brackets_missed_raises_the_roof_to_its_pairs(tmp_path):
    """The brackets see 10 GB/s every time; the roof samples paired with the cases saw 30:
    the run's DRAM roof is raised to the pairs' median, so no case (15 GB/s) is drawn above
    a roof measured in the slow state. Planted: without the pairs the roof stays at 10."""
    be = PairedFastCpu()
    s = RunSession(RunOptions(workloads=("vector_add",), dtypes=("fp64",), size="65536",
                              quick=True, seed=1), be, tmp_path)
    s.set_roofs(slow_roofs(be.device_name()))
    s.tracker = drift.RoofTracker(s.run.roofs, StateProbe(slow=10**6))
    s.run_cases(Quiet())
    ok = [c for c in s.run.cases if c.outcome.status == "ok"]
    dram = s.run.roofs.memory("dram")
    assert ok and dram.value == pytest.approx(PAIRED_BW)
    assert dram.name == f"dram read {drift.BRACKET_ROOF}"
    assert dram.evidence["value_from"].startswith("median of the roof samples paired")
    for c in ok:
        assert c.roofline.limiting_roof == dram.name
        assert c.roofline.efficiency <= 1 and c.roofline.paired is not None
        assert c.roofline.paired.efficiency == pytest.approx(CASE_BW / PAIRED_BW)
    # the brackets' own record is unchanged: every state they measured was the slow one
    assert {st.bytes_per_s for st in s.run.roofs.context.states} == {10e9}
    s2 = run_with(StateProbe(slow=10**6), tmp_path / "unpaired")
    assert s2.run.roofs.memory("dram").value == pytest.approx(10e9)


def test_a_steady_run_keeps_its_roof_and_says_nothing_of_drift(tmp_path):
    probe = StateProbe(slow=10**6, slow_bw=9.5e9)  # never faster than the measured roof
    s = run_with(probe, tmp_path)
    ok = [c for c in s.run.cases if c.outcome.status == "ok"]
    assert s.run.roofs.memory("dram").name == "dram stream-add-nt"
    assert all(c.roofline.efficiency == pytest.approx(1.5) for c in ok)  # truly above: not hidden
    assert not [n for n in s.run.notes if "moved by" in n]
    assert drift_band(s.run.roofs) is None and all(len(c.roofline.roof_states) == 2 for c in ok)


def test_compute_bound_cases_are_not_bracketed():
    class FakeCase:
        def __init__(self, ai):
            self.ai = ai

        def intensity(self):
            return {"dram": self.ai}

        def precision_on(self, kind):
            return "fp64"

    rs = slow_roofs("x")  # ridge at 100 FLOP/B
    probe = StateProbe(slow=10)
    t = drift.RoofTracker(rs, probe, clock=iter(range(100)).__next__)
    t.before(FakeCase(1000.0))
    assert probe.calls == 0
    t.before(FakeCase(0.1))
    assert probe.calls == 1 and rs.context.states[0].at_s == 1
    assert drift.drift_notes(rs.context) == []


def test_no_tracker_for_another_devices_roofs_or_a_gpu():
    be = CpuBackend()
    assert drift.RoofTracker.for_run(be, slow_roofs("Another CPU")) is None
    assert drift.RoofTracker.for_run(be, None) is None
    rs = slow_roofs(be.device_name())
    rs.roofs[0] = Roof("dram", "memory", 1e10, "user", level="dram")
    assert drift.RoofTracker.for_run(be, rs) is None
