"""The MPI link sweeps keep within their budget on a host that turns busy mid-sweep.

A simulated MPI (a clock that each operation advances) stands in for mpirun: an operation
costs 1 us until the host turns busy, then 20 ms (a scheduler slice per hop, as measured on
an oversubscribed 2-core host). A count planned by bytes alone (the planted error) runs past
the fleet's watchdog; the planned sweep stops in time and says so in the roof's evidence.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from roofbench.roofs.probes import links, mpi_links

FAST, SLOW = 1e-6, 20e-3


@dataclass
class FakeMPI:
    """The parts of mpi4py.MPI the sweeps use, over a simulated clock."""

    busy_after: int  # operations before the host turns busy
    now: float = 0.0
    ops: int = 0
    BYTE: str = "byte"
    FLOAT: str = "float"
    SUM: str = "sum"
    MAX: str = "max"

    def Wtime(self) -> float:  # noqa: N802 (mpi4py's name)
        return self.now

    def Get_processor_name(self) -> str:  # noqa: N802
        return "sim"

    def Get_library_version(self) -> str:  # noqa: N802
        return "simulated MPI"

    def op(self) -> None:
        self.ops += 1
        self.now += FAST if self.ops <= self.busy_after else SLOW


@dataclass
class FakeComm:
    mpi: FakeMPI
    size: int
    rank: int = 0
    collectives: list[str] = field(default_factory=list)

    def Get_size(self) -> int:  # noqa: N802
        return self.size

    def Get_rank(self) -> int:  # noqa: N802
        return self.rank

    def Barrier(self) -> None:  # noqa: N802
        self.mpi.op()

    def Allreduce(self, send: Any, recv: Any, op: str) -> None:  # noqa: N802
        # One rank's view: the "sum" is its own data (the sweep's stop mark included).
        src, dst = (send, recv) if isinstance(send, np.ndarray) else (send[0], recv[0])
        dst[:] = src
        self.mpi.op()

    def Send(self, buf: Any, dest: int, tag: int) -> None:  # noqa: N802
        self.mpi.op()

    def Recv(self, buf: Any, source: int, tag: int) -> None:  # noqa: N802
        self.mpi.op()

    def allgather(self, x: Any) -> list[Any]:
        return [x] * self.size

    def bcast(self, x: Any, root: int) -> Any:
        return x


SIZES = links.QUICK_MPI_SIZES  # 1 KiB .. 16 MiB: 2,000 operations per sample at 1 KiB
BUDGET = 30.0  # the fleet's --timeout, which its watchdog enforces per probe


def sweep(kind: str, busy_after: int, monkeypatch: pytest.MonkeyPatch
          ) -> tuple[links.LinkMeasurement, FakeMPI]:
    mpi = FakeMPI(busy_after=busy_after)
    monkeypatch.setattr(mpi_links, "_mpi", lambda: mpi)
    if kind == "allreduce":
        m = mpi_links.mpi_allreduce(FakeComm(mpi, size=3), SIZES, samples=3,
                                target_bytes=16 * links.MiB, budget_s=BUDGET)
    else:
        m = mpi_links.mpi_pingpong(FakeComm(mpi, size=3), SIZES, samples=3,
                               target_bytes=16 * links.MiB, budget_s=BUDGET)
    return m, mpi


@pytest.mark.parametrize("kind", ["allreduce", "p2p"])
def test_idle_host_sweeps_every_size_with_counts_by_bytes(kind, monkeypatch):
    m, mpi = sweep(kind, busy_after=10**9, monkeypatch=monkeypatch)
    assert [p.bytes for p in m.points] == list(SIZES)
    assert [p.iters for p in m.points] == [links.iters_for(s, 16 * links.MiB) for s in SIZES]
    assert all(len(p.samples_s) == 3 for p in m.points)
    assert "sweep_cut" not in m.info and mpi.now < 1.0


@pytest.mark.parametrize("kind", ["allreduce", "p2p"])
@pytest.mark.parametrize("busy_after", [0, 5, 60, 3000, 9000])  # from the start .. mid-sweep
def test_host_turning_busy_stops_the_sweep_inside_the_watchdog(kind, busy_after, monkeypatch):
    m, mpi = sweep(kind, busy_after, monkeypatch)
    assert mpi.now < BUDGET, f"the sweep took {mpi.now:.1f} s of simulated time"
    assert m.points, "at least the first size is measured"
    assert all(len(p.samples_s) >= 1 for p in m.points)
    roof = m.to_roof()
    assert roof is not None
    if len(m.points) < len(SIZES):  # cut: the roof says so
        assert "stopped after" in m.info["sweep_cut"] and "sweep_cut" in roof.evidence
    else:
        assert "sweep_cut" not in m.info


def test_counts_by_bytes_alone_outlive_the_watchdog(monkeypatch):
    """The planted error: without the plan the same busy host runs far past the budget."""
    monkeypatch.setattr(mpi_links, "iters_within",
                        lambda size, target, op_s, budget: links.iters_for(size, target))
    monkeypatch.setattr(mpi_links.SweepClock, "over", lambda self: False)
    monkeypatch.setattr(mpi_links.SweepClock, "deadline", lambda self, now: float("inf"))
    _, mpi = sweep("allreduce", busy_after=5, monkeypatch=monkeypatch)
    assert mpi.now > BUDGET


def test_iters_within():
    assert mpi_links.iters_within(1024, 16 << 20, 0.0, 0.2) == 2000  # no timing yet: by bytes
    assert mpi_links.iters_within(1024, 16 << 20, 1e-3, 0.2) == 200  # the budget cuts it
    assert mpi_links.iters_within(1 << 24, 16 << 20, 1.0, 0.2) == 1  # at least one operation
    clock = mpi_links.SweepClock(budget_s=30, sizes=5, samples=3)
    assert clock.per_sample_s == pytest.approx(0.2)
    assert mpi_links.SweepClock(budget_s=2, sizes=5, samples=3).per_sample_s == pytest.approx(0.025)
    clock.elapsed_s = 15.1
    assert clock.over() and "0 of 5 sizes: 15.1 s of a 30 s budget" in clock.cut_note()[
        "sweep_cut"]
