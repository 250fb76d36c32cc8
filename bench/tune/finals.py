"""The finals: after the loop, the configurations whose intervals tie with the best's (the
ranking's tie rule, ``record.rank``) meet the best head to head, in ABBA pairs in one job.

Why: within one tune, configurations are timed minutes apart, and on the 2-core VM one
configuration's rate drifted by more than 3% over that time (results/amd-epyc/
20261207T232653Z-tune-quiet2: timed against each other in one process, 2 of 12 search
choices lay wholly under 0.97 of the exhaustive's, 0.929 and 0.908, each process having
measured its own choice fastest). Two configurations whose intervals overlap were timed
under different machines; their order is partly the machine's. Timed in alternating pairs
(A B, B A), the drift hits both alike, and the gate's paired statistic (the median of the
ABBA blocks' ratios and its distribution-free 95% interval: ``gate.classify_case`` with
``paired=True``, as ``scripts/tune_ab.py`` and ``roofbench ab`` judge) says which is faster.

The rule: the loop's best is the champion; the tied configurations, best ranked first, at most
``FINALISTS``, meet it one at a time. A rival whose time over the champion's has its whole
95% interval below 1 (the gate's ``faster`` at threshold 0, beyond what outside load
explains) becomes the champion and meets the next; else the champion stays (a tie is said as
a tie). A side that fails validation in the finals (they build and validate each
configuration again: a new callable) loses its meeting. The chosen configuration is the last
champion.

The cost, bounded: per meeting a warm-up of ``WARMUP_S`` a side, both validations, then pairs
until the gate's 24 and ``MEET_S`` a side have passed and the verdict is decided (faster or
slower), at most ``CAP_S`` a side (``ab_session.alternate``'s budget and cap); so at most
``FINALISTS`` x (2 x (CAP_S + WARMUP_S) + two validations) seconds, counted in the tune's
wall. The ties beyond ``FINALISTS`` are named, not met.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, cast

from roofbench.errors_text import first_line
from roofbench.gate import CONFIDENCE, CaseVerdict, case_key, classify_case
from roofbench.records import CaseResult
from roofbench.timing import TimerConfig, Timing

from ..measure import core
from ..measure.callables import Clock, measure_callable
from ..measure.pairs import pair_for
from ..measure.user_code import raised_by_user
from .record import Finals, Meeting, Rank

# Kept short: the acceptance compares walls (search <= 80% of exhaustive), and on the quiet
# run at f887b2a the searches held more ties than the exhaustives (gemm regblock search-3: 5
# ties, its exhaustive 0; at 2 meetings of at most ~1.2 s its 70% became an estimated 76%).
# 24 pairs of a 512^3 gemm (~8 ms a call) take ~0.4 s: a 7% difference is decided in them.
FINALISTS = 2  # the most tied configurations that meet the best
MEET_S = 0.25  # sampling seconds a side before a decided meeting may stop
CAP_S = 0.5  # the most sampling seconds a side of one meeting
WARMUP_S = 0.05  # each side's warm-up before a meeting's pairs
THRESHOLD = 0.0  # faster: the paired interval wholly below 1 (the ranking's tie rule)

# The pairing loop: ``ab_session.alternate`` (bench/gate), given by the caller (bench/tune
# imports the core only: docs/architecture.md's floors); its signature, as called here.
Alternate = Callable[..., tuple[Timing, Timing]]


class Capture:
    """A clock that validates as ``clock`` does but keeps the function to be timed (the
    pairs are taken afterwards, alternating with the other side's: ``AbSession``'s way)."""

    pairs_roofs = False  # nothing is timed here

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.fn: Callable[[], Any] | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.clock, name)

    def time(self, fn: Callable[[], Any], cfg: TimerConfig) -> Timing:
        self.fn = fn
        return Timing(samples=[1.0], warmup_runs=0, stopped_by="deferred")


def finalists(ranking: Sequence[Rank], limit: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The tied configurations (rank order) that meet the best, and those past ``limit``."""
    tied = [r.index for r in ranking[1:] if r.ties_best]
    return tuple(tied[:limit]), tuple(tied[limit:])


def final_timer(full: TimerConfig) -> TimerConfig:
    """A meeting's timer: the tune's, with the finals' short warm-up, budget and cap."""
    return replace(full, warmup_s=min(full.warmup_s, WARMUP_S), budget_s=MEET_S,
                   min_samples_cap_s=CAP_S)


@dataclass(frozen=True)
class Referee:
    """What a meeting needs: each configuration's declared call (``call(i)``: built anew),
    the clock that validates and the wall clock that times the pairs (the tune's ``now``:
    a test's virtual one), the roofs, the CPU working set, and the timer."""

    call: Callable[[int], Any]
    alternate: Alternate
    clock: Clock
    now: Callable[[], float]
    roofs: Any
    ws: int | None
    timer: TimerConfig

    def validated(self, i: int) -> tuple[CaseResult | None, Callable[[], Any] | None, Any, str]:
        """Configuration ``i`` built, declared and validated (not timed): its record, the
        function to time, its call, or the reason it failed."""
        try:
            c = self.call(i)
        except Exception as e:
            if not raised_by_user(e):
                raise
            return None, None, None, f"build raised {first_line(e)}"
        cap = Capture(self.clock)
        rec = measure_callable(c, clock=cast(Clock, cap), cfg=self.timer, roofs=self.roofs)
        if rec.outcome.status != "ok" or cap.fn is None:
            return None, None, c, str(rec.outcome.error or rec.outcome.status)
        return rec, cap.fn, c, ""

    def meet(self, a: int, b: int, labels: tuple[str, str]) -> Meeting:
        t0 = self.now()
        ra, fa, call_a, why_a = self.validated(a)
        rb, fb, _, why_b = self.validated(b)

        def said(outcome: str, **kw: Any) -> Meeting:
            return Meeting(a, b, labels[0], labels[1], outcome, wall_s=self.now() - t0, **kw)

        if ra is None or rb is None or fa is None or fb is None:
            if ra is None and rb is None:  # nothing valid to put in its place
                return said("both invalid", verdict="not measured",
                            why=f"champion: {why_a}; rival: {why_b}")
            if ra is None:
                return said("champion invalid", verdict="invalid in A", why=why_a)
            return said("rival invalid", verdict="invalid in B", why=why_b)
        pair = pair_for(ra, self.roofs, self.clock, self.ws, call_a.counts.arrays)
        key = case_key(ra)

        def judged(ta: Timing, tb: Timing, xa: CaseResult, xb: CaseResult) -> CaseVerdict:
            core.fill_metrics(xa, ta, self.roofs, self.ws)
            core.fill_metrics(xb, tb, self.roofs, self.ws)
            return classify_case(key, xa, xb, THRESHOLD, CONFIDENCE, paired=True)

        def decided(ta: Timing, tb: Timing) -> bool:
            v = judged(ta, tb, copy.deepcopy(ra), copy.deepcopy(rb))
            return v.verdict in ("faster", "slower")

        ta, tb = self.alternate(fa, fb, self.timer, self.clock.sync, pair, clock=self.now,
                                decided=decided)
        v = judged(ta, tb, ra, rb)
        return said("rival wins" if v.verdict == "faster" else "champion stays",
                    verdict=v.verdict, ratio=v.ratio, lo=v.ratio_lo, hi=v.ratio_hi,
                    pairs=v.n_a, statistic=v.statistic, why=v.reason)


def hold(referee: Referee, ranking: Sequence[Rank], label: Callable[[int], str],
         limit: int = FINALISTS, spent: Callable[[], bool] = lambda: False,
         met: list[Meeting] | None = None) -> Finals | None:
    """The finals over ``ranking`` (None: no configuration ties the best, or none ranked).
    ``spent()``: the tune's budget is spent (no further meeting); ``met``: the meetings are
    appended to it as they end (an interrupted tune keeps them)."""
    if not ranking:
        return None
    rivals, left = finalists(ranking, limit)
    if not rivals:
        return None
    t0 = referee.now()
    champ = ranking[0].index
    meetings = met if met is not None else []
    for r in rivals:
        if spent():
            break
        m = referee.meet(champ, r, (label(champ), label(r)))
        meetings.append(m)
        if m.outcome in ("rival wins", "champion invalid"):
            champ = r
    opener = ranking[0].index
    unmet = [r for r in rivals if r not in {m.rival for m in meetings}]
    if champ == opener:
        verdict = (f"{label(opener)} stays: no tied configuration was found faster in "
                   f"{len(meetings)} meeting(s)")
    else:
        verdict = f"{label(champ)} chosen over the loop's best {label(opener)}"
    if unmet:
        verdict += f"; {len(unmet)} finalist(s) not met (the budget was spent)"
    if left:
        verdict += f"; {len(left)} more tied configuration(s) past the {limit} met"
    return Finals(opener, rivals, left, tuple(meetings), champ, verdict, limit,
                  referee.now() - t0,
                  (referee.timer.budget_s, referee.timer.min_samples_cap_s))
