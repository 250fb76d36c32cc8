"""A trace placed: each counted unit a case of the run schema (its calls' times from the
trace are its samples), on its precision's roof (``profile``'s ``op_case``); the whole trace
one case of workload ``program``; the Amdahl ranking; written as every run is
(results.json with a ``trace`` record, trace.md, roofline.png/.svg, trace.html).

A trace records no storages, so no reuse distance: each op is placed as ``profile`` places
an op alone and ``measure()`` a case, by its own bytes (its recorded inputs and outputs, each
once: the least its reuse distance can be), on the smallest cache level whose measured sweep
holds them (``roofline.place``, the rule of ``bench/profile/levels.py``), else DRAM; roofs with
no cache sweep (a GPU's) hold every op against DRAM. That level is the fastest its data can
have come from, so the roof is the highest the op can meet: an op whose data came from
further out sits below it, never above. Above 105% an op is flagged (invalid, the likely
cause said) and never plotted as valid (``measure.above_roof.flag_above_roof``).
"""

from __future__ import annotations

import hashlib
import platform
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from roofbench.bench.measure.above_roof import ABOVE, flag_above_roof
from roofbench.bench.present.amdahl import Share, roof_time
from roofbench.bench.present.blocks import Block, Image, Items, Section, Table, Text
from roofbench.bench.profile.common import DTYPES, OpPlace, compute_dtype, op_case
from roofbench.bench.profile.op_counts import CONVENTION
from roofbench.bench.profile.recording import Recording
from roofbench.bench.profile.report import Profile, family_rows, op_rows
from roofbench.bench.trace.analyse import Analysis
from roofbench.bench.trace.comm import placed_row
from roofbench.bench.trace.xplane import FLOPS_BY as XLA_COUNTS

from roofbench.fileio import atomic_write_text
from roofbench.records import CaseResult, Declaration, Evidence, Identity, Outcome, RunResult
from roofbench.roof_records import RoofSet
from roofbench.timing import Timing
from roofbench.units import duration, si

SHOWN = 25
RECORD_SHAPES = ("the trace was recorded without shapes: ops are timed, not counted; record "
                 "with torch.profiler.profile(..., record_shapes=True)")


@dataclass
class TraceProfile:
    """What ``roofbench.trace`` returns (``write(out)`` saves it)."""

    name: str
    device: str
    roofs: RoofSet | None
    roofs_from: str
    analysis: Analysis
    ops: list[OpPlace]
    program: CaseResult
    notes: list[str] = field(default_factory=list)
    comm: list[dict[str, Any]] = field(default_factory=list)  # comm.placed_row's rows

    @property
    def ops_s(self) -> float:
        return self.analysis.ops_s

    @property
    def trace_s(self) -> float:
        return self.analysis.trace_s

    @property
    def unclaimed_s(self) -> float:
        return self.analysis.unclaimed_s

    def record(self) -> dict[str, Any]:
        """The ``trace`` record of results.json: what the trace held and what was charged."""
        a = self.analysis
        return {"files": a.files, "gpu": a.gpu, "device_properties": a.device,
                "roofs_from": self.roofs_from, "trace_s": a.trace_s, "ops_s": a.ops_s,
                "unclaimed_s": a.unclaimed_s,
                "unclaimed": dict(sorted(a.unclaimed.items(), key=lambda kv: -kv[1])),
                "uncounted": [{"op": o.name, "calls": o.calls, "time_s": o.total_s,
                               "why": o.counted.why} for o in a.ops
                              if o.counted.distinct is None],
                "uncounted_kernels": a.uncounted_kernels, "steps": a.steps,
                "ranks": a.ranks, "links": a.links, "shapes": a.has_shapes,
                "communication": self.comm}

    def write(self, out: str | Path) -> list[Path]:
        """Into ``out``, or its first free sibling when it holds a run (never over one)."""
        from roofbench.bench.results import claim_folder

        got = claim_folder(Path(out))
        if got != Path(out):
            print(f"roofbench: {out} holds a run already: this trace writes {got}",
                  file=sys.stderr)
        return write_trace(self, got)


def _case(op: Any, gpu: bool, backend: str) -> CaseResult:
    """The record of one distinct op (one call), as ``profile`` records its ops."""
    # the variant names the inputs, so that two traces of one model pair op by op
    # (`roofbench compare`): the same op and inputs, the same case
    variant = "op-" + hashlib.sha1(op.signature.encode()).hexdigest()[:10]
    return op_case(op, gpu, backend, variant, "roofbench.trace",
                   {"timed": "in the trace (each call's recorded duration)"})


def own_working_set(op: Any) -> int:
    """The working set an op is placed by in a trace: its own bytes (read and written, each
    span once), as ``profile`` places an op alone (bench/profile/levels.py)."""
    return int(op.bytes)


def place(a: Analysis, rs: RoofSet | None, roofs_from: str, device: str,
          name: str) -> TraceProfile:
    from roofbench.bench.measure.core import fill_metrics

    backend = "cuda" if a.gpu else "cpu"
    places: list[OpPlace] = []
    for i, st in enumerate(a.ops):
        d = st.counted.distinct
        if d is None or not st.times_s:
            continue
        d.index, d.calls = i, st.calls
        if a.gpu and st.kernels:
            d.device = "cuda"
        rec = _case(d, a.gpu, backend)
        rec.evidence.extra["kernels"] = st.kernels
        if st.kernel_names:
            rec.evidence.extra["kernel_names"] = sorted(st.kernel_names)[:8]
        if st.total_s > 0:
            fill_metrics(rec, Timing(list(st.times_s), 0, "trace",
                                     {"source": "profiler trace"}), rs,
                         own_working_set(d) if rs is not None else None)
            flag_above_roof(rec, rs)
            if rec.outcome.error:  # the level came from the op's own bytes (module doc)
                rec.outcome.error = rec.outcome.error.replace(
                    "by its data's reuse distance", "by its own bytes (no storages in a "
                    "trace)")
        else:
            rec.outcome.status = "invalid"
            rec.outcome.error = "no time in the trace (no device work charged)"
        places.append(OpPlace(d, rec))
    whole = max(a.trace_s, a.ops_s) or 1.0
    for p in places:
        total = sum(a.ops[p.op.index].times_s)
        rt = roof_time(p.op.flops, p.case.declaration.bytes, p.case.identity.precision, rs)
        p.share = Share(f"{p.op.name} #{p.op.index}", total, total / whole,
                        rt * p.op.calls if rt is not None else None)
    program = _program(a, places, rs, backend)
    tp = TraceProfile(name, device, rs, roofs_from, a, places, program, list(a.notes),
                      [placed_row(c, rs) for c in a.comm])
    if tp.comm and not any(r["roof"] for r in tp.comm):
        tp.notes.append("communication kernels: not placed (no measured interconnect roof "
                        "or no message sizes): their time is listed, on no roof")
    if not a.has_shapes:
        tp.notes.append(RECORD_SHAPES)
    over = [p for p in places if p.case.outcome.status == "invalid" and p.case.roofline
            .efficiency is not None and p.case.roofline.efficiency > ABOVE]
    if over:
        tp.notes.append(f"{len(over)} op(s) above {ABOVE:.0%} of their roof: flagged invalid, "
                        "not plotted (each is held against the level its own bytes fit in; "
                        "roofs with no cache sweep hold every op against DRAM, which data "
                        "that stayed in a cache passes)")
    return tp


def _program(a: Analysis, places: list[OpPlace], rs: RoofSet | None,
             backend: str) -> CaseResult:
    from roofbench.bench.measure.core import fill_metrics

    flops = sum(p.op.flops * p.op.calls for p in places)
    nbytes = sum(p.op.bytes * p.op.calls for p in places)
    dt = compute_dtype([p.op for p in places]) if places else "float32"
    prec = "fp32"
    if places:
        by: dict[str, int] = {}
        for p in places:
            by[p.case.identity.precision] = by.get(p.case.identity.precision, 0) + \
                p.op.flops * p.op.calls
        prec = max(by, key=lambda k: by[k])
    c = CaseResult(
        Identity(workload="program", variant="trace", backend=backend,
                 dtype=DTYPES.get(dt, dt), size=[sum(o.calls for o in a.ops)], precision=prec,
                 cores="tensor" if prec.endswith("_tc") else "simt"),
        Declaration(flops=flops, bytes={"dram": nbytes} if nbytes else {},
                    ai={"dram": flops / nbytes} if nbytes else {}, marker="*"),
        Outcome(status="ok", checked=False),
        evidence=Evidence(extra={"measured_by": "roofbench.trace", "files": a.files,
                                 "time": "the trace's op time (CPU) or device busy time"}))
    if a.trace_s > 0:
        fill_metrics(c, Timing([a.trace_s], 0, "trace", {"source": "profiler trace"}), rs,
                     None)
        flag_above_roof(c, rs)
    return c


# ------------------------------------------------------------------------------- report


def _as_profile(tp: TraceProfile) -> Profile:
    """The report's rows come from ``profile``'s own table builders."""
    prof = Profile(tp.name, tp.device, tp.roofs, Recording([], [p.op for p in tp.ops], set(),
                                                           set()),
                   tp.ops, tp.program, "profiler trace")
    return prof


def _pct(x: float, whole: float) -> str:
    return f"{x / whole:.1%}" if whole else "-"


def sections(tp: TraceProfile) -> list[Section]:
    a = tp.analysis
    prof = _as_profile(tp)
    what = "device busy time (the GPU's kernels, memcpys and memsets)" if a.gpu \
        else "op time (the top-level ops, summed over threads)"
    head: list[Block] = [Items([
        f"files: {', '.join(Path(f).name for f in a.files)} ({len(a.ranks)} rank(s))",
        f"the trace's {what}: {duration(a.trace_s)}",
        f"charged to ops: {duration(a.ops_s)} ({_pct(a.ops_s, a.trace_s)})",
        f"no op claims: {duration(a.unclaimed_s)} ({_pct(a.unclaimed_s, a.trace_s)})",
        f"counted: {sum(1 for o in a.ops if o.counted.distinct)} of {len(a.ops)} distinct "
        f"ops; FLOPs {si(tp.program.declaration.flops, '')}, bytes "
        f"{si(tp.program.declaration.bytes.get('dram', 0), 'B')}",
        f"roofs: {tp.roofs_from}",
        "kernels linked to ops: " + (", ".join(f"{k} {v}" for k, v in a.links.items())
                                     or "none (a CPU trace)")])]
    out = [Section(f"Trace: {tp.name}", head)]
    if a.ranks and len(a.ranks) > 1:
        out.append(Section("Ranks", [Table([{"rank": r["rank"], "file": Path(r["file"]).name,
                                             "ops": duration(r["ops_s"]),
                                             "trace": duration(r["trace_s"])}
                                            for r in a.ranks])]))
    if a.steps:
        out.append(Section("Steps", [Table([{"rank": s["rank"], "step": s["step"],
                                             "ops": duration(s["ops_s"])}
                                            for s in a.steps])]))
    if tp.ops:
        out.append(Section("By op family", [Table(family_rows(prof))]))
        rows = op_rows(prof)
        blocks: list[Block] = [Text("Ranked by the most the whole can gain if that op alone "
                                    "reached its roof (Amdahl). Times are the trace's: "
                                    "time/call is the median of the calls."),
                               Table(rows[:SHOWN])]
        if len(rows) > SHOWN:
            blocks.append(Text(f"{len(rows) - SHOWN} more ops in results.json."))
        out.append(Section("Ops (Amdahl ranking)", blocks))
    if tp.comm:
        out.append(Section("Communication", [
            Text("NCCL/RCCL kernels, on no op and no memory roof: each call's bus bytes "
                 "(nccl-tests' busbw) over the kernel's own duration, the median call, on "
                 "the measured interconnect roof (docs/trace.md)."),
            Table([{"kernel": f"`{r['kernel'][:60]}`", "collective": r["collective"] or "-",
                    "calls": r["calls"], "time": duration(r["time_s"]),
                    "bus bytes/call": si(r["bus_bytes_per_call"], "B")
                    if r["bus_bytes_per_call"] else "-",
                    "bus B/s": si(r["bus_bytes_per_s"], "B/s") if r["bus_bytes_per_s"]
                    else "-",
                    "roof": r["roof"] or "-",
                    "% of roof": f"{r['efficiency']:.0%}" if r["efficiency"] is not None
                    else "-",
                    "note": r.get("why", "")} for r in tp.comm[:SHOWN]])]))
    lost = sorted(a.unclaimed.items(), key=lambda kv: -kv[1])[:SHOWN]
    if lost:
        out.append(Section("Time no op claims", [Table([{"what": k, "time": duration(v),
                                                        "share": _pct(v, a.trace_s)}
                                                       for k, v in lost])]))
    unc = [o for o in a.ops if o.counted.distinct is None][:SHOWN]
    if unc:
        out.append(Section("Not counted (timed only)", [Table([
            {"op": f"`{o.name}`", "calls": o.calls, "time": duration(o.total_s),
             "why": o.counted.why} for o in unc])]))
    if a.uncounted_kernels:
        out.append(Section("Kernels not counted", [Table([
            {"kernel": k[:80], "time": duration(v)}
            for k, v in sorted(a.uncounted_kernels.items(), key=lambda kv: -kv[1])[:SHOWN]])]))
    if tp.ops and all(p.op.flops_by == XLA_COUNTS for p in tp.ops):
        out.append(Section("Counting conventions", [
            Text(f"Each XLA op: {XLA_COUNTS}, on the optimized HLO the xplane carries; "
                 "bytes are its operands read and its output written (docs/trace.md).")]))
        return out
    out.append(Section("Counting conventions", [
        Text("The rules of `roofbench.profile` (docs/model.md), applied to the inputs the "
             "trace recorded (docs/trace.md)."),
        Table([{"family": k, "FLOP convention": v} for k, v in CONVENTION.items()])]))
    return out


def write_trace(tp: TraceProfile, out: Path) -> list[Path]:
    from roofbench.bench.present.plot import plot_roofline
    from roofbench.bench.present.report import section_lines
    from roofbench.bench.results import environment, git_commit, save_run, utc_stamp

    cases = [p.case for p in tp.ops] + [tp.program]
    info = {"kind": "gpu" if tp.analysis.gpu else "cpu", "name": tp.device,
            "python": platform.python_version()}
    run = RunResult(backend=tp.program.identity.backend, device=tp.device, roofs=tp.roofs,
                    cases=cases, environment=environment(info),
                    command=["roofbench.trace", *tp.analysis.files], created=utc_stamp(),
                    git_commit=git_commit(Path.cwd()), notes=list(tp.notes),
                    trace=tp.record())
    paths = [save_run(run, out)]
    fig: list[Path] = []
    if tp.roofs is not None:
        shown = [c for c in cases if c.declaration.flops > 0 and c.measurement.median_s]
        if shown:
            fig = plot_roofline([tp.roofs], [shown], out / "roofline",
                                f"{tp.name} on {tp.device}: the trace's ops")
    secs = sections(tp)
    if fig:
        secs.insert(1, Section("Roofline", [Image("roofline.png", "the trace's ops")]))
    body = [f"# roofbench trace: {tp.name}", "", f"- device: {tp.device}",
            f"- created: {run.created}", f"- git commit: `{run.git_commit}`", ""]
    body += [f"> {n}" for n in tp.notes] + ([""] if tp.notes else [])
    for s in secs:
        body += section_lines(s)
    md = out / "trace.md"
    atomic_write_text(md, "\n".join(body))
    html = out / "trace.html"  # report.html is `roofbench report`'s
    svg = next((p for p in fig if p.suffix == ".svg"), None)
    atomic_write_text(html, _html(tp, secs, svg))
    return paths + [md, html, *fig]


def _html(tp: TraceProfile, secs: list[Section], svg: Path | None) -> str:
    """One self-contained page: the sections as report.html renders them, the plot's SVG."""
    from html import escape

    from roofbench.bench.present.report_html import section_html

    parts = [s for s in (section_html(x) for x in secs if x.title != "Roofline")
             if s is not None]
    if svg is not None and svg.is_file():
        text = svg.read_text()
        parts.insert(0, ("Roofline", text[text.index("<svg"):]))
    notes = "".join(f"<p>{escape(n)}</p>" for n in tp.notes)
    body = "\n".join(f"<h2>{escape(h)}</h2>\n{b}" for h, b in parts)
    title = escape(f"roofbench trace: {tp.name}")
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{title}'
            f"</title></head>\n<body><h1>{title}</h1>\n<p>device {escape(tp.device)}</p>"
            f"{notes}\n{body}\n</body></html>\n")
