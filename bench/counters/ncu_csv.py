"""What Nsight Compute reports and how roofbench reads it: the metric names the checks need,
the FLOP weights of its roofline, and the ``--csv`` output (raw page or details page) turned
into one LaunchCounters per launch of a pipeline. Plain text any ncu release writes; the
tests' stand-in (tests/standins/fake_ncu) writes the same from the real H200 outputs."""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable
from dataclasses import dataclass

from roofbench.records import LaunchCounters

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
TENSOR_SRC = _T = "sm__ops_path_tensor_src_"
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


class NcuCaseError(RuntimeError):
    """One case could not be profiled (the others still are)."""


def base_name(metric: str) -> str:
    """'dram__bytes_read.sum' -> 'dram__bytes_read' (what --query-metrics lists)."""
    return metric.split(".", 1)[0]


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
        known = [v for v in vals if v is not None]
        return float(sum(known)) if len(known) == len(vals) else None

    metrics = sorted({m for r in rows for m in r.values})
    flops: dict[str, float] = {}
    groups = {p: dict(w) for p, w in FLOP_WEIGHTS.items()}
    groups["fp32"].update(OPTIONAL_FP32)
    for prec, weights in groups.items():
        got = [(v, w) for m, w in weights.items() if m in metrics
               if (v := total(m)) is not None]
        if got:
            flops[prec] = float(sum(v * w for v, w in got))
    tensor = [v for m in tensor_ops if m in metrics if (v := total(m)) is not None]
    if tensor:
        flops["tensor"] = float(sum(tensor))
    dur = total(DURATION)
    occ = None
    occs = [(r.values.get(OCCUPANCY), r.values.get(DURATION)) for r in rows]
    known = [(o, d if d else 1.0) for o, d in occs if o is not None]  # (occupancy, weight)
    if len(known) == len(occs):
        occ = sum(o * w for o, w in known) / sum(w for _, w in known) / 100
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
