"""Nsight Compute counters beside the model: ``roofbench run --ncu``.

After the cases are validated and timed, each valid case runs once more, alone, in a child
process (``python -m roofbench.bench.measure.ncu_case``) under ``ncu``, which reads per launch: DRAM
bytes read and written, L2 bytes, FLOPs per precision as Nsight Compute's roofline counts them
(FMA = 2, a half-precision instruction = 2 lanes, so HADD/HMUL = 2 and HFMA = 4), tensor-core
ops, duration and achieved occupancy. The model (FLOPs and bytes declared by the workload) and
the hardware are then compared per launch and per pipeline within stated tolerances.

Why the CSV page and not a library: ``nsight-python`` (PyPI) profiles by re-running the calling
script under ncu (a whole ``roofbench run``), its 1.x needs Nsight Compute >= 2026.2.1 and
cuda-core/cuda-bindings; ``ncu_report`` (shipped with Nsight Compute, or the 17 MB
``ncu-report`` wheel) reads binary ``.ncu-rep`` files that nothing but a real ncu on a GPU can
write, so its path could not be tested without a GPU. ``ncu --csv --page raw --print-units
base`` is plain text any ncu release writes, one row per kernel, and the stand-in in the tests
writes the same format (from the real H200 outputs).

Failures are one line each (no ncu, too old, counters not permitted, a case that fails under
ncu): the case keeps its timing and model numbers and the run goes on.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roofbench.readers import read_counters
from roofbench.records import LaunchCounters

if TYPE_CHECKING:
    from roofbench.records import CaseResult, RunResult

NCU_ENV = "ROOFBENCH_NCU"  # path of the ncu executable, when it is not on PATH
FALLBACK_PATHS = ("/usr/local/cuda/bin/ncu",)  # where the CUDA toolkit puts it
# The oldest Nsight Compute tried: 2022.3 (CUDA 11.8) is the first release that profiles Hopper.
MIN_VERSION = (2022, 3)
# Clocks as the device runs them (METHOD.md: leave the clocks alone): ncu's default "base"
# locks them to base clocks, and its durations would not compare with the timed medians.
CLOCK_CONTROL = "none"
CACHE_CONTROL = "all"  # flush caches before each launch: every launch starts from DRAM
TIMEOUT_S = 600
CASE_MARK = "ROOFBENCH_NCU_CASE "  # the line ncu_case prints: what it is about to launch
# Backends whose kernels carry their CUDA C names (extern "C"): selectable by exact name.
NAMED_BACKENDS = ("cuda", "pycuda")
# Backends whose runner can bracket the pipeline with cudaProfilerStart/Stop.
RANGE_BACKENDS = ("cuda", "pycuda", "numba")

DRAM_READ = "dram__bytes_read.sum"
DRAM_WRITE = "dram__bytes_write.sum"
L2_BYTES = "lts__t_bytes.sum"
DURATION = "gpu__time_duration.sum"
OCCUPANCY = "sm__warps_active.avg.pct_of_peak_sustained_active"  # "Achieved Occupancy"


def _op(name: str) -> str:
    return f"sm__sass_thread_inst_executed_op_{name}_pred_on.sum"


# FLOPs per thread instruction, as Nsight Compute's roofline weighs them.
FLOP_WEIGHTS: dict[str, dict[str, int]] = {
    "fp64": {_op("dadd"): 1, _op("dmul"): 1, _op("dfma"): 2},
    "fp32": {_op("fadd"): 1, _op("fmul"): 1, _op("ffma"): 2},
    "fp16": {_op("hadd"): 2, _op("hmul"): 2, _op("hfma"): 4},  # half2: 2 lanes a thread
}
# Packed fp32x2 instructions exist on newer GPUs only: collected where the device has them.
OPTIONAL_FP32 = {_op("fadd2"): 2, _op("fmul2"): 2, _op("ffma2"): 4}
# Tensor-core math ops (1 op = 1 FLOP: 2 per multiply-add) by input type. The device lists
# aggregates and their splits side by side (on sm_90: sm__ops_path_tensor_src_fp16, its
# _dst_fp16 / _dst_fp32 parts, each again _sparsity_on / _off, and per instruction family
# sm__ops_path_tensor_op_hmma_* / _hgmma_*), so summing every name of the family would count
# the same ops several times: per input type, the first of these non-overlapping sets the
# device lists entirely is collected.
_T = "sm__ops_path_tensor_src_"
TENSOR_OPS: dict[str, tuple[tuple[str, ...], ...]] = {
    "fp16": ((f"{_T}fp16",), (f"{_T}fp16_dst_fp16", f"{_T}fp16_dst_fp32")),
    "bf16": ((f"{_T}bf16",), (f"{_T}bf16_dst_fp32",),
             (f"{_T}bf16_dst_fp32_sparsity_off", f"{_T}bf16_dst_fp32_sparsity_on")),
    "fp8": ((f"{_T}fp8",), (f"{_T}fp8_dst_fp16", f"{_T}fp8_dst_fp32"),
            (f"{_T}fp8_sparsity_off", f"{_T}fp8_sparsity_on")),
    "fp32": ((f"{_T}tf32_dst_fp32",), (f"{_T}tf32",)),
    "fp64": ((f"{_T}fp64",),),
}
SIMT_FLOPS = tuple(m for w in FLOP_WEIGHTS.values() for m in w)
# What each check needs (its FLOPs also the tensor set of a tensor case's dtype).
CHECK_METRICS = {"FLOPs": SIMT_FLOPS, "DRAM read": (DRAM_READ,), "DRAM write": (DRAM_WRITE,)}
WANTED = (DURATION, L2_BYTES, OCCUPANCY)


class NcuUnavailable(RuntimeError):
    """ncu cannot collect anything on this machine: one line, the reason and the fix."""


class NcuCaseError(RuntimeError):
    """One case could not be profiled (the others still are)."""


def base_name(metric: str) -> str:
    """'dram__bytes_read.sum' -> 'dram__bytes_read' (what --query-metrics lists)."""
    return metric.split(".", 1)[0]


# -- records --------------------------------------------------------------------------------

@dataclass
class NcuSettings:
    """How the counters were collected, stored in each profiled case's extra['ncu']."""

    path: str
    version: str
    clock_control: str = CLOCK_CONTROL
    cache_control: str = CACHE_CONTROL
    metrics: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # wanted but not on this device
    # input dtype -> the tensor-op metrics collected for it ([] when the device lists none)
    tensor_ops: dict[str, list[str]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Tolerances:
    """Allowed hardware/model ratios. DRAM writes may read low: dirty lines still in L2 when a
    kernel ends are written back after it, so the read tolerance is the wider one."""

    flops: float = 0.02
    read: float = 0.05
    write_low: float = 0.10
    write_high: float = 0.05

    def text(self) -> str:
        return (f"FLOPs within {self.flops:.0%}; DRAM reads within {self.read:.0%}; DRAM writes "
                f"from {self.write_low:.0%} low to {self.write_high:.0%} high (dirty lines "
                "still in L2 when a kernel ends are written back after it)")


TOLERANCES = Tolerances()


def as_counters(x: LaunchCounters | dict[str, Any] | None) -> LaunchCounters | None:
    if x is None or isinstance(x, LaunchCounters):
        return x
    return read_counters(x)


# -- the CSV --------------------------------------------------------------------------------

@dataclass
class KernelRow:
    """One profiled kernel of an ncu CSV: metric -> value in base units (bytes, seconds, %)."""

    id: int
    kernel: str
    values: dict[str, float | None]


_SCALE = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
# Time units -> divisor to seconds (a division keeps 207424 ns exactly 0.000207424 s).
_TIME = {"ns": 1e9, "nsecond": 1e9, "us": 1e6, "usecond": 1e6, "ms": 1e3, "msecond": 1e3,
         "s": 1.0, "second": 1.0}
_COUNT_UNIT = re.compile(r"^([KMGTP]?)(byte|B|inst|warp|cycle|op|sector|request|thread)s?$")


def unit_factor(unit: str) -> float:
    """Multiplier from a value in ``unit`` to base units (bytes, counts, percent)."""
    u = unit.strip()
    if u in ("%", ""):
        return 1.0
    m = _COUNT_UNIT.match(u)
    if m:
        return _SCALE[m.group(1)]
    raise ValueError(f"unknown ncu unit {unit!r}")


def parse_value(text: str, unit: str = "") -> float | None:
    """'536,912,896' -> 536912896.0; times in seconds; 'n/a' or '' -> None."""
    t = text.strip().replace(",", "")
    if t.lower() in ("", "n/a", "no data", "nan"):
        return None
    if unit.strip() in _TIME:
        return float(t) / _TIME[unit.strip()]
    return float(t) * unit_factor(unit)


def parse_csv(text: str) -> list[KernelRow]:
    """Kernels of an ncu ``--csv`` output, in profiling order. Reads the raw page (one row per
    kernel, a metric per column, a units row under the header) and the details page (one row
    per metric: 'Metric Name', 'Metric Unit', 'Metric Value'). Lines that are not CSV records
    (==PROF== messages, program output) are skipped."""
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]
    rows = list(csv.reader(lines))
    if not rows:
        return []
    header = rows[0]
    if "ID" not in header or "Kernel Name" not in header:
        raise ValueError("not an ncu CSV (no 'ID' and 'Kernel Name' columns)")
    col = {name: i for i, name in enumerate(header)}
    out: dict[int, KernelRow] = {}
    if "Metric Name" in col and "Metric Value" in col:
        for r in rows[1:]:
            if len(r) != len(header) or r[col["ID"]] == "ID":
                continue
            kid = int(r[col["ID"]])
            kr = out.setdefault(kid, KernelRow(kid, r[col["Kernel Name"]], {}))
            unit = r[col["Metric Unit"]] if "Metric Unit" in col else ""
            kr.values[r[col["Metric Name"]]] = parse_value(r[col["Metric Value"]], unit)
        return [out[k] for k in sorted(out)]
    first_metric = max(col[c] for c in ("ID", "Kernel Name")) + 1
    fixed = {"Process ID", "Process Name", "Host Name", "Context", "Stream", "Block Size",
             "Grid Size", "Device", "CC", "Kernel Time", "Section Name"}
    metric_cols = [i for i in range(first_metric, len(header)) if header[i] not in fixed]
    units = [""] * len(header)
    body = rows[1:]
    if body and body[0][col["ID"]] == "":  # the units row (--print-units)
        units, body = body[0], body[1:]
    for r in body:
        if len(r) != len(header) or r[col["ID"]] == "ID":
            continue
        kid = int(r[col["ID"]])
        out[kid] = KernelRow(kid, r[col["Kernel Name"]],
                             {header[i]: parse_value(r[i], units[i]) for i in metric_cols})
    return [out[k] for k in sorted(out)]


def counters_from_rows(rows: list[KernelRow], tensor_ops: Iterable[str] = ()) -> LaunchCounters:
    """One launch's counters from the kernel(s) it ran (several are summed; occupancy is the
    duration-weighted mean). ``tensor_ops``: the non-overlapping tensor-op metrics of the
    case's input type (TENSOR_OPS), counted as its tensor FLOPs."""
    def total(metric: str) -> float | None:
        vals = [r.values.get(metric) for r in rows]
        return None if any(v is None for v in vals) else float(sum(vals))  # type: ignore[arg-type]

    metrics = sorted({m for r in rows for m in r.values})
    flops: dict[str, float] = {}
    groups = {p: dict(w) for p, w in FLOP_WEIGHTS.items()}
    groups["fp32"].update(OPTIONAL_FP32)
    for prec, weights in groups.items():
        got = [(total(m), w) for m, w in weights.items() if m in metrics]
        got = [(v, w) for v, w in got if v is not None]
        if got:
            flops[prec] = float(sum(v * w for v, w in got))
    tensor = [total(m) for m in tensor_ops if m in metrics]
    tensor = [v for v in tensor if v is not None]
    if tensor:
        flops["tensor"] = float(sum(tensor))
    dur = total(DURATION)
    occ = None
    occs = [(r.values.get(OCCUPANCY), r.values.get(DURATION)) for r in rows]
    if all(o is not None for o, _ in occs):
        weights = [d if d else 1.0 for _, d in occs]
        occ = sum(o * w for (o, _), w in zip(occs, weights, strict=True)) / sum(weights) / 100
    return LaunchCounters(
        kernel="+".join(r.kernel for r in rows), dram_read=total(DRAM_READ),
        dram_write=total(DRAM_WRITE), l2_bytes=total(L2_BYTES), flops=flops,
        duration_s=dur, achieved_occupancy=occ, kernels=len(rows),
        metrics={m: total(m) for m in metrics})


def assign(rows: list[KernelRow], n_launches: int, expected: list[str] | None = None,
           tensor_ops: Iterable[str] = ()) -> list[LaunchCounters]:
    """Profiled kernels -> one LaunchCounters per launch of the pipeline, in order.

    One kernel per launch maps in order (names checked when ``expected`` gives them); a
    single-launch case (a library call) takes every kernel it ran, summed."""
    if not rows:
        raise NcuCaseError("ncu profiled no kernel (check the kernel-name filter)")
    if len(rows) == n_launches:
        if expected is not None:
            got = [r.kernel for r in rows]
            if got != expected:
                raise NcuCaseError(f"ncu profiled kernels {got}, expected {expected}")
        return [counters_from_rows([r], tensor_ops) for r in rows]
    if n_launches == 1:
        return [counters_from_rows(rows, tensor_ops)]
    raise NcuCaseError(f"ncu profiled {len(rows)} kernels for a pipeline of {n_launches} "
                       "launches; cannot tell which is which")


# -- the tool -------------------------------------------------------------------------------

def find_ncu(explicit: str | None = None) -> str:
    """The ncu executable: ``explicit``, $ROOFBENCH_NCU, PATH, then /usr/local/cuda/bin."""
    cand = explicit or os.environ.get(NCU_ENV)
    if cand:
        if Path(cand).is_file() and os.access(cand, os.X_OK):
            return cand
        raise NcuUnavailable(f"ncu not found at {cand} ({NCU_ENV}): point {NCU_ENV} at the "
                             "Nsight Compute CLI executable")
    found = shutil.which("ncu")
    if found:
        return found
    for p in FALLBACK_PATHS:
        if os.access(p, os.X_OK):
            return p
    raise NcuUnavailable("ncu (Nsight Compute CLI) not found: install Nsight Compute (it ships "
                         "with the CUDA toolkit) and put ncu on PATH, or set "
                         f"{NCU_ENV}=/path/to/ncu")


def _run(cmd: list[str], timeout: float, **kw: Any) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    except subprocess.TimeoutExpired:
        raise NcuCaseError(f"{Path(cmd[0]).name} {cmd[1]} timed out after {timeout:.0f} s") \
            from None
    except OSError as e:
        raise NcuUnavailable(f"cannot run {cmd[0]} ({e.strerror})") from None


def ncu_version(path: str) -> str:
    """'2025.3.1.0' from ``ncu --version``."""
    p = _run([path, "--version"], 60)
    m = re.search(r"Version\s+(\d+\.\d+(?:\.\d+)*)", p.stdout + p.stderr)
    if p.returncode != 0 or not m:
        raise NcuUnavailable(f"{path} --version did not give a version: is it Nsight Compute?")
    return m.group(1)


def check_version(version: str) -> None:
    have = tuple(int(x) for x in version.split(".")[:2])
    if have < MIN_VERSION:
        raise NcuUnavailable(
            f"ncu {version} is too old (needs Nsight Compute {MIN_VERSION[0]}.{MIN_VERSION[1]} "
            "or newer): install a current Nsight Compute and put its ncu first on PATH")


_METRIC_NAME = re.compile(r"^([a-z][a-z0-9]*__[a-z0-9_]+)\b")


def parse_query(text: str) -> set[str]:
    """Base metric names listed by ``ncu --query-metrics`` (first column of its table)."""
    names = set()
    for ln in text.splitlines():
        m = _METRIC_NAME.match(ln.strip().strip('"'))
        if m:
            names.add(m.group(1))
    return names


def permission_error(text: str) -> bool:
    return "ERR_NVGPUCTRPERM" in text


PERMISSION_FIX = ("ncu may not read the GPU performance counters (ERR_NVGPUCTRPERM): run as "
                  "root, or allow all users with the nvidia module option "
                  "NVreg_RestrictProfilingToAdminUsers=0 and reload the driver (see "
                  "developer.nvidia.com/ERR_NVGPUCTRPERM)")


def choose_metrics(available: set[str]) -> tuple[list[str], list[str], dict[str, list[str]]]:
    """(metrics to collect, wanted ones this device lacks, tensor-op metrics per input type).
    Only what the device lists is collected; a check whose metrics are missing is skipped
    (``check_skips``), never computed from the rest. NcuUnavailable when no check can run."""
    if not any(base_name(m) in available for need in CHECK_METRICS.values() for m in need):
        raise NcuUnavailable("this device's ncu lists none of the metrics the checks need "
                             f"({', '.join(base_name(m) for m in (DRAM_READ, DRAM_WRITE))}, "
                             "the FLOP instruction counts)")
    metrics: list[str] = []
    missing: list[str] = []
    for m in (*WANTED, DRAM_READ, DRAM_WRITE, *SIMT_FLOPS):
        (metrics if base_name(m) in available else missing).append(m)
    metrics += [m for m in OPTIONAL_FP32 if base_name(m) in available]
    tensor: dict[str, list[str]] = {}
    for dtype, choices in TENSOR_OPS.items():
        pick = next((c for c in choices if all(n in available for n in c)), ())
        tensor[dtype] = [f"{n}.sum" for n in pick]
        if not pick:
            missing.append(f"{choices[0][0]}.sum")
    metrics += sorted({m for ms in tensor.values() for m in ms})
    return metrics, missing, tensor


def check_skips(settings: NcuSettings, c: CaseResult) -> dict[str, str]:
    """Checks of case ``c`` that cannot run with the metrics collected: check -> the metrics
    this device does not list."""
    have = set(settings.metrics)
    out: dict[str, str] = {}
    for check, need in CHECK_METRICS.items():
        absent = [m for m in need if m not in have]
        if check == "FLOPs" and c.unit == "tensor" and not settings.tensor_ops.get(c.dtype):
            absent.append(TENSOR_OPS.get(c.dtype, ((f"{_T}{c.dtype}",),))[0][0] + ".sum")
        if absent:
            out[check] = ", ".join(absent)
    return out


def settings_for(path: str) -> NcuSettings:
    """Version check and the metric list checked against this device's ``--query-metrics``."""
    version = ncu_version(path)
    check_version(version)
    p = _run([path, "--query-metrics"], 120)
    text = p.stdout + p.stderr
    if permission_error(text):
        raise NcuUnavailable(PERMISSION_FIX)
    available = parse_query(p.stdout)
    if p.returncode != 0 or not available:
        raise NcuUnavailable(f"ncu --query-metrics failed: {_last_error(text)}")
    metrics, missing, tensor = choose_metrics(available)
    return NcuSettings(path=path, version=version, metrics=metrics, missing=missing,
                       tensor_ops=tensor)


def _last_error(text: str) -> str:
    errs = [ln.strip() for ln in text.splitlines() if "==ERROR==" in ln]
    lines = errs or [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1][:300] if lines else "no output"


# -- one case -------------------------------------------------------------------------------

def _package_parent() -> Path:
    """The folder from which ``python -m roofbench...`` finds this package (a checkout root or
    site-packages)."""
    import roofbench

    return Path(roofbench.__file__).resolve().parent.parent


def case_command(c: CaseResult, seed: int | None) -> list[str]:
    cmd = [sys.executable, "-m", "roofbench.bench.measure.ncu_case", "--backend", c.backend,
           "--kernel", c.workload, "--variant", c.variant, "--dtype", c.dtype,
           "--size", "x".join(map(str, c.size))]
    if seed is not None:
        cmd += ["--seed", str(seed)]
    if c.backend in RANGE_BACKENDS:
        cmd.append("--profiler-range")
    return cmd


def kernel_functions(c: CaseResult) -> list[str] | None:
    """The CUDA C names of the case's launches, when every launch is one such kernel."""
    if c.backend not in NAMED_BACKENDS:
        return None
    facts = (c.extra or {}).get("launches") or []
    names = [f.get("function") for f in facts]
    if len(names) != len(c.launches) or not all(isinstance(n, str) and n for n in names):
        return None
    return names  # type: ignore[return-value]


def _one_kernel_each(c: CaseResult) -> bool:
    """Every launch is one kernel of ours (no library call, which may launch several)."""
    facts = (c.extra or {}).get("launches") or []
    return len(facts) == len(c.launches) and all(f.get("function") for f in facts)


def ncu_command(settings: NcuSettings, c: CaseResult, log: Path,
                seed: int | None) -> list[str]:
    cmd = [settings.path, "--csv", "--page", "raw", "--print-units", "base",
           "--log-file", str(log), "--metrics", ",".join(settings.metrics),
           "--clock-control", settings.clock_control, "--cache-control", settings.cache_control]
    if c.backend in RANGE_BACKENDS:
        cmd += ["--profile-from-start", "off"]
    names = kernel_functions(c)
    if names is not None:
        alt = "|".join(re.escape(n) for n in dict.fromkeys(names))
        cmd += ["--kernel-name", f"regex:^({alt})$", "--launch-count", str(len(names))]
    elif _one_kernel_each(c):
        cmd += ["--launch-count", str(len(c.launches))]
    return cmd + case_command(c, seed)


def profile_case(settings: NcuSettings, c: CaseResult, seed: int | None = None,
                 timeout: float = TIMEOUT_S) -> list[LaunchCounters]:
    """Run ``c``'s launches once under ncu; one LaunchCounters per launch, in order."""
    with tempfile.TemporaryDirectory(prefix="roofbench-ncu-") as tmp:
        log = Path(tmp) / "ncu.csv"
        p = _run(ncu_command(settings, c, log, seed), timeout, cwd=_package_parent())
        text = log.read_text() if log.exists() else ""
    everything = text + "\n" + p.stdout + "\n" + p.stderr
    if permission_error(everything):
        raise NcuUnavailable(PERMISSION_FIX)
    if p.returncode != 0:
        raise NcuCaseError(f"exit {p.returncode}: {_last_error(everything)}")
    try:
        rows = parse_csv(text)
    except ValueError as e:
        raise NcuCaseError(f"unreadable ncu output: {e}") from None
    tensor = settings.tensor_ops.get(c.dtype, []) if c.unit == "tensor" else []
    counters = assign(rows, len(c.launches), kernel_functions(c), tensor)
    skips = check_skips(settings, c)
    for lc in counters:  # a check without its metrics is left unmeasured, never partial
        if "FLOPs" in skips:
            lc.flops = {}
        if "DRAM read" in skips:
            lc.dram_read = None
        if "DRAM write" in skips:
            lc.dram_write = None
    return counters


def collect(cases: Iterable[CaseResult], *, seed: int | None = None,
            ncu_path: str | None = None, timeout: float = TIMEOUT_S,
            progress: Callable[[str], None] | None = None) -> list[str]:
    """The ``--ncu`` hook: counters for every valid case, attached to its launches
    (``LaunchResult.counters``) and the settings to ``extra['ncu']``. Returns one-line notes
    for the run (why nothing or something was not collected)."""
    todo = [c for c in cases if c.status == "ok"]
    if not todo:
        return []
    try:
        settings = settings_for(find_ncu(ncu_path))
    except (NcuUnavailable, NcuCaseError) as e:
        return [f"ncu: {e}; timings and model numbers are kept"]
    notes = []
    if settings.missing:
        notes.append(f"ncu {settings.version}: not on this device, not collected: "
                     f"{', '.join(settings.missing)}")
    said: set[tuple[str, str]] = set()
    for c in todo:
        for check, absent in check_skips(settings, c).items():
            if (check, absent) not in said:
                said.add((check, absent))
                notes.append(f"ncu {settings.version}: {check} not checked for {c.key} and "
                             f"cases like it: this device does not list {absent}")
        if progress is not None:
            progress(f"ncu {c.key}")
        try:
            counters = profile_case(settings, c, seed, timeout)
        except NcuUnavailable as e:
            notes.append(f"ncu: {e}; timings and model numbers are kept")
            break
        except NcuCaseError as e:
            notes.append(f"ncu {c.key}: {e}")
            continue
        for la, lc in zip(c.launches, counters, strict=True):
            la.counters = lc  # type: ignore[attr-defined]
        c.extra = {**(c.extra or {}), "ncu": settings.to_dict()}
    return notes


# -- model vs hardware ----------------------------------------------------------------------

@dataclass
class Check:
    """One quantity of one launch (or pipeline): the model's figure and the hardware's."""

    quantity: str  # "FLOPs", "DRAM read", "DRAM write"
    model: float
    measured: float | None
    low: float  # allowed ratio range
    high: float

    @property
    def ratio(self) -> float | None:
        if self.measured is None or not self.model:
            return None
        return self.measured / self.model

    @property
    def ok(self) -> bool | None:
        if self.measured is None:
            return None
        if not self.model:
            return self.measured == 0
        return self.low <= self.ratio <= self.high  # type: ignore[operator]

    def flag(self) -> str | None:
        if self.ok is not False:
            return None
        if not self.model:
            return f"{self.quantity}: model 0, hardware {_int(self.measured)}"
        return f"{self.quantity} x{self.ratio:.3f}"


def checks(model_flops: float, model_read: float, model_write: float,
           lc: LaunchCounters, tol: Tolerances = TOLERANCES) -> list[Check]:
    return [Check("FLOPs", model_flops, lc.flops_total, 1 - tol.flops, 1 + tol.flops),
            Check("DRAM read", model_read, lc.dram_read, 1 - tol.read, 1 + tol.read),
            Check("DRAM write", model_write, lc.dram_write, 1 - tol.write_low,
                  1 + tol.write_high)]


def model_split(c: CaseResult) -> list[tuple[int, int]] | None:
    """Model DRAM (read, write) bytes of each launch, from the workload's declaration."""
    from roofbench.kernels.registry import workloads
    from roofbench.kernels.spec import Case

    w = workloads().get(c.workload)
    if w is None or c.variant not in w.variants:
        return None
    case = Case(w, w.variants[c.variant], c.dtype, tuple(c.size))
    bufs = case.buffers()
    out = [(sum(bufs[n].nbytes for n in la.reads), sum(bufs[n].nbytes for n in la.writes))
           for la in case.launches()]
    return out if len(out) == len(c.launches) else None


def _sum_counters(items: list[LaunchCounters]) -> LaunchCounters:
    def add(vals: list[float | None]) -> float | None:
        return None if any(v is None for v in vals) else float(sum(vals))  # type: ignore[arg-type]

    precs = {p for lc in items for p in lc.flops}
    return LaunchCounters(
        kernel="pipeline", dram_read=add([lc.dram_read for lc in items]),
        dram_write=add([lc.dram_write for lc in items]),
        l2_bytes=add([lc.l2_bytes for lc in items]),
        flops={p: sum(lc.flops.get(p, 0.0) for lc in items) for p in precs},
        duration_s=add([lc.duration_s for lc in items]), kernels=sum(lc.kernels for lc in items))


def case_checks(c: CaseResult, tol: Tolerances = TOLERANCES
                ) -> list[tuple[str, LaunchCounters, list[Check]]]:
    """(label, counters, checks) per launch, then the pipeline total for multi-launch cases;
    [] when the case has no counters."""
    lcs = [as_counters(getattr(la, "counters", None)) for la in c.launches]
    if not lcs or any(lc is None for lc in lcs):
        return []
    split = model_split(c)
    rows = []
    for i, (la, lc) in enumerate(zip(c.launches, lcs, strict=True)):
        r, w = split[i] if split else (la.bytes.get("dram", 0), 0)
        label = la.kernel + (f" ({la.note})" if la.note else "")
        rows.append((label, lc, checks(la.flops, r, w, lc, tol)))  # type: ignore[arg-type]
    if len(lcs) > 1:
        tot = _sum_counters(lcs)  # type: ignore[arg-type]
        r = sum(s[0] for s in split) if split else c.bytes.get("dram", 0)
        w = sum(s[1] for s in split) if split else 0
        rows.append(("pipeline", tot, checks(c.flops, r, w, tot, tol)))
    return rows


def hw_dram_ai(c: CaseResult) -> float | None:
    """Model FLOPs / DRAM bytes the hardware moved (all launches): the plot's hollow marker."""
    lcs = [as_counters(getattr(la, "counters", None)) for la in c.launches]
    if not lcs or any(lc is None or lc.dram_total is None for lc in lcs):
        return None
    moved = sum(lc.dram_total for lc in lcs)  # type: ignore[union-attr,misc]
    return c.flops / moved if moved > 0 else None


def _int(v: float | None) -> str:
    return "-" if v is None else f"{v:,.0f}"


def _ratio(ch: Check) -> str:
    r = ch.ratio
    return "-" if r is None else f"{r:.3f}" + ("" if ch.ok else " !")


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


def ncu_section(run: RunResult) -> list[str]:
    """The report's 'Model vs hardware' section (markdown lines); [] when no case has
    counters."""
    profiled = [(c, case_checks(c)) for c in run.cases]
    profiled = [(c, rows) for c, rows in profiled if rows]
    if not profiled:
        return []
    out = ["## Model vs hardware (Nsight Compute)", ""]
    seen = []
    for c, _ in profiled:
        s = (c.extra or {}).get("ncu") or {}
        desc = (f"ncu {s.get('version', '?')}, `--clock-control {s.get('clock_control', '?')}`, "
                f"`--cache-control {s.get('cache_control', '?')}`")
        if s.get("missing"):
            desc += f"; not on this device: {', '.join(s['missing'])}"
        if desc not in seen:
            seen.append(desc)
    out += [f"Counters: {d}." for d in seen]
    out += ["Each case ran once more under ncu, alone. With `--clock-control none` its "
            "durations run at the clocks the timed runs saw; `--cache-control all` starts each "
            "launch from cold caches, so they are not the timed medians above. A check whose "
            "metrics this device does not list is shown as `-` and named under flags.", ""]
    out += [f"Tolerances: {TOLERANCES.text()}. A ratio is hardware / model; `!` marks one "
            "outside its tolerance. FLOPs are counted as Nsight Compute's roofline counts them "
            "(FMA = 2; a half-precision instruction = 2 lanes; tensor ops as reported), so "
            "operations the FLOP convention leaves out (e.g. the FMAs inside an IEEE sqrt) "
            "show up as extra hardware FLOPs.", ""]
    header = ["case", "launch", "FLOPs model", "FLOPs hw", "ratio", "DRAM read model",
              "DRAM read hw", "ratio", "DRAM write model", "DRAM write hw", "ratio",
              "L2 bytes hw", "time (ncu)", "achieved occ.", "flags"]
    rows = []
    for c, crow in profiled:
        for label, lc, chs in crow:
            fl, rd, wr = chs
            flags = [f for f in (ch.flag() for ch in chs) if f]
            flags += [f"{ch.quantity} not checked" for ch in chs if ch.measured is None]
            rows.append([
                c.key, label, _int(fl.model), _int(fl.measured), _ratio(fl),
                _int(rd.model), _int(rd.measured), _ratio(rd),
                _int(wr.model), _int(wr.measured), _ratio(wr), _int(lc.l2_bytes),
                "-" if lc.duration_s is None else f"{lc.duration_s * 1e6:.6g} us",
                "-" if lc.achieved_occupancy is None else f"{lc.achieved_occupancy:.1%}",
                "; ".join(flags) if flags else "ok"])
    out += _table(header, rows) + [""]
    ais = [(c.key, c.ai.get("dram"), hw_dram_ai(c)) for c, _ in profiled]
    ais = [(k, m, h) for k, m, h in ais if m and h]
    if ais:
        out += ["Arithmetic intensity, model FLOPs over model vs measured DRAM bytes: "
                + "; ".join(f"{k} {m:.4g} vs {h:.4g} FLOP/B" for k, m, h in ais), ""]
    return out


def case_json(case: Any, functions: list[str | None], kind: str = "gpu") -> str:
    """The line ncu_case prints before launching: the launches with their model numbers (read
    by the tests' stand-in ncu, and useful in a log)."""
    bufs = case.buffers()
    launches = []
    for la, fn in zip(case.launches(), functions, strict=True):
        launches.append({"kernel": la.kernel, "function": fn, "flops": la.flops,
                         "read": sum(bufs[n].nbytes for n in la.reads),
                         "write": sum(bufs[n].nbytes for n in la.writes)})
    return CASE_MARK + json.dumps({"case": case.key, "dtype": case.dtype,
                                   "unit": case.unit(kind), "launches": launches})
