"""A/B in one job: base and new measured alternately, sample by sample, so that whatever
else uses the machine (a neighbour's process, a clock change, the drift of a shared runner)
hits both sides alike; `roofbench compare` judges each case on its paired samples.

``AbSession(out=DIR).measure(base_fn, new_fn, *args, flops=..., reads=..., writes=...)``
validates each side as ``roofbench.measure`` does (``reference=``), then takes pairs of
samples: A then B, B then A, alternately (neither side always runs second, with the other's
caches and clocks behind it), after a warm-up of both. It stops on the timer's budget (the
two sides together get twice one case's), ``max_samples`` pairs, or once the paired ratio's
95% interval is within ``target_rel_ci`` of it (after 30 pairs). The host clock times each
sample (after a synchronising call on a GPU). What else used the machine is measured over the
whole alternation (the noise probe: /proc/stat counts in clock ticks, far coarser than one
sample, so it cannot be split by side; the two sides share that time alike) and recorded on
both sides (``Timing.outside_load``, whether or not the samples spread); each sample's own
wait for a core (schedstat, nanoseconds) is recorded beside it (``Timing.waits``): the load
rule's bound is then that of the pairs' median, about 1, the pairing having taken the load
out.

The run is two ordinary runs, ``DIR/a`` and ``DIR/b`` (report, plot and compare read each),
whose ``environment["ab"]`` names the pairing (one id, the side); ``roofbench compare DIR``
(or ``compare DIR/a DIR/b``) judges them paired. The same A/B measurement backs
``roofbench ab`` (bench/cli/ab.py) and the pytest fixture ``roofline_ab``
(bench/pytest/ab_fixture.py).
"""

from __future__ import annotations

import copy
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, cast

import numpy as np
from roofbench.bench.measure import core, door
from roofbench.bench.measure.api import Session
from roofbench.bench.measure.callables import Clock, clock_for, measure_callable, working_set
from roofbench.bench.measure.declared import DECLARED, declare
from roofbench.bench.measure.door import MeasureError
from roofbench.bench.measure.pairs import pair_for
from roofbench.bench.measure.roof_source import device_roofs
from roofbench.roofs.probes.cpu_noise import NoiseProbe, ThreadWaits, outside_load
from roofbench.roofs.probes.cpu_spinners import settle

from roofbench.gate import (
    AB_KEY,
    CONFIDENCE,
    MIN_PAIRS,
    CaseVerdict,
    case_key,
    classify_case,
    median_interval,
)
from roofbench.gate_load import block_ratios
from roofbench.records import CaseResult
from roofbench.roof_records import RoofSet
from roofbench.timing import (
    CI_MIN_SAMPLES,
    RoofPair,
    TimerConfig,
    Timing,
    roof_moved,
    short_flag,
    timer_for,
)

ORDER = "alternating pairs: A B, then B A"


def alternate(fn_a: Callable[[], Any], fn_b: Callable[[], Any], cfg: TimerConfig,
              sync: Callable[[], None] = lambda: None,
              pair: RoofPair | None = None,
              clock: Callable[[], float] = time.perf_counter,
              decided: Callable[[Timing, Timing], bool] | None = None,
              crossed: tuple[Callable[[], Any], Callable[[], Any]] | None = None,
              ) -> tuple[Timing, Timing]:
    """Pairs of samples of ``fn_a`` and ``fn_b``, alternating which goes first (see the
    module doc); each side's Timing holds its samples in pair order and its load. ``pair``:
    the roof that bounds both, sampled after each pair (both sides store its rates).

    ``crossed``: each side's code on the other side's data (``crossable``), run instead of
    ``fn_a``/``fn_b`` every other ABBA block. Two sides that allocate their own buffers hold
    them at different physical pages for the whole job: unchanged code read `slower` 1.066
    [1.030, 1.268] over 80 pairs under a busy loop per core (B 3.7% slower in both halves of
    the run), and two buffer sets timed alike in one process differed by up to 12%. Pairing
    cancels what changes in time, not what is fixed in the data; crossing makes it change. At
    each switch the coming pair's sides are rerun untimed, second then first, so that no side
    finds its data staler than in any other pair.

    ``decided(ta, tb)``: whether the pairs so far give the gate a verdict (not `uncertain`).
    Past the budget an undecided case samples on, within the cap (twice the timer's
    ``min_samples_cap_s``): on a runner whose cores are all taken, 24 pairs of a 1.5x
    slowdown gave 1.956 [1.180, 2.596] under a load bound of x1.29, `uncertain`, and the
    recipe's `ab` passed (issue 57); the pairs it lacked were the budget's, not the cap's.

    No order favours a side: the pairs run A B, B A, ... (ABBA blocks, which the gate judges
    as units), every pair's first side runs right after a run of its own, as in the blocks
    themselves (the warm-up ends with A for the first pair, A B; a rewarm after a roof
    sample runs the coming pair's second side, then its first). A rewarm that always ran A
    then B left B's data the freshest before every B A pair: B gained in one pair of each
    block and lost in none (the A/A intervals below 1 of issue 57)."""
    settle()  # no BLAS worker left spinning by the validation (roofs/probes/cpu_spinners.py)
    waits = ThreadWaits()  # each sample's wait for a core (schedstat, nanoseconds)
    waited: dict[str, list[float | None]] = {"A": [], "B": []}

    def one(fn: Callable[[], Any], side: str = "") -> float:
        sync()
        w0 = waits()
        t0 = clock()
        fn()
        sync()
        t1 = clock()
        w1 = waits()
        if side:
            waited[side].append(None if w0 is None or w1 is None else max(w1 - w0, 0) * 1e-9)
        return t1 - t0

    sets = [{"A": fn_a, "B": fn_b}] + ([{"A": crossed[0], "B": crossed[1]}] if crossed else [])

    def fns_at(n: int) -> dict[str, Callable[[], Any]]:
        """The functions of pair ``n``: the crossed ones in every other ABBA block."""
        return sets[(n // 2) % len(sets)]

    t_start, warm = clock(), 0
    while warm < cfg.warmup_min_runs or clock() - t_start < 2 * cfg.warmup_s:
        for fs in reversed(sets):  # B then A: the first pair's A runs after its own run,
            one(fs["B"])  # as every first does (the crossed set warmed too, before)
            one(fs["A"])
        warm += 1
        if warm >= 10_000:
            break
    if pair is not None:
        pair.sample()  # its first call allocates: untimed
    rates: list[float] = []
    probe = NoiseProbe()  # over the whole alternation: both sides shared its time alike
    samples: dict[str, list[float]] = {"A": [], "B": []}
    stopped, t0 = "max_samples", clock()
    min_pairs = max(cfg.min_samples, MIN_PAIRS)

    def timings(flag: bool) -> tuple[Timing, Timing]:
        """Both sides' Timings of the pairs so far (``flag``: with the load and flags)."""
        load = outside_load(probe.report()) if flag else ""
        out = []
        for side in ("A", "B"):
            w = [x for x in waited[side] if x is not None]
            t = Timing(samples=list(samples[side]), warmup_runs=warm, stopped_by=stopped,
                       config={**asdict(cfg), "ab": {"side": side, "order": ORDER,
                                                     "crossed": crossed is not None}},
                       outside_load=load, waits=w if len(w) == len(samples[side]) else [],
                       roof_probe=pair.probe if pair is not None else "",
                       roof_rates=list(rates))
            if flag:
                _flag(t)
            out.append(t)
        return out[0], out[1]

    def _flag(t: Timing) -> None:
        if stopped == "cap" and t.n < min_pairs:
            t.flags.append(short_flag(t.n, replace(
                cfg, min_samples=min_pairs, min_samples_cap_s=2 * cfg.min_samples_cap_s)))
        elif stopped == "cap":
            t.flags.append(f"undecided: {t.n} pairs within the {2 * cfg.min_samples_cap_s:g} s "
                           "cap left the gate's verdict uncertain")
        if t.n > 1 and t.cv > cfg.noisy_cv:
            t.flags.append(f"noisy: cv {t.cv:.1%} > {cfg.noisy_cv:.0%}")
            if t.paired:
                t.flags.append(roof_moved(t))

    while len(samples["A"]) < cfg.max_samples:
        fns = fns_at(len(samples["A"]))
        for side in ("AB" if len(samples["A"]) % 2 == 0 else "BA"):
            samples[side].append(one(fns[side], side))
        if pair is not None:
            rates.append(float(pair.sample()))
        n = len(samples["A"])
        coming = fns_at(n)
        if (pair is not None and pair.rewarm) or coming is not fns:
            # the roof's data evicted theirs, or the data cross: both back, untimed, the
            # coming pair's first last
            nxt = "BA" if n % 2 else "AB"
            one(coming[nxt[1]])
            one(coming[nxt[0]])
        # The stopping rule's work runs after every pair, whichever its order: were it after
        # B A pairs alone (where a block ends), every A B pair would start after that gap and
        # every B A pair without it, an order bias the blocks do not cancel (A/A 0.965-1.000
        # on the shared VM, 14 of 30 intervals below 1). Only the stop waits for a block.
        whole = n % 2 == 0  # a block (A B, B A) is judged whole: stop only between blocks
        if n >= max(min_pairs, CI_MIN_SAMPLES):
            ratios = block_ratios(samples["A"], samples["B"])
            iv, mid = median_interval(ratios, CONFIDENCE), statistics.median(ratios)
            if whole and iv and (iv[1] - iv[0]) / 2 <= cfg.target_rel_ci * mid:
                stopped = "median_ci"
                break
        elapsed = clock() - t0
        capped = elapsed >= 2 * cfg.min_samples_cap_s
        # past the budget, after every pair (whatever its order, as above): is it decided?
        done = (elapsed >= 2 * cfg.budget_s and n >= min_pairs
                and (decided is None or decided(*timings(False))))
        if whole and (done or (capped and elapsed >= 2 * cfg.budget_s)):
            stopped = "budget" if done else "cap"
            break
    ta, tb = timings(True)
    waits.close()
    return ta, tb


def settled(v: CaseVerdict, threshold: float) -> bool:
    """Whether sampling may stop on this verdict: `slower`/`faster` (their interval clears
    the threshold), or `same` (its whole interval lies within the threshold: the gate's
    rule; checked here too, so that a `same` read from an older file cannot stop a case on
    its median alone, as a wide interval once did: [0.72, 1.54] under two busy loops).
    A case unsettled at the cap keeps the gate's verdict and its `undecided` flag."""
    if v.verdict in ("slower", "faster"):
        return True
    if v.verdict != "same" or v.ratio_lo is None or v.ratio_hi is None:
        return False
    return 1.0 / (1.0 + threshold) <= v.ratio_lo and v.ratio_hi <= 1.0 + threshold


def same_data(x: Any, y: Any) -> bool:
    """Whether two arguments hold the same data in the same form, so that either side's
    code may run on either (numpy arrays and torch CPU tensors compared whole; other values
    by identity or ==)."""
    if x is y:
        return True
    if isinstance(x, np.ndarray) and isinstance(y, np.ndarray):
        return (x.shape == y.shape and x.dtype == y.dtype and x.strides == y.strides
                and bool(np.array_equal(x, y, equal_nan=x.dtype.kind in "fc")))
    if type(x).__module__.startswith("torch") and type(y) is type(x):
        try:
            return bool(x.device == y.device and x.device.type == "cpu" and x.dtype == y.dtype
                        and x.shape == y.shape and x.stride() == y.stride() and
                        x.equal(y))
        except Exception:  # a torch object that is not a tensor: by identity only
            return False
    if hasattr(x, "__array__") or hasattr(y, "__array__") or type(x) is not type(y):
        return False  # another array type (CuPy, JAX): not crossed
    try:
        return bool(x == y)
    except Exception:
        return False


def crossable(args_a: Sequence[Any], args_b: Sequence[Any]) -> bool:
    """Whether the two sides' arguments are distinct buffers of the same data, so that the
    job can cross them (``alternate``'s ``crossed``): never when they differ in any value,
    shape or type (the new code may need its own data), nor when they are the same objects
    (nothing to cross)."""
    if len(args_a) != len(args_b):
        return False
    both = list(zip(args_a, args_b, strict=True))
    return any(x is not y for x, y in both) and all(same_data(x, y) for x, y in both)


def load_during(call: Callable[[], Any]) -> str:
    """Run ``call`` under the noise probe: what else used the machine meanwhile, in the words
    of ``Timing.outside_load`` (empty when nothing did). The pytest plugin records it beside
    pytest-benchmark's timing, so compare applies one load rule to every input."""
    probe = NoiseProbe()
    call()
    return outside_load(probe.report())


class _Capture:
    """A clock that validates as ``clock`` does but keeps the function to be timed: the
    timing is taken afterwards, alternating with the other side's."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.fn: Callable[[], Any] | None = None

    pairs_roofs = False  # nothing is timed here: the pairs are taken in ``alternate``

    def __getattr__(self, name: str) -> Any:
        return getattr(self.clock, name)

    def time(self, fn: Callable[[], Any], cfg: TimerConfig) -> Timing:
        self.fn = fn
        return Timing(samples=[1.0], warmup_runs=0, stopped_by="deferred")


@dataclass
class AbResult:
    """One A/B case: each side's record and the paired verdict."""

    a: CaseResult
    b: CaseResult
    verdict: CaseVerdict  # per case at 95% (compare's is simultaneous over the run's cases)


def claim_job(out: Path) -> Path:
    """The A/B job's folder (``results.claim_folder`` over its a/, b/ and compare/)."""
    from roofbench.bench.results import AB_FILES, claim_folder

    from roofbench.boundary import Refusal

    try:
        got = claim_folder(out.absolute(), AB_FILES)
    except Refusal as e:
        raise MeasureError(f"out=: {e}") from None
    if got != out.absolute():
        print(f"roofbench: {out} holds an A/B job already: this one writes {got}",
              file=sys.stderr, flush=True)
    return got


class AbSession:
    """Two sessions, ``out/a`` (base) and ``out/b`` (new), filled pair by pair (see the
    module doc). ``threshold``: the change the returned verdicts call ``same``."""

    def __init__(self, out: str | Path | None = None, *,
                 roofs: RoofSet | str | Path | None = None,
                 roofs_cache: str | Path | None = None, timer: TimerConfig | None = None,
                 quick: bool = False, threshold: float = 0.05,
                 labels: tuple[str, str] = ("base", "new")) -> None:
        # The job's own folder, claimed now: a second job into the same --out takes out-2
        # (its a/, b/ and compare/ beside the first job's, never over them).
        self.out = claim_job(Path(out)) if out is not None else None
        self.id = uuid.uuid4().hex
        self.labels = labels
        self.sides = {s: Session(self.out / s.lower() if self.out else None, roofs=roofs,
                                 roofs_cache=roofs_cache, timer=timer, quick=quick)
                      for s in ("A", "B")}
        self.threshold = threshold

    def measure(self, base: Callable[..., Any], new: Callable[..., Any], *args: Any,
                args_b: Sequence[Any] | None = None, output_b: Any = None,
                **options: Any) -> AbResult:
        """``base(*args)`` against ``new(*args_b)`` (default: the same arguments), with
        ``roofbench.measure``'s keywords as ``options`` (the same counts for both: the same
        work; ``output_b``: what ``new`` writes, when not ``output``)."""
        unknown = sorted(set(options) - DECLARED)
        if unknown:
            raise MeasureError(f"unknown keyword {unknown[0]}= (an A/B pair takes "
                               f"{', '.join(sorted(DECLARED))}, args_b, output_b)")
        a = declare(base, args, named_after=new, **options)
        b_check = a.check if output_b is None else replace(a.check, output=door.output(output_b))
        b = replace(a, fn=door.function(new), args=tuple(args if args_b is None else args_b),
                    check=b_check)
        clock = clock_for(args)
        first = self.sides["A"]
        roofs, note = ((first.run.roofs, None) if first.run is not None
                       else device_roofs(clock, first.roofs_arg, first.roofs_cache))
        cfg = timer_for(clock.kind, first.timer, first.quick)
        recs: dict[str, CaseResult] = {}
        caps: dict[str, _Capture] = {}
        for side, call in (("A", a), ("B", b)):
            self._start(side, clock, cfg, roofs, note)
            caps[side] = _Capture(clock)
            recs[side] = measure_callable(call, clock=cast(Clock, caps[side]), cfg=cfg,
                                          roofs=roofs)
        fa, fb = caps["A"].fn, caps["B"].fn
        # placed as measure places them: on the cache level their data fits in, on a CPU
        ws = {side: (working_set(call.args, call.check.output) or None)
              if clock.kind == "cpu" else None for side, call in (("A", a), ("B", b))}
        if recs["A"].valid and recs["B"].valid and fa is not None and fb is not None:
            # one roof bounds both: one work
            pair = pair_for(recs["A"], roofs, clock, ws["A"], a.counts.arrays)
            key = case_key(recs["A"])

            def decided(ta: Timing, tb: Timing) -> bool:
                """The pairs so far settle the case (``settled``)."""
                ra, rb = copy.deepcopy(recs["A"]), copy.deepcopy(recs["B"])
                core.fill_metrics(ra, ta, roofs, ws["A"])
                core.fill_metrics(rb, tb, roofs, ws["B"])
                return settled(classify_case(key, ra, rb, self.threshold, CONFIDENCE,
                                             paired=True), self.threshold)

            cross = None
            if clock.kind == "cpu" and crossable(a.args, b.args):
                def xa() -> Any:
                    return a.fn(*b.args, **a.kwargs)

                def xb() -> Any:
                    return b.fn(*a.args, **b.kwargs)

                cross = (xa, xb)
            ta, tb = alternate(fa, fb, cfg, clock.sync, pair, decided=decided, crossed=cross)
            core.fill_metrics(recs["A"], ta, roofs, ws["A"])
            core.fill_metrics(recs["B"], tb, roofs, ws["B"])
        else:  # one side failed validation: the other is timed alone, as measure would
            for side, rec in recs.items():
                fn_side = caps[side].fn
                if rec.valid and fn_side is not None:
                    core.fill_metrics(rec, core.paired_time(
                        clock, fn_side, cfg, rec, roofs, ws[side], arrays=a.counts.arrays),
                        roofs, ws[side])
        for side, rec in recs.items():
            rec.evidence.extra["ab"] = {
                "id": self.id,
                "side": side,
                "label": self.labels[side == "B"],
            }
            self.sides[side]._add(rec)
        verdict = classify_case(case_key(recs["A"]), recs["A"], recs["B"], self.threshold,
                                CONFIDENCE, paired=True)
        return AbResult(recs["A"], recs["B"], verdict)

    def _start(self, side: str, clock: Clock, cfg: TimerConfig, roofs: RoofSet | None,
               note: str | None) -> None:
        """The side's run, as Session.measure starts one, naming the pairing."""
        sess = self.sides[side]
        if sess.run is not None:
            return
        from roofbench.bench.results import environment, git_commit, process_command, utc_stamp

        from roofbench.records import RunResult

        sess.run = RunResult(backend=clock.backend_name, device=clock.device_name(),
                             roofs=roofs, cases=[], environment=environment(clock.info()),
                             command=process_command(), created=utc_stamp(),
                             git_commit=git_commit(Path.cwd()), timer=asdict(cfg))
        sess.run.environment[AB_KEY] = {"id": self.id, "side": side, "order": ORDER,
                                        "label": self.labels[side == "B"]}
        if note:
            sess.run.notes.append(note)

    def close(self, interrupted: bool = False) -> list[Path]:
        """Save both runs with their reports; returns the files written."""
        return [p for s in ("A", "B") for p in self.sides[s].close(interrupted)]

    def __enter__(self) -> AbSession:
        return self

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> None:
        self.close(interrupted=kind is not None and issubclass(kind, KeyboardInterrupt))
