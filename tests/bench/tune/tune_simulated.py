"""A simulated machine for the tuner's tests: a virtual clock that only the kernels' samples
and the roof's samples advance, a memory system whose bandwidth a configuration can put in
another state, and a clock of the measurement core (``callables.Clock``) that times through
the timer's own ``sample_loop`` with a fake roof pair. Every kernel really computes its
output (validation is real); only time is simulated. conftest.py loads it as the module
``tune_simulated`` (a CLI test's script imports it by that name)."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from roofbench.bench.measure.callables import Clock

from roofbench.roof_records import Roof, RoofSet
from roofbench.timing import RoofPair, TimerConfig, Timing, sample_loop

DEVICE = "Simulated VM"
ROOF_BW = 100e9  # the calibrated DRAM roof (B/s)
NBYTES = 100_000_000  # a configuration's declared DRAM bytes: 1 ms at the roof
N = 4096  # the arrays really computed (small: only time is simulated)
# A short real timer: warm-up 10 virtual ms, then samples until 0.5% jitter converges.
TIMER = TimerConfig(warmup_s=0.01, budget_s=1.0, max_samples=200)


def roofs() -> RoofSet:
    return RoofSet(device=DEVICE, roofs=[
        Roof("dram stream-add-nt", "memory", ROOF_BW, "measured", level="dram",
             evidence={"probe": "stream-add-nt", "array_elements": 1 << 20}),
        Roof("fp32 FMA peak", "compute", 1e12, "measured", precision="fp32",
             evidence={"probe": "fma-peak"})])


class Machine:
    """Virtual time (``now``), the memory's bandwidth now (``bw``: the roof's state), and
    the seconds of the last kernel run (``last``)."""

    def __init__(self, seed: int = 0, jitter: float = 0.005) -> None:
        self.rng = random.Random(seed)
        self.now, self.bw, self.jitter = 0.0, ROOF_BW, jitter
        self.last: float | None = None
        self.built: list[dict[str, Any]] = []  # every configuration build() was called with

    def spend(self, efficiency: float, nbytes: float = NBYTES) -> None:
        """One run of a kernel moving ``nbytes`` at ``efficiency`` of the memory now."""
        t = nbytes / (efficiency * self.bw) * self.rng.gauss(1.0, self.jitter)
        self.now += t
        self.last = t

    def probe(self) -> float:
        rate = self.bw * self.rng.gauss(1.0, self.jitter)
        self.now += 1e-4
        return rate

    def clock(self) -> float:
        return self.now


class SimClock(Clock):
    """The measurement core's clock on the simulated machine: the timer's sample loop, the
    machine's virtual time, and the DRAM roof sampled beside each sample."""

    kind = "cpu"
    backend_name = "cpu"
    pairs_roofs = False  # the real samplers are not asked for; this clock pairs its own

    def __init__(self, machine: Machine, paired: bool = True) -> None:
        self.machine, self.paired = machine, paired

    def device_name(self) -> str:
        return DEVICE

    def info(self) -> dict[str, Any]:
        return {"kind": "cpu", "name": DEVICE}

    def extra(self) -> dict[str, Any]:
        return {}

    def time(self, fn: Callable[[], None], cfg: TimerConfig,
             pair: RoofPair | None = None) -> Timing:
        m = self.machine

        def one() -> float:
            m.last = None
            fn()
            assert m.last is not None, "the simulated kernel did not spend time"
            return m.last

        fake = RoofPair("memory:dram:stream-add-nt", m.probe) if self.paired else None
        return sample_loop(one, cfg, clock=m.clock, pair=fake)


@dataclass
class Sim:
    """One simulated tune's pieces: the machine, its clock, the arrays, and ``build`` of a
    scale kernel (out = 2 a) whose configuration's efficiency is ``eff[label]``."""

    machine: Machine
    clock: SimClock
    a: np.ndarray
    out: np.ndarray

    def builder(self, eff: Callable[[dict[str, Any]], float],
                nbytes: Callable[[dict[str, Any]], float] = lambda c: NBYTES,
                wrong: Callable[[dict[str, Any]], bool] = lambda c: False,
                state: Callable[[dict[str, Any]], float] | None = None
                ) -> Callable[..., Callable[..., None]]:
        m = self

        def build(**cfg: Any) -> Callable[..., None]:
            m.machine.built.append(dict(cfg))
            if state is not None:  # the memory is in this state while this one is timed
                m.machine.bw = state(cfg)

            def kernel(a: np.ndarray, out: np.ndarray) -> None:
                np.multiply(a, 3.0 if wrong(cfg) else 2.0, out=out)
                m.machine.spend(eff(cfg), nbytes(cfg))

            return kernel

        return build

    def kw(self, **extra: Any) -> dict[str, Any]:
        """tune's keywords for this simulation (counts: NBYTES of DRAM, N FLOPs)."""
        return {"flops": N, "bytes": {"dram": NBYTES}, "reference": lambda a, out: 2.0 * a,
                "output": self.out, "roofs": roofs(), "timer": TIMER,
                "clock": self.clock, "now": self.machine.clock, **extra}


