"""What a roof set was measured under, and the roof's state through a run: typed records of
``RoofSet.context`` and ``CaseResult.roof_states`` (records.py), with their readers.

- ``ProbeEnvironment``: the cores a CPU probe process ran on (the cores the machine allows it,
  or those a user chose with taskset, a cgroup or ``--cores``), the thread counts it set for
  Numba, OpenMP and BLAS, the thread and binding variables it found in the caller's
  environment (and left out of its own), and the fingerprint that keys the calibration cache.
- ``RoofState``: one short bandwidth probe of a run (a bracket around memory-bound cases):
  its best and median figure and when it ran.

The rule every roof follows (stated in the report): a roof is the best sustained figure of
its probe, a ceiling (STREAM's "Best Rate": the best time of calls that each stream several
times the last-level cache; a cache level's: the rate a tenth of its sweep's ~100-us bursts
reach); the median is stored beside it (``Roof.median``). A case is
placed by its median time against that ceiling. Part of the shared root.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

ROOF_RULE = ("a roof is the best sustained figure of its probe (a ceiling: the best time of "
             "calls that each run long enough to sustain it, STREAM's Best Rate; a CPU cache "
             "level's, the rate a tenth of its sweep's timed bursts reach, not one lucky "
             "burst); the probe's median is stored beside it; a case is placed by its median "
             "time, so its efficiency is its typical rate over that ceiling")

# A run's DRAM bandwidth that moved by more than this between its brackets is reported.
DRIFT_LIMIT = 0.10

CoresFrom = Literal["machine", "affinity", "option"]


@dataclass
class ProbeEnvironment:
    """How a CPU probe process was set up, and what it found (see the module doc).

    ``cores``: the cores it ran on (its affinity, set by itself); ``machine_cores``: the cores
    the machine allows it (the cgroup's effective cpuset, else the online cores);
    ``cores_from``: "machine" (all of them), "affinity" (the caller's affinity was narrower:
    taskset, a cgroup of its own) or "option" (``--cores``). ``variables``: the caller's
    thread and binding variables (OMP_NUM_THREADS, OMP_PROC_BIND, ...) as found; the probe
    ran without them. ``threads``: the thread counts the probe ran with (numba, blas, openmp;
    None where unknown). ``fingerprint``: CPU model, cores, memory and library versions, the
    key of the calibration cache."""

    cores: list[int]
    machine_cores: list[int]
    cores_from: CoresFrom = "machine"
    variables: dict[str, str] = field(default_factory=dict)
    threads: dict[str, int | None] = field(default_factory=dict)
    fingerprint: dict[str, str] = field(default_factory=dict)

    @property
    def restricted(self) -> bool:
        """Measured on fewer cores than the machine allows (on purpose: the roofs say so)."""
        return set(self.cores) != set(self.machine_cores)

    @property
    def cores_text(self) -> str:
        return cpu_list(self.cores)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class RoofState:
    """One short bandwidth probe of a run: ``bytes_per_s`` its best sustained figure,
    ``median_bytes_per_s`` its median, ``at_s`` seconds from the start of the cases."""

    probe: str
    bytes_per_s: float
    median_bytes_per_s: float
    at_s: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class PairState:
    """The pairs of a case taken in one state of its roof (``state_split``): the roof's median
    rate then, the case's efficiency (median ratio) then, and how many pairs."""

    roof_median: float
    efficiency: float
    pairs: int


@dataclass(frozen=True)
class PairedRoof:
    """A case's efficiency from paired samples (``RooflinePlace.paired``): each timed sample
    was followed by a short sample of the roof that bounds it (``Timing.roof_rates``), each
    pair gives a ratio (the case's rate over the roof's at that moment), and ``efficiency`` is
    the median of the ratios, [``lo``, ``hi``] its 95% interval. ``roof_low``..``roof_high``:
    the roof's rate while the case ran; ``ceiling``: the roof's best sustained figure (the
    machine's best state), ``of_ceiling`` the case's median rate over it (the unpaired rule).
    ``probe``: which roof, as ``kind:key:name`` (``memory:dram:stream-add-nt``)."""

    probe: str
    pairs: int
    efficiency: float
    lo: float
    hi: float
    roof_low: float
    roof_median: float
    roof_high: float
    ceiling: float
    of_ceiling: float | None
    unit: str  # "B/s" or "FLOP/s"
    # The pairs by the roof's state where it took two (a VM's memory at ~40 and ~70 GB/s),
    # slow first: a case whose efficiency differs between them does not follow its roof all
    # the way. Empty: one state (or a file written before it was kept).
    states: tuple[PairState, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class RoofContext:
    """``RoofSet.context``: the probe environment, and the states a run tracked."""

    environment: ProbeEnvironment | None = None
    states: list[RoofState] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"environment": self.environment.to_dict() if self.environment else None,
                "states": [s.to_dict() for s in self.states]}

    def drift(self) -> float | None:
        """How far the tracked bandwidth moved: max / min - 1 of the states' best figures."""
        values = [s.bytes_per_s for s in self.states]
        return max(values) / min(values) - 1 if len(values) > 1 else None


def cpu_list(cores: list[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``"0-2,5"`` (the cpuset list format)."""
    out: list[str] = []
    s = sorted(set(cores))
    i = 0
    while i < len(s):
        j = i
        while j + 1 < len(s) and s[j + 1] == s[j] + 1:
            j += 1
        out.append(str(s[i]) if i == j else f"{s[i]}-{s[j]}")
        i = j + 1
    return ",".join(out)


def cpu_list_parts(text: str) -> Iterator[tuple[str, str, str | None]]:
    """The parts of a CPU list in the kernel's cpulist format (``"0-2,5"``), blanks skipped:
    (part, low, high or None where the part is one CPU), as text; each reader checks them
    its own way."""
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        yield part, lo, hi if sep else None


def parse_cpu_list(text: str) -> list[int]:
    """``"0-2,5"`` -> ``[0, 1, 2, 5]``; ValueError on anything else (an empty list included)."""
    cores: set[int] = set()
    for part, lo, hi in cpu_list_parts(text):
        a, b = int(lo), int(hi) if hi is not None else int(lo)
        if a < 0 or b < a:
            raise ValueError(f"bad core range {part!r}")
        cores.update(range(a, b + 1))
    if not cores:
        raise ValueError(f"no cores in {text!r}")
    return sorted(cores)


def read_state(d: dict[str, Any]) -> RoofState:
    return RoofState(probe=str(d["probe"]), bytes_per_s=float(d["bytes_per_s"]),
                     median_bytes_per_s=float(d["median_bytes_per_s"]), at_s=float(d["at_s"]))


def read_context(d: Any) -> RoofContext | None:
    """``RoofSet.context`` as stored (None: a file written before it existed)."""
    if not isinstance(d, dict):
        return None
    env = d.get("environment")
    pe = None
    if isinstance(env, dict):
        pe = ProbeEnvironment(
            cores=[int(c) for c in env.get("cores") or []],
            machine_cores=[int(c) for c in env.get("machine_cores") or []],
            cores_from=env.get("cores_from") or "machine",
            variables={str(k): str(v) for k, v in (env.get("variables") or {}).items()},
            threads=dict(env.get("threads") or {}),
            fingerprint={str(k): str(v) for k, v in (env.get("fingerprint") or {}).items()})
    return RoofContext(environment=pe, states=[read_state(s) for s in d.get("states") or []])
