"""The report's model-vs-hardware section: Nsight Compute's counters beside the counted FLOPs
and bytes of each launch (the checks are roofbench/ncu_checks.py's, on the stored case)."""

from __future__ import annotations

from roofbench.ncu_checks import TOLERANCES, Check, case_checks, hw_dram_ai, whole
from roofbench.records import RunResult

from .blocks import Block, Lines, Section, Table, Text


def _ratio(ch: Check) -> str:
    r = ch.ratio
    return "-" if r is None else f"{r:.3f}" + ("" if ch.ok else " !")


def ncu_section(run: RunResult) -> Section | None:
    """The report's 'Model vs hardware' section; None when no case has counters."""
    profiled = [(c, case_checks(c)) for c in run.cases]
    profiled = [(c, rows) for c, rows in profiled if rows]
    if not profiled:
        return None
    seen: list[str] = []
    for c, _ in profiled:
        s = c.evidence.ncu
        desc = (f"ncu {s.version if s else '?'}, `--clock-control "
                f"{s.clock_control if s else '?'}`, `--cache-control "
                f"{s.cache_control if s else '?'}`")
        if s is not None and s.missing:
            desc += f"; not on this device: {', '.join(s.missing)}"
        if desc not in seen:
            seen.append(desc)
    out: list[Block] = [Lines(
        [f"Counters: {d}." for d in seen]
        + ["Each case ran once more under ncu, alone. With `--clock-control none` its "
           "durations run at the clocks the timed runs saw; `--cache-control all` starts each "
           "launch from cold caches, so they are not the timed medians above. A check whose "
           "metrics this device does not list is shown as `-` and named under flags."])]
    out.append(Text(f"Tolerances: {TOLERANCES.text()}. A ratio is hardware / model; `!` marks "
                    "one outside its tolerance. FLOPs are counted as Nsight Compute's roofline "
                    "counts them (FMA = 2; a half-precision instruction = 2 lanes; tensor ops "
                    "as reported), so operations the FLOP convention leaves out (e.g. the FMAs "
                    "inside an IEEE sqrt) show up as extra hardware FLOPs."))
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
                c.key, label, whole(fl.model), whole(fl.measured), _ratio(fl),
                whole(rd.model), whole(rd.measured), _ratio(rd),
                whole(wr.model), whole(wr.measured), _ratio(wr), whole(lc.l2_bytes),
                "-" if lc.duration_s is None else f"{lc.duration_s * 1e6:.6g} us",
                "-" if lc.achieved_occupancy is None else f"{lc.achieved_occupancy:.1%}",
                "; ".join(flags) if flags else "ok"])
    # Columns repeat their names ("ratio"): rows as (header, cell) pairs, in order.
    out.append(Table([dict(zip(_unique(header), r, strict=True)) for r in rows], plain=True,
                     headers=header))
    ais = [(c.key, c.declaration.ai.get("dram"), hw_dram_ai(c)) for c, _ in profiled]
    ais = [(k, m, h) for k, m, h in ais if m and h]
    if ais:
        out.append(Text("Arithmetic intensity, model FLOPs over model vs measured DRAM bytes: "
                        + "; ".join(f"{k} {m:.4g} vs {h:.4g} FLOP/B" for k, m, h in ais)))
    return Section("Model vs hardware (Nsight Compute)", out)


def _unique(names: list[str]) -> list[str]:
    """Column keys for a header whose names repeat: the n-th "ratio" becomes "ratio#n"."""
    seen: dict[str, int] = {}
    out = []
    for n in names:
        seen[n] = seen.get(n, 0) + 1
        out.append(n if seen[n] == 1 else f"{n}#{seen[n]}")
    return out


