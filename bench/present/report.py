"""report.md: a pure function of results.json.

Roofs (measured beside datasheet), every case, the fusion result (naive vs fused: AI, time,
speedup, bytes ratio), where the time of each multi-launch pipeline goes, invalid and skipped
cases with their reasons, and the environment.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from roofbench.errors_text import first_line
from roofbench.records import CaseResult, RoofSet, RunResult
from roofbench.units import si

from .fusion import fused_from
from .ncu_section import ncu_section


def _t(s: float | None) -> str:
    if s is None:
        return "-"
    if s < 1e-3:
        return f"{s * 1e6:.3g} us"
    if s < 1:
        return f"{s * 1e3:.3g} ms"
    return f"{s:.3g} s"


def roofs_frame(rs: RoofSet) -> pd.DataFrame:
    rows = []
    for r in rs.roofs:
        key = r.level if r.kind != "compute" else r.precision
        ds = (rs.memory(key, "datasheet") if r.kind == "memory"
              else rs.compute(key, "datasheet") if r.kind == "compute" else None)
        rows.append({
            "roof": r.name, "kind": r.kind, "level/precision": key, "value": si(r.value, r.unit),
            "source": r.source, "probe": r.evidence.get("probe", ""),
            "vs datasheet": (f"{r.value / ds.value:.1%}" if ds is not None and r.source
                             == "measured" else ""),
        })
    return pd.DataFrame(rows)


def ridges(rs: RoofSet) -> list[tuple[str, str, float]]:
    out = []
    precs = sorted({r.precision for r in rs.roofs if r.kind == "compute"})
    for src in ("measured", "datasheet"):
        for p in precs:
            try:
                out.append((src, p, rs.ridge(p, "dram", src)))
            except KeyError:
                continue
    return out


def occupancy_text(c: CaseResult) -> str:
    """Theoretical occupancy of each launch (GPU backends record it per launch), with the
    registers that set it: shown beside efficiency because the two axes are independent."""
    parts = []
    for la in c.launches:
        if la.occupancy is not None:
            regs = la.occupancy.registers_per_thread
            parts.append(f"{la.occupancy.occupancy:.0%}" + (f" ({regs} regs)" if regs else ""))
    return ", ".join(parts) if parts else "-"


def cases_table(cases: list[CaseResult]) -> pd.DataFrame:
    rows = []
    for c in cases:
        t = c.timing
        occ = occupancy_text(c)
        rows.append({
            "kernel": c.workload, "variant": c.variant, "dtype": c.dtype,
            "size": "x".join(map(str, c.size)), "AI": f"{c.ai.get('dram', 0):.3g}",
            "time": _t(c.median_s), "cv": f"{t.cv:.1%}" if t else "-",
            "FLOP/s": si(c.flop_per_s), "B/s": si(c.bytes_per_s.get("dram")),
            "attainable": si(c.attainable),
            "efficiency": (f"{c.efficiency:.1%}" + (" (above roof)" if c.efficiency > 1 else ""))
            if c.efficiency else "-",
            "bound": c.bound or "-",
            "occupancy": occ,
            "status": c.status + (" (" + "; ".join(t.flags) + ")" if t and t.flags else ""),
        })
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class FusionRow:
    """A (naive -> fused) pair of one workload, dtype and size: what fusing bought."""

    workload: str
    dtype: str
    size: str  # "4096x1024"
    src: str  # the variant fused from (Variant.arrow_from)
    dst: str  # the fused variant
    ai_src: float | None  # DRAM intensity, FLOP/B
    ai_dst: float | None
    time_src: float | None  # median seconds
    time_dst: float | None
    speedup: float | None  # time_src / time_dst, None unless both are valid
    bytes_ratio: float  # DRAM bytes of src over dst: the most a memory-bound device can gain
    valid: bool


def fusion_rows(cases: list[CaseResult]) -> list[FusionRow]:
    """Every (naive -> fused) pair the workloads declare via Variant.arrow_from."""
    idx = {(c.backend, c.workload, c.variant, c.dtype, tuple(c.size)): c for c in cases}
    rows = []
    for c, arrow_from in fused_from(cases):
        src = idx.get((c.backend, c.workload, arrow_from, c.dtype, tuple(c.size)))
        if src is None or "unsupported" in (src.status, c.status):
            continue  # a variant this backend cannot run is no fusion result
        both_valid = src.valid and c.valid and src.median_s and c.median_s
        rows.append(FusionRow(
            workload=c.workload, dtype=c.dtype, size="x".join(map(str, c.size)),
            src=src.variant, dst=c.variant, ai_src=src.ai.get("dram"), ai_dst=c.ai.get("dram"),
            time_src=src.median_s, time_dst=c.median_s,
            speedup=(src.median_s / c.median_s) if both_valid else None,
            bytes_ratio=src.bytes["dram"] / c.bytes["dram"], valid=bool(both_valid)))
    return rows


def fusion_bound(c: CaseResult) -> float | None:
    """The end-to-end speedup fusion can at most give a memory-bound pipeline: its bytes over
    the bytes of its inputs and outputs alone (what one fused launch must still move)."""
    io = c.io_bytes()
    return c.bytes["dram"] / io if io else None


def pipeline_rows(c: CaseResult) -> list[dict[str, Any]]:
    times = [la.timing.median if la.timing else None for la in c.launches]
    total = sum(t for t in times if t) or None
    rows = []
    for la, t in zip(c.launches, times, strict=True):
        rows.append({"launch": f"{la.kernel}" + (f" ({la.note})" if la.note else ""),
                     "FLOPs": la.flops, "bytes": la.bytes.get("dram"), "time": _t(t),
                     "share": f"{t / total:.1%}" if t and total else "-",
                     "B/s": si(la.bytes.get("dram", 0) / t if t else None)})
    return rows


def render(run: RunResult) -> str:
    """report.md: the header, then every section of SECTIONS in order."""
    out = _header_lines(run)
    for title, section in SECTIONS:
        out += _guarded(title, section, run)
    return "\n".join(out)


def _header_lines(run: RunResult) -> list[str]:
    """Device, backend, when, the command and the commit; then the run's notes as quotes."""
    out = [f"# roofbench report: {run.device}", "",
           f"- backend: `{run.backend}`", f"- created: {run.created}",
           f"- command: `{' '.join(run.command)}`", f"- git commit: `{run.git_commit}`", ""]
    out += [f"> {note}" for note in run.notes] + ([""] if run.notes else [])
    return out


def _guarded(title: str, section: Callable[[RunResult], list[str]], run: RunResult) -> list[str]:
    """One section on its own: one that fails is named with the reason and the others are
    still written (a report of a partial or older file is still a report)."""
    try:
        return section(run)
    except Exception as e:  # one broken section must not cost the whole report
        return [f"## {title}", "", f"_This section could not be rendered: {first_line(e)}_", ""]


def _roofs_section(run: RunResult) -> list[str]:
    out = ["## Roofs", ""]
    rs = run.roofs
    if rs is None:
        return out + ["No roofs: points are shown without attainable performance.", ""]
    out += [roofs_frame(rs).to_markdown(index=False), ""]
    rl = ridges(rs)
    if rl:
        out += ["Ridge points (compute / DRAM bandwidth): " + ", ".join(
            f"{p} {x:.3g} FLOP/B ({s})" for s, p, x in rl), ""]
    if rs.datasheet is not None:
        entry = f"`{rs.datasheet.entry}` " if rs.datasheet.entry else ""
        out += [f"Datasheet: {entry}({rs.datasheet.reason})", ""]
    if rs.failed_probes:
        out += ["Probes that failed: " + "; ".join(f"{f.probe}: {f.reason}"
                                                   for f in rs.failed_probes), ""]
    out += [f"Note: {n}" for n in rs.notes] + ([""] if rs.notes else [])
    if rs.elapsed_s is not None:
        out += [f"The probes took {rs.elapsed_s:.1f} s.", ""]
    return out


def fusion_table(cases: list[CaseResult]) -> list[dict[str, str]]:
    """The fusion rows as displayed (report.md and report.html)."""
    return [{
        "workload": r.workload, "dtype": r.dtype, "size": r.size,
        "from -> to": f"{r.src} -> {r.dst}",
        "AI": f"{r.ai_src:.3g} -> {r.ai_dst:.3g}",
        "time": f"{_t(r.time_src)} -> {_t(r.time_dst)}",
        "speedup": f"{r.speedup:.2f}x" if r.speedup else "- (not valid)",
        "bytes ratio": f"{r.bytes_ratio:.2f}x",
    } for r in fusion_rows(cases)]


def _fusion_section(run: RunResult) -> list[str]:
    rows = fusion_table(run.cases)
    if not rows:
        return []
    df = pd.DataFrame(rows)
    return ["## Fusion", "",
            "Fusing keeps intermediates out of memory: the bytes ratio is what a "
            "memory-bound device can gain at most; the speedup is what it did.", "",
            df.to_markdown(index=False), ""]


def above_roof_cause(c: CaseResult, roofs: RoofSet | None) -> str:
    """The likely reason a point sits above its roof (no point can beat a true roof)."""
    if c.bound == "memory":
        bound = fusion_bound(c)
        if bound is not None and bound > 1.0001:
            return ("counted bytes include re-reads or temporaries that a cache served "
                    "(the model counts minimum DRAM traffic per launch)")
        return "the bandwidth roof underestimates the device (its probe is slower than this kernel)"
    roof = next((r for r in (roofs.roofs if roofs else []) if r.name == c.limiting_roof), None)
    if roof is not None and not roof.precision.endswith("_tc") and c.unit == "tensor":
        return "held against a CUDA-core roof while it runs on tensor cores"
    if roof is not None and roof.evidence.get("ceiling") == "mma.sync":
        return "the roof is a hand-written mma.sync probe; a library reaches more"
    return "the compute roof underestimates the device (its probe is slower than this kernel)"


def _cases_section(run: RunResult) -> list[str]:
    ok = [c for c in run.cases if c.status == "ok"]
    out = ["## Cases", ""]
    if not ok:
        out += ["No case ran to completion.", ""]
    else:
        out += [cases_table(ok).to_markdown(index=False), ""]
        above = [c for c in ok if c.efficiency and c.efficiency > 1]
        if above:
            out += ["Above their roof (no point can beat a true roof):", ""]
            out += [f"- {c.key}: {c.efficiency:.0%} of {c.limiting_roof}; likely cause: "
                    f"{above_roof_cause(c, run.roofs)}" for c in above]
            out.append("")
    out += _hardware_validation_lines(run)
    out += _vs_library_lines(ok)
    conventions = sorted({c.flop_convention for c in run.cases if c.flop_convention})
    if conventions:
        out += ["FLOP conventions: " + " | ".join(conventions), ""]
    return out


def _vs_library_lines(ok: list[CaseResult]) -> list[str]:
    """Each hand-written variant's FLOP/s as a fraction of the vendor library's on the same
    workload, dtype and size (the hand-written GEMMs' targets are stated against cuBLAS)."""
    lib = {(c.backend, c.workload, c.dtype, tuple(c.size)): c for c in ok
           if c.variant == "library" and c.flop_per_s}
    lines = []
    for c in ok:
        ref = lib.get((c.backend, c.workload, c.dtype, tuple(c.size)))
        if ref is not None and c.variant != "library" and c.flop_per_s:
            lines.append(f"{c.variant} {c.dtype} {'x'.join(map(str, c.size))} "
                         f"{c.flop_per_s / ref.flop_per_s:.2f}")
    return (["Hand-written vs library (FLOP/s ratio): " + ", ".join(lines), ""]
            if lines else [])


def _hardware_validation_lines(run: RunResult) -> list[str]:
    """Kernels whose code has never been validated on real hardware (proven only by compile,
    SASS and CPU models) are marked; a run on that hardware is their first real test."""
    lines = []
    for c in run.cases:
        new_facts = [la.facts for la in c.launches
                     if la.facts is not None and not la.facts.validated_on_hardware]
        new = sorted({f.function or "" for f in new_facts})
        if new:
            lines.append(f"- {c.key} ({', '.join(new)} on {new_facts[0].arch}): not yet "
                         f"validated on hardware before this run; here it is `{c.status}`"
                         + (f" ({c.error})" if c.error else ""))
    return ["Kernels not yet validated on hardware:", "", *lines, ""] if lines else []


def _pipelines_section(run: RunResult) -> list[str]:
    pipes = [c for c in run.cases if c.status == "ok" and len(c.launches) > 1]
    if not pipes:
        return []
    out = ["## Where the time goes in multi-launch pipelines", ""]
    for c in pipes:
        e2e = c.median_s or 0
        s = sum(la.timing.median for la in c.launches if la.timing)
        bound = fusion_bound(c)
        out += [f"### {c.workload}/{c.variant} {c.dtype} {'x'.join(map(str, c.size))}", "",
                f"End to end {_t(e2e)}; sum of launches timed alone {_t(s)}."
                + (f" Fused into one launch that moves only the inputs and outputs at the "
                   f"same bandwidth, it would be at most {bound:.2f}x faster."
                   if bound else ""), "",
                pd.DataFrame(pipeline_rows(c)).to_markdown(index=False), ""]
    return out


PHASES = ("inputs", "compile", "prepare", "validate", "time", "time_launches")


def _phases_section(run: RunResult) -> list[str]:
    """Where the run spent its time: per phase in total (wall, and device seconds where the
    work ran on a GPU), and the slowest cases."""
    timed = [c for c in run.cases if c.phases]
    if not timed:
        return []
    total = {p: sum(c.phases.get(p, 0.0) for c in timed) for p in PHASES}
    dev = {p: sum(c.device_phases.get(p, 0.0) for c in timed) for p in PHASES
           if any(p in c.device_phases for c in timed)}
    grand = sum(total.values()) or 1.0

    def part(p: str, v: float) -> str:
        d = f", device {dev[p]:.1f} s" if p in dev else ""
        return f"{p} {v:.1f} s ({v / grand:.0%}{d})"
    out = ["## Where the run spent its time", "",
           f"{len(timed)} cases, {sum(total.values()):.1f} s in all: " + ", ".join(
               part(p, v) for p, v in total.items() if v), ""]
    if dev:
        out += ["Wall seconds on the host; device seconds by CUDA events around the phase "
                "(inputs drawn, reference and validation computed on the GPU) and, for time, "
                "the sum of the timed samples (warm-ups not counted). A phase far longer than "
                "its device seconds was spent on the host.", ""]

    def cell(c: CaseResult, p: str) -> str:
        w = f"{c.phases.get(p, 0):.2f}"
        return f"{w} / {c.device_phases[p]:.2f}" if p in c.device_phases else w
    slow = sorted(timed, key=lambda c: -sum(c.phases.values()))[:5]
    out += [pd.DataFrame([{"case": c.key, "seconds": f"{sum(c.phases.values()):.2f}",
                           **{(f"{p} (wall / device)" if p in dev else p): cell(c, p)
                              for p in PHASES}}
                          for c in slow]).to_markdown(index=False), ""]
    return out


def _not_measured_section(run: RunResult) -> list[str]:
    bad = [c for c in run.cases if c.status != "ok"]
    if not bad:
        return []
    return ["## Not measured", "", "Cases that failed validation or could not run "
            "(never plotted as valid points):", "",
            pd.DataFrame([{"case": c.key, "status": c.status, "reason": c.error}
                          for c in bad]).to_markdown(index=False), ""]


def _environment_section(run: RunResult) -> list[str]:
    env = run.environment or {}
    out = ["## Environment", "", f"- host: {env.get('host')}",
           f"- platform: {env.get('platform')}"]
    dev = env.get("device") or {}
    for k in ("name", "cores", "numba_threads", "caches", "mem_total", "compute_capability",
              "sm_count", "driver", "cuda"):
        if k in dev:
            out.append(f"- {k}: {dev[k]}")
    libs = env.get("libraries") or {}
    if libs:
        out.append("- libraries: " + ", ".join(f"{k} {v}" for k, v in libs.items()))
    timer = run.timer or {}
    if timer:
        out.append("- timer: " + ", ".join(f"{k}={v}" for k, v in timer.items()))
    out.append("")
    return out


SECTIONS: list[tuple[str, Callable[[RunResult], list[str]]]] = [
    ("Roofs", _roofs_section),
    ("Fusion", _fusion_section),
    ("Cases", _cases_section),
    ("Where the time goes in multi-launch pipelines", _pipelines_section),
    ("Model vs hardware (Nsight Compute)", ncu_section),  # only when run --ncu collected
    ("Where the run spent its time", _phases_section),
    ("Not measured", _not_measured_section),
    ("Environment", _environment_section),
]
