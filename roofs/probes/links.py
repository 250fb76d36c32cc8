"""Interconnect roofs: how fast bytes cross between ranks and between GPUs.

Three probes, each turned into a ``Roof`` of kind ``"interconnect"`` with its evidence:

- MPI point-to-point (ping-pong between two ranks over a sweep of message sizes) and MPI
  all-reduce, so a CPU-only cluster, or one host running two ranks over shared memory, gets a
  measured link roof. Timed with ``MPI.Wtime``; every rank runs the same fixed iteration counts
  (an adaptive stop would let ranks disagree on how many messages to expect and deadlock).
- NCCL all-reduce / all-gather / reduce-scatter over the GPUs of this process (CuPy's
  ``cupy.cuda.nccl``, one communicator per device via ``ncclCommInitAll``) and a peer-to-peer
  copy matrix between every pair of GPUs: gpu_links.py.

Collective bandwidth follows nccl-tests: ``algbw = size / time`` and ``busbw = algbw x factor``
with factor ``2(n-1)/n`` for all-reduce and ``(n-1)/n`` for all-gather and reduce-scatter (size
is the full gathered / scattered buffer there). busbw is what a link of the ring has to carry,
so it is comparable to a link's hardware bandwidth and it is the figure the roof uses.

CuPy and mpi4py are imported lazily: this module imports on any machine. It must not import
``roofbench.bench`` (roofs/ is the model layer); a host clock is injected where one is needed.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from roofbench.records import Roof

KiB, MiB = 1 << 10, 1 << 20

# Interconnect roof levels (Roof.level of kind "interconnect").
LINK_LEVELS = {
    "mpi_p2p": "MPI point-to-point (ping-pong, one direction)",
    "mpi_allreduce": "MPI all-reduce bus bandwidth",
    "nccl_allreduce": "NCCL all-reduce bus bandwidth",
    "nccl_allgather": "NCCL all-gather bus bandwidth",
    "nccl_reducescatter": "NCCL reduce-scatter bus bandwidth",
    "gpu_p2p": "GPU peer-to-peer copy (best pair)",
}

P2P_SIZES = tuple(KiB * 4**i for i in range(11))  # 1 KiB .. 1 GiB, x4 steps
DEFAULT_MPI_SIZES = tuple(s for s in P2P_SIZES if s <= 64 * MiB)
QUICK_MPI_SIZES = tuple(s for s in P2P_SIZES if s <= 16 * MiB)

NOISY_CV = 0.05  # same threshold as the timer's noisy flag

BUS_FACTOR_DOC = "nccl-tests: all-reduce busbw = algbw x 2(n-1)/n; all-gather, " \
                 "reduce-scatter busbw = algbw x (n-1)/n"


def bus_factor(op: str, n: int) -> float:
    """nccl-tests' algbw -> busbw factor for ``n`` ranks (0 for one rank: nothing crosses)."""
    if n < 1:
        raise ValueError("n must be >= 1")
    if op in ("allreduce", "all_reduce"):
        return 2.0 * (n - 1) / n
    if op in ("allgather", "all_gather", "reducescatter", "reduce_scatter"):
        return (n - 1) / n
    if op in ("p2p", "sendrecv", "copy"):
        return 1.0
    raise ValueError(f"unknown collective {op!r}")


@dataclass
class SizePoint:
    """One message size of a sweep: raw per-operation times and the bandwidths they give."""

    bytes: int
    iters: int  # operations per sample (the sample is their mean time)
    samples_s: list[float]  # seconds per operation, raw
    algbw: float = 0.0  # B/s at the median
    busbw: float = 0.0  # B/s at the median

    @property
    def median_s(self) -> float:
        return statistics.median(self.samples_s)

    @property
    def cv(self) -> float:
        """Spread of the samples (stdev / mean): a busy host shows up here."""
        if len(self.samples_s) < 2:
            return 0.0
        return statistics.stdev(self.samples_s) / statistics.fmean(self.samples_s)


@dataclass
class LinkMeasurement:
    """A bandwidth sweep of one operation over one set of ranks or devices."""

    op: str  # "p2p", "allreduce", "allgather", "reducescatter"
    library: str  # "MPI" or "NCCL"
    level: str  # a LINK_LEVELS key
    ranks: int
    points: list[SizePoint] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)  # hosts, transport, library version
    note: str = ""  # why there is no roof (one rank, one device), if so

    @property
    def peak_busbw(self) -> float:
        return max((p.busbw for p in self.points), default=0.0)

    @property
    def peak_algbw(self) -> float:
        return max((p.algbw for p in self.points), default=0.0)

    def best_point(self) -> SizePoint | None:
        return max(self.points, key=lambda p: p.busbw, default=None)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["peak_busbw"] = self.peak_busbw
        d["peak_algbw"] = self.peak_algbw
        return d

    def to_roof(self) -> Roof | None:
        """The measured roof (the best bus bandwidth of the sweep); None without a link."""
        best = self.best_point()
        if best is None or best.busbw <= 0:
            return None
        return Roof(
            name=f"{self.library} {self.op} ({self.ranks} ranks)",
            kind="interconnect", value=best.busbw, source="measured", level=self.level,
            evidence={
                "probe": f"{self.library} {self.op} size sweep",
                "definition": BUS_FACTOR_DOC if self.op != "p2p"
                else "ping-pong: bytes / (round trip / 2), one direction",
                "ranks": self.ranks,
                "best_size_bytes": best.bytes,
                "best_algbw_Bps": best.algbw,
                "sizes_bytes": [p.bytes for p in self.points],
                "algbw_Bps": [p.algbw for p in self.points],
                "busbw_Bps": [p.busbw for p in self.points],
                "median_s": [p.median_s for p in self.points],
                "iters": [p.iters for p in self.points],
                "samples": len(best.samples_s),
                "cv_at_best": best.cv,
                # The best size may sit in a cache; the largest shows the sustained figure.
                "largest_size_bytes": self.points[-1].bytes,
                "busbw_at_largest_Bps": self.points[-1].busbw,
                "flags": [f"noisy: cv {best.cv:.1%} > {NOISY_CV:.0%} at the best size"]
                if best.cv > NOISY_CV else [],
                **self.info,
            })


def iters_for(size: int, target_bytes: int, lo: int = 3, hi: int = 2000) -> int:
    # Enough operations per sample that a sample is well above the clock's resolution, few
    # enough that a big message does not take seconds. Deterministic: every rank computes
    # the same count from the same size.
    return int(min(hi, max(lo, target_bytes // max(size, 1))))


# ----------------------------------------------------------------------------------------- MPI


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


def mpi_pingpong(comm: Any, sizes: Sequence[int] = DEFAULT_MPI_SIZES, samples: int = 5,
                 target_bytes: int = 64 * MiB, pair: tuple[int, int] = (0, 1)
                 ) -> LinkMeasurement:
    """Ping-pong between the two ranks of ``pair``; the others wait. Collective on ``comm``.

    Bandwidth = bytes / (round trip / 2): one direction of the link. The result is broadcast
    so that every rank returns the same measurement.
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
    buf = rng.integers(1, 255, size=max(sizes), dtype=np.uint8)  # never zeros
    for size in sizes:
        iters = iters_for(size, target_bytes)
        msg = buf[:size]
        times: list[float] = []
        comm.Barrier()
        for s in range(samples + 1):  # first round is a warm-up (connection setup, pinning)
            if me == a:
                t0 = MPI.Wtime()
                for _ in range(iters):
                    comm.Send([msg, MPI.BYTE], dest=b, tag=7)
                    comm.Recv([msg, MPI.BYTE], source=b, tag=7)
                if s > 0:
                    times.append((MPI.Wtime() - t0) / iters / 2.0)
            elif me == b:
                for _ in range(iters):
                    comm.Recv([msg, MPI.BYTE], source=a, tag=7)
                    comm.Send([msg, MPI.BYTE], dest=a, tag=7)
        if me == a:
            pt = SizePoint(bytes=size, iters=iters, samples_s=times)
            pt.algbw = pt.busbw = size / pt.median_s
            meas.points.append(pt)
    meas.points = comm.bcast(meas.points, root=a)
    return meas


def mpi_allreduce(comm: Any, sizes: Sequence[int] = DEFAULT_MPI_SIZES, samples: int = 5,
                  target_bytes: int = 64 * MiB) -> LinkMeasurement:
    """MPI all-reduce (float32 sum) bus bandwidth over every rank of ``comm``. Collective.

    A sample's time is the slowest rank's mean time per operation (the collective is done
    when the last rank is done).
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
    for size in sizes:
        count = max(1, size // 4)
        iters = iters_for(size, target_bytes)
        times: list[float] = []
        for s in range(samples + 1):
            comm.Barrier()
            t0 = MPI.Wtime()
            for _ in range(iters):
                comm.Allreduce([src[:count], MPI.FLOAT], [dst[:count], MPI.FLOAT], op=MPI.SUM)
            t = (MPI.Wtime() - t0) / iters
            t = comm.allreduce(t, op=MPI.MAX)
            if s > 0:
                times.append(t)
        pt = SizePoint(bytes=count * 4, iters=iters, samples_s=times)
        pt.algbw = pt.bytes / pt.median_s
        pt.busbw = pt.algbw * factor
        meas.points.append(pt)
    return meas
