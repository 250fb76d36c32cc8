"""Every op timed where it runs: the real program run again and again under a dispatch mode
that times each aten call (the host clock around the call on a CPU, a pair of CUDA events
on a GPU), so that an op's time is what it costs inside the program, its data wherever the
program left it (a decode step's weights streamed from DRAM), and the ops add up to the
program less the Python between them.

Σ ops and the program come from the same runs: each timed run's wall, less the timing
mode's own bookkeeping in that run (the shape checks and clock reads around each call,
timed), is the program's time in that run; the ops' times summed in that run over it is
the run's ratio, so a run a busy machine stretches stretches both (``in_run_ratios``; the
eager run after each, ``eager_s``, is another run and meets other load).

What the bookkeeping cannot time is the mode's entry: the dispatcher's trip into Python
and back for each call, before the first clock read and after the last (some µs a call,
as long as a decode step's small ops). Right after each timed run, in the same run, an
empty op (a 1-element add) is called through the same mode and without it
(``overhead_call_s``): what the mode adds per call beyond its timed bookkeeping, times the
run's calls, is the run's profiler overhead (``overhead_s``), taken out of its program time
and reported as its own line.

Each run is checked call by call against the recording (the op and its inputs' shapes): a
program whose inputs change between calls (a key/value cache passed in that grows on every
call) is refused with a one-line hint, since neither its counts nor its times would hold.
"""

from __future__ import annotations

import functools
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from roofbench.bench.errors import UserError
from roofbench.bench.profile.recording import Recording

from roofbench.timing import ROOF_MOVED, RoofPair, TimerConfig, Timing, roof_moved

MIN_LONG_RUNS = 3  # timed runs of a program one run of which outlasts the timer's budget
# the empty op's calls per run: blocks (their median: one preempted block moves nothing)
# of calls, each through the mode and without it
EMPTY_BLOCKS, EMPTY_CALLS = 5, 20


class ProgramChanged(UserError):
    """The program did not repeat the recorded calls (its inputs changed between calls)."""


@dataclass
class InProgram:
    """Per distinct op, seconds per call in each timed run (its calls in that run summed,
    over their number); the runs' wall seconds under the mode."""

    per_call: dict[int, list[float]] = field(default_factory=dict)
    run_s: list[float] = field(default_factory=list)
    ops_s: list[float] = field(default_factory=list)  # per run: every call's time summed
    # per run: the program once more right after, without the mode (its eager time, paired
    # with the run's ops so that a shared machine's load shifts both alike)
    eager_s: list[float] = field(default_factory=list)
    warmup_runs: int = 1
    # the program's roof sampled right after each eager run (bench/measure/pairs.py)
    roof_probe: str = ""
    roof_rates: list[float] = field(default_factory=list)
    # per run: the timing mode's own seconds (around each call, outside the op's window)
    book_s: list[float] = field(default_factory=list)
    # per run: the mode's untimed seconds per call (its entry into Python and back), from
    # the empty op called through it and without it in that run; x the run's calls, the
    # run's profiler overhead (``overhead_s``). Empty on a GPU: the host's time overlaps
    # the device's there, so the wall is not reduced by it
    overhead_call_s: list[float] = field(default_factory=list)
    calls: int = 0  # aten calls per run
    # what else used the machine over all the runs (a CPU's counters: load, preemptions,
    # page faults; roofs/probes/cpu_noise.py), None on a GPU; the CV a timing is noisy over
    noise: Any = None
    noisy_cv: float = 0.05

    def marked(self, t: Timing) -> Timing:
        """``t`` flagged as the suite flags a case's timing (``timing.sample_loop``, the CPU
        backend): noisy over ``noisy_cv`` with its cause (the paired roof moved, else the
        counters'), and the outside load seen over the runs."""
        from roofbench.roofs.probes.cpu_noise import noise_cause, outside_load

        if self.noise is not None:
            t.outside_load = outside_load(self.noise)
        if t.n > 1 and t.cv > self.noisy_cv:
            t.flags.append(f"noisy: cv {t.cv:.1%} > {self.noisy_cv:.0%}")
            if t.paired:
                t.flags.append(roof_moved(t))
            if self.noise is not None and not any(f.startswith(ROOF_MOVED) for f in t.flags):
                t.flags.append(f"noise cause: {noise_cause(self.noise)}")
        return t

    def under_load(self) -> str:
        """What other processes did while the runs were timed, when they took more than the
        noise probe's share of the machine or made this process wait for a core ("" else)."""
        from roofbench.roofs.probes.cpu_noise import OTHER_BUSY, outside_load

        r = self.noise
        if r is None or not (r.other_busy > OTHER_BUSY or (r.waited or 0.0) > OTHER_BUSY):
            return ""
        return outside_load(r)

    def run_totals(self, distinct: int, calls: int) -> list[float]:
        """The op's seconds in each run (its calls summed)."""
        return [s * calls for s in self.per_call.get(distinct, [])]

    @property
    def overhead_s(self) -> list[float]:
        """Per run: the profiler's untimed seconds in that run (its per-call entry cost,
        measured in the run, x the run's calls); zeros where it was not measured (GPU)."""
        if not self.overhead_call_s:
            return [0.0] * len(self.run_s)
        return [c * self.calls for c in self.overhead_call_s]

    @property
    def program_run_s(self) -> list[float]:
        """Per run: the program's seconds in that run (its wall less the mode's own: the
        timed bookkeeping and the measured entry cost of each call)."""
        return [w - b - o for w, b, o in zip(self.run_s, self.book_s, self.overhead_s,
                                             strict=True)]

    def in_run_ratios(self) -> list[float]:
        """Per run: its ops' seconds summed over the program's seconds in that run."""
        return [o / p for o, p in zip(self.ops_s, self.program_run_s, strict=True) if p > 0]

    def in_run_ratio(self) -> float | None:
        r = self.in_run_ratios()
        return statistics.median(r) if r else None

    def timing(self, distinct: int) -> Timing | None:
        s = self.per_call.get(distinct)
        if not s:
            return None
        return self.marked(Timing(samples=list(s), warmup_runs=self.warmup_runs,
                                  stopped_by="runs", config={
                                      "timed": "in the program, each call under the dispatch "
                                               "mode"}))

    def eager_timing(self) -> Timing | None:
        """The paired eager runs as the program's samples (host clock, end to end)."""
        if not self.eager_s:
            return None
        paired = len(self.roof_rates) == len(self.eager_s)
        return self.marked(Timing(samples=list(self.eager_s), warmup_runs=self.warmup_runs,
                                  stopped_by="runs",
                                  config={"timed": "end to end, each run right after a timed "
                                                   "run of its ops"},
                                  roof_probe=self.roof_probe if paired else "",
                                  roof_rates=list(self.roof_rates) if paired else []))

    def paired_ratio(self) -> float | None:
        """The median over the runs of the run's ops summed over the eager run after it."""
        r = [o / e for o, e in zip(self.ops_s, self.eager_s, strict=False) if e > 0]
        return statistics.median(r) if r else None

    def median_sum(self, calls: dict[int, int]) -> float:
        """The ops' in-program seconds of one run: each op's median per call x its calls."""
        return sum(statistics.median(v) * calls.get(d, 0) for d, v in self.per_call.items()
                   if v)


def _where(rec: Recording, j: int, name: str, shapes: list[tuple[int, ...]]) -> str | None:
    """Why call ``j`` of this run is not the recorded call ``j`` (None when it is)."""
    if j >= len(rec.calls):
        return f"call {j} ({name}) beyond the {len(rec.calls)} recorded"
    c = rec.calls[j]
    want = rec.distinct[c.distinct].name
    if want != name:
        return f"call {j} is {name}, recorded {want}"
    got_in = [m.shape for m in c.inputs]
    if got_in != shapes:
        return f"call {j} ({name}) has inputs {shapes}, recorded {got_in}"
    return None


Check = Callable[[int, str, list[tuple[int, ...]]], str | None]


@functools.cache
def timed_mode() -> type:
    """The timing mode's class (built once, where torch is imported): each aten call timed
    by ``clock`` (a pair of CUDA events around it on a GPU) into ``state["dt"]`` at the
    call's position, the mode's own seconds around it into ``state["book"]``, and the call
    checked by ``check`` (position, op, its inputs' shapes: why it departs, or None)."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    class Timed(TorchDispatchMode):
        def __init__(self, state: dict[str, Any], clock: Callable[[], float], gpu: bool,
                     check: Check) -> None:
            super().__init__()
            self.state, self.clock, self.gpu, self.check = state, clock, gpu, check

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            t_in = self.clock()
            out, t_op = self._call(func, args, kwargs or {})
            self.state["book"] += self.clock() - t_in - t_op
            return out

        def _call(self, func: Any, args: Any, kwargs: dict[str, Any]) -> tuple[Any, float]:
            state, clock = self.state, self.clock
            j = state["pos"]
            state["pos"] = j + 1
            if self.gpu:
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(
                    enable_timing=True)
                h0 = clock()
                e0.record()
                out = func(*args, **kwargs)
                e1.record()
                t_op = clock() - h0  # the launch, on the host: the program's
                state["ev"].append((j, e0, e1))
            else:
                t0 = clock()
                out = func(*args, **kwargs)
                t_op = state["dt"][j] = clock() - t0
            # checked after the call, as recorded (an in-place squeeze_ changes its input)
            shapes = [tuple(int(s) for s in x.shape) for x in tree_flatten((args, kwargs))[0]
                      if isinstance(x, torch.Tensor)]
            why = self.check(j, str(func), shapes)
            if why is not None:
                raise ProgramChanged(
                    f"the program did not repeat its calls ({why}): its inputs or state "
                    "change between calls (a cache that grows?); build a fresh cache inside "
                    "the profiled function, or pass one that is not updated")
            return out, t_op

    return Timed


def entry_cost(clock: Callable[[], float]) -> Callable[[], float]:
    """A measure of the timing mode's untimed seconds per call on a CPU: an empty op (a
    1-element add) called ``EMPTY_CALLS`` times through the mode, as a program's op is
    (timed, checked), and as many times without it, in ``EMPTY_BLOCKS`` blocks; per call,
    the mode's wall less its timed bookkeeping less the plain calls' wall, median over the
    blocks (>= 0). Called right after a timed run, so it meets that run's load."""
    import torch
    from roofbench.bench.profile.recording import record_program

    a, b, out = torch.ones(1), torch.ones(1), torch.empty(1)

    def empty() -> None:
        torch.add(a, b, out=out)

    rec, _ = record_program(empty, (), {}, clone=False)
    mode = timed_mode()
    state: dict[str, Any] = {"pos": 0, "dt": [0.0] * EMPTY_CALLS, "ev": [], "book": 0.0}

    def check(_j: int, name: str, shapes: list[tuple[int, ...]]) -> str | None:
        return _where(rec, 0, name, shapes)  # the program's check, on the one call

    def measure() -> float:
        per = []
        for _ in range(EMPTY_BLOCKS):
            t0 = clock()
            for _ in range(EMPTY_CALLS):
                empty()
            plain = clock() - t0
            state["pos"], state["book"] = 0, 0.0
            with mode(state, clock, False, check):
                t0 = clock()
                for _ in range(EMPTY_CALLS):
                    empty()
                timed = clock() - t0
            per.append((timed - state["book"] - plain) / EMPTY_CALLS)
        return max(0.0, statistics.median(per))

    return measure


def time_in_program(fn: Callable[[], Any], rec: Recording, cfg: TimerConfig,
                    gpu: bool = False, pair: RoofPair | None = None,
                    threads: Callable[[], int] | None = None,
                    clock: Callable[[], float] = time.perf_counter) -> InProgram:
    """Run ``fn`` (the program on its working copy) under the timing mode: one warm-up run,
    then at least ``cfg.min_samples`` (``MIN_LONG_RUNS`` when the warm-up run alone outlasts
    ``cfg.budget_s``) and at most ``cfg.max_samples`` runs, more while ``cfg.budget_s``
    lasts, each followed (on a CPU) by the mode's entry cost measured on an empty op
    (``entry_cost``), then by one run without the mode (the paired eager
    time; ``pair``: the program's roof, sampled after each eager run; ``threads``: read
    where each run starts, the count torch runs it on; ``clock``: the host clock, a fake
    one in tests). Raises
    ``ProgramChanged`` when a run departs from ``rec``."""
    import torch

    n_calls = len(rec.calls)
    dist = [c.distinct for c in rec.calls]
    state: dict[str, Any] = {"pos": 0, "dt": [0.0] * n_calls, "ev": [], "book": 0.0}
    mode = timed_mode()

    def check(j: int, name: str, shapes: list[tuple[int, ...]]) -> str | None:
        return _where(rec, j, name, shapes)

    def one_run() -> tuple[list[float], float]:
        if threads is not None:
            threads()
        state["pos"], state["ev"], state["book"] = 0, [], 0.0
        state["dt"] = [0.0] * n_calls
        t0 = clock()
        with mode(state, clock, gpu, check):
            fn()
        if gpu:
            torch.cuda.synchronize()
            for j, e0, e1 in state["ev"]:
                state["dt"][j] = e0.elapsed_time(e1) / 1e3
        wall = clock() - t0
        if state["pos"] != n_calls:
            raise ProgramChanged(
                f"the program made {state['pos']} aten calls, recorded {n_calls}: its inputs "
                "or state change between calls (a cache that grows?); build a fresh cache "
                "inside the profiled function, or pass one that is not updated")
        return state["dt"], wall

    out = InProgram(roof_probe=pair.probe if pair is not None else "",
                    noisy_cv=cfg.noisy_cv, calls=n_calls)
    entry = entry_cost(clock) if not gpu else None
    probe = None
    if not gpu:
        from roofbench.roofs.probes.cpu_noise import NoiseProbe

        probe = NoiseProbe()
    if pair is not None:
        pair.sample()  # its first call allocates: untimed
    t0 = time.perf_counter()
    one_run()  # warm-up, and the first check that the program repeats itself
    long_run = time.perf_counter() - t0 > cfg.budget_s
    counts: dict[int, int] = {}
    for d in dist:
        counts[d] = counts.get(d, 0) + 1
    start = time.perf_counter()
    runs = 0
    lo, hi = max(cfg.min_samples, 1), max(cfg.max_samples, cfg.min_samples, 1)
    if long_run:  # one run outlasts the whole budget (a model's prefill): 3 runs suffice
        lo = min(lo, MIN_LONG_RUNS)
    while runs < lo or (runs < hi and time.perf_counter() - start < cfg.budget_s):
        dts, wall = one_run()
        by: dict[int, float] = {}
        for j, dt in enumerate(dts):
            by[dist[j]] = by.get(dist[j], 0.0) + dt
        for d, t in by.items():
            out.per_call.setdefault(d, []).append(t / counts[d])
        out.run_s.append(wall)
        out.book_s.append(state["book"])
        out.ops_s.append(sum(dts))
        if entry is not None:  # in the same run: what the mode added to each call untimed
            out.overhead_call_s.append(entry())
        t0 = clock()
        fn()
        if gpu:
            torch.cuda.synchronize()
        out.eager_s.append(clock() - t0)
        if pair is not None:
            out.roof_rates.append(float(pair.sample()))
            if pair.rewarm:  # the roof's data evicted the program's: back, untimed
                fn()
        runs += 1
    if probe is not None:
        out.noise = probe.report()
    return out
