"""Every record roofbench writes to disk: results.json, roofs files, the calibration cache.

Each record is a dataclass with ``to_dict`` (what is written, exactly); reading any version
ever written is readers.py's job. The roof records (Roof, RoofSet) are roof_records.py's,
named here too. Files: ``roofbench.results`` (results.json) version 6
(``RESULTS_SCHEMA_VERSION``); a roof set (``RoofSet.to_dict``) version 2; a GPU's calibration
cache ``roofbench.calibrated-roofs/1`` (``CalibratedRoofs``, calibrated.py). Part of the shared
root: it imports nothing from kernels/, roofs/ or bench/.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal, cast

from . import __version__
from .cache_records import Placement
from .roof_context import PairedRoof, RoofState
from .roof_records import (
    RoofSet,
)
from .timing import Timing

if TYPE_CHECKING:
    from _typeshed import DataclassInstance


class Plain:
    """A record written as ``asdict`` has it: its fields, nested records as dicts."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(cast("DataclassInstance", self))

# ---------------------------------------------------------------------------- launches


@dataclass(frozen=True)
class Occupancy(Plain):
    """Theoretical occupancy of one launch (bench/backends/occupancy.py computes it)."""

    threads_per_block: int
    registers_per_thread: int
    smem_per_block: int
    blocks_per_sm: int
    warps_per_sm: int
    max_warps_per_sm: int
    occupancy: float  # warps_per_sm / max_warps_per_sm
    limiter: str  # "warps", "blocks", "registers" or "shared_memory"


@dataclass
class LaunchCounters(Plain):
    """What ncu measured for one launch of a pipeline (values exactly as read, base units)."""

    kernel: str  # the kernel name ncu reported (joined by '+' when several were summed)
    dram_read: float | None = None  # bytes
    dram_write: float | None = None  # bytes
    l2_bytes: float | None = None  # bytes
    flops: dict[str, float] = field(default_factory=dict)  # precision -> FLOPs (tensor: ops)
    duration_s: float | None = None
    achieved_occupancy: float | None = None  # fraction of the peak warps per SM
    kernels: int = 1  # kernels summed into this launch (a library call may launch several)
    metrics: dict[str, float | None] = field(default_factory=dict)  # every metric as read

    @property
    def flops_total(self) -> float | None:
        return sum(self.flops.values()) if self.flops else None

    @property
    def dram_total(self) -> float | None:
        if self.dram_read is None or self.dram_write is None:
            return None
        return self.dram_read + self.dram_write


@dataclass
class LaunchFacts(Plain):
    """How a backend ran one launch: the function (or the library call standing in for one),
    its geometry and resources where the backend knows them, and the occupancy they give."""

    function: str | None = None  # the kernel function as launched (CUDA C name, Numba twin)
    library: str | None = None  # a vendor-library call instead of a kernel ("matmul", "sdpa")
    arch: str | None = None  # the device architecture it ran on ("sm_90")
    grid: list[int] | None = None
    block: list[int] | None = None
    dynamic_smem: int | None = None  # bytes
    static_smem: int | None = None
    registers: int | None = None  # per thread
    local_bytes: int | None = None  # per thread (spills)
    compiler: str | None = None  # when it differs from the case's (extra["compiler"])
    occupancy: Occupancy | None = None  # theoretical, where the registers are known
    # False: the function has never run on real hardware before (compiled, inspected and
    # emulated only); a report names such cases.
    validated_on_hardware: bool = True


@dataclass
class LaunchResult:
    """One launch of a case's pipeline: what the model counts, and what was measured of it."""

    kernel: str
    note: str
    flops: int
    bytes: dict[str, int]
    timing: Timing | None = None  # this launch timed alone (multi-launch pipelines)
    counters: LaunchCounters | None = None  # Nsight Compute's reading (run --ncu)
    facts: LaunchFacts | None = None  # how the backend ran it (GPU backends)
    # The buffers the launch moves through DRAM, by name (CaseResult.buffers): the model's
    # read and write bytes of the launch.
    reads: list[str] = field(default_factory=list)
    writes: list[str] = field(default_factory=list)

    @property
    def occupancy(self) -> Occupancy | None:
        return self.facts.occupancy if self.facts is not None else None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "kernel": self.kernel, "note": self.note, "flops": self.flops,
            "bytes": dict(self.bytes), "reads": list(self.reads), "writes": list(self.writes),
            "timing": self.timing.to_dict() if self.timing else None,
            "counters": self.counters.to_dict() if self.counters else None}
        if self.facts is not None:  # absent, not null, where unknown (CPU backends)
            d["facts"] = self.facts.to_dict()
        return d


@dataclass(frozen=True)
class BufferFacts:
    """One buffer of a case: its role (input, output, temp) and its bytes."""

    role: str
    nbytes: int


@dataclass
class NcuSettings(Plain):
    """How Nsight Compute collected a case's counters (``roofbench run --ncu``)."""

    path: str
    version: str
    clock_control: str = "none"
    cache_control: str = "all"
    metrics: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # wanted but not on this device
    # input dtype -> the tensor-op metrics collected for it ([] when the device lists none)
    tensor_ops: dict[str, list[str]] = field(default_factory=dict)


# ---------------------------------------------------------------------------- cases, runs


@dataclass(frozen=True)
class OccupancyLevel(Plain):
    """Where a case of an occupancy scan (`roofbench occupancy`) sits on the occupancy axis:
    the same case at every level, only how much of the device runs it changes.

    ``axis`` "threads": the CPU's Numba threads (``value`` of ``of`` cores); "blocks_per_sm":
    a GPU's resident blocks per SM, limited through dynamic shared memory (and, for a
    grid-stride kernel, the grid), ``value`` of the ``of`` the kernel reaches unlimited. The
    theoretical occupancy each launch then gets is in its facts, the achieved one in its ncu
    counters."""

    axis: Literal["threads", "blocks_per_sm"]
    value: int
    of: int

    @property
    def fraction(self) -> float:
        """The level as a fraction of the device (threads / cores, blocks / most blocks)."""
        return self.value / self.of

    @property
    def tag(self) -> str:
        """The level in a case key: ``2threads``, ``3blocks-per-SM``."""
        return f"{self.value}threads" if self.axis == "threads" else f"{self.value}blocks-per-SM"


@dataclass
class Identity:
    """Which case it is: the workload, variant, dtype and size on one backend, and the roof it
    is held against (``precision``, on ``cores``); its level of an occupancy scan, if any."""

    workload: str
    variant: str
    backend: str
    dtype: str
    size: list[int]
    precision: str  # the compute roof the case is held against
    cores: str  # what runs it: "simt" (CUDA cores / SIMD lanes) or "tensor"
    # Its level of an occupancy scan; None for every case of a plain run.
    occupancy_level: OccupancyLevel | None = None

    @property
    def key(self) -> str:
        base = f"{self.workload}/{self.variant}/{self.dtype}/{'x'.join(map(str, self.size))}"
        return base + (f"@{self.occupancy_level.tag}" if self.occupancy_level else "")


@dataclass
class Declaration:
    """What the workload declares of the case: its counts and intensity, the tolerance it is
    checked to, and what a report needs of the declarations (stored at run time so that a
    report is a function of the record alone): the plot marker and FLOP convention, the variant
    it is fused from (the plot's arrow, the fusion table), its known limit, every buffer."""

    flops: int
    bytes: dict[str, int]
    ai: dict[str, float]
    tolerance: float | None = None
    marker: str = "o"
    flop_convention: str = ""
    arrow_from: str | None = None
    limit_note: str = ""  # the variant's known reason to stay below its roof here
    buffers: dict[str, BufferFacts] = field(default_factory=dict)


@dataclass
class Outcome:
    """How the case ended: ``status`` "ok", "invalid" (failed validation), "error" or
    "unsupported"; ``checked``: whether its outputs were compared with a reference (False only
    for a callable timed without one: roofbench.measure, a pytest-benchmark entry)."""

    status: str
    checked: bool = True
    error: str | None = None
    rel_error: float | None = None

    @property
    def valid(self) -> bool:
        """It ran and, where checked, matched its reference."""
        return self.status == "ok"


@dataclass
class Measurement:
    """What was timed: the raw samples (``timing``) and their median, each launch of the
    pipeline, and the wall (host) seconds of each phase (inputs, compile, prepare, validate,
    time, time_launches); ``device_phases``: the device seconds of the phases whose work ran
    on a GPU (CUDA events; the timed samples' sum), absent for host-only phases."""

    timing: Timing | None = None
    median_s: float | None = None
    launches: list[LaunchResult] = field(default_factory=list)
    phases: dict[str, float] = field(default_factory=dict)
    device_phases: dict[str, float] = field(default_factory=dict)


@dataclass
class RooflinePlace:
    """Where the case sits under the roofs: its rates, the roof that limits it and how close
    it comes; ``placement``: the level its bytes are placed on (a CPU case that fits in a
    cache); ``roof_states``: the DRAM bandwidth measured just before and after it."""

    flop_per_s: float | None = None
    bytes_per_s: dict[str, float] = field(default_factory=dict)
    attainable: float | None = None
    efficiency: float | None = None  # achieved / attainable
    bound: str | None = None  # "memory" or "compute" (what limits it under the roofs)
    limiting_roof: str | None = None
    placement: Placement | None = None
    roof_states: list[RoofState] = field(default_factory=list)
    paired: PairedRoof | None = None  # efficiency from samples paired with the roof's


@dataclass
class Evidence:
    """Free-form backend facts (``extra``) and how ncu collected counters (run --ncu)."""

    extra: dict[str, Any] = field(default_factory=dict)
    ncu: NcuSettings | None = None


@dataclass
class CaseResult:
    """One (workload, variant, dtype, size) on one backend, nested by meaning: which case
    (identity), what was declared of it, how it ended (outcome), what was measured, where it
    sits under the roofs (roofline) and the evidence beside."""

    identity: Identity
    declaration: Declaration
    outcome: Outcome
    measurement: Measurement = field(default_factory=Measurement)
    roofline: RooflinePlace = field(default_factory=RooflinePlace)
    evidence: Evidence = field(default_factory=Evidence)

    @property
    def key(self) -> str:
        return self.identity.key

    @property
    def valid(self) -> bool:
        return self.outcome.valid

    def to_dict(self) -> dict[str, Any]:
        i, m, r = asdict(self.identity), self.measurement, asdict(self.roofline)
        if i["occupancy_level"] is None:  # optional: only an occupancy scan's cases have one
            del i["occupancy_level"]
        meas: dict[str, Any] = {
            "timing": m.timing.to_dict() if m.timing else None, "median_s": m.median_s,
            "launches": [la.to_dict() for la in m.launches], "phases": dict(m.phases)}
        if m.device_phases:  # optional: a host-only case writes none
            meas["device_phases"] = dict(m.device_phases)
        if not r["roof_states"]:
            del r["roof_states"]
        if r["placement"] is None:  # optional: only a case placed under cache roofs has one
            del r["placement"]
        if r["paired"] is None:  # optional: only a case timed beside its roof's samples
            del r["paired"]
        return {"identity": i, "declaration": asdict(self.declaration),
                "outcome": asdict(self.outcome), "measurement": meas, "roofline": r,
                "evidence": asdict(self.evidence)}

    def io_bytes(self) -> int | None:
        """Bytes of the case's inputs and outputs: what one fused launch must still move."""
        bufs = self.declaration.buffers
        if not bufs:
            return None
        return sum(b.nbytes for b in bufs.values() if b.role in ("input", "output"))

    def launch_split(self) -> list[tuple[int, int]] | None:
        """The model's DRAM (read, write) bytes of each launch, from the buffers it names."""
        bufs, launches = self.declaration.buffers, self.measurement.launches
        if not bufs or not launches or not all(la.reads or la.writes for la in launches):
            return None
        try:
            return [(sum(bufs[n].nbytes for n in la.reads),
                     sum(bufs[n].nbytes for n in la.writes)) for la in launches]
        except KeyError:
            return None


RESULTS_SCHEMA = "roofbench.results"
# 1: first release. 2: cases carry ``phases`` (and, optional, ``device_phases``), runs
# ``interrupted``, the roof set its typed fields. 3: cases carry what a report needs of the
# declarations (marker, flop_convention, arrow_from, buffers, each launch's reads and writes)
# and typed launch facts and ncu settings. readers.py reads every version. A run cut short
# also carries ``stop`` (RunStop), optional: a reader of version 3 without it reads None.
# 4: a case is nested by meaning (identity, declaration, outcome, measurement, roofline,
# evidence; CaseResult), ``valid`` no longer stored (the outcome's status says it).
# 5: a timing may carry its paired roof's rates (``roof_probe``, ``roof_rates``) and the
# roofline the efficiency they give (``paired``: PairedRoof); both optional. ``paired`` may
# carry ``states`` (the efficiency in each of two roof states; absent or [] in older files).
# 6: a run placed from a profiler trace (`roofbench trace`) carries ``trace``: the files,
# the time charged to ops and what no op claims, steps, ranks, the ops not counted
# (optional: absent in every other run and in older files).
RESULTS_SCHEMA_VERSION = 6

StopCause = Literal["signal", "os-error", "memory", "error"]
StopPhase = Literal["start", "roofs", "cases", "report"]


@dataclass(frozen=True)
class RunStop:
    """Why a run was cut short: the cause, what the one line said, and the phase it was in."""

    cause: StopCause
    detail: str  # e.g. "SIGTERM", "results.json: No space left on device (ENOSPC)"
    phase: StopPhase


@dataclass
class RunResult:
    """One `roofbench run`: what ran where, under which roofs, and every case."""

    backend: str
    device: str
    roofs: RoofSet | None
    cases: list[CaseResult]
    environment: dict[str, Any] = field(default_factory=dict)
    command: list[str] = field(default_factory=list)
    created: str = ""
    git_commit: str | None = None
    timer: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    interrupted: bool = False  # cut short (a signal, a write that failed) before the end
    stop: RunStop | None = None  # why, when interrupted
    trace: dict[str, Any] | None = None  # a run placed from a profiler trace (version 6)
    # read-time only: cases the reader left out, by backend/key, with the reason (never saved)
    unreadable: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": RESULTS_SCHEMA, "schema_version": RESULTS_SCHEMA_VERSION,
            "roofbench_version": __version__,
            "created": self.created, "command": self.command, "git_commit": self.git_commit,
            "backend": self.backend, "device": self.device,
            "environment": self.environment, "timer": self.timer, "notes": self.notes,
            "interrupted": self.interrupted,
            **({"stop": asdict(self.stop)} if self.stop else {}),  # only a run cut short
            **({"trace": self.trace} if self.trace else {}),  # only a trace's run
            "roofs": self.roofs.to_dict() if self.roofs else None,
            "cases": [c.to_dict() for c in self.cases],
        }
