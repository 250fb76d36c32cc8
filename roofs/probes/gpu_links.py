"""The links between the GPUs of one process: NCCL all-reduce / all-gather / reduce-scatter
(CuPy's ``cupy.cuda.nccl``, one communicator per device via ``ncclCommInitAll``) and a
peer-to-peer copy matrix between every pair of GPUs (peer access where available, staged by
the driver otherwise). Bus bandwidth and the records are links.py's; CuPy is imported lazily.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from roofbench.roof_records import Roof

from .links import (
    LinkMeasurement,
    MiB,
    SizePoint,
    bus_factor,
    iters_for,
)

DEFAULT_NCCL_SIZES = tuple(MiB * 4**i for i in range(6))  # 1 MiB .. 1 GiB
QUICK_NCCL_SIZES = tuple(MiB * 4**i for i in range(4))  # 1 MiB .. 64 MiB


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
    iters = iters_for(size, target_bytes, lo=2, hi=200)
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
