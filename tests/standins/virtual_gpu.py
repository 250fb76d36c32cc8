"""A GPU on a virtual clock, for the paired roof samples (roofs/probes/gpu_pairs.py): the probes'
adapter (``gpu_device.Gpu``: compile, allocate, launch) whose launches of the probe kernels
advance ``now`` by their work over a planted rate times the device's ``speed`` (1.0 at the
calibration's clocks; a test lowers it as a power or thermal limit would), CUDA events that
read ``now``, and the roofs a calibration of it would store. Nothing here races a wall clock."""

from __future__ import annotations

from typing import Any

from roofbench.bench.backends.cuda_timer import EventOps, event_seconds
from roofbench.roofs.probes import gpu_math as gm
from roofbench.roofs.probes import gpu_memory as gmem
from roofbench.roofs.probes.gpu_pairs import PairDevice

from roofbench.roof_records import Roof, RoofSet

NAME = "Virtual H200"
MiB, GiB = 1 << 20, 1 << 30
HBM, L2, FP32 = 4.0e12, 10.0e12, 60.0e12  # the planted roofs at speed 1.0 (B/s, FLOP/s)
SM, L2_BYTES = 132, 50 * MiB
FMA_ITERS = 4096  # the calibration's loop (its launch lasts FMA_S at FP32)
FMA_GRID, FMA_BLOCK = SM * 8, 256
FMA_S = gm.fma_flops(FMA_GRID * FMA_BLOCK, FMA_ITERS, False) / FP32
L2_LAUNCH = gmem.l2_launch("read", L2_BYTES / 4, 512, 2 * GiB)


class Arr:
    def __init__(self, n: int, kind: str) -> None:
        self.n, self.kind = n, kind


class VirtualGpu:
    """``launches`` logs every launch by kernel name ("case" for the case's own work)."""

    name, sm_count, cc, l2_bytes, index = NAME, SM, (9, 0), L2_BYTES, 0

    def __init__(self, free_bytes: int = 100 * GiB) -> None:
        self.free_bytes = free_bytes
        self.now, self.speed = 0.0, 1.0
        self.launches: list[str] = []
        self.allocated: list[Arr] = []
        self.compiled: list[str] = []
        self.l2_holds: str | None = None  # whose working set L2 holds: the last launch's

    # -- the Gpu protocol (what the samplers call) -------------------------------------------
    def compile(self, source: str, name: str) -> str:
        assert 'extern "C"' in source
        self.compiled.append(name)
        return name

    def kernel(self, module: str, name: str) -> Any:
        def launch(grid: tuple[int, ...], block: tuple[int, ...], args: tuple[Any, ...]) -> None:
            self.run(name, self.seconds(name, grid[0], block[0], args))
        return launch

    def random(self, n: int, kind: str) -> Arr:
        return self.empty(n, kind)

    def empty(self, n: int, kind: str) -> Arr:
        a = Arr(n, kind)
        self.allocated.append(a)
        return a

    def library_stream(self, lib: str, op: str, nbytes: int) -> Any:
        work = gmem.stream_bytes(op, nbytes // 4, 4)
        return lambda: self.run(f"{lib} {op}", work / (HBM * self.speed))

    # -- the model ----------------------------------------------------------------------------
    def run(self, name: str, seconds: float) -> None:
        self.launches.append(name)
        self.now += seconds
        self.l2_holds = name

    def seconds(self, name: str, grid: int, block: int, args: tuple[Any, ...]) -> float:
        if name.startswith("stream_"):
            kernel, suf = name.split("_")[1:]
            return gmem.stream_bytes(kernel, int(args[-1]), 4 if suf == "f32" else 8) / (
                HBM * self.speed)
        if name.startswith("l2_"):
            moved = grid * int(args[1]) * 16
            # a launch after other work finds its working set evicted: its first pass from HBM
            cold = 0.0 if self.l2_holds == name else int(args[1]) * int(args[2]) * 16 / HBM
            return moved / (L2 * self.speed) + cold
        if name == "fma_fp32":
            return gm.fma_flops(grid * block, int(args[2]), False) / (FP32 * self.speed)
        raise AssertionError(f"no model of {name}")

    def case(self, work: float, rate: float) -> None:
        """The case's own launch: ``work`` at ``rate`` (at speed 1.0)."""
        self.run("case", work / (rate * self.speed))

    # -- CUDA events on the virtual clock -----------------------------------------------------
    def ops(self) -> EventOps:
        def record(ev: dict[str, float]) -> None:
            ev["t"] = self.now

        return EventOps(new_event=dict, record=record, wait=lambda ev: None,
                        elapsed_s=lambda a, b: b["t"] - a["t"])

    def device(self) -> PairDevice:
        return PairDevice(self, event_seconds(self.ops()), f"virtual:{id(self)}")  # type: ignore[arg-type]


def roofs(device: str = NAME) -> RoofSet:
    """What a calibration of the virtual GPU stores (the probes' evidence: kernel, launch)."""
    fma_flops = gm.fma_flops(FMA_GRID * FMA_BLOCK, FMA_ITERS, False)
    la = L2_LAUNCH
    return RoofSet(device=device, roofs=[
        Roof("HBM (stream triad fp32)", "memory", HBM, "measured", level="dram",
             evidence={"probe": "stream triad fp32", "array_bytes": 1 * GiB,
                       "config": {"block": 512, "blocks_per_sm": 4, "grid": SM * 4}}),
        Roof("HBM (datasheet)", "memory", 4.8e12, "datasheet", level="dram"),
        Roof("L2 (read, na loads, working-set sweep)", "memory", L2, "measured", level="l2",
             evidence={"probe": "l2_read_na_ilp8", "form": "read",
                       "config": {"block": la.block, "ilp": 8, "loads": "na", "grid": la.grid,
                                  "chunk_bytes": la.chunk_vecs * 16, "chunks": la.nchunks},
                       "working_set_bytes": la.working_set_bytes,
                       "bytes_per_launch": la.bytes_per_launch}),
        Roof("FP32 FMA (CUDA cores)", "compute", FP32, "measured", precision="fp32",
             evidence={"probe": "fma_fp32", "iters": FMA_ITERS, "flops_per_launch": fma_flops,
                       "config": {"block": FMA_BLOCK, "blocks_per_sm": 8, "grid": FMA_GRID}}),
        Roof("FP16 tensor (cupy GEMM)", "compute", 800e12, "measured", precision="fp16_tc",
             evidence={"probe": "library GEMM", "ceiling": "library"}),
    ])

