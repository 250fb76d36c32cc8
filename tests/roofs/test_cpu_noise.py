"""The CPU timing-noise counters and the cause they name (no timing is asserted)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from roofbench.roofs.probes.cpu_noise import (
    CpuTimes,
    NoiseProbe,
    NoiseReport,
    huge_page_fraction,
    noise_cause,
)

STAT = "cpu  {u} 0 {s} {i} 0 0 0 {st} 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n"


def _report(**kw) -> NoiseReport:
    base = dict(wall_s=2.0, cores=2, other_busy=0.0, steal=0.0, minor_faults=0,
                major_faults=0, involuntary_switches=0, load_avg_1m=0.1)
    base.update(kw)
    return NoiseReport(**base)


def test_proc_stat_first_line() -> None:
    t = CpuTimes.parse(STAT.format(u=100, s=20, i=500, st=7))
    assert (t.busy, t.idle, t.steal) == (120, 500, 7)
    assert CpuTimes.parse("intr 1 2 3\n") == CpuTimes()


def test_quiet_machine_names_no_outside_cause() -> None:
    assert noise_cause(_report()).startswith("no outside cause")


def test_each_cause_is_named() -> None:
    assert "other processes used 60% of the 2 cores" in noise_cause(
        _report(other_busy=0.6, load_avg_1m=5.2, involuntary_switches=300))
    assert "stole 12.0% of the CPU time (480 ms over the 2 cores)" in noise_cause(
        _report(steal=0.12))
    assert "stole" not in noise_cause(_report(steal=0.005))  # under 1%: not named
    assert "page faults" in noise_cause(_report(minor_faults=5000))
    assert "page faults" in noise_cause(_report(major_faults=1))
    both = noise_cause(_report(other_busy=0.5, minor_faults=5000))
    assert "page faults" in both and "other processes" in both


def test_probe_reads_the_counters(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    stat.write_text(STAT.format(u=0, s=0, i=0, st=0))
    probe = NoiseProbe(stat)
    sum(range(10000))
    r = probe.report()
    assert r.wall_s > 0 and r.cores >= 1
    assert 0.0 <= r.other_busy <= 1.0 and r.steal == 0.0
    assert r.minor_faults >= 0 and r.major_faults >= 0
    assert NoiseProbe(tmp_path / "missing").report().steal == 0.0


@pytest.mark.parametrize("children, expected", [(False, (3, 1, 4)), (True, (23, 3, 10))])
def test_probe_counts_the_children_only_when_asked(tmp_path: Path, monkeypatch, children,
                                                   expected) -> None:
    # getrusage's totals before and after, this process's and its children's: the report's
    # counts are the differences of the sums of those it was asked for.
    from roofbench.roofs.probes import cpu_noise

    def usage(t: float, faults: int, major: int, switches: int) -> SimpleNamespace:
        return SimpleNamespace(ru_utime=t, ru_stime=t / 2, ru_minflt=faults, ru_majflt=major,
                               ru_nivcsw=switches)

    calls = {"self": iter([usage(1.0, 10, 1, 100), usage(1.5, 13, 2, 104)]),
             "children": iter([usage(2.0, 5, 0, 7), usage(3.0, 25, 2, 13)])}
    monkeypatch.setattr(cpu_noise, "resource", SimpleNamespace(
        RUSAGE_SELF="self", RUSAGE_CHILDREN="children", getrusage=lambda who: next(calls[who])))
    stat = tmp_path / "stat"
    stat.write_text(STAT.format(u=0, s=0, i=0, st=0))
    r = NoiseProbe(stat, children=children).report()
    assert (r.minor_faults, r.major_faults, r.involuntary_switches) == expected
    # the children's usage is read only where the timed work runs in children
    assert len(list(calls["children"])) == (0 if children else 2)


SMAPS = """7f0000000000-7f0040000000 rw-p 00000000 00:00 0
Size:            1048576 kB
Rss:             1048576 kB
AnonHugePages:    786432 kB
7f0050000000-7f0050100000 rw-p 00000000 00:00 0
Rss:                1024 kB
AnonHugePages:         0 kB
7f0060000000-7f0060200000 r-xp 00000000 08:01 1234 /usr/lib/libfoo.so
Rss:                2048 kB
AnonHugePages:         0 kB
"""


def test_huge_page_fraction_of_the_buffers_mappings() -> None:
    first = (0x7F0000001000, 0x7F0000002000)
    second = (0x7F0050000010, 0x7F0050000020)
    assert huge_page_fraction([first], SMAPS) == 0.75
    assert huge_page_fraction([second], SMAPS) == 0.0
    both = huge_page_fraction([first, second], SMAPS)
    assert both == 786432 / (1048576 + 1024)
    assert huge_page_fraction([(0x10, 0x20)], SMAPS) is None  # no mapping holds it


def test_huge_page_fraction_of_a_real_array() -> None:
    import numpy as np

    a = np.ones(1 << 20)
    frac = huge_page_fraction([(a.ctypes.data, a.ctypes.data + a.nbytes)])
    assert frac is None or 0.0 <= frac <= 1.0
