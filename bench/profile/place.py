"""Placing a profile's ops: the roofs for the threads torch used, the op's alone figures
kept beside its in-program ones, a point above its roof flagged with its cause, and the
machine's cost of one op dispatch (what a fused kernel still pays once).
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass, field, replace
from typing import Any

from roofbench.bench.measure import core
from roofbench.bench.measure.callables import Clock

from roofbench.records import CaseResult
from roofbench.roof_records import RoofSet
from roofbench.timing import RoofPair, TimerConfig


def used_cores(threads: int) -> int:
    """The cores a program of ``threads`` threads runs on: no more than the process may use
    (its CPU affinity, as under taskset)."""
    allowed = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return min(threads, allowed) if allowed else threads


@dataclass
class ThreadHold:
    """torch's intra-op thread count held at ``threads`` (the caller's) while a profile
    times: a roof sample beside a timed sample is a Numba kernel whose OpenMP region sets
    OpenMP's thread count, which is torch's own, so the next timed op would run on all cores
    beside roofs scaled for fewer. Each sample of a pair is followed by ``hold`` (``pair``);
    ``read`` keeps the count torch reports where a timed run starts, so the count the roofs
    are for is the one read, never assumed."""

    threads: int
    seen: set[int] = field(default_factory=set)
    reset: int = 0  # times a probe had changed the count and it was set back

    @classmethod
    def now(cls) -> ThreadHold:
        import torch

        return cls(torch.get_num_threads())

    def hold(self) -> None:
        import torch

        if torch.get_num_threads() != self.threads:
            torch.set_num_threads(self.threads)
            self.reset += 1

    def read(self) -> int:
        """The count torch uses now (called where a timed run starts), kept."""
        import torch

        self.hold()
        n = torch.get_num_threads()
        self.seen.add(n)
        return n

    def pair(self, p: RoofPair | None) -> RoofPair | None:
        """``p`` whose every sample is followed by ``hold``."""
        if p is None:
            return None
        sample = p.sample

        def held() -> float:
            try:
                return sample()
            finally:
                self.hold()
        return replace(p, sample=held)

    def used(self) -> int:
        """The count the timed runs ran on: the one read (the largest, were they to differ:
        the higher roof, so no point is flagged above a roof by a count it did not run on)."""
        return max(self.seen) if self.seen else self.threads


def held_paired_time(hold: ThreadHold, clock: Clock, fn: Any, cfg: TimerConfig,
                     rec: CaseResult, roofs: RoofSet | None, working_set: int | None = None,
                     arrays: Any = (), shares: Any = None) -> Any:
    """``core.paired_time`` with torch's threads held (``ThreadHold``) beside every roof
    sample, and read where the timing starts."""
    from roofbench.bench.measure.pairs import pair_for

    hold.read()
    return core.time_call(clock, fn, cfg, pair=hold.pair(
        pair_for(rec, roofs, clock, working_set, arrays, shares)))


def roofs_for_threads(rs: RoofSet, threads: int) -> RoofSet:
    """The roofs for ``threads`` threads: a compute roof measured on more threads (its
    evidence's ``threads``) scaled to ``threads`` of them (a core's FMA pipes are its own);
    memory roofs kept, one core's bandwidth is not a share of the socket's (noted)."""
    out = copy.deepcopy(rs)
    scaled = []
    for r in out.roofs:
        t = r.evidence.get("threads")
        if r.kind == "compute" and isinstance(t, int) and t > threads > 0:
            r.evidence["scaled_from"] = {"threads": t, "value": r.value}
            r.value = r.value * threads / t
            r.evidence["threads"] = threads
            scaled.append(r.name)
    if scaled:
        out.notes.append(f"compute roofs {', '.join(scaled)} scaled to the {threads} "
                         "thread(s) torch used; memory roofs as measured on all threads")
    return out


def mark_ranks(ranked: list[Any], totals: dict[int, list[float]]) -> None:
    """Whether each rank of the ranking (``OpPlace``s in profile.md's order) is significant:
    the op's seconds per program run over the timed runs, less its time at its roof (what
    the ranking orders by), lowest and highest (its interval),
    and the neighbouring ranks whose interval overlaps it (``rank_tie_with``): an op that
    overlaps the next is not surely ahead of it (a preempted call makes a small op "#1").
    Recorded in each op's evidence, for the report and the plot to say."""
    iv = []
    for p in ranked:  # ranked by the time saved at the roof: the interval is of that
        t = totals.get(p.op.index) or [p.total_s]
        rt = p.share.roof_time_s if p.share and p.share.gain is not None else None
        iv.append((min(t) - (rt or 0.0), max(t) - (rt or 0.0)))
    for i, p in enumerate(ranked):
        lo, hi = iv[i]
        ties = [j + 1 for j in (i - 1, i + 1)
                if 0 <= j < len(ranked) and iv[j][0] <= hi and lo <= iv[j][1]]
        p.case.evidence.extra.update(rank=i + 1, rank_interval_s=[lo, hi],
                                     rank_tie_with=ties, rank_significant=not ties)


def alone_summary(rec: CaseResult) -> dict[str, Any]:
    """The op timed alone on its cloned arguments (its data warm in cache), as placed."""
    r, pl = rec.roofline, rec.roofline.placement
    return {"median_s": rec.measurement.median_s, "level": pl.level if pl else "dram",
            "working_set": pl.working_set_bytes if pl else None,
            "efficiency": r.efficiency, "limiting_roof": r.limiting_roof,
            "timed": "alone, data warm (its first call's cloned arguments)",
            # the roof sampled beside each of its samples ("" unpaired): the efficiency is
            # then the median of the pairs' ratios
            "roof_probe": t.roof_probe if (t := rec.measurement.timing) is not None else ""}


def launch_cost(clock: Clock, cfg: TimerConfig, gpu: bool) -> float | None:
    """Seconds one aten op costs with nothing to compute: a 1-element add, timed as the ops
    are (dispatch on a CPU; launch and dispatch on a GPU)."""
    import torch

    dev = "cuda" if gpu else "cpu"
    a, b = torch.ones(1, device=dev), torch.ones(1, device=dev)
    out = torch.empty(1, device=dev)
    return core.time_call(clock, lambda: torch.add(a, b, out=out), cfg).median
