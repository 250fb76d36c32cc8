"""The report's sections, once: report.md (report.py) and report.html (report_html.py) render
the same list. The blocks a section is made of are blocks.py (the section modules build them
too); the names are also reachable here.

A section is a title and blocks: text (a paragraph with Markdown's inline `code` and _emphasis_),
lines (written one under the other), bullet items, a table, a sub-heading, a figure of the
run folder. Each section is a
pure function of the stored run; one that has nothing to say is None (left out), one that
fails is rendered as its title and the reason, and the others are still written.
"""

from __future__ import annotations

from typing import Any

from roofbench.cache_records import PLACEMENT_RULE
from roofbench.records import CaseResult, RunResult
from roofbench.roof_records import RoofSet
from roofbench.roofline import placement_problem
from roofbench.units import duration, si

from .amdahl import amdahl_section
from .blocks import (
    Block,
    Items,
    Lines,
    Section,
    SectionFn,
    Sub,
    Table,
    Text,
)
from .fusion import fusion_bound, fusion_table
from .ncu_section import ncu_section
from .occupancy_scan import occupancy_section
from .roof_state import paired_text, roof_context_lines

# -- roofs ----------------------------------------------------------------------------------

def roofs_rows(rs: RoofSet) -> list[dict[str, Any]]:
    rows = []
    for r in rs.roofs:
        key = r.key
        ds = (rs.memory(key, "datasheet") if r.kind == "memory"
              else rs.compute(key, "datasheet") if r.kind == "compute" else None)
        rows.append({
            "roof": r.name, "kind": r.kind, "level/precision": key, "value": si(r.value, r.unit),
            "source": r.source, "probe": r.evidence.get("probe", ""),
            "vs datasheet": (f"{r.value / ds.value:.1%}" if ds is not None and r.source
                             == "measured" else ""),
        })
    return rows


def ridges(rs: RoofSet) -> list[tuple[str, str, float]]:
    out = []
    precs = sorted({r.key for r in rs.roofs if r.kind == "compute"})
    for src in ("measured", "datasheet"):
        for p in precs:
            try:
                out.append((src, p, rs.ridge(p, "dram", src)))
            except KeyError:
                continue
    return out


def roofs_blocks(rs: RoofSet | None) -> list[Block]:
    if rs is None:
        return [Text("No roofs: points are shown without attainable performance.")]
    out: list[Block] = [Table(roofs_rows(rs), html_columns={
        "evidence": [evidence_html(r.evidence) for r in rs.roofs]})]
    out.append(Lines(roof_context_lines(rs)))  # the roof rule, probe cores, run's states
    rl = ridges(rs)
    if rl:
        out.append(Text("Ridge points (compute / DRAM bandwidth): " + ", ".join(
            f"{p} {x:.3g} FLOP/B ({s})" for s, p, x in rl)))
    if rs.datasheet is not None:
        entry = f"`{rs.datasheet.entry}` " if rs.datasheet.entry else ""
        out.append(Text(f"Datasheet: {entry}({rs.datasheet.reason})"))
    if rs.failed_probes:
        out.append(Text("Probes that failed: " + "; ".join(f"{f.probe}: {f.reason}"
                                                          for f in rs.failed_probes)))
    if rs.notes:
        out.append(Lines([f"Note: {n}" for n in rs.notes]))
    if rs.elapsed_s is not None:
        out.append(Text(f"The probes took {rs.elapsed_s:.1f} s."))
    return out


def evidence_html(ev: dict[str, Any]) -> str:
    """A roof's evidence as a collapsed block of JSON (report.html only)."""
    import html
    import json

    if not ev:
        return ""
    text = json.dumps(ev, indent=1, default=str)
    summary = ev.get("probe") or ev.get("source") or "evidence"
    return (f"<details><summary>{html.escape(str(summary))}</summary>"
            f"<pre>{html.escape(text)}</pre></details>")


def roofs_section(run: RunResult) -> Section:
    return Section("Roofs", roofs_blocks(run.roofs))


# -- fusion ---------------------------------------------------------------------------------

def fusion_section(run: RunResult) -> Section | None:
    rows = fusion_table(run.cases)
    if not rows:
        return None
    return Section("Fusion", [
        Text("Fusing keeps intermediates out of memory: the bytes ratio is what a memory-bound "
             "device can gain at most; the speedup is what it did."), Table(rows)])


# -- cases ----------------------------------------------------------------------------------

def occupancy_text(c: CaseResult) -> str:
    """Theoretical occupancy of each launch (GPU backends record it per launch), with the
    registers that set it: shown beside efficiency because the two axes are independent."""
    parts = []
    for la in c.measurement.launches:
        if la.occupancy is not None:
            regs = la.occupancy.registers_per_thread
            parts.append(f"{la.occupancy.occupancy:.0%}" + (f" ({regs} regs)" if regs else ""))
    return ", ".join(parts) if parts else "-"


def status_notes(c: CaseResult) -> list[str]:
    """What qualifies a case's status: its timing's flags, and no reference to check it."""
    o, t = c.outcome, c.measurement.timing
    out = [] if o.checked or o.status != "ok" else ["not validated: no reference given"]
    return out + (list(t.flags) if t else [])


def cases_rows(cases: list[CaseResult]) -> list[dict[str, Any]]:
    rows = []
    for c in cases:
        i, r, t, notes = c.identity, c.roofline, c.measurement.timing, status_notes(c)
        rows.append({
            "workload": i.workload, "variant": i.variant, "dtype": i.dtype,
            "size": "x".join(map(str, i.size)), "AI": f"{c.declaration.ai.get('dram', 0):.3g}",
            "time": duration(c.measurement.median_s), "cv": f"{t.cv:.1%}" if t else "-",
            "FLOP/s": si(r.flop_per_s), "B/s": si(r.bytes_per_s.get("dram")),
            "attainable": si(r.attainable),
            "efficiency": (f"{r.efficiency:.1%}" + (" (above roof)" if r.efficiency > 1 else ""))
            if r.efficiency else "-",
            "bound": (r.bound or "-") + placed_text(c),
            "occupancy": occupancy_text(c),
            "status": c.outcome.status + (" (" + "; ".join(notes) + ")" if notes else ""),
        })
    return rows


def placed_text(c: CaseResult) -> str:
    """", data in L2" for a case placed on a cache level (its roof is that level's)."""
    pl = c.roofline.placement
    return f", data in {pl.level.upper()}" if pl is not None and pl.level != "dram" else ""


LOW_PRECISION = ("bf16", "fp16", "fp8")  # dtypes whose ops may be held against an fp32 roof


def above_roof_cause(c: CaseResult, roofs: RoofSet | None) -> str:
    """The likely reason a point sits above its roof (no point can beat a true roof)."""
    wrong = placement_problem(c, roofs) if roofs is not None else None
    if wrong:
        return f"held against the wrong memory level ({wrong})"
    if c.roofline.bound == "memory":
        bound = fusion_bound(c)
        if bound is not None and bound > 1.0001:
            return ("counted bytes include re-reads or temporaries that a cache served "
                    "(the model counts minimum DRAM traffic per launch)")
        return "the bandwidth roof underestimates the device (its probe is slower than this kernel)"
    limit = c.roofline.limiting_roof
    roof = next((r for r in (roofs.roofs if roofs else []) if r.name == limit), None)
    if roof is not None and not (roof.precision or "").endswith("_tc") and \
            c.identity.cores == "tensor":
        return "held against a CUDA-core roof while it runs on tensor cores"
    if roof is not None and roof.evidence.get("ceiling") == "mma.sync":
        return "the roof is a hand-written mma.sync probe; a library reaches more"
    dtype = c.identity.dtype
    if roof is not None and dtype in LOW_PRECISION and roofs is not None and \
            roofs.compute(dtype) is None and roof.precision != dtype:
        return (f"held against {roof.name}, the nearest measured roof: no {dtype} roof was "
                f"measured here, and a {dtype} unit (AVX512-BF16, AMX, tensor cores) can "
                "compute faster")
    return "the compute roof underestimates the device (its probe is slower than this kernel)"


BELOW_ROOF = 0.75  # under this fraction of its roof a case's known limit is printed


def cases_section(run: RunResult) -> Section:
    ok = [c for c in run.cases if c.outcome.status == "ok"]
    out: list[Block] = []
    if not ok:
        out.append(Text("No case ran to completion."))
    else:
        out.append(Table(cases_rows(ok)))
        paired = [(c.key, paired_text(c)) for c in ok if c.roofline.paired is not None]
        if paired:
            out += [Text("Efficiency from paired samples: each timed sample was followed by a "
                         "sample of the roof that bounds it, and the efficiency is the median "
                         "of the pairs' ratios (what the case did of what the machine could "
                         "do at that moment):"), Items([f"{k}: {t}" for k, t in paired])]
        if any(placed_text(c) for c in ok):
            out.append(Text(f"Cases placed on a cache level are held against its roof; "
                            f"the rule: {PLACEMENT_RULE}."))
        above = [c for c in ok if c.roofline.efficiency and c.roofline.efficiency > 1]
        if above:
            out += [Text("Above their roof (no point can beat a true roof):"), Items([
                f"{c.key}: {c.roofline.efficiency:.0%} of {c.roofline.limiting_roof}; likely "
                f"cause: {above_roof_cause(c, run.roofs)}" for c in above])]
    below = [c for c in ok if c.declaration.limit_note and c.roofline.efficiency is not None
             and c.roofline.efficiency < BELOW_ROOF]
    if below:
        out += [Text(f"Below {BELOW_ROOF:.0%} of their roof, for a known reason:"), Items([
            f"{c.key}: {c.roofline.efficiency:.0%} of {c.roofline.limiting_roof}; "
            f"{c.declaration.limit_note}" for c in below])]
    new = not_validated_items(run.cases)
    if new:
        out += [Text("Kernels not yet validated on hardware:"), Items(new)]
    ratios = vs_library(ok)
    if ratios:
        out.append(Text("Hand-written vs library (FLOP/s ratio): " + ", ".join(ratios)))
    conventions = sorted({fc for c in run.cases if (fc := c.declaration.flop_convention)})
    if conventions:
        out.append(Text("FLOP conventions: " + " | ".join(conventions)))
    return Section("Cases", out)


def vs_library(ok: list[CaseResult]) -> list[str]:
    """Each hand-written variant's FLOP/s as a fraction of the vendor library's on the same
    workload, dtype and size (the hand-written GEMMs' targets are stated against cuBLAS)."""
    def where(c: CaseResult) -> tuple[str, str, str, tuple[int, ...]]:
        return c.identity.backend, c.identity.workload, c.identity.dtype, tuple(c.identity.size)

    lib = {where(c): c for c in ok if c.identity.variant == "library" and c.roofline.flop_per_s}
    lines = []
    for c in ok:
        ref, i, fs = lib.get(where(c)), c.identity, c.roofline.flop_per_s
        if ref is not None and ref.roofline.flop_per_s and i.variant != "library" and fs:
            lines.append(f"{i.variant} {i.dtype} {'x'.join(map(str, i.size))} "
                         f"{fs / ref.roofline.flop_per_s:.2f}")
    return lines


def not_validated_items(cases: list[CaseResult]) -> list[str]:
    """Kernels whose code has never been validated on real hardware (proven only by compile,
    SASS and CPU models) are marked; a run on that hardware is their first real test."""
    lines = []
    for c in cases:
        facts = [la.facts for la in c.measurement.launches
                 if la.facts is not None and not la.facts.validated_on_hardware]
        new = sorted({f.function or "" for f in facts})
        if new:
            lines.append(f"{c.key} ({', '.join(new)} on {facts[0].arch}): not yet validated "
                         f"on hardware before this run; here it is `{c.outcome.status}`"
                         + (f" ({c.outcome.error})" if c.outcome.error else ""))
    return lines


# -- pipelines, phases, the rest ------------------------------------------------------------

def pipeline_rows(c: CaseResult) -> list[dict[str, Any]]:
    times = [la.timing.median if la.timing else None for la in c.measurement.launches]
    total = sum(t for t in times if t) or None
    rows = []
    for la, t in zip(c.measurement.launches, times, strict=True):
        rows.append({"launch": f"{la.kernel}" + (f" ({la.note})" if la.note else ""),
                     "FLOPs": la.flops, "bytes": la.bytes.get("dram"), "time": duration(t),
                     "share": f"{t / total:.1%}" if t and total else "-",
                     "B/s": si(la.bytes.get("dram", 0) / t if t else None)})
    return rows


def pipelines_section(run: RunResult) -> Section | None:
    pipes = [c for c in run.cases if c.outcome.status == "ok" and len(c.measurement.launches) > 1]
    if not pipes:
        return None
    out: list[Block] = []
    for c in pipes:
        e2e = c.measurement.median_s or 0
        s = sum(la.timing.median for la in c.measurement.launches if la.timing)
        bound = fusion_bound(c)
        i = c.identity
        out += [Sub(f"{i.workload}/{i.variant} {i.dtype} {'x'.join(map(str, i.size))}"),
                Text(f"End to end {duration(e2e)}; sum of launches timed alone {duration(s)}."
                     + (f" Fused into one launch that moves only the inputs and outputs at "
                        f"the same bandwidth, it would be at most {bound:.2f}x faster."
                        if bound else "")),
                Table(pipeline_rows(c))]
    return Section("Where the time goes in multi-launch pipelines", out)


PHASES = ("inputs", "compile", "prepare", "validate", "time", "time_launches")


def phases_section(run: RunResult) -> Section | None:
    """Where the run spent its time: per phase in total (wall, and device seconds where the
    work ran on a GPU), and the slowest cases."""
    timed = [c for c in run.cases if c.measurement.phases]
    if not timed:
        return None
    total = {p: sum(c.measurement.phases.get(p, 0.0) for c in timed) for p in PHASES}
    dev = {p: sum(c.measurement.device_phases.get(p, 0.0) for c in timed) for p in PHASES
           if any(p in c.measurement.device_phases for c in timed)}
    grand = sum(total.values()) or 1.0

    def part(p: str, v: float) -> str:
        d = f", device {dev[p]:.1f} s" if p in dev else ""
        return f"{p} {v:.1f} s ({v / grand:.0%}{d})"
    out: list[Block] = [Text(f"{len(timed)} cases, {sum(total.values()):.1f} s in all: "
                             + ", ".join(part(p, v) for p, v in total.items() if v))]
    if dev:
        out.append(Text("Wall seconds on the host; device seconds by CUDA events around the "
                        "phase (inputs drawn, reference and validation computed on the GPU) and, "
                        "for time, the sum of the timed samples (warm-ups not counted). A phase "
                        "far longer than its device seconds was spent on the host."))

    def cell(c: CaseResult, p: str) -> str:
        w = f"{c.measurement.phases.get(p, 0):.2f}"
        return (
            f"{w} / {c.measurement.device_phases[p]:.2f}" if p in c.measurement.device_phases else w
        )

    slow = sorted(timed, key=lambda c: -sum(c.measurement.phases.values()))[:5]
    out.append(Table([{"case": c.key, "seconds": f"{sum(c.measurement.phases.values()):.2f}",
                       **{(f"{p} (wall / device)" if p in dev else p): cell(c, p)
                          for p in PHASES}} for c in slow]))
    return Section("Where the run spent its time", out)


def not_measured_section(run: RunResult) -> Section | None:
    bad = [c for c in run.cases if c.outcome.status != "ok"]
    if not bad:
        return None
    return Section(
        "Not measured",
        [
            Text("Cases that failed validation or could not run (never plotted as valid points):"),
            Table(
                [
                    {"case": c.key, "status": c.outcome.status, "reason": c.outcome.error}
                    for c in bad
                ]
            ),
        ],
    )


def environment_section(run: RunResult) -> Section:
    env = run.environment or {}
    items = [f"host: {env.get('host')}", f"platform: {env.get('platform')}"]
    dev = env.get("device") or {}
    for k in ("name", "cores", "numba_threads", "caches", "mem_total", "compute_capability",
              "sm_count", "driver", "cuda"):
        if k in dev:
            items.append(f"{k}: {dev[k]}")
    libs = env.get("libraries") or {}
    if libs:
        items.append("libraries: " + ", ".join(f"{k} {v}" for k, v in libs.items()))
    timer = run.timer or {}
    if timer:
        items.append("timer: " + ", ".join(f"{k}={v}" for k, v in timer.items()))
    return Section("Environment", [Items(items)])


SECTIONS: list[tuple[str, SectionFn]] = [
    ("Roofs", roofs_section),
    ("Fusion", fusion_section),
    ("Cases", cases_section),
    ("Occupancy scan", occupancy_section),  # only for `roofbench occupancy`
    ("Where the time goes in multi-launch pipelines", pipelines_section),
    ("Which launch first (Amdahl)", amdahl_section),
    ("Model vs hardware (Nsight Compute)", ncu_section),  # only when run --ncu collected
    ("Where the run spent its time", phases_section),
    ("Not measured", not_measured_section),
    ("Environment", environment_section),
]
