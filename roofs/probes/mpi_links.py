"""MPI link roofs: ping-pong between two ranks and all-reduce over all, each a size sweep.

Timed with ``MPI.Wtime``. A sweep is bounded in time as well as in bytes (``SweepClock``): on
an oversubscribed or busy host one operation can cost several scheduler slices (20 ms measured
for a 3-rank all-reduce on 2 busy cores, against 1-10 us idle), and a count chosen by bytes
alone then runs past the fleet's watchdog, which aborts the job. Ranks must agree on every
count or they deadlock, so every decision comes from data that all ranks hold:

- the operations per sample are planned from the slowest rank's pilot and warm-up times,
  which the sweep shares with one small all-reduce (a broadcast from the timing rank for p2p);
- a sample that outlives its deadline is stopped by the operation itself: the stopping rank
  marks its send buffer (all-reduce: one element raised past any sum of real values; p2p: the
  first byte, never zero otherwise, set to zero) and every rank sees the mark in the same
  operation's result, so all stop after the same operation;
- past half the budget the sweep ends; the sizes it measured stay, the cut is in the roof's
  evidence (``sweep_cut``).

The stop check is a clock read and one element read per operation: well under a microsecond,
within the run-to-run spread of the 1 KiB latency (3-5 us over shared memory, 2 ranks) and
nothing at the sizes that set the roof.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from roofbench.roofs.probes.links import (
    DEFAULT_MPI_SIZES,
    LinkMeasurement,
    MiB,
    SizePoint,
    bus_factor,
    iters_for,
)

STOP_MARK = 1e6  # all-reduce: far above any sum of the sweep's values (each in [0.5, 1.5))
OVERRUN = 4.0  # a sample may take this many times its plan before it is stopped


def iters_within(size: int, target_bytes: int, op_s: float, sample_budget_s: float) -> int:
    """``iters_for``, cut so that one sample takes at most ``sample_budget_s`` at ``op_s``
    seconds per operation. At least one."""
    by_bytes = iters_for(size, target_bytes)
    if op_s <= 0 or sample_budget_s <= 0:
        return by_bytes
    return max(1, min(by_bytes, int(sample_budget_s / op_s)))


@dataclass
class SweepClock:
    """The time bound of one sweep; its shared fields hold only values every rank has."""

    budget_s: float  # the caller's deadline for the whole sweep (the fleet's watchdog)
    sizes: int
    samples: int
    start: float = 0.0  # this rank's clock at the start: only for its own deadlines
    elapsed_s: float = 0.0  # shared: the slowest rank's time since the sweep began
    op_s: float = 0.0  # shared: the slowest time per operation seen at this size so far
    done_sizes: int = 0

    @property
    def per_sample_s(self) -> float:
        # A quarter of the budget for sizes x (samples + warm-up) rounds; the rest is slack
        # for barriers and for operations that get slower after the pilot. 0.2 s is plenty.
        return min(0.2, 0.25 * self.budget_s / max(1, self.sizes * (self.samples + 1)))

    def iters(self, size: int, target_bytes: int) -> int:
        return iters_within(size, target_bytes, self.op_s, self.per_sample_s)

    def deadline(self, now: float) -> float:
        """This rank's time at which a sample starting ``now`` is stopped."""
        return min(now + OVERRUN * self.per_sample_s, self.start + 0.5 * self.budget_s)

    def over(self) -> bool:
        """Past half the budget: end the sweep well before the watchdog has to."""
        return self.elapsed_s > 0.5 * self.budget_s

    def cut_note(self) -> dict[str, str]:
        if self.done_sizes >= self.sizes:
            return {}
        return {"sweep_cut": f"stopped after {self.done_sizes} of {self.sizes} sizes: "
                             f"{self.elapsed_s:.1f} s of a {self.budget_s:g} s budget "
                             f"(a busy or oversubscribed host)"}


def _mpi() -> Any:
    from mpi4py import MPI  # lazy: roofs/ imports on machines without MPI

    return MPI


def _mpi_info(comm: Any) -> dict[str, Any]:
    MPI = _mpi()
    hosts = comm.allgather(MPI.Get_processor_name())
    # MCA settings change the transport (e.g. single-copy off in containers): keep them.
    mca = {k: v for k, v in os.environ.items() if k.startswith("OMPI_MCA_")}
    return {"hosts": sorted(set(hosts)), "clock": "MPI.Wtime",
            "mpi_library": MPI.Get_library_version().strip().splitlines()[0],
            "mpi_settings": mca}


def _sweep(clock: SweepClock, sizes: Sequence[int], samples: int, target_bytes: int,
           timed: Any, point: Any) -> None:
    """The loop both sweeps share: per size a first touch, a pilot, a warm-up that re-plans
    the count, then the samples. ``timed(size, iters)`` runs one round and returns the shared
    (seconds per operation, operations done); ``point(size, iters, times)`` records a size."""
    for size in sizes:
        if clock.over():
            break
        timed(size, 1)  # not planned on: connection setup, first touch
        clock.op_s = 0.0
        timed(size, 2)  # the pilot
        # A quarter of the pilot's count for the warm-up: a pilot that caught the host idle
        # must not plan a long round that then runs at a busy host's pace.
        iters = max(1, clock.iters(size, target_bytes) // 4)
        times: list[float] = []
        fewest = 0
        for s in range(samples + 1):
            t, done = timed(size, iters)
            if s == 0:
                iters = clock.iters(size, target_bytes)
                fewest = iters
                continue
            times.append(t)
            fewest = min(fewest, done)
            if done < iters or clock.over():  # stopped at its deadline: the host is busy
                break
        if times:
            point(size, fewest, times)
            clock.done_sizes += 1


def mpi_pingpong(comm: Any, sizes: Sequence[int] = DEFAULT_MPI_SIZES, samples: int = 5,
                 target_bytes: int = 64 * MiB, pair: tuple[int, int] = (0, 1),
                 budget_s: float = 60.0) -> LinkMeasurement:
    """Ping-pong between the two ranks of ``pair``; the others wait. Collective on ``comm``.

    Bandwidth = bytes / (round trip / 2): one direction of the link. The result is broadcast
    so that every rank returns the same measurement. Bounded by ``budget_s`` (module doc).
    """
    MPI = _mpi()
    n = comm.Get_size()
    info = _mpi_info(comm)
    meas = LinkMeasurement(op="p2p", library="MPI", level="mpi_p2p", ranks=2 if n >= 2 else 1,
                           info={**info, "pair": list(pair)})
    if n < 2:
        meas.note = "one rank: no peer to exchange with"
        return meas
    a, b = pair
    me = comm.Get_rank()
    rng = np.random.default_rng(1234 + me)
    buf = rng.integers(1, 255, size=max(sizes), dtype=np.uint8)  # never zeros: 0 is the mark
    clock = SweepClock(budget_s, len(sizes), samples, start=MPI.Wtime())

    def timed(size: int, iters: int) -> tuple[float, int]:
        msg = buf[:size]
        comm.Barrier()
        t0 = MPI.Wtime()
        end = clock.deadline(t0)
        done = 0
        if me == a:
            first = int(msg[0])
            while done < iters:
                last = done + 1 == iters or MPI.Wtime() > end
                if last:
                    msg[0] = 0  # tells b that this round trip is the last
                comm.Send([msg, MPI.BYTE], dest=b, tag=7)
                comm.Recv([msg, MPI.BYTE], source=b, tag=7)
                done += 1
                if last:
                    break
            msg[0] = first
        elif me == b:
            while True:
                comm.Recv([msg, MPI.BYTE], source=a, tag=7)
                last = msg[0] == 0
                comm.Send([msg, MPI.BYTE], dest=a, tag=7)
                done += 1
                if last:
                    break
        t, done, clock.elapsed_s = comm.bcast(
            ((MPI.Wtime() - t0) / max(done, 1), done, MPI.Wtime() - clock.start), root=a)
        clock.op_s = max(clock.op_s, t)
        return t / 2.0, int(done)  # one direction: half the round trip

    def point(size: int, iters: int, times: list[float]) -> None:
        pt = SizePoint(bytes=size, iters=iters, samples_s=times)
        pt.algbw = pt.busbw = size / pt.median_s
        meas.points.append(pt)

    _sweep(clock, sizes, samples, target_bytes, timed, point)
    meas.info.update(clock.cut_note())
    return meas


def mpi_allreduce(comm: Any, sizes: Sequence[int] = DEFAULT_MPI_SIZES, samples: int = 5,
                  target_bytes: int = 64 * MiB, budget_s: float = 60.0) -> LinkMeasurement:
    """MPI all-reduce (float32 sum) bus bandwidth over every rank of ``comm``. Collective.

    A sample's time is the slowest rank's mean time per operation (the collective is done
    when the last rank is done). Bounded by ``budget_s`` (module doc).
    """
    MPI = _mpi()
    n = comm.Get_size()
    meas = LinkMeasurement(op="allreduce", library="MPI", level="mpi_allreduce", ranks=n,
                           info={**_mpi_info(comm), "dtype": "float32", "reduce_op": "sum"})
    if n < 2:
        meas.note = "one rank: all-reduce moves nothing (busbw factor 2(n-1)/n = 0)"
    factor = bus_factor("allreduce", n)
    rng = np.random.default_rng(99 + comm.Get_rank())
    src = rng.random(max(sizes) // 4, dtype=np.float32) + 0.5
    dst = np.empty_like(src)
    clock = SweepClock(budget_s, len(sizes), samples, start=MPI.Wtime())
    mine, slowest = np.zeros(3), np.zeros(3)

    def timed(size: int, iters: int) -> tuple[float, int]:
        count = max(1, size // 4)
        s, d, k = src[:count], dst[:count], count - 1
        keep = float(s[k])
        comm.Barrier()
        t0 = MPI.Wtime()
        end = clock.deadline(t0)
        done = 0
        while done < iters:
            if MPI.Wtime() > end:
                s[k] = STOP_MARK  # every rank sees it in this operation's sum
            comm.Allreduce([s, MPI.FLOAT], [d, MPI.FLOAT], op=MPI.SUM)
            done += 1
            if d[k] >= STOP_MARK:
                break
        s[k] = keep
        mine[:] = ((MPI.Wtime() - t0) / done, done, MPI.Wtime() - clock.start)
        comm.Allreduce(mine, slowest, op=MPI.MAX)  # done is the same on every rank
        clock.elapsed_s = float(slowest[2])
        clock.op_s = max(clock.op_s, float(slowest[0]))
        return float(slowest[0]), int(slowest[1])

    def point(size: int, iters: int, times: list[float]) -> None:
        pt = SizePoint(bytes=max(1, size // 4) * 4, iters=iters, samples_s=times)
        pt.algbw = pt.bytes / pt.median_s
        pt.busbw = pt.algbw * factor
        meas.points.append(pt)

    _sweep(clock, sizes, samples, target_bytes, timed, point)
    meas.info.update(clock.cut_note())
    return meas
