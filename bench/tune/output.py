"""A tune's files, in a folder claimed as a session's (never written over): results.json and
results.csv (every configuration timed, as a run's cases: `roofbench report`, `plot` and
`compare` read it), tune.json (the ``TuneRecord``), tune.md (the configurations best first,
ties marked, the stop reason and the headroom) and tune.png/.svg (the configurations as a
cloud under the roof, the chosen one marked)."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

from roofbench.fileio import atomic_write_text
from roofbench.records import CaseResult, RunResult
from roofbench.roof_records import RoofSet
from roofbench.units import duration

from ..results import claim_folder, environment, git_commit, process_command, save_run, utc_stamp
from .record import STOPS, TuneRecord

FILES = ("results.json", "results.csv", "tune.json", "tune.md", "tune.png", "tune.svg")


def tagged_cases(rec: TuneRecord) -> list[CaseResult]:
    """Copies of every timed or validated configuration's case, each with what the tune made
    of it in ``evidence.extra["tune"]`` (its status, rank, tie with the best, chosen)."""
    ranks = {r.index: r for r in rec.ranking}
    best = rec.best
    out = []
    for t in rec.trials:
        if t.case is None:
            continue
        c = copy.deepcopy(t.case)
        r = ranks.get(t.index)
        c.evidence.extra["tune"] = {
            "config": dict(t.config), "status": t.status, "why": t.why,
            "rank": r.rank if r else None, "ties_best": r.ties_best if r else None,
            "chosen": best is not None and t.index == best.index}
        out.append(c)
    return out


def run_of(rec: TuneRecord, roofs: RoofSet | None, clock: Any, note: str | None,
           timer: dict[str, Any]) -> RunResult:
    """The run every configuration's case belongs to (a session's, one device)."""
    run = RunResult(backend=clock.backend_name, device=rec.device, roofs=roofs,
                    cases=tagged_cases(rec), environment=environment(clock.info()),
                    command=process_command(), created=utc_stamp(),
                    git_commit=git_commit(Path.cwd()), timer=dict(timer))
    if note:
        run.notes.append(note)
    run.notes.append(f"roofbench tune {rec.name}: {rec.stop} ({rec.stop_detail})")
    f = rec.finals
    run.notes.append(f"roofbench tune {rec.name}: finals: " + (rec.finals_note if f is None else (
        f"{f.verdict}: " + "; ".join(
            f"{m.rival_label} against {m.champion_label}"
            + (f" {m.ratio:.4f} [{m.lo:.4f}, {m.hi:.4f}] (time rival / champion, "
               f"{m.pairs} ABBA pairs)" if m.ratio is not None and m.lo is not None
               and m.hi is not None else "") + f": {m.outcome}" for m in f.meetings))))
    return run


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


def render(rec: TuneRecord) -> str:
    """tune.md: what was chosen and why the search stopped, then every configuration."""
    best = rec.best
    lines = [f"# Tune: {rec.name} on {rec.device}", ""]
    if best is None:
        lines.append("**No configuration was valid**: nothing is chosen.")
    else:
        eff = rec.efficiency
        top = next(r for r in rec.ranking if r.index == best.index)
        span = ("its median's 95% interval" if top.interval_s is not None else
                f"the range of its {len(best.samples_s)} samples: too few for an interval")
        lines.append(f"**Chosen: {best.label}**, median {duration(best.median(rec.basis))}"
                     + (f", {_pct(eff[0])}-{_pct(eff[1])} of its roof ({span})" if eff else "")
                     + f" (times compared {_basis_words(rec.basis)}).")
    drop = ("off" if rec.drop_at is None
            else f"at {rec.drop_at:g}x after {rec.screen_samples} samples")
    lines += ["", f"Stopped: **{rec.stop}**: {STOPS.get(rec.stop, rec.stop)} "
                  f"({rec.stop_detail}).",
              f"Headroom left: {'-' if rec.headroom is None else f'{rec.headroom:.3g}x'} "
              "(the best's interval's slow end over the least time at its roof of the best "
              "and of every configuration not tried)."
              + (f" Target {rec.target:.0%}; budget "
                 f"{'none' if rec.budget_s is None else f'{rec.budget_s:g} s'}; early drop "
                 f"{drop}"
                 f"{'; exhaustive' if rec.exhaustive else ''}; {duration(rec.wall_s)} in all."),
              ""]
    if rec.search_would_stop:
        n, why = rec.search_would_stop
        lines += [f"Without --exhaustive the search would have stopped after {n} "
                  f"configuration(s) ({why}).", ""]
    lines += finals_lines(rec)
    counts = {s: rec.count(s) for s in ("ok", "dropped", "pruned", "invalid", "error",
                                         "untried") if rec.count(s)}
    lines += ["Configurations: " + ", ".join(f"{n} {s}" for s, n in counts.items())
              + (f", {len(rec.excluded)} excluded by the space's constraints"
                 if rec.excluded else "") + ".", ""]
    lines += ["| rank | configuration | median | 95% interval of the median | of its roof | "
              "at its roof | samples | vs the next |", "|---|---|---|---|---|---|---|---|"]
    for r in rec.ranking:
        t = rec.trial(r.index)
        iv = (f"{duration(r.interval_s[0])}-{duration(r.interval_s[1])}"
              if r.interval_s else "too few samples")
        tie = ("tie with the best" if r.rank > 1 and r.ties_best else "")
        nxt = {True: "faster (significant)", False: "tie", None: "-"}[r.differs_from_next]
        mark = " **(chosen)**" if best is not None and r.index == best.index else (
            f" ({tie})" if tie else "")
        lines.append(f"| {r.rank} | {t.label}{mark} | {duration(r.median_s)} | {iv} | "
                     f"{_pct(t.efficiency)} | {duration(t.roof_time_s)} | "
                     f"{len(t.samples_s)} | {nxt} |")
    rest = [t for t in rec.trials if t.status != "ok"]
    if rest:
        lines += ["", "| configuration | status | why |", "|---|---|---|"]
        lines += [f"| {t.label} | {t.status} | {t.why or ''} |" for t in rest]
    if rec.excluded:
        lines += ["", "Excluded by the space's constraints: "
                  + "; ".join(f"{lab} ({why})" for lab, why in rec.excluded) + "."]
    return "\n".join(lines) + "\n"


def finals_lines(rec: TuneRecord) -> list[str]:
    """The finals in tune.md: who met whom, the paired ratio and its interval, the verdict."""
    f = rec.finals
    if f is None:
        return [f"Finals: {rec.finals_note or 'none'}.", ""]
    out = [f"Finals: {f.verdict} ({duration(f.wall_s)}; each tie with the loop's best met the "
           "champion in ABBA pairs in one job; time rival / time champion, the gate's "
           "paired statistic).", "",
           "| champion | rival | time rival / champion [95%] | pairs | verdict | outcome |",
           "|---|---|---|---|---|---|"]
    for m in f.meetings:
        iv = (f" [{m.lo:.4f}, {m.hi:.4f}]" if m.lo is not None and m.hi is not None
              else " (no interval)")
        ratio = "-" if m.ratio is None else f"{m.ratio:.4f}{iv}"
        why = f": {m.why}" if m.outcome.endswith("invalid") and m.why else ""
        out.append(f"| {m.champion_label} | {m.rival_label} | {ratio} | {m.pairs} | "
                   f"{m.verdict} {m.statistic} | {m.outcome}{why} |")
    return [*out, ""]


def _basis_words(basis: str) -> str:
    return ("on paired samples: each time scaled by its roof's rate beside it"
            if basis == "paired" else "on raw times")


def plot_tune(rec: TuneRecord, cases: list[CaseResult], roofs: RoofSet | None,
              out_base: Path) -> list[Path]:
    """tune.png and tune.svg: ``tune_figure``."""
    from ..present.plot import save_figure

    return save_figure(tune_figure(rec, cases, roofs), out_base)


def tune_figure(rec: TuneRecord, cases: list[CaseResult], roofs: RoofSet | None) -> Any:
    """The configurations timed to the end as a cloud of points under the roof
    (``present/plot.build_figure``), the chosen one ringed in red and named."""
    from ..present.figure_data import point_xy
    from ..present.plot import build_figure

    shown = [c for c in cases if c.evidence.extra.get("tune", {}).get("status") == "ok"]
    rf = build_figure([roofs] if roofs is not None else [], [shown],
                      f"tune {rec.name} on {rec.device}: {len(shown)} configurations",
                      dense_above=0)
    chosen = next((c for c in shown if c.evidence.extra["tune"]["chosen"]), None)
    if chosen is not None:
        x, y = point_xy(chosen)
        if y:
            rf.ax.plot([x], [y], marker="o", ms=14, mfc="none", mec="#b00000", mew=2.0,
                       linestyle="none", zorder=9, label="chosen")
            rf.ax.annotate(f"chosen: {rec.best.label if rec.best else ''}", (x, y),
                           xytext=(12, -14), textcoords="offset points", fontsize=8,
                           color="#b00000", zorder=9)
    return rf


def write_tune(rec: TuneRecord, out: Path, roofs: RoofSet | None, clock: Any,
               note: str | None = None, timer: dict[str, Any] | None = None) -> Path:
    """Every file of the tune into ``out`` (or the first free sibling: ``claim_folder``,
    said on stderr); returns the folder written."""
    folder = claim_folder(out, FILES)
    if folder != out:
        print(f"roofbench: {out} holds a run already: this tune writes {folder}",
              file=sys.stderr, flush=True)
    run = run_of(rec, roofs, clock, note, timer or {})
    save_run(run, folder)
    atomic_write_text(folder / "tune.json", json.dumps(rec.to_dict(), indent=1,
                                                       allow_nan=True) + "\n")
    atomic_write_text(folder / "tune.md", render(rec))
    plot_tune(rec, run.cases, roofs, folder / "tune")
    return folder
