"""``--compile``: the same program under ``torch.compile`` (inductor), timed with the same
clock, placed beside the eager program.

Inductor's generated kernels run below the dispatcher, so they cannot be recorded op by op:
the generated code is read (``run_and_get_code``) for the kernels it made (their names, and
the library calls it kept, such as mm), and the compiled program's bytes are the model's —
the eager bytes less what each fusion group saves (its eager bytes minus its fused bytes) —
beside the compiled program's measured time. Its FLOPs are the eager count.

Each fusion group is also timed on its own (``group_function``): its member ops replayed in
program order on the cloned arguments of their first calls, each intermediate handed to the
next op as the view it read (``as_strided`` of the producer's result), eager and under
``torch.compile``; a group that is the whole program reuses the program's two times. The
plot draws an arrow eager -> compiled for the program and for each group.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from roofbench.bench.measure import core
from roofbench.bench.measure.above_roof import flag_above_roof
from roofbench.bench.measure.callables import Clock
from roofbench.bench.measure.pairs import mixed_shares
from roofbench.bench.profile.common import program_case, program_shares
from roofbench.bench.profile.place import ThreadHold, held_paired_time

from roofbench.errors_text import first_line
from roofbench.records import CaseResult, Declaration, Evidence, Identity, Outcome
from roofbench.timing import TimerConfig

if TYPE_CHECKING:
    from roofbench.bench.profile.fusion import Group
    from roofbench.bench.profile.report import Profile

_KERNEL = re.compile(r"\b((?:cpp|triton)_\w*fused\w*|triton_\w+)\s*=\s*async_compile")
_EXTERN = re.compile(r"extern_kernels\.(\w+)")


@dataclass
class GroupTiming:
    """One fusion group replayed alone, eager and compiled, placed (``case_*``)."""

    group: int
    eager: CaseResult
    compiled: CaseResult | None
    kernels: list[str] = field(default_factory=list)
    error: str | None = None

    @property
    def speedup(self) -> float | None:
        e, c = (
            self.eager.measurement.median_s,
            self.compiled.measurement.median_s if self.compiled else None,
        )
        return e / c if e and c else None


WARMUP_CALLS = 12  # calls at most before the compiled program is timed


@dataclass(frozen=True)
class Warmup:
    """The compiled program's calls after the first and before it is timed: each call's
    seconds, the graphs dynamo compiled again during them (a recompile: a guard failed),
    and whether the calls had settled (one compiled nothing and ran within 1.5x of the one
    before) when they stopped."""

    call_s: tuple[float, ...]
    recompiles: int
    settled: bool


def _graphs() -> int:
    """Graphs dynamo has compiled in this process (a recompile adds one)."""
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])


def _settled_call(clock: Clock, fn: Callable[[], Any]) -> Callable[[], None]:
    """One call of ``fn`` with its queued work waited for (a GPU's)."""
    def call() -> None:
        fn()
        clock.sync()

    return call


def warm_up(call: Callable[[], Any], limit: int = WARMUP_CALLS,
            now: Callable[[], float] = time.perf_counter,
            graphs: Callable[[], int] = _graphs) -> Warmup:
    """Call the compiled program until a call compiles nothing new and takes no more than
    1.5x the call before it, at most ``limit`` calls: the time then taken is the compiled
    code's, not a recompile's nor a first call's (lazy initialisation, allocator growth)."""
    times: list[float] = []
    start = graphs()
    for _ in range(limit):
        before = graphs()
        t0 = now()
        call()
        times.append(now() - t0)
        if graphs() == before and len(times) >= 2 and times[-1] <= 1.5 * times[-2]:
            return Warmup(tuple(times), graphs() - start, True)
    return Warmup(tuple(times), graphs() - start, False)


@dataclass
class Compiled:
    case: CaseResult | None  # the compiled program, placed (None: it did not compile)
    kernels: list[str] = field(default_factory=list)  # generated kernels
    extern: list[str] = field(default_factory=list)  # library calls kept (mm, convolution)
    compile_s: float = 0.0  # the first call: tracing, code generation, the C++ build
    error: str | None = None
    eager_bytes: int = 0
    fused_bytes: int = 0  # the model's bytes of the compiled program
    groups: list[GroupTiming] = field(default_factory=list)
    call_s: float | None = None  # a compiled call's own cost (``compiled_call_cost``)
    warmup: Warmup | None = None  # the calls before timing (``warm_up``)

    @property
    def bytes_ratio(self) -> float | None:
        return self.eager_bytes / self.fused_bytes if self.fused_bytes else None


def generated_kernels(code: list[str]) -> tuple[list[str], list[str]]:
    """(the kernels inductor generated, the library calls it kept) in its output code."""
    kernels: list[str] = []
    extern: list[str] = []
    for src in code:
        for k in _KERNEL.findall(src):
            if k not in kernels:
                kernels.append(k)
        extern += _EXTERN.findall(src)
    return kernels, sorted(set(extern))


def compile_program(prof: Profile, fn: Callable[..., Any], args: tuple[Any, ...],
                    kwargs: dict[str, Any], clock: Clock, cfg: TimerConfig,
                    hold: ThreadHold | None = None) -> Compiled:
    """The program under torch.compile, then each fusion group, timed as the eager ops are
    (``held_paired_time``: each sample paired with its roof, torch's threads held at
    ``hold``'s count beside every roof sample, so the compiled kernels run on the threads
    the roofs are scaled for)."""
    import torch

    hold = hold or ThreadHold.now()
    from torch._inductor.utils import run_and_get_code

    saved = sum(g.count * (g.eager_bytes - g.fused_bytes) for g in prof.groups)
    eager_bytes = prof.program.declaration.bytes.get("dram", 0)
    out = Compiled(None, eager_bytes=eager_bytes, fused_bytes=eager_bytes - saved)
    compiled = torch.compile(fn)
    t0 = time.perf_counter()
    try:
        _, code = run_and_get_code(compiled, *args, **kwargs)
    except Exception as e:  # no compiler, an op inductor refuses: said, the eager stands
        out.error = first_line(e)
        return out
    out.compile_s = time.perf_counter() - t0
    out.kernels, out.extern = generated_kernels(list(code))
    gpu = clock.kind == "gpu"
    case = program_case(prof.recording, clock, gpu, "compiled", bytes_total=out.fused_bytes)
    try:  # timed once its calls settle: never a recompile or a first call's cost
        out.warmup = warm_up(_settled_call(clock, lambda: compiled(*args, **kwargs)))
    except Exception as e:  # a later call fails where the first did not: said
        out.error = first_line(e)
        return out
    case.evidence.extra.update(kernels=out.kernels, library_calls=out.extern,
                      bytes_model="eager bytes less each fusion group's saving",
                      compile_s=out.compile_s, warmup_s=list(out.warmup.call_s),
                      recompiles=out.warmup.recompiles, settled=out.warmup.settled)
    # paired as the eager program is (its ops' streams): on a CPU, where its roofs sample
    core.fill_metrics(case, held_paired_time(hold, clock, lambda: compiled(*args, **kwargs),
                                             cfg, case, prof.roofs if not gpu else None,
                                             shares=program_shares(prof.recording)),
                      prof.roofs)
    flag_above_roof(case, prof.roofs)  # the program's rule: above 105% is not valid
    out.case = case
    if prof.groups:
        out.call_s = compiled_call_cost(clock, cfg)
    for i, g in enumerate(prof.groups):
        out.groups.append(time_group(prof, i, g, clock, cfg, out, hold))
    return out


def compiled_call_cost(clock: Clock, cfg: TimerConfig) -> float | None:
    """Seconds one call of a compiled group costs with nothing to compute: a 1-element add
    under torch.compile, called as ``group_function``'s replays are (no arguments, its
    tensors held by the closure). What a group's replay pays beyond its kernel's bytes."""
    import torch

    dev = "cuda" if clock.kind == "gpu" else "cpu"
    a, b = torch.ones(1, device=dev), torch.ones(1, device=dev)
    fn = torch.compile(lambda: torch.add(a, b))
    try:
        fn()
    except Exception:  # no compiler here: the groups' replays say so one by one
        return None
    return core.time_call(clock, fn, cfg).median


def group_function(prof: Profile, g: Group) -> Callable[[], Any]:
    """The group's ops in program order on their first calls' cloned arguments; an input
    produced inside the group is the producer's result seen through the view it was read
    as. Needs the distinct ops' clones (kept under compile=True)."""
    import torch
    from torch.utils._pytree import tree_flatten, tree_unflatten

    rec = prof.recording
    inside = set(g.calls)
    last: dict[int, int] = {}
    plan = []
    for c in rec.calls:
        if c.index in inside:
            d = rec.distinct[c.distinct]
            if d.replay is None:
                raise ValueError(f"{d.name}: its arguments were freed")
            leaves, spec = tree_flatten(d.replay)
            tensors = [i for i, x in enumerate(leaves) if isinstance(x, torch.Tensor)]
            links = {pos: (m.storage, m.shape, m.stride, m.offset)
                     for pos, m in zip(tensors, c.inputs, strict=True)
                     if last.get(m.storage) in inside}
            plan.append((d.func, leaves, spec, links, [m.storage for m in c.outputs]))
        for s in c.written:
            last[s] = c.index

    def run() -> Any:
        made: dict[int, Any] = {}
        result = None
        for func, leaves, spec, links, outs in plan:
            cur = list(leaves)
            for pos, (st, shape, stride, offset) in links.items():
                cur[pos] = torch.as_strided(made[st], shape, stride, offset)
            a, k = tree_unflatten(cur, spec)
            result = func(*a, **k)
            got = [t for t in tree_flatten(result)[0] if isinstance(t, torch.Tensor)]
            for st, t in zip(outs, got, strict=False):
                made[st] = t
        return result

    return run


def time_group(prof: Profile, i: int, g: Group, clock: Clock, cfg: TimerConfig,
               program: Compiled, hold: ThreadHold | None = None) -> GroupTiming:
    import torch

    hold = hold or ThreadHold.now()
    from torch._inductor.utils import run_and_get_code

    def case(variant: str, nbytes: int) -> CaseResult:
        return CaseResult(
            Identity(workload=f"group{i}", variant=variant, backend=clock.backend_name,
                     dtype=prof.program.identity.dtype, size=[len(g.calls)], precision=g.precision,
                     cores="simt"),
            Declaration(flops=g.flops, bytes={"dram": nbytes},
                        ai={"dram": g.flops / nbytes} if nbytes
                          else {},
                        marker="D", arrow_from="eager" if variant == "compiled" else None),
            Outcome(status="ok", checked=False),
            evidence=Evidence(extra={"measured_by": "roofbench.profile", "ops": g.names,
                                 "occurs": g.count}))

    eager = case("eager", g.eager_bytes)
    non_views = [c for c in prof.recording.calls if c.written]
    if len(g.calls) == len(non_views) and program.case is not None:  # the whole program
        core.fill_metrics(eager, prof.program.measurement.timing, prof.roofs)  # type: ignore[arg-type]
        comp = case("compiled", g.fused_bytes)
        core.fill_metrics(comp, program.case.measurement.timing, prof.roofs)  # type: ignore[arg-type]
        return GroupTiming(i, *_flagged(prof, eager, comp), list(program.kernels))
    # replayed alone, each sample paired as the program is, by its members' streams
    rs = prof.roofs if clock.kind != "gpu" else None
    shares = mixed_shares([(prof.recording.distinct[d].arrays, prof.recording.distinct[d].bytes)
                           for d in g.distinct])
    try:
        fn = group_function(prof, g)
        core.fill_metrics(eager, held_paired_time(hold, clock, fn, cfg, eager, rs,
                                                  shares=shares), prof.roofs)
        compiled = torch.compile(fn)
        _, code = run_and_get_code(compiled)
    except Exception as e:  # said in the report; the group's prediction stands
        return GroupTiming(i, *_flagged(prof, eager, None), error=first_line(e))
    comp = case("compiled", g.fused_bytes)
    warm_up(_settled_call(clock, compiled))  # timed settled, as the program is
    core.fill_metrics(comp, held_paired_time(hold, clock, compiled, cfg, comp, rs,
                                             shares=shares), prof.roofs)
    return GroupTiming(i, *_flagged(prof, eager, comp), generated_kernels(list(code))[0])


def _flagged(prof: Profile, eager: CaseResult,
             comp: CaseResult | None) -> tuple[CaseResult, CaseResult | None]:
    """A group's replays under the ops' rule: above 105% of its roof, not valid (cause)."""
    for c in (eager, comp):
        if c is not None:
            flag_above_roof(c, prof.roofs)
    return eager, comp
