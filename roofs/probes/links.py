"""Interconnect roofs: how fast bytes cross between ranks and between GPUs.

Three probes, each turned into a ``Roof`` of kind ``"interconnect"`` with its evidence:

- MPI point-to-point (ping-pong between two ranks over a sweep of message sizes) and MPI
  all-reduce, so a CPU-only cluster, or one host running two ranks over shared memory, gets a
  measured link roof: mpi_links.py (each sweep bounded in time, every rank stopping together).
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

import statistics
from dataclasses import asdict, dataclass, field
from typing import Any

from roofbench.roof_records import Roof

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
