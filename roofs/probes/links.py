"""Interconnect roofs: how fast bytes cross between ranks and between GPUs.

Three probes, each turned into a ``Roof`` of kind ``"interconnect"`` with its evidence:

- MPI point-to-point (ping-pong between two ranks over a sweep of message sizes) and MPI
  all-reduce, so a CPU-only cluster, or one host running two ranks over shared memory, gets a
  measured link roof. Timed with ``MPI.Wtime``; every rank runs the same fixed iteration counts
  (an adaptive stop would let ranks disagree on how many messages to expect and deadlock).
- NCCL all-reduce / all-gather / reduce-scatter over the GPUs of this process (CuPy's
  ``cupy.cuda.nccl``, one communicator per device via ``ncclCommInitAll``).
- A peer-to-peer copy matrix between every pair of GPUs (CuPy, peer access where available,
  staged by the driver otherwise).

Collective bandwidth follows nccl-tests: ``algbw = size / time`` and ``busbw = algbw x factor``
with factor ``2(n-1)/n`` for all-reduce and ``(n-1)/n`` for all-gather and reduce-scatter (size
is the full gathered / scattered buffer there). busbw is what a link of the ring has to carry,
so it is comparable to a link's hardware bandwidth and it is the figure the roof uses.

CuPy and mpi4py are imported lazily: this module imports on any machine. It must not import
``roofbench.bench`` (roofs/ is the model layer); a host clock is injected where one is needed.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import time
from collections.abc import Callable, Sequence
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
DEFAULT_NCCL_SIZES = tuple(MiB * 4**i for i in range(6))  # 1 MiB .. 1 GiB
QUICK_NCCL_SIZES = tuple(MiB * 4**i for i in range(4))  # 1 MiB .. 64 MiB

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


def _iters_for(size: int, target_bytes: int, lo: int = 3, hi: int = 2000) -> int:
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
        iters = _iters_for(size, target_bytes)
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
        iters = _iters_for(size, target_bytes)
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


# ------------------------------------------------------------------------------------ GPU (CuPy)


class GpuUnavailable(RuntimeError):
    """CuPy, a CUDA device or NCCL is missing: a one-line reason."""


def _cupy() -> Any:
    try:
        import cupy
    except ImportError as e:
        raise GpuUnavailable(f"no GPU: CuPy is not installed ({e})") from None
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # CUDA driver missing or broken
        raise GpuUnavailable(f"no GPU: CUDA runtime reports no device ({e})") from None
    if n < 1:
        raise GpuUnavailable("no GPU: CUDA runtime reports 0 devices")
    return cupy


def gpu_count() -> int:
    """Visible CUDA devices; 0 when CuPy or the driver is missing."""
    try:
        return _cupy().cuda.runtime.getDeviceCount()
    except GpuUnavailable:
        return 0


def nccl_collectives(sizes: Sequence[int] = DEFAULT_NCCL_SIZES,
                     ops: Sequence[str] = ("allreduce", "allgather", "reducescatter"),
                     devices: Sequence[int] | None = None, samples: int = 5,
                     target_bytes: int = 1 << 30,
                     clock: Callable[[], float] = time.perf_counter) -> list[LinkMeasurement]:
    """NCCL collectives over the GPUs of this process (one communicator per device).

    One device still runs (NCCL with one rank): algbw is recorded, busbw is 0 by definition
    and no roof is made. The host clock brackets each sample after a synchronisation of every
    device, so the sample ends when the slowest GPU ends.
    """
    cupy = _cupy()
    from cupy.cuda import nccl

    if not getattr(nccl, "available", True):
        raise GpuUnavailable("NCCL is not available to CuPy (install the nvidia-nccl wheel)")
    devs = list(devices) if devices is not None else list(
        range(cupy.cuda.runtime.getDeviceCount()))
    comms = nccl.NcclCommunicator.initAll(devs)
    names = _device_names(cupy, devs)
    group = _NcclGroup.allocate(cupy, nccl, devs, comms, max(sizes))
    out = []
    for op in ops:
        factor = bus_factor(op, group.n)  # before any launch: an unknown op fails here
        meas = LinkMeasurement(op=op, library="NCCL", level=f"nccl_{op}", ranks=group.n,
                               info={"devices": devs, "device_names": names,
                                     "clock": "host clock after device sync",
                                     "nccl_version": nccl.get_version(), "dtype": "float32"})
        if group.n == 1:
            meas.note = ("one device: NCCL ran with one rank; busbw is 0 by definition "
                         "(nothing crosses a link), algbw recorded")
        for size in sizes:
            meas.points.append(_nccl_point(group, op, size, factor, samples, target_bytes,
                                           clock))
        out.append(meas)
    return out


def _device_names(cupy: Any, devs: Sequence[int]) -> list[str]:
    names = []
    for d in devs:
        nm = cupy.cuda.runtime.getDeviceProperties(d)["name"]
        names.append(nm.decode() if isinstance(nm, bytes) else str(nm))
    return names


@dataclass
class _NcclGroup:
    """One communicator, stream and float32 send/receive pair per device, launched together."""

    cupy: Any
    nccl: Any
    devs: list[int]
    comms: list[Any]
    streams: list[Any] = field(default_factory=list)
    bufs: list[tuple[Any, Any]] = field(default_factory=list)

    @classmethod
    def allocate(cls, cupy: Any, nccl: Any, devs: list[int], comms: list[Any],
                 big: int) -> _NcclGroup:
        """Buffers of ``big`` bytes on every device (the largest message of the sweep)."""
        g = cls(cupy, nccl, devs, comms)
        for d in devs:
            with cupy.cuda.Device(d):
                g.streams.append(cupy.cuda.Stream(non_blocking=True))
                send = cupy.random.random(big // 4, dtype=cupy.float32) + 0.5
                recv = cupy.empty(big // 4, dtype=cupy.float32)
                g.bufs.append((send, recv))
        return g

    @property
    def n(self) -> int:
        return len(self.devs)

    def sync(self) -> None:
        for d, st in zip(self.devs, self.streams, strict=True):
            with self.cupy.cuda.Device(d):
                st.synchronize()

    def launch(self, op: str, total_elems: int) -> None:
        """One collective of ``total_elems`` float32 over every device (one NCCL group)."""
        nccl = self.nccl
        per_rank = total_elems // self.n
        nccl.groupStart()
        for i, d in enumerate(self.devs):
            send, recv = self.bufs[i]
            with self.cupy.cuda.Device(d):
                sp, rp, st = send.data.ptr, recv.data.ptr, self.streams[i].ptr
                comm = self.comms[i]
                if op == "allreduce":
                    comm.allReduce(sp, rp, total_elems, nccl.NCCL_FLOAT32, nccl.NCCL_SUM, st)
                elif op == "allgather":  # each rank contributes total/n, receives total
                    comm.allGather(sp, rp, per_rank, nccl.NCCL_FLOAT32, st)
                else:  # reduce-scatter: each rank sends total, receives total/n
                    comm.reduceScatter(sp, rp, per_rank, nccl.NCCL_FLOAT32, nccl.NCCL_SUM, st)
        nccl.groupEnd()


def _nccl_point(group: _NcclGroup, op: str, size: int, factor: float, samples: int,
                target_bytes: int, clock: Callable[[], float]) -> SizePoint:
    """One message size: a discarded warm-up sample, then ``samples`` timed ones; busbw is
    algbw x ``factor`` (bus_factor)."""
    total = (size // 4 // group.n) * group.n  # divisible by n for gather/scatter
    iters = _iters_for(size, target_bytes, lo=2, hi=200)
    times: list[float] = []
    for s in range(samples + 1):
        group.sync()
        t0 = clock()
        for _ in range(iters):
            group.launch(op, total)
        group.sync()
        if s > 0:
            times.append((clock() - t0) / iters)
    pt = SizePoint(bytes=total * 4, iters=iters, samples_s=times)
    pt.algbw = pt.bytes / pt.median_s
    pt.busbw = pt.algbw * factor
    return pt


@dataclass
class P2PMatrix:
    """Copy bandwidth (B/s) from device i to device j; diagonal left at 0."""

    devices: int
    bandwidth: list[list[float]] = field(default_factory=list)
    peer_access: list[list[bool]] = field(default_factory=list)
    size_bytes: int = 0
    samples: int = 0
    names: list[str] = field(default_factory=list)
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_roof(self) -> Roof | None:
        off = [(self.bandwidth[i][j], i, j) for i in range(self.devices)
               for j in range(self.devices) if i != j]
        if not off:
            return None
        best, bi, bj = max(off)
        return Roof(name=f"GPU P2P copy (best of {len(off)} pairs)", kind="interconnect",
                    value=best, source="measured", level="gpu_p2p",
                    evidence={"probe": "cudaMemcpyPeerAsync", "best_pair": [bi, bj],
                              "worst_Bps": min(off)[0], "matrix_Bps": self.bandwidth,
                              "peer_access": self.peer_access, "size_bytes": self.size_bytes,
                              "samples": self.samples, "devices": self.names,
                              "definition": "bytes copied / time, one direction"})


def p2p_matrix(size: int = 256 * MiB, samples: int = 5,
               clock: Callable[[], float] = time.perf_counter) -> P2PMatrix:
    """Copy bandwidth between every ordered pair of visible GPUs (one device: a note)."""
    cupy = _cupy()
    rt = cupy.cuda.runtime
    n = rt.getDeviceCount()
    names = []
    for d in range(n):
        nm = rt.getDeviceProperties(d)["name"]
        names.append(nm.decode() if isinstance(nm, bytes) else str(nm))
    res = P2PMatrix(devices=n, size_bytes=size, samples=samples, names=names,
                    bandwidth=[[0.0] * n for _ in range(n)],
                    peer_access=[[i == j for j in range(n)] for i in range(n)])
    if n < 2:
        res.note = "one device: no peer pairs to measure"
        return res
    bufs = []
    for d in range(n):
        with cupy.cuda.Device(d):
            bufs.append(cupy.random.random(size // 4, dtype=cupy.float32) + 0.5)
    for i in range(n):
        for j in range(n):
            if i == j:
                continue
            can = bool(rt.deviceCanAccessPeer(i, j))
            res.peer_access[i][j] = can
            if can:
                with cupy.cuda.Device(i), contextlib.suppress(rt.CUDARuntimeError):
                    rt.deviceEnablePeerAccess(j)  # raises when already enabled
            times = []
            for s in range(samples + 1):
                with cupy.cuda.Device(j):
                    cupy.cuda.runtime.deviceSynchronize()
                t0 = clock()
                with cupy.cuda.Device(j):
                    rt.memcpyPeer(bufs[j].data.ptr, j, bufs[i].data.ptr, i, size)
                    cupy.cuda.runtime.deviceSynchronize()
                if s > 0:
                    times.append(clock() - t0)
            res.bandwidth[i][j] = size / statistics.median(times)
    return res
