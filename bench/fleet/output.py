"""The fleet report on disk: fleet.json, fleet.md, fleet.png, one roofs file per rank."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from roofbench.fileio import atomic_write_bytes
from roofbench.readers import read_roof, read_roofset
from roofbench.roof_records import RoofSet
from roofbench.roofline import device_slug
from roofbench.units import si


def write_atomic(path: Path, data: str | bytes) -> None:
    atomic_write_bytes(path, data.encode() if isinstance(data, str) else data)


PROGRESS_FILE = "fleet-progress.json"
PROGRESS_SCHEMA = "roofbench.fleet-progress/1"


def rank_roofs_name(res: dict[str, Any]) -> str:
    return f"rank{res['rank']}-{device_slug(res['roofs']['device'])}.json"


PROGRESS_NOTES = {
    "starting": "rank 0 claimed this folder for a fleet job; if this file outlives the job, "
                "it ended before any rank's result arrived",
    "gathering": "rank 0 is gathering; if this file outlives the job, the pending ranks "
                 "never answered (killed, or the job was aborted)",
    "stopped": "the fleet report was not written: the job ended while rank 0 waited for the "
               "pending ranks",
    "links": "every rank's calibration arrived (their roofs files are here); if this file "
             "outlives the job, the MPI link probes did not finish (the job's stderr says "
             "which)",
}


def write_progress(out: Path, results: list[dict[str, Any]], pending: list[int],
                   state: str, why: str = "", rewrite_roofs: bool = True) -> None:
    """Rank 0's record while it gathers (``state`` "gathering"), rewritten as each rank's
    result arrives, with that rank's roofs file: a job that dies before the report (mpirun
    aborts every rank when one is killed) leaves the results it had and who it was waiting
    for. ``state`` "stopped": rank 0 itself was stopped, ``pending`` are the ranks lost;
    "links": every result arrived and the MPI link probes are running (``rewrite_roofs``
    False: the roofs files were written as the results arrived)."""
    for res in results if rewrite_roofs else []:
        if res["status"] == "ok" and res["roofs"]:
            write_atomic(out / rank_roofs_name(res), json.dumps(res["roofs"], indent=1,
                                                               default=str) + "\n")
    lost = pending if state == "stopped" else []
    write_atomic(out / PROGRESS_FILE, json.dumps(
        {"schema": PROGRESS_SCHEMA, "state": state, "why": why,
         "received": [r["rank"] for r in results], "pending": pending, "lost": lost,
         "note": PROGRESS_NOTES.get(state, PROGRESS_NOTES["gathering"]),
         "ranks": results}, indent=1, default=str) + "\n")


def write_report(rep: dict[str, Any], out: Path) -> None:
    write_atomic(out / "fleet.json", json.dumps(rep, indent=1, default=str) + "\n")
    write_atomic(out / "fleet.md", fleet_markdown(rep))
    link_roofs = rep["interconnect"]["roofs"]
    for res in rep["ranks"]:
        if res["status"] == "ok" and res["roofs"]:
            rs = dict(res["roofs"])
            # Each device's calibrated roofs with the links it was measured over, ready for
            # `roofbench distributed --roofs FILE`.
            rs["roofs"] = list(rs["roofs"]) + link_roofs
            write_atomic(out / rank_roofs_name(res), json.dumps(rs, indent=1, default=str)
                         + "\n")
    if link_roofs:
        write_atomic(out / "links.json", json.dumps(
            {"device": "interconnect", "roofs": link_roofs,
             "info": {"measured_by": "roofbench fleet"}}, indent=1) + "\n")
    png = fleet_plot(rep)
    if png is not None:
        write_atomic(out / "fleet.png", png)
    (out / PROGRESS_FILE).unlink(missing_ok=True)  # the report says everything it said


def md_table(header: list[str], rows: list[list[Any]]) -> str:
    def cell(x: Any) -> str:
        return str(x).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def fleet_markdown(rep: dict[str, Any]) -> str:
    out = _md_header(rep) + _md_ranks(rep) + _md_outliers(rep) + _md_roofs(rep)
    out += _md_interconnect(rep["interconnect"])
    return "\n".join(out) + "\n"


def _md_header(rep: dict[str, Any]) -> list[str]:
    return [f"# Fleet calibration ({rep['world_size']} ranks)", "",
            f"- created {rep['created_utc']}, roofbench {rep['roofbench_version']}, "
            f"launcher: {rep['launcher']}",
            f"- backend requested: {rep['backend_requested']}, quick: {rep['quick']}, "
            f"outlier margin: {rep['margin']:.0%} below the median of the other same-name "
            f"devices, "
            f"timeout per wait: {rep['timeout_s']:g} s", ""]


def _md_ranks(rep: dict[str, Any]) -> list[str]:
    out = ["## Ranks", "", md_table(
        ["rank", "host", "local rank", "gpu", "backend", "device", "status", "time", "error"],
        [[r["rank"], r["host"], r["local_rank"], r["gpu"] or "-", r["backend"] or "-",
          r["device"] or "-", r["status"], f"{r['elapsed_s']:.1f} s", r["error"] or ""]
         for r in rep["ranks"]]), ""]
    notes = [f"- rank {r['rank']}: {n}" for r in rep["ranks"] for n in r["notes"]]
    if notes:
        out += notes + [""]
    return out


def _md_outliers(rep: dict[str, Any]) -> list[str]:
    if not rep["outliers"]:
        return ["No outliers: every device is within the margin of its peers' median "
                "(or has no peer of the same name).", ""]
    return ["## Outliers", ""] + [
        f"- **rank {o['rank']} ({o['host']}, {o['device']})**: {o['roof']} "
        f"{si(o['measured'])} is {o['vs_peers']:.0%} of its peers' median "
        f"{si(o['peer_median'])}" for o in rep["outliers"]] + [""]


def _md_roofs(rep: dict[str, Any]) -> list[str]:
    """One table per rank: each measured roof against its datasheet figure and its peers."""
    by_rank: dict[int, list[dict[str, Any]]] = {}
    for row in rep["comparison"]:
        by_rank.setdefault(row["rank"], []).append(row)
    out: list[str] = []
    for r, rows in sorted(by_rank.items()):
        out += [f"## Rank {r}: {rows[0]['device']} on {rows[0]['host']}", "", md_table(
            ["roof", "kind", "level/precision", "measured", "datasheet", "ratio",
             "vs peers", "outlier"],
            [[x["roof"], x["kind"], x["key"], si(x["measured"], x["unit"]),
              si(x["datasheet"], x["unit"]),
              f"{x['ratio']:.1%}" if x["ratio"] else "- (no datasheet figure)",
              f"{x['vs_peers']:.1%} of {x['peers']}" if x["peers"] else "- (no peer)",
              "**yes**" if x["outlier"] else ""] for x in rows]), ""]
    return out


def _md_interconnect(ic_: dict[str, Any]) -> list[str]:
    out = ["## Interconnect (MPI)", ""]
    if ic_["measurements"]:
        for m in ic_["measurements"]:
            out += [f"### MPI {m['op']} over {m['ranks']} ranks "
                    f"({', '.join(m['info'].get('hosts', []))})", "", md_table(
                        ["bytes", "median time", "cv", "algbw", "busbw"],
                        [[p["bytes"], f"{statistics.median(p['samples_s']) * 1e6:.1f} us",
                          f"{_cv(p['samples_s']):.1%}", si(p["algbw"], "B/s"),
                          si(p["busbw"], "B/s")] for p in m["points"]]), ""]
        for roof in ic_["roofs"]:
            ev = roof["evidence"]
            out.append(f"- roof **{roof['name']}** ({roof['level']}): {si(roof['value'], 'B/s')}"
                       f" at {ev['best_size_bytes']} B, cv {ev.get('cv_at_best', 0):.1%}"
                       f" ({si(ev.get('busbw_at_largest_Bps'), 'B/s')} at the largest size,"
                       f" {ev.get('largest_size_bytes')} B)"
                       + ("".join(f"; {f}" for f in ev.get("flags", []))))
        out.append("- busbw = algbw x 2(n-1)/n for all-reduce (nccl-tests); p2p = bytes / "
                   "(round trip / 2)")
    if ic_["note"]:
        out.append(f"- {ic_['note']}")
    return out


def _cv(xs: list[float]) -> float:
    return statistics.stdev(xs) / statistics.fmean(xs) if len(xs) > 1 else 0.0


def fleet_plot(rep: dict[str, Any]) -> bytes | None:
    """Every device's measured roofs on one log-log chart, one colour per rank."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    sets = [(r["rank"], r["host"], read_roofset(r["roofs"])) for r in rep["ranks"]
            if r["status"] == "ok" and r["roofs"]]
    links = [read_roof(d) for d in rep["interconnect"]["roofs"]]
    if not sets and not links:
        return None
    fig, ax = plt.subplots(figsize=(9, 6))
    x = np.logspace(-3, 4, 300)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    ymax = 1.0
    for i, (rank, host, rs) in enumerate(sets):
        ymax = max(ymax, _plot_device(ax, x, rs, colors[i % len(colors)],
                                      f"rank {rank} {host}: {rs.device}"))
    for lk in links:
        ax.plot(x, lk.value * x, ":", color="0.3", lw=1.2,
                label=f"link {lk.name} {si(lk.value, 'B/s')}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_ylim(top=ymax * 3, bottom=max(ymax * 1e-5, 1.0))
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("attainable FLOP/s")
    ax.set_title(f"Fleet roofs: {len(sets)} device(s), measured")
    ax.grid(True, which="both", alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="lower right")
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue()


def _plot_device(ax: Any, x: Any, rs: RoofSet, col: str, label: str) -> float:
    """One device's measured roofs in its colour; returns its highest compute roof (or 1)."""
    import numpy as np

    styles = ["-", "--", "-.", ":"]
    ymax = 1.0
    mem = rs.memory("dram", "measured")
    comps = sorted({r.key for r in rs.roofs if r.kind == "compute"
                    and r.source == "measured"})
    if mem is not None and not comps:  # bandwidth only: draw the slope alone
        ax.plot(x, mem.value * x, "-", color=col, lw=1.6, label=f"{label} {mem.level}")
    for j, prec in enumerate(comps):
        c = rs.compute(prec, "measured")
        if c is None:
            continue
        y = np.minimum(c.value, mem.value * x) if mem else np.full_like(x, c.value)
        ymax = max(ymax, c.value)
        ax.plot(x, y, styles[j % len(styles)], color=col, lw=1.6, label=f"{label} {prec}")
    return ymax


def summary_text(rep: dict[str, Any], out: Path) -> str:
    lines = [f"fleet: {rep['world_size']} rank(s), report in {out}/fleet.md"]
    for r in rep["ranks"]:
        lines.append(f"  rank {r['rank']} {r['host']}: {r['status']} {r['device'] or ''} "
                     f"{r['error'] or ''}".rstrip())
    for roof in rep["interconnect"]["roofs"]:
        flags = roof["evidence"].get("flags", [])
        lines.append(f"  link {roof['name']}: {si(roof['value'], 'B/s')}"
                     + (f" ({'; '.join(flags)})" if flags else ""))
    if rep["interconnect"]["note"]:
        lines.append(f"  {rep['interconnect']['note']}")
    for o in rep["outliers"]:
        lines.append(f"  OUTLIER rank {o['rank']} {o['host']}: {o['roof']} at "
                     f"{o['vs_peers']:.0%} of peers")
    return "\n".join(lines)
