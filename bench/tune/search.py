"""The search: every configuration of a space built, validated, timed with paired roof samples
and placed by the measurement core (``callables.measure_callable``: the path of
``roofbench.measure``), until a stop rule says there is nothing left to win.

Stop rules, checked before each configuration (docs/tune.md says why each is safe):

- target: the best configuration's efficiency from its interval's upper end (the slow side)
  reaches ``target`` of its attainable roof, and no untried configuration's time at its own
  roof is under ``target`` x that upper end (with counts the same for every configuration the
  second half follows from the first);
- no_config_can_win: every untried configuration's time at its roof (a bound from its counts)
  is at or above the best's interval's lower end: none can beat it by more than the noise;
- budget: ``budget_s`` wall seconds spent;
- and per configuration: one whose time at its roof cannot beat the best is not tried
  (pruned); one whose first ``screen_samples`` samples put the 95% interval of its median
  (``gate.median_interval``; with too few samples for one, their range) wholly above
  ``drop_at`` x the best's interval's upper end is dropped (timed no further): it is known
  to be slower than the best by more than that margin.

After the loop (whatever stopped it but the budget), the finals (``finals.py``): the
configurations whose intervals tie with the best's meet it head to head in ABBA pairs, and the
one the gate's paired statistic finds faster is chosen; ``finalists=0``: none.

``exhaustive=True`` tries every configuration (the budget still holds) and records where the
search would have stopped. Counts may depend on the configuration (``flops=lambda cfg: ...``):
they must not overstate the work, or the roof time understates no configuration's bound and a
mediocre one reads as near its roof and stops the search early.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from roofbench.errors_text import first_line
from roofbench.gate import median_interval
from roofbench.records import CaseResult
from roofbench.roof_records import RoofSet
from roofbench.timing import TimerConfig, timer_for

from ..measure import door
from ..measure.callables import Clock, clock_for, working_set
from ..measure.declared import Call, Check, Counts, declare, declared_counts
from ..measure.door import MeasureError
from ..measure.user_code import raised_by_user
from .finals import FINALISTS, Alternate, Referee, final_timer, hold
from .measured import Bench, declared_case, placed, rest_timer, roof_time, trial_of
from .record import CONFIDENCE, STOPS, Finals, Meeting, Trial, TuneRecord, rank
from .space import Config, Space, SpaceError, label, space

# The early drop: a configuration whose median is known (its 95% interval from the screen's
# samples) to be over DROP_AT x the best's slow end. 6 samples: the fewest with a 95% interval
# of the median, their range (all six above the line: a sign test, 1/64 for a median below
# it). The margin covers what pairing does not take out between two configurations' timings
# (a 1.5x factor on the fastest of 5 dropped 0-3 of 15 gemm regblock and of 25 attention
# configurations quiet, 1.1-1.7x behind with a CV of 3-10%: results/amd-epyc/
# 20261207T205123Z-tune-quiet).
DROP_AT = 1.1
SCREEN_SAMPLES = 6
ORDERS = ("declared", "roof")


class TuneError(MeasureError):
    """A tune that cannot run as asked: one line (a ValueError; exit 2 under the CLI)."""


def _count(x: Any, config: Config) -> Any:
    """A count as declared for this configuration: a callable of the configuration, or the
    value itself (arrays and numbers)."""
    return x(config) if callable(x) else x


@dataclass(frozen=True)
class Declared:
    """What every configuration shares: the arguments, the counts as given (values or
    callables of the configuration) and the check."""

    args: tuple[Any, ...]
    kwargs: Mapping[str, Any]
    flops: Any
    reads: Any
    writes: Any
    bytes: Any
    dtype: str | None
    precision: str | None
    reference: Any
    output: Any
    tolerance: float | None
    size: Sequence[int] | None
    workload: str

    def counts(self, config: Config) -> Counts:
        """This configuration's counts, checked as ``measure`` checks them."""
        try:
            b = _count(self.bytes, config)
            return declared_counts(self.args, flops=_count(self.flops, config),
                                   reads=_count(self.reads, config),
                                   writes=_count(self.writes, config), bytes=b,
                                   dtype=self.dtype, precision=self.precision, size=self.size)
        except MeasureError as e:
            raise TuneError(f"{label(config)}: {e}") from None
        except Exception as e:  # a count callable of the user's raised
            raise TuneError(f"{label(config)}: the counts raised {first_line(e)}") from None

    def call(self, fn: Callable[..., Any], config: Config) -> Call:
        """The declared call of this configuration's function (``declare``, as ``measure``)."""
        self.counts(config)  # its counts' errors said with the configuration
        return declare(fn, self.args, self.kwargs, flops=_count(self.flops, config),
                       reads=_count(self.reads, config), writes=_count(self.writes, config),
                       bytes=_count(self.bytes, config), dtype=self.dtype,
                       precision=self.precision, name=f"{self.workload}/{variant(config)}",
                       reference=self.reference, output=self.output, tolerance=self.tolerance,
                       size=self.size)


def variant(config: Config) -> str:
    """The case's variant: the configuration's label, with no '/' (a key's separator)."""
    return label(config).replace("/", ":")


@dataclass(frozen=True)
class Best:
    """The best so far, on the basis the ranking compares: its trial, the interval of its
    median (the range of its samples where they are too few for one) and the basis."""

    trial: Trial
    lo: float
    hi: float
    basis: str


def best_of(trials: Iterable[Trial]) -> Best | None:
    basis, ranking = rank(list(trials))
    if not ranking:
        return None
    r = ranking[0]
    t = next(x for x in trials if x.index == r.index)
    if r.interval_s is not None:
        lo, hi = r.interval_s
    else:  # too few samples for an interval (a long kernel the timer's cap stopped short): the
        # samples' whole range, wider than any interval of their median
        times = t.times(basis)
        lo, hi = min(times), max(times)
    return Best(t, lo, hi, basis)


def above_roof(best: Best) -> bool:
    """The best's median is above its own roof (faster than its counts take at the roof):
    the counts or the roof samples are wrong there (a valid point above its roof is a bug),
    and no rule that reads the roof (stop, prune, drop) may act on it: the search goes on.
    Its interval's fast end alone beyond the roof is noise about a kernel near it."""
    own = best.trial.roof_time_s
    return own is not None and own > 0 and best.trial.median(best.basis) < own


def should_stop(best: Best | None, left: Sequence[float | None], target: float
                ) -> tuple[str, str] | None:
    """The stop rule the best and the roof times of the configurations left (None: no roof
    time known) meet first, as (reason, one line), or None."""
    if best is None or not left or above_roof(best):
        return None
    own = best.trial.roof_time_s
    if own is not None and own > 0:
        eff_lo = own / best.hi
        if eff_lo >= target and all(x is not None and x >= target * best.hi for x in left):
            return "target", (f"{best.trial.label} at >= {eff_lo:.1%} of its roof (its "
                              f"interval's slow end), target {target:.0%}")
    if all(x is not None and x >= best.lo for x in left):
        least = min(x for x in left if x is not None)
        return "no_config_can_win", (
            f"the least time at its roof of the {len(left)} configuration(s) left, "
            f"{least:.4g} s, is at or above the best's interval's low end {best.lo:.4g} s")
    return None


def _check(target: float, budget_s: float | None, drop_at: float | None,
           screen_samples: int, order: str, exhaustive: bool, finalists: int) -> None:
    if isinstance(finalists, bool) or not isinstance(finalists, int) or finalists < 0:
        raise TuneError(f"finalists= must be a whole number >= 0 (0: no finals), got "
                        f"{finalists!r}")
    if isinstance(target, bool) or not isinstance(target, (int, float)) or \
            not 0 < target <= 1:
        raise TuneError(f"target= must be a fraction of the roof in (0, 1], got {target!r}")
    if budget_s is not None and (isinstance(budget_s, bool)
                                 or not isinstance(budget_s, (int, float))
                                 or not math.isfinite(budget_s) or budget_s <= 0):
        raise TuneError(f"budget_s= must be a number of seconds > 0, got {budget_s!r}")
    if drop_at is not None and (isinstance(drop_at, bool)
                                or not isinstance(drop_at, (int, float))
                                or not math.isfinite(drop_at) or drop_at <= 1):
        raise TuneError(f"drop_at= must be a factor > 1 (or None: drop nothing), got "
                        f"{drop_at!r}")
    if isinstance(screen_samples, bool) or not isinstance(screen_samples, int) or \
            screen_samples < 1:
        raise TuneError(f"screen_samples= must be a whole number >= 1, got {screen_samples!r}")
    if order not in ORDERS:
        raise TuneError(f"order= must be one of {', '.join(ORDERS)}, got {order!r}")
    if not isinstance(exhaustive, bool):
        raise TuneError(f"exhaustive= must be True or False, got {exhaustive!r}")


def as_space(x: Any) -> Space:
    if isinstance(x, Space):
        return x
    if isinstance(x, Mapping):
        return space(x)
    if isinstance(x, (list, tuple)):
        return Space.of(x)
    raise SpaceError("space= must be a Space, a dict of parameter -> values, or a list of "
                     f"configurations, got {type(x).__name__}")


def tune(build: Callable[..., Callable[..., Any]], space: Any, *args: Any,
         flops: Any = None, reads: Any = 0, writes: Any = 0, bytes: Any = None,
         dtype: str | None = None, precision: str | None = None, name: str | None = None,
         reference: Any = None, output: Any = None, tolerance: float | None = None,
         size: Sequence[int] | None = None, target: float = 0.9,
         budget_s: float | None = None, exhaustive: bool = False,
         drop_at: float | None = DROP_AT, screen_samples: int = SCREEN_SAMPLES,
         order: str = "declared", finalists: int = FINALISTS,
         alternate: Alternate | None = None,
         roofs: RoofSet | str | Path | None = None,
         roofs_cache: str | Path | None = None, timer: TimerConfig | None = None,
         quick: bool = False, out: str | Path | None = None, clock: Clock | None = None,
         now: Callable[[], float] = time.perf_counter, first: Config | None = None,
         **kwargs: Any) -> TuneRecord:
    """Search ``space`` for the fastest valid configuration of ``build(**config)(*args)``.

    ``build(**config)`` returns the callable of one configuration; ``space`` a ``Space``
    (``bench/tune/space.py``), a dict of parameter -> values, or a list of configurations.
    ``flops``, ``reads``, ``writes``, ``bytes`` are ``roofbench.measure``'s, each either the
    value or a callable of the configuration (a tile that re-reads more declares it); the
    other keywords of ``measure`` (``reference``, ``output``, ``tolerance``, ``dtype``, ...)
    hold for every configuration, and keywords not tune's are the function's. ``target``: the
    fraction of its roof at which the best stops the search; ``budget_s``: wall seconds;
    ``drop_at`` / ``screen_samples``: the early drop (None: none); ``order``: "declared" (the
    space's) or "roof" (least time at its roof first); ``exhaustive``: try every
    configuration; ``finalists``: the most configurations tied with the best that meet it in
the finals (0: none); ``alternate``: their pairing loop, ``ab_session.alternate``
(bench/gate: the CLI gives it; without it no finals are held, and the record says so).
``first``: a configuration of the space tried before all others (the
    best another device chose). ``out``: a folder for results.json, tune.json, report and
    plot.
    ``clock``/``now``: the measuring clock and the wall clock of the budget (a test's fakes).
    Returns the frozen ``TuneRecord``; the module doc has the stop rules."""
    if not callable(build):
        raise TuneError(f"build must be a callable returning the function of one "
                        f"configuration, got {type(build).__name__}")
    _check(target, budget_s, drop_at, screen_samples, order, exhaustive, finalists)
    sp = as_space(space)
    configs = sp.configs()
    excluded = tuple((label(c), why) for c, why in sp.excluded())
    if timer is not None and not isinstance(timer, TimerConfig):
        raise TuneError(f"timer= must be a TimerConfig, got {type(timer).__name__}")
    out_dir = door.out_arg(out)
    door.name(name)
    workload = (name or getattr(build, "__name__", None) or "tune").replace("/", ":")
    dec = Declared(tuple(args), dict(kwargs), flops, reads, writes, bytes, dtype, precision,
                   door.reference(reference), door.output(output), door.tolerance(tolerance),
                   size, workload)
    counts = [dec.counts(c) for c in configs]  # a bad declaration refused before any run
    if clock is None:
        from ..measure.api import refuse_interpreters

        refuse_interpreters()
        clock = clock_for(args)
    from ..measure.roof_source import device_roofs

    rs, note = device_roofs(clock, door.roofs_arg(roofs),
                            door.out_arg(roofs_cache) if roofs_cache is not None else None)
    full = timer_for(clock.kind, timer, quick)
    screen = replace(full, min_samples=screen_samples, max_samples=screen_samples)
    ws = (working_set(args, dec.output) or None) if clock.kind == "cpu" else None
    bench = Bench(clock, rs, full, screen, ws)
    bounds = [roof_time(placed(declared_case(n, f"{workload}/{variant(c)}", clock.backend_name),
                               rs, ws), rs) for c, n in zip(configs, counts, strict=True)]
    todo = list(range(len(configs)))
    if order == "roof":
        todo.sort(key=lambda i: (bounds[i] is None, bounds[i] or 0.0, i))
    if first is not None:
        at = next((i for i, c in enumerate(configs) if c == dict(first)), None)
        if at is None:
            raise TuneError(f"first= {label(first)} is not a configuration of the space")
        todo.remove(at)
        todo.insert(0, at)
    search = Search(build, configs, bounds, dec, bench, target, drop_at, exhaustive, now)
    referee = None if alternate is None else Referee(
        lambda i: dec.call(build(**configs[i]), configs[i]), alternate, clock, now, rs, ws,
        final_timer(full))

    def record(stop: str, detail: str) -> TuneRecord:
        rec = search.record(stop, detail, sp_order=order, excluded=excluded,
                            budget_s=budget_s, screen_samples=screen_samples,
                            device=clock.device_name())
        if out_dir is None:
            return rec
        from .output import write_tune

        return replace(rec, out=str(write_tune(rec, out_dir, rs, clock, note, asdict(full))))

    try:
        stop, detail = search.run(todo, budget_s)
        search.finals_note = (
            "not held: finalists=0" if finalists == 0 else
            "not held: the budget was spent" if stop == "budget" else
            "not held: no pairing loop given (alternate=; `roofbench tune` gives it)"
            if referee is None else "")
        if not search.finals_note and referee is not None:
            search.hold_finals(referee, finalists, budget_s)
            if search.finals is None:
                search.finals_note = "none: no configuration's interval tied the best's"
    except KeyboardInterrupt:  # what was tried is kept: the files written, then the stop
        if out_dir is not None:
            record("interrupted", f"stopped after {len(search.trials)} configuration(s)")
        raise
    return record(stop, detail)


def screen_low(times: Sequence[float]) -> tuple[float, str]:
    """The fast end of a screen's 95% interval of its median (``gate.median_interval``, the
    ranking's rule), or with too few samples for one their fastest; and its words."""
    iv = median_interval(list(times), CONFIDENCE)
    if iv is None:
        return min(times), "its fastest"
    return iv[0], "the fast end of its median's 95% interval"


def carry_check(checked: CaseResult, rec: CaseResult) -> None:
    """The screen's validation said in the record of the timing that followed it."""
    rec.outcome.checked, rec.outcome.rel_error = checked.outcome.checked, \
        checked.outcome.rel_error
    rec.declaration.tolerance = checked.declaration.tolerance
    if "validate" in checked.measurement.phases:
        rec.measurement.phases["validate"] = checked.measurement.phases["validate"]
    said = checked.evidence.extra.get("validation")
    if said is not None:
        rec.evidence.extra["validation"] = f"{said} (before the screen's samples)"


class Search:
    """The loop over one space (``tune`` builds it): the trials so far and the best."""

    def __init__(self, build: Callable[..., Any], configs: list[dict[str, Any]],
                 bounds: list[float | None], dec: Declared, bench: Bench, target: float,
                 drop_at: float | None, exhaustive: bool, now: Callable[[], float]) -> None:
        self.build, self.configs, self.bounds, self.dec = build, configs, bounds, dec
        self.bench, self.target, self.drop_at = bench, target, drop_at
        self.exhaustive, self.now = exhaustive, now
        self.trials: dict[int, Trial] = {}
        self.would_stop: tuple[int, str] | None = None
        self.t0 = now()
        self.best: Best | None = None
        self.finals: Finals | None = None
        self.met: list[Meeting] = []  # the finals' meetings as they end
        self.finals_note = ""  # why no finals were held (none: "")

    def hold_finals(self, referee: Referee, limit: int, budget_s: float | None) -> None:
        """The finals over the loop's ranking (``finals.hold``), the budget still binding."""
        _, ranking = rank(tuple(self.trials.values()))
        self.finals = hold(referee, ranking, lambda i: label(self.configs[i]), limit,
                           lambda: budget_s is not None and
                           self.now() - self.t0 >= budget_s, self.met)

    def run(self, todo: list[int], budget_s: float | None) -> tuple[str, str]:
        for pos, i in enumerate(todo):
            left = [self.bounds[j] for j in todo[pos:] if j not in self.trials]
            why = should_stop(self.best, left, self.target)
            if why is not None:
                if not self.exhaustive:
                    self._leave(todo[pos:], "untried", f"not tried: stopped ({why[0]})")
                    return why
                if self.would_stop is None:
                    self.would_stop = (len(self.trials), why[0])
            spent = self.now() - self.t0
            if budget_s is not None and spent >= budget_s:
                self._leave(todo[pos:], "untried", "not tried: the budget was spent")
                return "budget", f"{spent:.3g} s spent of a {budget_s:g} s budget"
            b, best = self.bounds[i], self.best
            if best is not None and not self.exhaustive and b is not None and \
                    b >= best.lo and not above_roof(best):
                self.trials[i] = Trial(
                    i, self.configs[i], label(self.configs[i]), "pruned",
                    f"its time at its roof {b:.4g} s is at or above the best's interval's "
                    f"low end {best.lo:.4g} s", roof_time_s=b)
                continue
            self.trials[i] = self.one(i)
            self.best = best_of(self.trials.values())
        return "space_tried", f"{len(self.trials)} configuration(s) considered"

    def _leave(self, rest: Sequence[int], status: str, why: str) -> None:
        for j in rest:
            if j not in self.trials:
                self.trials[j] = Trial(j, self.configs[j], label(self.configs[j]), status,
                                       why, roof_time_s=self.bounds[j])

    def one(self, i: int) -> Trial:
        """Build, validate, (screen,) time and place configuration ``i``."""
        config, t0 = self.configs[i], self.now()
        bench, roofs = self.bench, self.bench.roofs
        try:
            fn = self.build(**config)
            if not callable(fn):
                raise TypeError(f"build returned {type(fn).__name__}, not a callable")
            call = self.dec.call(fn, config)
            best = self.best
            screened = best is not None and not self.exhaustive and \
                self.drop_at is not None and not above_roof(best)
            rec = bench.measure(call, bench.screen if screened else bench.full)
            if rec.outcome.status != "ok":
                return trial_of(i, config, rec, roofs, "invalid", rec.outcome.error,
                              self.now() - t0)
            if screened:
                assert best is not None and self.drop_at is not None
                first = trial_of(i, config, rec, roofs, "dropped", None, 0.0)
                basis = "paired" if best.basis == "paired" and first.paired and \
                    (first.roof_probe, first.roof_value) == (best.trial.roof_probe,
                                                             best.trial.roof_value) else "raw"
                hi = best.hi if basis == best.basis else (
                    best.trial.interval(basis) or (max(best.trial.times(basis)),))[-1]
                low, what = screen_low(first.times(basis))
                if low > self.drop_at * hi:
                    why = (f"dropped after {len(first.samples_s)} samples: {what} ({basis}) "
                           f"{low:.4g} s is {low / hi:.2f}x the best's interval's slow end "
                           f"{hi:.4g} s (drop at {self.drop_at:g}x)")
                    return replace(first, why=why, wall_s=self.now() - t0)
                screen = rec.measurement.timing
                assert screen is not None
                # The rest is not validated again: the screen validated this callable on these
                # arrays just before (a second check of a large output cost as much as the
                # timing itself: docs/tune.md); its verdict is the record's.
                checked = rec
                rec = bench.measure(replace(call, check=Check()),
                                    rest_timer(bench.full, screen,
                                               checked.measurement.phases.get("time")))
                carry_check(checked, rec)
                bench.count_screen(rec, screen)
        except (TuneError, KeyboardInterrupt):
            raise
        except Exception as e:
            if not raised_by_user(e):
                raise  # roofbench's own failure: a bug, not a configuration's
            return Trial(i, config, label(config), "error", first_line(e),
                         roof_time_s=self.bounds[i], wall_s=self.now() - t0)
        return trial_of(i, config, rec, roofs, "ok", None, self.now() - t0)

    def record(self, stop: str, detail: str, *, sp_order: str,
               excluded: tuple[tuple[str, str], ...], budget_s: float | None,
               screen_samples: int, device: str) -> TuneRecord:
        trials = tuple(self.trials[i] for i in self.trials)  # in the order considered
        basis, ranking = rank(trials)
        best = best_of(trials)
        finals = self.finals
        if finals is None and self.met and ranking:  # interrupted in the finals: the
            # meetings that ended are kept, the loop's best chosen
            finals = Finals(ranking[0].index, tuple(m.rival for m in self.met), (),
                            tuple(self.met), ranking[0].index,
                            f"interrupted after {len(self.met)} meeting(s): the loop's "
                            "best stays", 0, 0.0)
        if best is not None and finals is not None and finals.chosen != best.trial.index:
            # the finals' winner: its own interval on the ranking's basis
            r = next(x for x in ranking if x.index == finals.chosen)
            t = self.trials[finals.chosen]
            lo, hi = r.interval_s or (min(t.times(basis)), max(t.times(basis)))
            best = Best(t, lo, hi, basis)
        headroom = efficiency = None
        if best is not None:
            own = best.trial.roof_time_s
            if own:
                efficiency = (own / best.hi, own / best.lo)
            rest = [t.roof_time_s for t in trials if t.status in ("untried", "pruned")]
            bounds = [own, *rest]
            if all(x is not None and x > 0 for x in bounds):
                headroom = best.hi / min(x for x in bounds if x is not None)
        if stop in STOPS and best is None and stop != "budget":
            detail += "; no configuration was valid"
        return TuneRecord(
            name=self.dec.workload, target=self.target, exhaustive=self.exhaustive,
            budget_s=budget_s, drop_at=self.drop_at, screen_samples=screen_samples,
            order=sp_order, trials=trials, excluded=excluded, basis=basis, ranking=ranking,
            stop=stop, stop_detail=detail, headroom=headroom, efficiency=efficiency,
            wall_s=self.now() - self.t0, device=device, search_would_stop=self.would_stop,
            finals=finals, finals_note=self.finals_note if finals is None else "")
