"""One GPU calibration's shared state and the arithmetic every probe uses.

``ProbeRun`` holds the device, the injected timer, the roofs being built and the probes that
failed; the pure functions turn timed samples into rates and pick launch configurations.
"""

from __future__ import annotations

import contextlib
import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from roofbench.errors_text import first_line
from roofbench.roof_records import RoofSet

from .gpu_device import Gpu, ProbeUnavailable, TimeFn

CUDA_DIR = Path(__file__).with_name("cuda")
SUSTAIN_WINDOW = 5  # consecutive samples a "sustained" rate must hold

LABEL = {"fp64": "FP64", "fp32": "FP32", "fp16": "FP16x2", "bf16": "BF16x2",
         "fp64_tc": "FP64 tensor", "tf32_tc": "TF32 tensor", "fp16_tc": "FP16 tensor",
         "bf16_tc": "BF16 tensor", "fp8_tc": "FP8 tensor"}



def scale_iters(iters: int, seconds: float, target_s: float, lo: int = 1,
                hi: int = 1 << 24) -> int:
    """Iterations that make a compute probe last about target_s, from one trial run."""
    if seconds <= 0 or not math.isfinite(seconds):
        return min(hi, iters * 16)
    return int(min(hi, max(lo, round(iters * target_s / seconds))))


@dataclass
class ConfigResult:
    """One launch configuration of a bandwidth probe and what it achieved."""

    block: int
    blocks_per_sm: int
    grid: int
    median_s: float
    rate: float  # bytes/s (or FLOP/s) at the median
    cv: float
    n: int  # samples

    def config(self) -> dict[str, int]:
        return {"block": self.block, "blocks_per_sm": self.blocks_per_sm, "grid": self.grid}


def pick_best_config(results: Sequence[ConfigResult], tie: float = 0.005) -> ConfigResult:
    """The fastest configuration; within ``tie`` of it, the steadier (lower CV), then the one
    with fewer threads (less to schedule for the same rate)."""
    if not results:
        raise ValueError("no configuration was measured")
    top = max(r.rate for r in results)
    near = [r for r in results if r.rate >= top * (1 - tie)]
    return min(near, key=lambda r: (r.cv, r.grid * r.block))


def roof_from_samples(samples: Sequence[float], work: float) -> tuple[float, dict[str, Any]]:
    """Rate (work per second) at the median sample, with the spread the evidence keeps.

    The median, not the best sample, is the roof: a ceiling this device sustains, not one
    lucky launch. The best-sample rate is recorded beside it.
    """
    s = [float(x) for x in samples if x and x > 0 and math.isfinite(x)]
    if not s or work <= 0:
        raise ValueError("no valid samples")
    med = statistics.median(s)
    cv = statistics.stdev(s) / statistics.fmean(s) if len(s) > 1 else 0.0
    return work / med, {"median_s": med, "min_s": min(s), "max_s": max(s), "n": len(s),
                        "cv": cv, "rate_at_best_sample": work / min(s),
                        "rate_sustained": sustained_rate(s, work)}


def sustained_rate(samples: Sequence[float], work: float,
                   window: int = SUSTAIN_WINDOW) -> float:
    """The best rate the device held over ``window`` consecutive samples: the highest median of
    any run of ``window`` samples (all of them when fewer). Not one lucky launch (a median
    covers it), not the median of a whole series that a noisy neighbour or a clock dip drags
    down: what the hardware demonstrably sustains, the figure a roof must not fall below."""
    s = [float(x) for x in samples]
    if not s or work <= 0 or any(not (x > 0 and math.isfinite(x)) for x in s):
        raise ValueError("no valid samples")
    w = min(window, len(s))
    return max(work / statistics.median(s[i:i + w]) for i in range(len(s) - w + 1))


@dataclass
class ProbeRun:
    """State shared by the probes of one calibration."""

    gpu: Gpu
    time_fn: TimeFn
    quick: bool
    progress: Callable[[str], None]
    rs: RoofSet
    failed: list[dict[str, str]] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)  # every probe's figure
    modules: dict[str, Any] = field(default_factory=dict)
    deadline: float | None = None  # perf_counter() after which no further probe starts
    budget_s: float | None = None
    after_probe: Callable[[str], None] | None = None  # hears each probe's name when it ends

    @property
    def cc_str(self) -> str:
        return f"{self.gpu.cc[0]}.{self.gpu.cc[1]}"

    def module(self, fname: str, arch: str | None = None) -> Any:
        """A probe source compiled once: by CuPy for the device, or for an arch-specific
        target (``arch``, e.g. sm_90a) through cuda-python."""
        key = f"{fname}@{arch}" if arch else fname
        if key not in self.modules:
            src = (CUDA_DIR / fname).read_text()
            self.modules[key] = (self.gpu.compile_native(src, fname, arch) if arch
                                 else self.gpu.compile(src, fname))
        return self.modules[key]

    def attempt(self, probe: str, fn: Callable[[], None]) -> None:
        """Run one probe; a failure is recorded with its reason and the run goes on. Past the
        calibration's time budget a probe is not started, and says so."""
        t0 = time.perf_counter()
        if self.deadline is not None and t0 > self.deadline:
            self.failed.append({"probe": probe, "reason": f"not run: the calibration budget of "
                                f"{self.budget_s:.0f} s was spent by the probes before it"})
            return
        try:
            fn()
        except ProbeUnavailable as e:
            self.failed.append({"probe": probe, "reason": str(e)})
        except Exception as e:  # OOM, compile error, driver error: this probe only
            self.failed.append({"probe": probe, "reason": first_line(e)})
        finally:
            with contextlib.suppress(Exception):  # freeing must not hide the probe's result
                self.gpu.release()
            self.rs.info.setdefault("probe_seconds", {})[probe] = round(
                time.perf_counter() - t0, 3)
        if self.after_probe is not None:
            self.after_probe(probe)

    def timed(self, fn: Callable[[], None], work: float, search: bool = False
              ) -> tuple[float, dict[str, Any]]:
        """Time ``fn`` (``work`` bytes or FLOPs a launch): the median rate and the stats.
        ``search``: a candidate of a configuration search or a point of a curve, timed by the
        short search timer (the figure a roof takes is timed in full)."""
        t = self.time_fn(fn, search=True) if search else self.time_fn(fn)
        value, stats = roof_from_samples(t.samples, work)
        summary = t.summary() if hasattr(t, "summary") else {}
        stats["stopped_by"] = summary.get("stopped_by")
        stats["flags"] = summary.get("flags", [])
        stats["samples_s"] = [float(x) for x in t.samples]
        return value, stats
