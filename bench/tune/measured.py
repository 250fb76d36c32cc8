"""How one configuration is measured and placed: ``Bench`` (the clock, the roofs, the full
timer and the screen's), its time at its roof from its counts (``roof_time``), a screen's
samples counted with the timing that follows it (``rest_timer``, ``joined``), and the
``Trial`` a measured record makes."""

from __future__ import annotations

from dataclasses import dataclass, replace

from roofbench.records import CaseResult, Declaration, Identity, Outcome
from roofbench.roof_records import RoofSet
from roofbench.roofline import apply_roofs, pair_matches, place, placed_bytes
from roofbench.timing import TimerConfig, Timing

from ..measure.callables import Clock, measure_callable
from ..measure.core import fill_metrics
from ..measure.declared import Call, Counts
from .record import Trial
from .space import Config, label


def declared_case(n: Counts, name: str, backend: str) -> CaseResult:
    """An untimed record of these counts, as ``measure_callable`` starts one."""
    workload, _, variant = name.partition("/")
    return CaseResult(
        Identity(workload=workload, variant=variant or "default", backend=backend,
                 dtype=n.dtype, size=list(n.size), precision=n.precision, cores=n.cores),
        Declaration(flops=n.flops, bytes=dict(n.bytes), ai=n.ai), Outcome(status="ok"))


def roof_time(rec: CaseResult, roofs: RoofSet | None) -> float | None:
    """Seconds the case's counts take at its attainable roof where it is placed (the least
    time any configuration of these counts can take: a point above its roof is a bug):
    FLOPs over the attainable FLOP/s, or for 0 FLOPs the bytes of its slowest level over
    that level's roof. None without a roof that bounds it."""
    if roofs is None:
        return None
    r, flops = rec.roofline, rec.declaration.flops
    if flops > 0:
        return flops / r.attainable if r.attainable else None
    times = [b / m.value for lvl, b in placed_bytes(rec).items()
             if b > 0 and (m := roofs.memory(lvl)) is not None and m.value > 0]
    return max(times) if times else None


def placed(rec: CaseResult, roofs: RoofSet | None, ws: int | None) -> CaseResult:
    if roofs is not None:
        if ws is not None:
            rec.roofline.placement = place(ws, roofs)
        apply_roofs(rec, roofs)
    return rec


@dataclass
class Bench:
    """What measures one configuration: the clock (chosen once from the arguments), the
    roofs, the full timer and the short one of a screen, the working set a CPU case is
    placed by."""

    clock: Clock
    roofs: RoofSet | None
    full: TimerConfig
    screen: TimerConfig
    ws: int | None = None

    def measure(self, call: Call, cfg: TimerConfig) -> CaseResult:
        return measure_callable(call, clock=self.clock, cfg=cfg, roofs=self.roofs)

    def count_screen(self, rec: CaseResult, screen: Timing) -> None:
        """The screen's samples counted with the rest of the timing (``joined``), the
        record's time, rates and place filled again from all of them (``core.fill_metrics``)."""
        rest = rec.measurement.timing
        if rest is None or rest.roof_probe != screen.roof_probe or \
                bool(rest.roof_rates) != bool(screen.roof_rates):
            return  # two roofs (never seen): the rest alone stands
        fill_metrics(rec, joined(screen, rest), self.roofs, self.ws)
        rec.evidence.extra["tune_screen"] = (
            f"the first {screen.n} samples are the screen's (an early-drop check), timed "
            f"just before the rest by the same loop")


def rest_timer(full: TimerConfig, screen: Timing, screen_s: float | None = None
               ) -> TimerConfig:
    """The timer of what follows a screen that did not drop its configuration: the full one
    less what the screen took (its samples, and ``screen_s``, the wall seconds of its timing
    phase with its roof samples: else the samples' sum, off the budget; no second warm-up,
    the kernel ran just now), so that a screen costs about nothing more."""
    spent = screen_s if screen_s is not None else sum(screen.samples)
    return replace(full, warmup_s=0.0, warmup_min_runs=1,
                   min_samples=max(2, full.min_samples - screen.n),
                   max_samples=max(1, full.max_samples - screen.n),
                   budget_s=max(0.0, full.budget_s - spent))


def joined(first: Timing, rest: Timing) -> Timing:
    """Two consecutive timings of one configuration by the same loop, as one: the samples
    (and their waits and paired roof rates) in order, the rest's stop and configuration."""
    waits = first.waits + rest.waits if first.waits and rest.waits else []
    return Timing(samples=[*first.samples, *rest.samples],
                  warmup_runs=first.warmup_runs + rest.warmup_runs,
                  stopped_by=rest.stopped_by, config=dict(rest.config),
                  flags=list(dict.fromkeys([*first.flags, *rest.flags])),
                  outside_load="; ".join(x for x in (first.outside_load, rest.outside_load)
                                         if x),
                  waits=waits, roof_probe=rest.roof_probe,
                  roof_rates=[*first.roof_rates, *rest.roof_rates])


def trial_of(index: int, config: Config, rec: CaseResult, roofs: RoofSet | None,
           status: str, why: str | None, wall: float) -> Trial:
    t = rec.measurement.timing
    roof_value = None
    if t is not None and t.paired and roofs is not None and \
            pair_matches(t.roof_probe, rec, roofs):
        roof = next((x for x in roofs.roofs if x.name == rec.roofline.limiting_roof), None)
        roof_value = roof.value if roof is not None else None
    return Trial(
        index=index, config=dict(config), label=label(config), status=status, why=why,
        flops=rec.declaration.flops, bytes=dict(rec.declaration.bytes),
        roof_time_s=roof_time(rec, roofs),
        samples_s=tuple(t.samples) if t is not None else (),
        roof_rates=tuple(t.roof_rates) if t is not None and roof_value else (),
        roof_probe=t.roof_probe if t is not None and roof_value else "",
        roof_value=roof_value, stopped_by=t.stopped_by if t is not None else "",
        efficiency=rec.roofline.efficiency, key=rec.key, wall_s=wall, case=rec)
