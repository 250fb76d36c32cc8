"""report.md: a pure function of results.json.

Roofs (measured beside datasheet), every case, the fusion result (naive vs fused: AI, time,
speedup, bytes ratio), where the time of each multi-launch pipeline goes, invalid and skipped
cases with their reasons, and the environment.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
from roofbench.kernels.registry import workloads
from roofbench.roofs.model import RoofSet

from .results import RunResult
from .runner import CaseResult


def _si(v: float | None, unit: str = "") -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    for p, s in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= p:
            return f"{v / p:.3g} {s}{unit}"
    return f"{v:.3g} {unit}".rstrip()


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
            "roof": r.name, "kind": r.kind, "level/precision": key, "value": _si(r.value, r.unit),
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
    for la in (c.extra or {}).get("launches") or []:
        occ = (la.get("occupancy") or {}).get("occupancy")
        if isinstance(occ, (int, float)):
            regs = la.get("registers")
            parts.append(f"{occ:.0%}" + (f" ({regs} regs)" if regs else ""))
    return ", ".join(parts) if parts else "-"


def cases_table(cases: list[CaseResult]) -> pd.DataFrame:
    rows = []
    for c in cases:
        t = c.timing or {}
        occ = occupancy_text(c)
        rows.append({
            "kernel": c.workload, "variant": c.variant, "dtype": c.dtype,
            "size": "x".join(map(str, c.size)), "AI": f"{c.ai.get('dram', 0):.3g}",
            "time": _t(c.median_s), "cv": f"{t['cv']:.1%}" if t.get("cv") is not None else "-",
            "FLOP/s": _si(c.flop_per_s), "B/s": _si(c.bytes_per_s.get("dram")),
            "attainable": _si(c.attainable),
            "efficiency": (f"{c.efficiency:.1%}" + (" (above roof)" if c.efficiency > 1 else ""))
            if c.efficiency else "-",
            "bound": c.bound or "-",
            "occupancy": occ,
            "status": c.status + (" (" + "; ".join(t.get("flags")) + ")"
                                  if t.get("flags") else ""),
        })
    return pd.DataFrame(rows)


def fusion_rows(cases: list[CaseResult]) -> list[dict[str, Any]]:
    """Every (naive -> fused) pair the workloads declare via Variant.arrow_from."""
    ws = workloads()
    idx = {(c.backend, c.workload, c.variant, c.dtype, tuple(c.size)): c for c in cases}
    rows = []
    for c in cases:
        w = ws.get(c.workload)
        v = w.variants.get(c.variant) if w else None
        if v is None or not v.arrow_from:
            continue
        src = idx.get((c.backend, c.workload, v.arrow_from, c.dtype, tuple(c.size)))
        if src is None:
            continue
        both_valid = src.valid and c.valid and src.median_s and c.median_s
        rows.append({
            "workload": c.workload, "dtype": c.dtype, "size": "x".join(map(str, c.size)),
            "from": src.variant, "to": c.variant,
            "AI from": src.ai.get("dram"), "AI to": c.ai.get("dram"),
            "time from": src.median_s, "time to": c.median_s,
            "speedup": (src.median_s / c.median_s) if both_valid else None,
            "bytes ratio": src.bytes["dram"] / c.bytes["dram"],
            "valid": bool(both_valid),
        })
    return rows


def fusion_bound(c: CaseResult) -> float | None:
    """The end-to-end speedup fusion can at most give a memory-bound pipeline: its bytes over
    the bytes of its inputs and outputs alone (what one fused launch must still move)."""
    w = workloads().get(c.workload)
    if w is None or c.variant not in w.variants:
        return None
    from roofbench.kernels.spec import Case

    case = Case(w, w.variants[c.variant], c.dtype, tuple(c.size))
    io = sum(b.nbytes for b in case.buffers().values() if b.role in ("input", "output"))
    return c.bytes["dram"] / io if io else None


def pipeline_rows(c: CaseResult) -> list[dict[str, Any]]:
    times = [(la.timing or {}).get("median_s") for la in c.launches]
    total = sum(t for t in times if t) or None
    rows = []
    for la, t in zip(c.launches, times, strict=True):
        rows.append({"launch": f"{la.kernel}" + (f" ({la.note})" if la.note else ""),
                     "FLOPs": la.flops, "bytes": la.bytes.get("dram"), "time": _t(t),
                     "share": f"{t / total:.1%}" if t and total else "-",
                     "B/s": _si(la.bytes.get("dram", 0) / t if t else None)})
    return rows


def render(run: RunResult) -> str:
    ws = workloads()
    out = [f"# roofbench report: {run.device}", ""]
    out += [f"- backend: `{run.backend}`", f"- created: {run.created}",
            f"- command: `{' '.join(run.command)}`", f"- git commit: `{run.git_commit}`", ""]
    for note in run.notes:
        out.append(f"> {note}")
    if run.notes:
        out.append("")
    out += ["## Roofs", ""]
    if run.roofs:
        out.append(roofs_frame(run.roofs).to_markdown(index=False))
        out.append("")
        rl = ridges(run.roofs)
        if rl:
            out.append("Ridge points (compute / DRAM bandwidth): " + ", ".join(
                f"{p} {x:.3g} FLOP/B ({s})" for s, p, x in rl))
            out.append("")
        if run.roofs.info.get("datasheet"):
            out += [f"Datasheet: {run.roofs.info['datasheet']}", ""]
        failed = run.roofs.info.get("failed_probes")
        if failed:
            out += ["Probes that failed: " + "; ".join(f"{k}: {v}" for k, v in failed.items()
                                                      if isinstance(failed, dict)), ""]
    else:
        out += ["No roofs: points are shown without attainable performance.", ""]

    fus = fusion_rows(run.cases)
    if fus:
        out += ["## Fusion", "",
                "Fusing keeps intermediates out of memory: the bytes ratio is what a "
                "memory-bound device can gain at most; the speedup is what it did.", ""]
        df = pd.DataFrame([{
            "workload": r["workload"], "dtype": r["dtype"], "size": r["size"],
            "from -> to": f"{r['from']} -> {r['to']}",
            "AI": f"{r['AI from']:.3g} -> {r['AI to']:.3g}",
            "time": f"{_t(r['time from'])} -> {_t(r['time to'])}",
            "speedup": f"{r['speedup']:.2f}x" if r["speedup"] else "- (not valid)",
            "bytes ratio": f"{r['bytes ratio']:.2f}x",
        } for r in fus])
        out += [df.to_markdown(index=False), ""]

    ok = [c for c in run.cases if c.status == "ok"]
    out += ["## Cases", ""]
    if ok:
        out += [cases_table(ok).to_markdown(index=False), ""]
        above = [c.key for c in ok if c.efficiency and c.efficiency > 1]
        if above:
            out += [f"Above their roof: {', '.join(above)}. No point can beat a true roof: "
                    "either the roof underestimates the device (a slow or noisy probe; see "
                    "its samples in results.json) or the case moved fewer bytes than counted "
                    "(a re-read served by a cache).", ""]
    else:
        out += ["No case ran to completion.", ""]
    conventions = sorted({ws[c.workload].flop_convention for c in run.cases
                          if c.workload in ws and ws[c.workload].flop_convention})
    if conventions:
        out += ["FLOP conventions: " + " | ".join(conventions), ""]

    pipes = [c for c in ok if len(c.launches) > 1]
    if pipes:
        out += ["## Where the time goes in multi-launch pipelines", ""]
        for c in pipes:
            e2e = c.median_s or 0
            s = sum((la.timing or {}).get("median_s") or 0 for la in c.launches)
            bound = fusion_bound(c)
            out += [f"### {c.workload}/{c.variant} {c.dtype} {'x'.join(map(str, c.size))}", "",
                    f"End to end {_t(e2e)}; sum of launches timed alone {_t(s)}."
                    + (f" Fused into one launch that moves only the inputs and outputs at the "
                       f"same bandwidth, it would be at most {bound:.2f}x faster."
                       if bound else ""), "",
                    pd.DataFrame(pipeline_rows(c)).to_markdown(index=False), ""]

    bad = [c for c in run.cases if c.status != "ok"]
    if bad:
        out += ["## Not measured", "", "Cases that failed validation or could not run "
                "(never plotted as valid points):", ""]
        out += [pd.DataFrame([{"case": c.key, "status": c.status, "reason": c.error}
                              for c in bad]).to_markdown(index=False), ""]

    env = run.environment or {}
    out += ["## Environment", "", f"- host: {env.get('host')}",
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
    return "\n".join(out)
