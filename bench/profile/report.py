"""A profile written out: results.json (the run schema: each distinct op a case, the program
and its compiled twin cases of workload ``program``), profile.md (the report below) and
roofline.png/.svg (the project's plot, with the eager -> compiled arrow).

The report: the whole program (measured end to end, the sum of its ops timed alone, the
gap between them stated as framework and dispatch overhead), the families, every distinct
op ranked by Amdahl's bound, the fusion groups with their predicted bound beside the
compiled program's measured speedup, and the counting conventions.

``Profile`` (what ``roofbench.profile`` returns) lives here with its report, so that the
profile modules below (``fusion``, ``compiled``, ``jax_program``) take it from a
module that imports none of them.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from roofbench.bench.present.amdahl import ranked, roof_time
from roofbench.bench.present.amdahl import rows as amdahl_rows
from roofbench.bench.present.blocks import Block, Image, Items, Section, Table, Text
from roofbench.bench.present.figure_data import noise_flags
from roofbench.bench.present.plot_dense import DENSE_POINTS
from roofbench.bench.present.roof_state import paired_text
from roofbench.bench.profile.common import OpPlace, ridge_of
from roofbench.bench.profile.op_counts import CONVENTION, FAMILIES, SPECIAL
from roofbench.bench.profile.recording import Recording

from roofbench.fileio import atomic_write_text
from roofbench.records import CaseResult, RunResult
from roofbench.roof_records import RoofSet
from roofbench.roofline import roof_precision
from roofbench.units import duration, si

SHOWN_OPS = 25  # rows of the projection's table
# Ops ranked in profile.md: every op the plot numbers (beyond plot_dense.DENSE_POINTS the
# plot draws dots without numbers), so each number on the plot is a row here.
RANKED_OPS = DENSE_POINTS


@dataclass
class Profile:
    """What ``roofbench.profile`` returns (``write(out)`` saves it: ``write_profile``)."""

    name: str
    device: str
    roofs: RoofSet | None
    recording: Recording
    ops: list[OpPlace]
    program: CaseResult
    clock: str  # "host clock" or "CUDA events"
    notes: list[str] = field(default_factory=list)
    groups: list[Any] = field(default_factory=list)  # fusion.Group
    compiled: Any = None  # compiled.Compiled
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ops_s(self) -> float:
        """The ops' seconds in one run of the program: the median over the timed runs of
        each run's calls summed (in-program timing), else each op's median x its calls."""
        runs = self.extra.get("ops_run_s")
        if runs:
            return float(statistics.median(runs))
        return sum(p.total_s for p in self.ops)

    @property
    def program_s(self) -> float:
        return self.program.measurement.median_s or 0.0

    @property
    def overhead_s(self) -> float:
        """The whole program's time beyond the sum of its ops timed alone (framework,
        dispatch, allocation; negative when the ops ran faster in the program)."""
        return self.program_s - self.ops_s

    def ranking(self) -> list[OpPlace]:
        return [p for s in ranked([p.share for p in self.ops if p.share])
                for p in self.ops if p.share is s]

    def families(self) -> list[dict[str, Any]]:
        """Time, share, FLOPs and bytes by op family (calls counted)."""
        whole = max(self.program_s, self.ops_s) or 1.0
        out = []
        for fam in FAMILIES:
            ps = [p for p in self.ops if p.op.family == fam]
            if not ps:
                continue
            t = sum(p.total_s for p in ps)
            fl = sum(p.op.flops * p.op.calls for p in ps)
            by = sum(p.op.bytes * p.op.calls for p in ps)
            out.append({"family": fam, "calls": sum(p.op.calls for p in ps),
                        "distinct": len(ps), "time_s": t, "share": t / whole, "flops": fl,
                        "bytes": by, "ai": fl / by if by else None})
        return out

    def write(self, out: str | Path) -> list[Path]:
        """Write into ``out``, or its first free sibling when ``out`` holds a run or an input
        (``results.claim_folder``): never over a results file, said when it moves."""
        from roofbench.bench.results import claim_folder

        got = claim_folder(Path(out))
        if got != Path(out):
            print(f"roofbench: {out} holds a run already: this profile writes {got}",
                  file=sys.stderr)
        return write_profile(self, got)

    def project(self, roofs: RoofSet | str | Path) -> Any:
        """This profile's counts on another device's roofs (``project.Projection``,
        kept in ``extra['projection']`` for the report): lower bounds, not measurements."""
        from roofbench.bench.profile.project import load_target, project

        proj = (project(self, roofs) if isinstance(roofs, RoofSet)
                else project(self, load_target(roofs), f"`{roofs}`"))
        self.extra["projection"] = proj.to_dict()
        return proj


def _ai(v: float | None) -> str:
    return f"{v:.3g}" if v is not None else "-"


def _pct(v: float | None) -> str:
    return f"{v:.1%}" if v is not None else "-"


def _eff(c: CaseResult) -> str:
    if c.roofline.efficiency is None:
        return "-"
    r = c.roofline
    return f"{r.efficiency:.1%} of {r.limiting_roof}" + (
        " (bytes/s)" if c.declaration.flops == 0 else "")


def flags_text(c: CaseResult | None) -> str:
    """What qualifies a case's figures: not valid (its cause), noisy (its cause), as its
    record carries them; "-" when nothing does."""
    if c is None:
        return "-"
    out = [f"not valid: {c.outcome.error}"] if c.outcome.status == "invalid" else []
    out += noise_flags(c)
    return "; ".join(out) or "-"


def order_text(c: CaseResult) -> str:
    """Whether the op's rank holds over the timed runs (its evidence's ``rank_tie_with``:
    the neighbours whose interval overlaps its own); "-" when not judged."""
    ties = c.evidence.extra.get("rank_tie_with")
    if ties is None:
        return "-"
    return f"tie with #{', #'.join(map(str, ties))}" if ties else "sure"


def bound_text(c: CaseResult) -> str:
    """Its bound, with the level it was held against when that is not DRAM: the plot's x
    axis is DRAM intensity, so "compute" against an L1 roof must say so."""
    b = c.roofline.bound
    if b is None:
        return "-"
    pl = c.roofline.placement
    if pl is not None and pl.level != "dram":
        return f"{b}, against {pl.level.upper()} (data in {pl.level.upper()})"
    return b


def program_rows(prof: Profile) -> list[dict[str, Any]]:
    cases = [prof.program] + ([prof.compiled.case] if prof.compiled and prof.compiled.case
                              else [])
    out = []
    for c in cases:
        d = c.declaration
        b = d.bytes.get("dram", 0)
        out.append({"program": c.identity.variant, "FLOPs": si(d.flops, ""), "bytes": si(b, "B"),
                    "FLOP/B": _ai(d.ai.get("dram")), "time": duration(c.measurement.median_s),
                    "FLOP/s": si(c.roofline.flop_per_s, "FLOP/s"),
                    "bound": bound_text(c), "of its roof": _eff(c), "flags": flags_text(c)})
    return out


def op_rows(prof: Profile) -> list[dict[str, Any]]:
    ranked = prof.ranking()
    amd = {r["launch"]: r for r in amdahl_rows([p.share for p in ranked if p.share])}
    out = []
    for p in ranked:
        c, a = p.case, amd.get(p.share.name if p.share else "", {})
        out.append({"rank": a.get("rank", "-"), "op": f"`{p.op.name}`", "family": p.op.family,
                    "calls": p.op.calls, "inputs": p.op.signature,
                    "FLOPs/call": si(p.op.flops, ""), "bytes/call": si(p.op.bytes, "B"),
                    "FLOP/B": _ai(c.declaration.ai.get("dram")),
                    "time/call": duration(c.measurement.median_s),
                    "share": a.get("share", "-"), "bound": bound_text(c),
                    "of its roof": _eff(c), "distance": a.get("distance to roof", "-"),
                    "whole gains at most": a.get("whole gains at most", "-"),
                    "order": order_text(c), "flags": flags_text(c)})
    return out


def family_rows(prof: Profile) -> list[dict[str, Any]]:
    return [{"family": f["family"], "calls": f["calls"], "distinct ops": f["distinct"],
             "time": duration(f["time_s"]), "share": _pct(f["share"]),
             "FLOPs": si(f["flops"], ""), "bytes": si(f["bytes"], "B"),
             "FLOP/B": _ai(f["ai"])} for f in prof.families()]


def group_rows(prof: Profile) -> list[dict[str, Any]]:
    out = []
    timed = {t.group: t for t in prof.compiled.groups} if prof.compiled else {}
    launch = prof.extra.get("launch_s")
    for i, g in enumerate(prof.groups):
        fused_t = g.fused_roof_s(prof.roofs)
        bound = g.bounded_speedup(prof.roofs, launch)
        t = timed.get(i)
        out.append({"group": f"G{i}", "ops": " -> ".join(g.names), "occurs": g.count,
                    "FLOPs": si(g.flops, ""), "eager bytes": si(g.eager_bytes, "B"),
                    "fused bytes": si(g.fused_bytes, "B"), "bytes ratio": f"{g.ratio:.3g}x",
                    "FLOP/B": f"{_ai(g.ai_eager)} -> {_ai(g.ai_fused)}",
                    "eager time": duration(g.eager_s), "fused at roof": duration(fused_t),
                    "predicted bound": f"{bound:.3g}x" if bound else "-",
                    "beyond the bytes": _beyond(prof, g, launch)})
        if t is not None:
            sp = t.speedup
            out[-1]["replayed eager -> compiled"] = (
                f"{duration(t.eager.measurement.median_s)} -> "
                f"{duration(t.compiled.measurement.median_s)}: "
                f"{sp:.3g}x ({len(t.kernels)} kernel(s))"
                if t.compiled and sp
                else f"not compiled: {t.error}"
            )
            # a replay above its roof is not valid, as an op: named, not drawn
            flags = [f"{v}: {f}" for v, c in (("eager", t.eager), ("compiled", t.compiled))
                     if (f := flags_text(c)) != "-"]
            out[-1]["replay flags"] = "; ".join(flags) or "-"
            call = prof.compiled.call_s if prof.compiled.call_s is not None \
                else prof.extra.get("launch_s")
            pc = g.predicted_compiled_s(prof.roofs, call)
            comp = t.compiled.measurement.median_s if t.compiled else None
            if sp and pc and comp:
                # The replay's speedup predicted (its eager time over the predicted compiled
                # one) over the one measured: the compiled time measured over predicted.
                out[-1]["predicted compiled"] = duration(pc)
                out[-1]["predicted / measured"] = f"{comp / pc:.3g}"
                out[-1]["why not within 2x"] = (_why_off(g, t, fused_t, call)
                                                if not 0.5 <= comp / pc <= 2 else "-")
    return out


def _beyond(prof: Profile, g: Any, launch: float | None) -> str:
    """What a fused kernel at the roof would gain beyond what fusion's bytes and launches
    explain, and why: the eager ops ran below their roof (their rate, not fusion's)."""
    explained = g.explained_speedup(launch)
    at_roof = g.predicted_speedup(prof.roofs, launch)
    if explained is None or at_roof is None or at_roof <= explained * 1.05:
        return "-"
    rt = roof_time(g.flops, {"dram": g.eager_bytes}, g.precision, prof.roofs)
    rate = f" at {100 * rt / g.eager_s:.2g}% of their roof" if rt and g.eager_s else ""
    return (f"{at_roof:.3g}x at the roof: the eager ops ran{rate}; a faster kernel, not "
            f"fusion, would explain the rest")


def _why_off(g: Any, t: Any, fused_t: float | None, call_s: float | None) -> str:
    """What, measured, puts a group's compiled replay more than 2x off its prediction: the
    compiled time against its parts (the fused bytes at the roof, a compiled call's cost),
    and the replayed eager time against the one in the program."""
    comp = t.compiled.measurement.median_s
    why = [f"the compiled replay took {duration(comp)} against {duration(fused_t)} for the "
           f"fused bytes at the roof + {duration(call_s)} for a compiled call"]
    special = sorted({n for n in g.names if n in SPECIAL})
    if special:
        why.append(f"it computes {', '.join(special)}, counted 0 FLOPs by the convention: "
                   "the bound leaves their cost out")
    if len(t.kernels) > 1:
        why.append(f"{len(t.kernels)} kernels generated (the call's cost is one kernel's)")
    alone = t.eager.measurement.median_s
    if alone and g.eager_s and not 0.5 <= g.eager_s / alone <= 2:
        why.append(f"its ops took {duration(g.eager_s)} in the program, "
                   f"{duration(alone)} replayed alone")
    return "; ".join(why)


def compiled_lines(prof: Profile) -> list[str]:
    c = prof.compiled
    if c is None:
        return []
    if c.case is None:
        return [f"`torch.compile` failed: {c.error}"]
    eager, comp = prof.program, c.case
    me, mc = eager.measurement.median_s, comp.measurement.median_s
    speed = (me / mc) if me and mc else None
    ratio = c.bytes_ratio
    kernels = ", ".join(f"`{k}`" for k in c.kernels) or "-"
    lib = f"; library calls kept: {', '.join(c.extern)}" if c.extern else ""
    first = (f"`torch.compile` (inductor) generated {len(c.kernels)} kernel(s): {kernels}"
             f"{lib}; first call (trace, generate, build) {duration(c.compile_s)}.")
    ae, ac = eager.declaration.ai.get("dram"), comp.declaration.ai.get("dram")
    second = (f"Program eager -> compiled: {_ai(ae)} -> {_ai(ac)} FLOP/B (the compiled "
              f"program's bytes are the fusion model's, {si(c.fused_bytes, 'B')}: inductor's "
              f"kernels run below the dispatcher); measured {duration(me)} -> {duration(mc)}")
    if speed:
        second += f": speedup {speed:.3g}x"
    if ratio and eager.roofline.bound == "compute":
        second += (f"; bytes ratio {ratio:.3g}x, but the program is compute-bound: fewer "
                   "bytes do not bound its time")
    elif ratio:
        second += f", against a bytes ratio of {ratio:.3g}x (the bound while memory-bound)"
    out = [first, second + "."]
    w = c.warmup
    if w is not None:
        out.append(f"Timed after {len(w.call_s)} warm-up call(s) "
                   f"({', '.join(duration(x) for x in w.call_s[:6])}"
                   f"{', ...' if len(w.call_s) > 6 else ''}), {w.recompiles} recompile(s)"
                   + ("" if w.settled else ": the calls had NOT settled (each still more than "
                      "1.5x the one before, or still compiling): the time may hold a "
                      "recompile's cost") + ".")
    pred = predicted_compiled_s(prof)
    if pred and mc and not 0.5 <= mc / pred <= 2:
        out.append(f"Predicted and measured disagree: the compiled program took "
                   f"{duration(mc)}, {mc / pred:.3g}x the {duration(pred)} predicted (the "
                   "eager program less what each fusion group's predicted bound saves); "
                   + _compiled_why(prof, me, mc) + ".")
    return out


def predicted_compiled_s(prof: Profile) -> float | None:
    """The compiled program's time predicted: the eager program's, less the share of its
    ops' time each fusion group saves at its predicted bound (its eager time less that over
    the bound; shares of the ops' sum in the program, the runs the groups' times come from,
    so a program timed under other load keeps its own scale), never under the compiled
    program's time at its roofs."""
    me, ops = prof.program_s, prof.ops_s
    if not me or not ops:
        return None
    launch = prof.extra.get("launch_s")
    saved = 0.0
    for g in prof.groups:
        b = g.bounded_speedup(prof.roofs, launch)
        if b and b > 1:
            saved += g.count * (g.eager_s - g.eager_s / b)
    comp = prof.compiled.case if prof.compiled is not None else None
    floor = (roof_time(comp.declaration.flops, comp.declaration.bytes,
                       comp.identity.precision, prof.roofs) if comp is not None else None)
    return max(me * max(ops - saved, 0.0) / ops, floor or 0.0)


def _compiled_why(prof: Profile, me: float | None, mc: float) -> str:
    """What, measured, stands behind a compiled time more than 2x off its prediction."""
    c = prof.compiled
    why = []
    if me and mc > me:
        why.append(f"inductor's code ran {mc / me:.3g}x slower than the eager program's aten "
                   "kernels here (its generated loops, not the bytes, set the time)")
    if c.warmup is not None and (c.warmup.recompiles or not c.warmup.settled):
        why.append(f"{c.warmup.recompiles} recompile(s) in the warm-up"
                   + ("" if c.warmup.settled else ", the calls unsettled"))
    if c.extern:
        why.append(f"library calls kept ({', '.join(c.extern)}) run as in eager: fusion "
                   "saves only around them")
    pred = predicted_compiled_s(prof)
    ee, ec = prof.program.roofline.efficiency, c.case.roofline.efficiency if c.case else None
    if pred and mc < pred / 2 and ee and ec and ec > ee:
        why.append(f"the eager program ran at {_pct(ee)} of its roof, the compiled one at "
                   f"{_pct(ec)}: inductor's kernels run nearer the roof than the eager ops, "
                   "beyond what fusion's bytes and launches explain")
    if prof.program.roofline.bound == "compute":
        why.append("the program is compute-bound: fewer bytes do not bound its time")
    noisy = [f for x in (prof.program, c.case) if x is not None for f in noise_flags(x)]
    if noisy:
        why.append("the timing: " + "; ".join(noisy))
    if not prof.groups and me and mc < me:
        why.append("no fusion group was found: the prediction saves nothing, inductor "
                   "gained elsewhere (its own kernels for ops the groups leave out)")
    return "; ".join(why) or "no measured cause found: said, not explained"


def _roofs_line(prof: Profile, rid: float | None) -> str:
    rs = prof.roofs
    if rs is None:
        return "no roofs: nothing placed"
    m, c = rs.memory("dram"), rs.compute(prof.program.identity.precision)
    parts = [f"roofs from {prof.extra.get('roofs_from', '-')}"]
    if m is not None:
        parts.append(f"DRAM {si(m.value, 'B/s')} ({m.name})")
    if c is not None:
        parts.append(f"{prof.program.identity.precision} {si(c.value, 'FLOP/s')} ({c.name})")
    if rid:
        parts.append(f"ridge {_ai(rid)} FLOP/B")
    return ", ".join(parts)


def _load_line(prof: Profile, load: tuple[float, ...] | None) -> str:
    """The machine's load average (1, 5, 15 min) when the profile started and was written:
    other processes on a shared machine slow every op and every roof measured there."""
    start = prof.extra.get("load_start")
    parts = [f"started {', '.join(f'{x:.2f}' for x in start)}"] if start else []
    if load:
        parts.append(f"written {', '.join(f'{x:.2f}' for x in load)}")
    threads = prof.extra.get("torch_threads")
    return (f"load average (1, 5, 15 min) {'; '.join(parts) or 'unknown'} on "
            f"{os.cpu_count()} cores" + (f"; torch threads {threads}" if threads else ""))


def _timed_line(prof: Profile, calls: int, distinct: int) -> str:
    runs = prof.extra.get("in_program_runs")
    if not runs:
        return (f"{calls} aten calls, {distinct} distinct ops, each timed alone "
                f"({prof.clock}) on its first call's cloned arguments; the program timed end "
                "to end the same way.")
    return (f"{calls} aten calls, {distinct} distinct ops, each call timed where it runs "
            f"({prof.clock} around it) in {runs} runs of the program (the times shown, "
            "tables and plot); each distinct op also replayed alone on its first call's "
            "cloned arguments, its data warm (results.json: evidence.extra.alone); the "
            "program timed end to end without the timing mode.")


def _sum_lines(prof: Profile) -> list[str]:
    gap = prof.overhead_s
    lines = [f"sum of the ops in the program (each run's calls summed, median run): "
             f"{duration(prof.ops_s)}"]
    alone = prof.extra.get("ops_alone_s")
    if alone is not None:
        lines.append(f"sum of the ops alone, data warm (median x calls): {duration(alone)}")
    walls, sums = prof.extra.get("run_wall_s") or [], prof.extra.get("ops_run_s") or []
    if walls and sums:
        ratio = statistics.median(o / w for o, w in zip(sums, walls, strict=True) if w)
        lines.append(f"the ops' share of each timed run's wall (median): {ratio:.1%} "
                     "(the rest: Python between the ops and the timing mode's own cost)")
    same = prof.extra.get("ops_over_program")
    if same is not None:  # inprogram.in_run_ratios: both sides from one run
        lo_hi = prof.extra.get("ops_over_program_spread")
        n = len(prof.extra.get("ops_over_program_runs") or [])
        lines.append(f"the ops over the program in the same run (each run's ops summed over "
                     f"that run's program time, the timing mode's own cost taken out): median "
                     f"{same:.3f}" + (f", [{lo_hi[0]:.3f}, {lo_hi[1]:.3f}] over {n} runs"
                                       if lo_hi else ""))
    over, per_call = prof.extra.get("profiler_overhead_s"), prof.extra.get(
        "profiler_overhead_call_s")
    if over and per_call:
        lines.append(f"profiler overhead (the timing mode's entry into Python for each call, "
                     f"untimed: an empty op through it and without it, in each run), taken "
                     f"out of each run's program time: median {duration(statistics.median(over))}"
                     f" per run ({duration(statistics.median(per_call))} per call x "
                     f"{len(prof.recording.calls)} calls)")
    paired = prof.extra.get("ops_over_eager_paired")
    if paired is not None:
        lines.append(f"the ops over the eager program, run by run (each timed run followed "
                     f"by one eager run; median): {paired:.3f}")
    lines += [f"the whole program: {duration(prof.program_s)}",
              f"framework and dispatch overhead (program - sum of ops): "
              f"{'-' if gap < 0 else ''}{duration(abs(gap))}"
              + (" (negative: the ops took longer in their timed runs than the program in "
                 "its own; on a loaded machine the runs differ)" if gap < 0 else "")]
    return lines


def _paired_lines(prof: Profile) -> list[str]:
    """The program's figures against its roof as it was while it ran (each run paired with a
    sample of that roof: bench/measure/pairs.py), eager and compiled, where they were."""
    compiled = prof.compiled.case if prof.compiled is not None else None
    return [f"{variant}, paired: {text}" for variant, case in (("eager", prof.program),
                                                               ("compiled", compiled))
            if case is not None and (text := paired_text(case)) is not None]


def sections(prof: Profile) -> list[Section]:
    p = prof.program
    rid = ridge_of(prof.roofs, p.identity.precision)
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    calls, distinct = len(prof.recording.calls), len(prof.ops)
    head: list[Block] = [Text(_timed_line(prof, calls, distinct)), Table(program_rows(prof)),
                         Items([*_sum_lines(prof), *_paired_lines(prof),
                                _roofs_line(prof, rid), _load_line(prof, load),
                                *([f"**{m}**"] if (m := under_load(prof)) else [])])]
    head += [Text(x) for x in compiled_lines(prof)]
    out = [Section(f"Program: {prof.name}", head)]
    if prof.extra.get("jax"):
        j = prof.extra["jax"]
        out.append(Section("JAX: XLA's count beside roofbench's", [Table([
            {"count": "XLA cost_analysis()", "FLOPs": si(j["xla_flops"], ""),
             "bytes": si(j["xla_bytes"], "B")},
            {"count": "roofbench, jaxpr unfused", "FLOPs": si(j["own_flops"], ""),
             "bytes": si(j["own_bytes_unfused"], "B")},
            {"count": "roofbench, arguments + results", "FLOPs": si(j["own_flops"], ""),
             "bytes": si(j["own_bytes_io"], "B")}])]))
    if prof.ops:
        out.append(Section("By op family", [Table(family_rows(prof))]))
        rows = op_rows(prof)
        blocks: list[Block] = [Text("Ranked by the most the whole can gain if that op alone "
                                  "reached its roof (Amdahl: 1 / ((1 - s) + s / r)). "
                                  "0-FLOP ops are placed by bandwidth. Order: whether "
                                  "the rank holds over the timed runs (its time per run, "
                                  "less its time at the roof, lowest to highest, clear of "
                                  "its neighbours'); a tie could swap places. Flags: not valid "
                                  "(above 105% of its roof, with the likely cause), noisy "
                                  "(with its cause)."),
                             Table(rows[:RANKED_OPS])]
        if (prec := precision_notes(prof)):
            blocks.append(Items(prec))
        if len(rows) > RANKED_OPS:
            blocks.append(Text(f"{len(rows) - RANKED_OPS} more ops in results.json."))
        out.append(Section("Ops (Amdahl ranking)", blocks))
        fusion: list[Block] = [
            Text("Memory-bound ops whose intermediates feed only the next op of the group: "
                 "the bytes one fused kernel must still move, and the most fusion can "
                 "gain: the predicted bound is what the bytes and launches explain (the "
                 "group's eager time in the program over the same work with the fused bytes "
                 "moved at the eager ops' own rate and one launch), never more than the "
                 "fused kernel at the roof + one launch allows; beyond the bytes: what a "
                 "kernel at the roof would gain on top, and why. With --compile each "
                 "group is replayed alone, eager and under torch.compile (the arrow per "
                 "group on the plot), beside its predicted compiled time: the fused bytes "
                 "at the roof + a compiled call's own cost"
                 + (f" ({duration(prof.compiled.call_s)}, a 1-element add compiled, "
                    "measured here)" if prof.compiled and prof.compiled.call_s else "")
                 + "; predicted / measured compares the compiled times."),
            Table(group_rows(prof)) if prof.groups else Text("None found.")]
        out.append(Section("Fusion opportunities", fusion))
        others = sorted({p.op.name for p in prof.ops if p.op.family == "other"})
        conv: list[Block] = [Table([{"family": k, "FLOP convention": v}
                                    for k, v in CONVENTION.items()])]
        if others:
            conv.append(Text("No convention (0 FLOPs counted): " + ", ".join(others)))
        out.append(Section("Counting conventions", conv))
    pj = prof.extra.get("projection")
    if pj:
        out.append(Section(f"Projected onto {pj['device']}: a projection", [
            Text(f"{pj['mark']}; roofs from {pj['roofs_from']}. The program's bound there: "
                 f"{duration(pj['program_bound_s'])} (its ops' bounds summed; launch and "
                 f"dispatch not included), measured here {duration(prof.program_s)}."),
            Table([{**r, "bound/call s": duration(r["bound/call s"]),
                    "here/call s": duration(r["here/call s"])}
                   for r in pj["ops"][:SHOWN_OPS]])]))
    return out


PROFILE_FILE = "profile.json"  # the report's sections as written: `roofbench report` rebuilds


def under_load(prof: Profile) -> str:
    """The profile's under-load mark, as its measurement recorded it ("" when none)."""
    got = prof.extra.get("under_load")
    if not got:
        return ""
    return f"taken under load: {got}" if isinstance(got, str) else "taken under load"


def precision_notes(prof: Profile) -> list[str]:
    """Ops whose dtype has no measured compute roof here (bf16 on a CPU): held against the
    nearest measured roof, named, never silently the fp32 one."""
    rs = prof.roofs
    if rs is None:
        return []
    by: dict[tuple[str, str], list[str]] = {}
    for p in prof.ops:
        i = p.case.identity
        if p.op.flops and i.dtype != i.precision.removesuffix("_tc") and \
                rs.compute(i.dtype) is None and rs.compute(i.dtype + "_tc") is None:
            roof = rs.compute(roof_precision(i.precision, rs))
            by.setdefault((i.dtype, roof.name if roof else "no roof"), []).append(p.op.packet)
    return [f"{len(ops)} {dt} op(s) ({', '.join(sorted(set(ops))[:6])}): no {dt} compute roof "
            f"was measured on this device; held against {roof}, the nearest measured roof. "
            f"A {dt} unit (AVX512-BF16, AMX, tensor cores) may compute faster: their "
            "efficiency is against that roof, not a {dt} one".replace("{dt}", dt)
            for (dt, roof), ops in by.items()]


def annotate(prof: Profile) -> None:
    """Each case's point named as profile.md names it (its evidence: the plot reads it, and
    `roofbench plot` on the folder draws the same): an op by its rank, P/Pc the program,
    Gi/Gic fusion group i; the legend entry it belongs to; an op's time share."""
    amd = {r["launch"]: r for r in amdahl_rows([p.share for p in prof.ranking() if p.share])}
    for p in prof.ops:
        a = amd.get(p.share.name if p.share else "", {})
        p.case.evidence.extra.update(
            plot_number=a.get("rank"), plot_group="op (number: its rank in profile.md)",
            plot_label=f"{p.op.packet} {p.case.identity.dtype} x{p.op.calls}"
                       + (f" ({o})" if (o := order_text(p.case)).startswith("tie") else ""),
            time_share=a.get("share"))
    progs = [("P", prof.program)] + ([("Pc", prof.compiled.case)]
                                     if prof.compiled and prof.compiled.case else [])
    for num, c in progs:
        c.evidence.extra.update(plot_number=num, plot_group="program, eager -> compiled",
                                plot_label=f"program ({c.identity.variant})")
    for t in prof.compiled.groups if prof.compiled is not None else []:
        for suffix, c in (("", t.eager), ("c", t.compiled)):
            if c is not None:
                c.evidence.extra.update(
                    plot_number=f"G{t.group}{suffix}",
                    plot_group="fusion group replayed, eager -> compiled",
                    plot_label=f"G{t.group} ({c.identity.variant}): "
                               + " -> ".join(prof.groups[t.group].names))


def write_profile(prof: Profile, out: Path) -> list[Path]:
    # matplotlib and pandas: loaded when a profile is written, not when it is imported
    from roofbench.bench.present.report import (  # noqa: F401  (loaded before a stop can cut it)
        section_lines,
    )
    from roofbench.bench.results import environment, git_commit, save_run, utc_stamp

    annotate(prof)
    cases = [p.case for p in prof.ops] + [prof.program]
    if prof.compiled is not None and prof.compiled.case is not None:
        cases.append(prof.compiled.case)
    for t in prof.compiled.groups if prof.compiled is not None else []:
        cases += [t.eager] + ([t.compiled] if t.compiled is not None else [])
    backend = prof.program.identity.backend
    info = dict(prof.extra.get("clock_info") or {"kind": "cpu", "name": prof.device})
    info["python"] = platform.python_version()
    run = RunResult(backend=backend, device=prof.device, roofs=prof.roofs, cases=cases,
                    environment=environment(info), command=["roofbench.profile", prof.name],
                    created=utc_stamp(), git_commit=git_commit(Path.cwd()),
                    notes=list(prof.notes))
    paths = [save_run(run, out)]
    stored = StoredReport(prof.name, under_load(prof), sections(prof))
    try:
        atomic_write_text(out / PROFILE_FILE, json.dumps(stored.to_dict(), indent=1))
        return paths + [out / PROFILE_FILE] + render_profile(run, stored, out / "profile.md")
    except KeyboardInterrupt:  # stopped while drawing: recorded, and the report once more
        run.interrupted = True
        run.notes.append("interrupted while the profile's report was written")
        save_run(run, out)
        atomic_write_text(out / "profile.md", "\n".join(_body(stored, run, stored.sections)))
        raise


@dataclass(frozen=True)
class StoredReport:
    """A profile's report as written (profile.json): its sections hold what results.json
    does not (the recording's fusion groups, families, the sums of each run), so that
    `roofbench report` and `plot` on the folder rebuild the profile's own report."""

    name: str
    mark: str  # said in red on the plot and at the report's top ("" none)
    sections: list[Section]

    def to_dict(self) -> dict[str, Any]:
        return {"format": "roofbench profile report", "version": 1, "name": self.name,
                "mark": self.mark, "sections": [
                    {"title": s.title, "blocks": [_block_dict(b) for b in s.blocks]}
                    for s in self.sections]}

    @staticmethod
    def from_dict(d: dict[str, Any]) -> StoredReport:
        return StoredReport(str(d["name"]), str(d.get("mark") or ""), [
            Section(str(s["title"]), [_block_of(b) for b in s["blocks"]])
            for s in d["sections"]])


def _block_dict(b: Block) -> dict[str, Any]:
    if isinstance(b, Table):
        return {"kind": "table", "rows": b.rows}
    if isinstance(b, Items):
        return {"kind": "items", "items": b.items}
    if isinstance(b, Image):
        return {"kind": "image", "path": b.path, "alt": b.alt}
    return {"kind": "text", "text": getattr(b, "text", "")}


def _block_of(d: dict[str, Any]) -> Block:
    kind = d.get("kind")
    if kind == "table":
        return Table([dict(r) for r in d["rows"]])
    if kind == "items":
        return Items([str(x) for x in d["items"]])
    if kind == "image":
        return Image(str(d["path"]), str(d["alt"]))
    return Text(str(d.get("text", "")))


def load_stored(folder: Path) -> StoredReport | None:
    """The profile report stored beside a results.json (None: not a profile's folder, or one
    written before profile.json existed); a file that cannot be read is a UserError."""
    from roofbench.bench.errors import UserError

    path = folder / PROFILE_FILE
    if not path.is_file():
        return None
    try:
        return StoredReport.from_dict(json.loads(path.read_text()))
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise UserError(f"{path}: not a profile report ({type(e).__name__}: {e})") from None


def _body(stored: StoredReport, run: RunResult, secs: list[Section]) -> list[str]:
    from roofbench.bench.present.report import section_lines

    body = [f"# roofbench profile: {stored.name}", "", f"- device: {run.device}",
            f"- created: {run.created}", f"- git commit: `{run.git_commit}`", ""]
    notes = ([f"**{stored.mark}**"] if stored.mark else []) + [
        n for n in run.notes if n != stored.mark]  # the mark once, set apart
    body += [f"> {n}" for n in notes] + ([""] if notes else [])
    for s in secs:
        body += section_lines(s)
    return body


ROOFLINE_TEXT = ("Numbers: an op's rank in the Amdahl ranking below; P the program, Pc "
                 "compiled; Gi fusion group i replayed alone, Gic compiled (the arrows). A "
                 "point above 105% of its roof is not drawn: the key names it with its cause; "
                 "0-FLOP ops (no place on a log axis) are listed in the key with their "
                 "bandwidth and time share; a noisy point says so in the key.")


def _key_order(c: CaseResult) -> tuple[int, int, str]:
    """The key's order: the program, the ops by rank (profile.md's), the groups."""
    num = str(c.evidence.extra.get("plot_number") or "")
    if num.isdigit():
        return 1, int(num), ""
    digits = "".join(ch for ch in num if ch.isdigit())
    return (0 if num.startswith("P") else 2), int(digits or 0), num


def plot_profile(run: RunResult, stored: StoredReport, base: Path,
                 all_roofs: bool = False) -> list[Path]:
    """The profile's roofline (PNG and SVG at ``base``): every case, as annotated."""
    from roofbench.bench.present.plot import plot_roofline

    if run.roofs is None:
        return []
    return plot_roofline([run.roofs], [sorted(run.cases, key=_key_order)], base,
                         f"{stored.name} on {run.device}: ops and program",
                         all_roofs=all_roofs, mark=stored.mark)


def render_profile(run: RunResult, stored: StoredReport, md: Path,
                   fig_base: Path | None = None) -> list[Path]:
    """profile.md at ``md``, report.html beside it, and the roofline (``fig_base``, default
    roofline beside ``md``): the profile's own report, from what the folder holds."""
    from roofbench.bench.present.report_html import render_sections_html

    base = fig_base if fig_base is not None else md.parent / "roofline"
    fig = plot_profile(run, stored, base)
    secs = list(stored.sections)
    if fig:
        svg = fig[1]
        rel = os.path.relpath(fig[0], md.parent)
        secs.insert(1, Section("Roofline", [Text(ROOFLINE_TEXT), Image(
            rel, "ops and program", svg=lambda: svg.read_text())]))
    atomic_write_text(md, "\n".join(_body(stored, run, secs)))
    page = md.parent / "report.html" if md.name == "profile.md" else md.with_suffix(".html")
    notes = ([f"**{stored.mark}**"] if stored.mark else []) + [
        n for n in run.notes if n != stored.mark]
    atomic_write_text(page, render_sections_html(
        f"roofbench profile: {stored.name}",
        f"device {run.device}, created {run.created}, commit {run.git_commit}", notes, secs))
    return [md, page, *fig]
