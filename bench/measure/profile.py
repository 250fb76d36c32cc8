"""``roofbench.profile(fn_or_module, *args, **kwargs)``: every aten op of a PyTorch program
counted, timed alone and placed on this device's measured roofs, the whole program beside it.

1. The program runs once under the recorder (``profile_record``): every aten op, its
   tensors, the data flow; FLOPs from torch's registry or the stated convention
   (``profile_ops``), bytes by the unique-span rule.
2. Each distinct op is replayed alone on its cloned arguments and timed with the project's
   timer (``Clock.time``: the host clock on a CPU, CUDA events on a GPU); identical calls are
   timed once and counted. The whole program is timed end to end the same way; what it takes
   beyond the sum of its ops is stated as framework and dispatch overhead.
3. Each op and the program are timed and placed by the measurement core
   (``core.time_call``, ``core.fill_metrics``: the functions of the runner and of
   ``roofbench.measure``); an op of 0 FLOPs by bandwidth (its bytes/s over the memory roof,
   ``roofline.by_bandwidth``), a view (nothing moved) not at all. Amdahl's ranking
   (``present/amdahl``), the families, the fusion groups (``profile_fusion``) and, with
   ``compile=True``, the program under ``torch.compile`` (``profile_compile``) follow.

Roofs as ``roofbench.measure`` finds them (``api.device_roofs``): ``roofs=`` as given, else
this device's calibration cache, measured once by the quick calibration when absent.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from roofbench.records import CaseResult, Declaration, Evidence, Identity, Outcome, RoofSet
from roofbench.roofline import roof_precision
from roofbench.timing import TimerConfig

from ..present.amdahl import Share, ranked, roof_time
from . import core
from .callables import Clock, clock_for
from .profile_ops import FAMILIES
from .profile_record import Distinct, Recording, record_program

_DTYPES = {"float64": "fp64", "float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}


def precision_of(dtype: str, fam: str, gpu: bool) -> str:
    """The compute roof an op meets: its dtype's, low precision computing in fp32 (as a
    run's cases), on a GPU a bf16/fp16 matmul on the tensor cores."""
    p = _DTYPES.get(dtype, "fp32")
    if p in ("fp16", "bf16"):
        return f"{p}_tc" if gpu and fam == "matmul/conv/attention" else "fp32"
    return p


@dataclass
class OpPlace:
    """One distinct op placed: its record (one call), how often it ran, its Amdahl share."""

    op: Distinct
    case: CaseResult
    share: Share | None = None

    @property
    def total_s(self) -> float:
        return (self.case.measurement.median_s or 0.0) * self.op.calls

    @property
    def bandwidth_efficiency(self) -> float | None:
        """A 0-FLOP op's attained bytes/s over its memory roof (its efficiency)."""
        return self.case.roofline.efficiency if self.case.declaration.flops == 0 else None


@dataclass
class Profile:
    """What ``roofbench.profile`` returns (``write(out)`` saves it: ``profile_report``)."""

    name: str
    device: str
    roofs: RoofSet | None
    recording: Recording
    ops: list[OpPlace]
    program: CaseResult
    clock: str  # "host clock" or "CUDA events"
    notes: list[str] = field(default_factory=list)
    groups: list[Any] = field(default_factory=list)  # profile_fusion.Group
    compiled: Any = None  # profile_compile.Compiled
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ops_s(self) -> float:
        return sum(p.total_s for p in self.ops)

    @property
    def program_s(self) -> float:
        return self.program.measurement.median_s or 0.0

    @property
    def overhead_s(self) -> float:
        """The whole program's time beyond the sum of its ops timed alone (framework,
        dispatch, allocation; negative when the ops ran faster in the program)."""
        return self.program_s - self.ops_s

    def ranking(self) -> list[OpPlace]:
        return [p for s in ranked([p.share for p in self.ops if p.share])
                for p in self.ops if p.share is s]

    def families(self) -> list[dict[str, Any]]:
        """Time, share, FLOPs and bytes by op family (calls counted)."""
        whole = max(self.program_s, self.ops_s) or 1.0
        out = []
        for fam in FAMILIES:
            ps = [p for p in self.ops if p.op.family == fam]
            if not ps:
                continue
            t = sum(p.total_s for p in ps)
            fl = sum(p.op.flops * p.op.calls for p in ps)
            by = sum(p.op.bytes * p.op.calls for p in ps)
            out.append({"family": fam, "calls": sum(p.op.calls for p in ps),
                        "distinct": len(ps), "time_s": t, "share": t / whole, "flops": fl,
                        "bytes": by, "ai": fl / by if by else None})
        return out

    def write(self, out: str | Path) -> list[Path]:
        from .profile_report import write_profile

        return write_profile(self, Path(out))


def op_case(op: Distinct, gpu: bool, backend: str) -> CaseResult:
    """The record of one distinct op (one call), before timing."""
    prec = precision_of(op.dtype, op.family, gpu)
    by = {"dram": op.bytes} if op.bytes else {}
    return CaseResult(
        Identity(workload=op.name, variant=f"op{op.index}", backend=backend,
                 dtype=_DTYPES.get(op.dtype, op.dtype), size=[op.calls], precision=prec,
                 cores="tensor" if prec.endswith("_tc") else "simt"),
        Declaration(flops=op.flops, bytes=by, ai={"dram": op.flops / op.bytes} if op.bytes else {},
                    flop_convention=op.flops_by),
        Outcome(status="ok", checked=False),
        evidence=Evidence(extra={"measured_by": "roofbench.profile", "family": op.family,
                             "calls": op.calls, "signature": op.signature,
                             "outputs": op.outputs, "device": op.device,
                             "read_bytes": op.reads, "written_bytes": op.writes,
                             "replayed": "alone, on its first call's cloned arguments"}))


def _timer(clock: Clock, timer: TimerConfig | None) -> TimerConfig:
    from .api import _timer as api_timer

    return api_timer(clock, timer, quick=True)


def profile(fn: Callable[..., Any], *args: Any, roofs: RoofSet | str | Path | None = None,
            timer: TimerConfig | None = None, compile: bool = False,
            name: str | None = None, out: str | Path | None = None,
            **kwargs: Any) -> Profile:
    """Profile ``fn(*args, **kwargs)`` (a function or an ``nn.Module``) op by op on this
    device's roofs (see the module doc). A jitted JAX function is placed whole
    (``profile_jax``). ``compile=True`` adds the program under ``torch.compile``; ``out``
    writes results.json, report.md and roofline.png there. The program runs under the
    caller's grad mode: wrap the call in ``torch.no_grad()`` for inference."""
    from .profile_jax import is_jax, profile_jax

    label = name or getattr(fn, "__qualname__", None) or type(fn).__name__
    if is_jax(fn, args):
        prof = profile_jax(fn, args, kwargs, roofs=roofs, timer=timer, name=label)
    else:
        prof = profile_torch(fn, args, kwargs, roofs=roofs, timer=timer, name=label,
                             compile=compile)
    if out is not None:
        prof.write(out)
    return prof


def profile_torch(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], *,
                  roofs: RoofSet | str | Path | None, timer: TimerConfig | None, name: str,
                  compile: bool = False, keep_replays: bool = False) -> Profile:
    import torch

    from .api import device_roofs
    from .profile_fusion import fusion_groups

    load_start = os.getloadavg() if hasattr(os, "getloadavg") else None
    t0 = time.perf_counter()
    recording, _ = record_program(fn, args, kwargs)
    t_record = time.perf_counter() - t0
    tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
    clock = clock_for(tensors)
    gpu = clock.kind == "gpu"
    rs, note = device_roofs(clock, roofs)
    cfg = _timer(clock, timer)
    places = []
    t0 = time.perf_counter()
    for op in recording.distinct:
        rec = op_case(op, gpu, clock.backend_name)
        assert op.replay is not None
        timing = core.time_call(clock, _replay(op.func, *op.replay), cfg)
        core.fill_metrics(rec, timing, rs)
        if not (compile or keep_replays):  # freed once timed (a fusion group replays them)
            op.replay = None
        places.append(OpPlace(op, rec))
    t_ops = time.perf_counter() - t0
    program = program_case(recording, clock, gpu, "eager")
    t0 = time.perf_counter()
    core.fill_metrics(program, core.time_call(clock, lambda: fn(*args, **kwargs), cfg),
                      rs)
    t_program = time.perf_counter() - t0
    prof = Profile(name, clock.device_name(), rs, recording, places, program,
                   "CUDA events" if gpu else "host clock")
    if note:
        prof.notes.append(note)
    whole = max(prof.program_s, prof.ops_s) or 1.0
    for p in places:
        rt = roof_time(p.op.flops, p.case.declaration.bytes, p.case.identity.precision, rs)
        p.share = Share(f"{p.op.name} #{p.op.index}", p.total_s, p.total_s / whole,
                        rt * p.op.calls if rt is not None else None)
    prof.groups = fusion_groups(prof)
    prof.extra["phases_s"] = {"record": t_record, "time_ops": t_ops, "time_program": t_program}
    prof.extra["clock_info"] = clock.info()
    prof.extra["load_start"] = load_start
    prof.extra["roofs_from"] = roofs_from(roofs)
    prof.extra["torch_threads"] = torch.get_num_threads()
    if compile:
        from .profile_compile import compile_program

        prof.compiled = compile_program(prof, fn, args, kwargs, clock, cfg)
        if not keep_replays:
            for op in recording.distinct:
                op.replay = None
    return prof


def _replay(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Callable[[], None]:
    def call() -> None:
        func(*args, **kwargs)

    return call


def program_case(recording: Recording, clock: Clock, gpu: bool, variant: str,
                 bytes_total: int | None = None) -> CaseResult:
    """The whole program as one case: every call's FLOPs, and its bytes (each op's own, the
    eager program's traffic) unless ``bytes_total`` says otherwise (a fused program)."""
    calls = recording.distinct
    flops = sum(d.flops * d.calls for d in calls)
    nbytes = bytes_total if bytes_total is not None else sum(d.bytes * d.calls for d in calls)
    by_prec: dict[str, int] = {}
    for d in calls:
        p = precision_of(d.dtype, d.family, gpu)
        by_prec[p] = by_prec.get(p, 0) + d.flops * d.calls
    prec = max(by_prec, key=lambda k: by_prec[k]) if by_prec else "fp32"
    dt = next((d.dtype for d in calls if d.flops), calls[0].dtype if calls else "float32")
    return CaseResult(
        Identity(workload="program", variant=variant, backend=clock.backend_name,
                 dtype=_DTYPES.get(dt, dt), size=[len(recording.calls)], precision=prec,
                 cores="tensor" if prec.endswith("_tc") else "simt"),
        Declaration(flops=flops, bytes={"dram": nbytes} if nbytes else {},
                    ai={"dram": flops / nbytes} if nbytes else {}, marker="*",
                    arrow_from="eager" if variant != "eager" else None),
        Outcome(status="ok", checked=False),
        evidence=Evidence(extra={"measured_by": "roofbench.profile", "calls": len(recording.calls),
                             "distinct_ops": len(calls)}))


def roofs_from(roofs: RoofSet | str | Path | None) -> str:
    """Where the roofs came from, said in the report."""
    if roofs is None:
        return "this device's calibration cache (roofs/<device>.json)"
    return "a RoofSet given" if isinstance(roofs, RoofSet) else f"`{roofs}`"


def ridge_of(rs: RoofSet | None, precision: str) -> float | None:
    if rs is None:
        return None
    c, m = rs.compute(roof_precision(precision, rs)), rs.memory("dram")
    return c.value / m.value if c and m else None
