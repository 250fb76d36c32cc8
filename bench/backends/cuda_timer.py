"""GPU timing with CUDA events, shared by the CuPy and PyCUDA backends.

One sample = event recorded on the run's stream, the work, event recorded, wait for the second
event, elapsed time between them (the GPU's own clock; host launch time shows only when the GPU
waits for the host). The loop, warm-up and noise criterion are ``timer.sample_loop``'s, the same
as the CPU backend's. Cold mode enqueues an L2 flush (a memset of a buffer twice the L2 size,
allocated once, outside every timed window) on the same stream before the first event, so it
runs before the timed window opens.

Around every sample the SM clock is read through NVML (``roofbench.roofs.probes.nvml``, failing
soft); samples taken while the SM clock sat under ``THROTTLE_FRACTION`` of its maximum, or
while NVML named a throttling reason, are counted and flagged (kept, not dropped: raw samples
stay raw).
The clock snapshots before and after a case go into ``Timing.config["clocks"]``.

``pair``: the roof that bounds the case, sampled right after each sample has ended (outside
its window, by the sampler's own events: roofs/probes/gpu_pairs.py), as ``sample_loop`` does
on the CPU; a pair that asks for it re-runs the case once, untimed, before its next sample.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from roofbench.timing import RoofPair, TimerConfig, Timing, sample_loop

# nvbench drops samples below 75% of the default clock; we flag the same condition.
THROTTLE_FRACTION = 0.75


@dataclass(frozen=True)
class EventOps:
    """What the timer needs from a CUDA runtime binding (CuPy or PyCUDA)."""

    new_event: Callable[[], Any]
    record: Callable[[Any], None]  # record an event on the run's stream
    wait: Callable[[Any], None]  # block the host until the event completed
    elapsed_s: Callable[[Any, Any], float]
    flush_l2: Callable[[], None] | None = None  # enqueue an L2 flush on the run's stream


def _nvml_snapshot(index: int) -> Callable[[], dict[str, Any]] | None:
    try:
        from roofbench.roofs.probes import nvml
    except ImportError:  # pragma: no cover - nvml ships with roofbench
        return None
    if not nvml.available():
        return None
    return lambda: nvml.snapshot(index)


def event_seconds(ops: EventOps) -> Callable[[Callable[[], None]], float]:
    """Device seconds of the work one call of a function enqueues: an event before it and
    one after it on the run's stream, the second waited for (a roof's sample)."""
    e0, e1 = ops.new_event(), ops.new_event()

    def timed(fn: Callable[[], None]) -> float:
        ops.record(e0)
        fn()
        ops.record(e1)
        ops.wait(e1)
        return ops.elapsed_s(e0, e1)
    return timed


def cuda_time(fn: Callable[[], None], cfg: TimerConfig, ops: EventOps,
              device_index: int = 0,
              snapshot: Callable[[], dict[str, Any]] | None = None,
              pair: RoofPair | None = None) -> Timing:
    """Time ``fn`` (which enqueues work on the run's stream) with CUDA events; ``pair``: the
    roof sampled beside each sample (module doc)."""
    flush = ops.flush_l2 if cfg.cold else None
    if cfg.cold and flush is None:
        raise ValueError("cold timing needs an L2 flush")
    snap = snapshot if snapshot is not None else _nvml_snapshot(device_index)
    e0, e1 = ops.new_event(), ops.new_event()  # reused: no allocation inside the loop
    clocks: list[dict[str, Any]] = []

    def one() -> float:
        if flush is not None:  # cold
            flush()  # enqueued before e0: outside the window
        ops.record(e0)
        fn()
        ops.record(e1)
        ops.wait(e1)
        if snap is not None:
            clocks.append(snap())
        return ops.elapsed_s(e0, e1)

    def warm() -> None:  # untimed, no clock read: the case's data back where it lives
        if flush is not None:
            flush()
        fn()
        ops.record(e1)
        ops.wait(e1)

    before = snap() if snap is not None else None
    t = sample_loop(one, cfg, pair=pair, rewarm=warm)
    after = snap() if snap is not None else None
    t.config = dict(t.config)
    t.config["timer"] = "cuda_events"
    if snap is not None:
        per_sample = clocks[-t.n:]  # warm-up calls come first
        t.config["clocks"] = clock_summary(before, after, per_sample)
        flag = throttle_flag(per_sample)
        if flag:
            t.flags.append(flag)
    else:
        t.config["clocks"] = {"nvml": "unavailable"}
    return t


def clock_summary(before: dict[str, Any] | None, after: dict[str, Any] | None,
                  per_sample: list[dict[str, Any]]) -> dict[str, Any]:
    sm = [s["sm_clock_mhz"] for s in per_sample if s.get("sm_clock_mhz") is not None]
    return {
        "before": before,
        "after": after,
        "sm_clock_mhz_samples": sm,
        "sm_clock_mhz_median": statistics.median(sm) if sm else None,
        "sm_clock_mhz_min": min(sm) if sm else None,
    }


def throttle_flag(per_sample: list[dict[str, Any]],
                  fraction: float = THROTTLE_FRACTION) -> str | None:
    """A flag naming how many samples ran throttled, or None."""
    bad = 0
    max_clock = None
    for s in per_sample:
        clock, mx = s.get("sm_clock_mhz"), s.get("max_sm_clock_mhz")
        max_clock = mx or max_clock
        low = clock is not None and mx and clock < fraction * mx
        if low or s.get("throttled"):
            bad += 1
    if not bad:
        return None
    return (f"throttled: {bad}/{len(per_sample)} samples with the SM clock under "
            f"{fraction:.0%} of its max ({max_clock} MHz) or a throttle reason set")
