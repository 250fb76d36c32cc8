"""What a tune leaves: every configuration considered (``Trial``), the ranking best first with
its ties (``Rank``), the stop reason and the headroom left (``TuneRecord``), all frozen.

Times are compared on one basis for the whole ranking: where every ranked configuration was
timed with paired roof samples of the same roof, each sample's time scaled by its roof's rate
then over the roof's calibrated rate (``t_i * r_i / R``: the time it would have taken with the
roof at its calibrated rate; a memory system that changed state between two configurations'
timings moves both the time and the rate, not their product); else the raw times. An interval
is the distribution-free interval of the median (``gate.median_interval``, 95%); two
configurations whose intervals overlap are a tie: neither is known to be faster."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from roofbench.gate import median_interval
from roofbench.records import CaseResult

CONFIDENCE = 0.95
SCHEMA = "roofbench.tune"
SCHEMA_VERSION = 2  # 2: "finals" (bench/tune/finals.py); "best" the finals' choice

# Why the search ended.
STOPS = {
    "target": "the best configuration reached the target fraction of its roof",
    "no_config_can_win": "no untried configuration can beat the best by more than the noise "
                         "(each one's time at its roof is within the best's interval)",
    "budget": "the time budget was spent",
    "space_tried": "every configuration of the space was tried",
    "interrupted": "stopped by a signal (Ctrl-C, SIGTERM): what was tried is kept",
}

# What became of one configuration.
STATUSES = ("ok", "dropped", "invalid", "error", "pruned", "untried")


@dataclass(frozen=True)
class Trial:
    """One configuration: ``status`` ok (timed to the timer's stop), dropped (its first
    samples far behind the best: timed no further), invalid (failed validation), error (build
    or call raised), pruned (not tried: its time at its roof could not beat the best),
    untried (the search stopped first); ``why`` says the reason in one line."""

    index: int  # its place in the space's enumeration order
    config: Mapping[str, Any]
    label: str
    status: str
    why: str | None = None
    flops: int | None = None
    bytes: Mapping[str, int] = field(default_factory=dict)
    roof_time_s: float | None = None  # at its attainable roof under the run's roofs
    samples_s: tuple[float, ...] = ()
    roof_rates: tuple[float, ...] = ()
    roof_probe: str = ""
    roof_value: float | None = None  # the calibrated rate of the roof its pairs sampled
    stopped_by: str = ""
    efficiency: float | None = None  # the case record's (paired where it was)
    key: str = ""
    wall_s: float = 0.0
    case: CaseResult | None = field(default=None, compare=False, repr=False)

    @property
    def timed(self) -> bool:
        return self.status in ("ok", "dropped") and bool(self.samples_s)

    @property
    def paired(self) -> bool:
        return (bool(self.roof_rates) and len(self.roof_rates) == len(self.samples_s)
                and bool(self.roof_value))

    def times(self, basis: str) -> list[float]:
        """Its samples on ``basis``: "raw" seconds, or "paired" (t_i * r_i / R)."""
        if basis == "paired":
            if not self.paired or self.roof_value is None:
                raise ValueError(f"{self.label} has no paired samples")
            return [t * r / self.roof_value
                    for t, r in zip(self.samples_s, self.roof_rates, strict=True)]
        return list(self.samples_s)

    def median(self, basis: str) -> float:
        return statistics.median(self.times(basis))

    def interval(self, basis: str) -> tuple[float, float] | None:
        """The median's distribution-free 95% interval on ``basis`` (None: too few
        samples for one)."""
        return median_interval(self.times(basis), CONFIDENCE)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "index": self.index, "config": dict(self.config), "label": self.label,
            "status": self.status, "why": self.why, "flops": self.flops,
            "bytes": dict(self.bytes), "roof_time_s": self.roof_time_s,
            "samples": len(self.samples_s), "stopped_by": self.stopped_by,
            "efficiency": self.efficiency, "key": self.key, "wall_s": self.wall_s}
        if self.samples_s:
            d["median_s"] = self.median("raw")
            d["samples_s"] = list(self.samples_s)
        if self.roof_rates:
            d["roof_probe"], d["roof_value"] = self.roof_probe, self.roof_value
            d["roof_rates"] = list(self.roof_rates)
        return d


def basis_of(trials: Sequence[Trial]) -> str:
    """"paired" when every trial has paired samples of one roof (same probe, same
    calibrated rate) and none of them, so scaled, has its median above its roof; else "raw".
    A paired median faster than the roof allows is a roof sample that is wrong (measured on
    the 2-core VM under load ~18: fp32 FMA samples at 0.07-0.11 GFLOP/s beside others at
    38-128, scaling some gemm samples 1000x down), so those samples cannot rank anything."""
    if trials and all(t.paired for t in trials) and len(
            {(t.roof_probe, t.roof_value) for t in trials}) == 1 and \
            not any(t.roof_time_s and t.median("paired") < t.roof_time_s for t in trials):
        return "paired"
    return "raw"


def overlap(a: tuple[float, float] | None, b: tuple[float, float] | None) -> bool:
    """Two intervals overlap (a tie); one unknown interval is a tie with anything: what
    cannot be told apart is never called different."""
    if a is None or b is None:
        return True
    return a[0] <= b[1] and b[0] <= a[1]


@dataclass(frozen=True)
class Rank:
    """One timed configuration in the ranking (best first): its median and interval on the
    record's basis; ``tied_with``: the indices of every other ranked configuration whose
    interval overlaps its own; ``differs_from_next``: its interval lies wholly below the next
    one's (the difference is significant); ``beaten_by_best``: the best's interval lies wholly
    below its own."""

    index: int
    rank: int
    median_s: float
    interval_s: tuple[float, float] | None
    tied_with: tuple[int, ...]
    differs_from_next: bool | None  # None for the last
    beaten_by_best: bool

    @property
    def ties_best(self) -> bool:
        return self.rank == 1 or not self.beaten_by_best

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "rank": self.rank, "median_s": self.median_s,
                "interval_s": list(self.interval_s) if self.interval_s else None,
                "tied_with": list(self.tied_with), "differs_from_next": self.differs_from_next,
                "ties_best": self.ties_best}


def rank(trials: Sequence[Trial]) -> tuple[str, tuple[Rank, ...]]:
    """The basis and the ranking of the configurations timed to the timer's stop (status
    ok), fastest median first (ties of medians in enumeration order)."""
    ok = [t for t in trials if t.status == "ok" and t.samples_s]
    basis = basis_of(ok)
    order = sorted(ok, key=lambda t: (t.median(basis), t.index))
    ivs = {t.index: t.interval(basis) for t in order}
    out = []
    best = ivs[order[0].index] if order else None
    for i, t in enumerate(order):
        iv = ivs[t.index]
        ties = tuple(u.index for u in order if u.index != t.index and overlap(iv, ivs[u.index]))
        nxt = (not overlap(iv, ivs[order[i + 1].index])) if i + 1 < len(order) else None
        out.append(Rank(t.index, i + 1, t.median(basis), iv, ties, nxt,
                        i > 0 and not overlap(best, iv)))
    return basis, tuple(out)


# What became of one meeting.
OUTCOMES = {
    "rival wins": "the rival's time over the champion's lies wholly below 1: it is faster",
    "champion stays": "the rival is not known to be faster (a tie, or slower)",
    "rival invalid": "the rival failed validation in the finals: the champion stays",
    "champion invalid": "the champion failed validation in the finals: the rival takes its "
                        "place",
    "both invalid": "both failed validation in the finals: the champion stays (none valid "
                    "to put in its place), said here",
}


@dataclass(frozen=True)
class Meeting:
    """One meeting: the champion (A) against a rival (B), by their indices and labels;
    ``ratio``: time B / time A, the median of the ABBA blocks' ratios, with its 95% interval
    (``lo``, ``hi``; None: too few pairs for one); ``pairs`` per side; the gate's
    ``verdict`` on B against A at threshold 0 and its ``statistic``; the ``outcome``."""

    champion: int
    rival: int
    champion_label: str
    rival_label: str
    outcome: str
    verdict: str = ""
    ratio: float | None = None
    lo: float | None = None
    hi: float | None = None
    pairs: int = 0
    statistic: str = ""
    why: str = ""
    wall_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"champion": self.champion, "rival": self.rival,
                "champion_label": self.champion_label, "rival_label": self.rival_label,
                "outcome": self.outcome, "verdict": self.verdict, "ratio": self.ratio,
                "interval": [self.lo, self.hi] if self.lo is not None else None,
                "pairs": self.pairs, "statistic": self.statistic, "why": self.why,
                "wall_s": self.wall_s}


@dataclass(frozen=True)
class Finals:
    """The finals of one tune: the loop's best (``opener``), the tied configurations that met
    the champion in turn (``finalists``, rank order) and those tied past ``limit`` (not met),
    the ``meetings``, the ``chosen`` configuration's index, one line of ``verdict`` and the
    wall seconds the finals took (in the tune's)."""

    opener: int
    finalists: tuple[int, ...]
    left_out: tuple[int, ...]
    meetings: tuple[Meeting, ...]
    chosen: int
    verdict: str
    limit: int
    wall_s: float
    side_s: tuple[float, float] = (0.0, 0.0)  # a meeting's sampling seconds a side: (least
    # before a decided meeting stops, most)

    def to_dict(self) -> dict[str, Any]:
        return {"opener": self.opener, "finalists": list(self.finalists),
                "left_out": list(self.left_out), "chosen": self.chosen,
                "verdict": self.verdict, "limit": self.limit, "wall_s": self.wall_s,
                "side_s": list(self.side_s), "meetings": [m.to_dict() for m in self.meetings]}


@dataclass(frozen=True)
class TuneRecord:
    """One tune: the trials in the order considered, the configurations the space's
    constraints excluded (with the rule), the ranking, the finals (the ties with the best
    timed against it in ABBA pairs: ``finals.py``), the chosen configuration (the finals'
    winner; without finals rank 1), why
    the search stopped, and what is left to win: ``headroom`` the best's interval's upper end
    over the least time at its roof of the best and of every configuration left untried (the
    most any of them could still gain, a factor >= 1 unless a point sits above its roof);
    ``efficiency_s`` the best's fraction of its own roof from its interval (low, high)."""

    name: str
    target: float
    exhaustive: bool
    budget_s: float | None
    drop_at: float | None
    screen_samples: int
    order: str
    trials: tuple[Trial, ...]
    excluded: tuple[tuple[str, str], ...]
    basis: str
    ranking: tuple[Rank, ...]
    stop: str
    stop_detail: str
    headroom: float | None
    efficiency: tuple[float, float] | None
    wall_s: float
    device: str = ""
    # exhaustive: where the search (without exhaustive) would have stopped, and why
    search_would_stop: tuple[int, str] | None = None
    out: str = ""  # the folder its files were written to (``tune(out=)``), else ""
    finals: Finals | None = None  # None: not held (``finals_note`` says why)
    finals_note: str = ""

    @property
    def best(self) -> Trial | None:
        """The chosen configuration's trial: the finals' winner, else rank 1."""
        if not self.ranking:
            return None
        return self.trial(self.finals.chosen if self.finals is not None
                          else self.ranking[0].index)

    @property
    def config(self) -> dict[str, Any] | None:
        """The chosen configuration (None: none was valid)."""
        b = self.best
        return dict(b.config) if b is not None else None

    def trial(self, index: int) -> Trial:
        return next(t for t in self.trials if t.index == index)

    def count(self, status: str) -> int:
        return sum(1 for t in self.trials if t.status == status)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA, "version": SCHEMA_VERSION, "name": self.name,
            "device": self.device, "target": self.target, "exhaustive": self.exhaustive,
            "budget_s": self.budget_s, "drop_at": self.drop_at,
            "screen_samples": self.screen_samples, "order": self.order,
            "stop": self.stop, "stop_detail": self.stop_detail, "headroom": self.headroom,
            "efficiency": list(self.efficiency) if self.efficiency else None,
            "wall_s": self.wall_s, "basis": self.basis, "out": self.out,
            "best": self.config, "search_would_stop": (
                {"after": self.search_would_stop[0], "stop": self.search_would_stop[1]}
                if self.search_would_stop else None),
            "ranking": [r.to_dict() for r in self.ranking],
            "finals": self.finals.to_dict() if self.finals is not None else None,
            "finals_note": self.finals_note,
            "trials": [t.to_dict() for t in self.trials],
            "excluded": [{"label": lab, "why": why} for lab, why in self.excluded],
        }
