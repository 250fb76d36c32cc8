"""Any callable measured as a run measures a workload: counted, validated, timed, placed.

A workload module declares its buffers and launches; a user's function declares its FLOPs and
bytes by hand and how its result is checked, as a ``Call`` (declared.py). The clock comes
from the arguments (``clock_for``): CUDA events on the current stream when any argument is a
CuPy array or a torch CUDA tensor, the host clock (the CPU backend's, with its noise probe)
otherwise; the loop, warm-up and stopping rule are the timer's (``sample_loop``), the same as
every backend's. Validating, timing and placing are the measurement core's
(``core.validate``, ``core.time_call``, ``core.fill_metrics``): the functions the suite's
runner calls for a workload; this module says only which clock times a call and where its
outputs are.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
from roofbench.roofs.probes.gpu_pairs import PairDevice

from roofbench.records import CaseResult, Declaration, Evidence, Identity, Measurement, Outcome
from roofbench.roof_records import RoofSet
from roofbench.roofline import LEVEL_LABELS
from roofbench.timing import RoofPair, TimerConfig, Timing
from roofbench.units import si

from ..backends.cuda_timer import EventOps, cuda_time
from ..backends.gpu_roofs import pair_device_through_cupy
from . import core
from .declared import Call, array_args, dtype_name

# -- the clock ------------------------------------------------------------------------------

class Clock:
    """Where the callable runs, how one sample is taken, and the backend whose roofs and
    facts the record carries."""

    kind = "cpu"
    backend_name = "cpu"
    array_module = "numpy"

    def __init__(self) -> None:
        from ..backends.cpu import CpuBackend

        self.backend: Any = CpuBackend()

    def device_name(self) -> str:
        return str(self.backend.device_name())

    def info(self) -> dict[str, Any]:
        return dict(self.backend.info())

    def roofs_backend(self) -> Any:
        """The backend whose quick calibration measures this device (None: none can)."""
        return self.backend

    pairs_roofs = True  # the timer samples a roof beside each sample (bench/measure/pairs.py)

    def time(self, fn: Callable[[], None], cfg: TimerConfig,
             pair: RoofPair | None = None) -> Timing:
        return self.backend.time(fn, cfg, pair=pair)

    def sync(self) -> None:
        """Wait for the work the function queued (nothing on the host)."""

    def extra(self) -> dict[str, Any]:
        noise = getattr(self.backend, "last_noise", None)
        return {"timing_environment": noise.to_dict()} if noise is not None else {}

    def host(self, a: Any) -> Any:
        """An array where its values can be validated (numpy or CuPy), and that module."""
        t = _torch_tensor(a)
        if t is not None:
            return _torch_host(t), np
        try:
            return np.asarray(a), np
        except (TypeError, ValueError, RuntimeError):  # an array module numpy cannot wrap
            return np.from_dlpack(a), np

    def poison(self, a: Any) -> None:
        t = _torch_tensor(a)
        if t is not None:
            _torch_poison(t)
        else:
            a.fill(np.nan)


def _torch_tensor(a: Any) -> Any:
    """``a`` when it is a torch tensor (torch only looked at when the caller imported it)."""
    torch = sys.modules.get("torch")
    return a if torch is not None and isinstance(a, torch.Tensor) else None


def _torch_host(t: Any) -> Any:
    """A float64 host copy of a tensor, through the tensor API: fp16, bf16 and fp8 upcast
    (numpy has no bf16), an output that requires grad detached, a CUDA tensor copied."""
    t = t.detach().to("cpu")
    return (t.double() if dtype_name(t) is not None else t).numpy()


def _torch_poison(t: Any) -> None:
    """NaN into every element, in place, by the tensor API (a leaf that requires grad is
    written through a detached view of its storage)."""
    t.detach().fill_(float("nan"))


class CupyClock(Clock):
    """CUDA events on CuPy's current stream (the one the caller's work is queued on)."""

    kind = "gpu"
    backend_name = "cuda"
    array_module = "cupy"

    def __init__(self) -> None:
        import cupy

        self.cupy = cupy
        self.index = int(cupy.cuda.Device().id)
        self._backend: Any = None

    @property
    def backend(self) -> Any:
        if self._backend is None:
            from ..backends.cupy import CupyBackend

            self._backend = CupyBackend(device=self.index)
        return self._backend

    def time(self, fn: Callable[[], None], cfg: TimerConfig,
             pair: RoofPair | None = None) -> Timing:
        cp = self.cupy
        stream = cp.cuda.get_current_stream()
        ops = EventOps(new_event=cp.cuda.Event, record=lambda ev: ev.record(stream),
                       wait=lambda ev: ev.synchronize(),
                       elapsed_s=lambda a, b: cp.cuda.get_elapsed_time(a, b) / 1e3)
        return cuda_time(fn, cfg, ops, device_index=self.index, pair=pair)

    def pair_device(self) -> PairDevice | None:
        """The roof's samples, timed on the stream the caller's work is queued on."""
        return pair_device_through_cupy(self.index, self.cupy.cuda.get_current_stream())

    def sync(self) -> None:
        self.cupy.cuda.get_current_stream().synchronize()

    def extra(self) -> dict[str, Any]:
        return {}

    def host(self, a: Any) -> Any:
        return self.cupy.asarray(a), self.cupy  # validated on the device: scalars come back

    def poison(self, a: Any) -> None:
        a.fill(self.cupy.nan)


class TorchClock(Clock):
    """CUDA events on torch's current stream; validation on a host copy."""

    kind = "gpu"
    backend_name = "cuda"
    array_module = "torch"

    def __init__(self, device_index: int) -> None:
        import torch

        self.torch = torch
        self.index = device_index
        self._backend: Any = None

    def device_name(self) -> str:
        return str(self.torch.cuda.get_device_name(self.index))

    def info(self) -> dict[str, Any]:
        return {"kind": "gpu", "name": self.device_name(), "index": self.index,
                "torch_version": str(self.torch.__version__),
                "torch_cuda": str(getattr(self.torch.version, "cuda", None))}

    def roofs_backend(self) -> Any:
        """CuPy's backend calibrates the device when CuPy is there too."""
        from ..backends.cupy import CupyBackend

        if CupyBackend.unavailable_reason() is not None:
            return None
        if self._backend is None:
            self._backend = CupyBackend(device=self.index)
        return self._backend

    def time(self, fn: Callable[[], None], cfg: TimerConfig,
             pair: RoofPair | None = None) -> Timing:
        cuda = self.torch.cuda
        stream = cuda.current_stream(self.index)
        ops = EventOps(new_event=lambda: cuda.Event(enable_timing=True),
                       record=lambda ev: ev.record(stream), wait=lambda ev: ev.synchronize(),
                       elapsed_s=lambda a, b: a.elapsed_time(b) / 1e3)
        return cuda_time(fn, cfg, ops, device_index=self.index, pair=pair)

    def pair_device(self) -> PairDevice | None:
        """The roof's samples, through CuPy (on a stream of their own) where it is there."""
        return pair_device_through_cupy(self.index)

    def sync(self) -> None:
        self.torch.cuda.synchronize(self.index)

    def extra(self) -> dict[str, Any]:
        return {}

    def host(self, a: Any) -> Any:
        if isinstance(a, self.torch.Tensor):
            return _torch_host(a), np
        return np.asarray(a), np

    def poison(self, a: Any) -> None:
        _torch_poison(a)


def clock_for(args: Sequence[Any]) -> Clock:
    """CuPy events when an argument is a CuPy array, torch events when one is a torch CUDA
    tensor, the host clock otherwise (only modules the caller imported are looked at)."""
    cupy, torch = sys.modules.get("cupy"), sys.modules.get("torch")
    for a in args:
        if cupy is not None and isinstance(a, cupy.ndarray):
            return CupyClock()
        if torch is not None and isinstance(a, torch.Tensor) and a.is_cuda:
            idx = a.device.index
            return TorchClock(int(idx if idx is not None else torch.cuda.current_device()))
    return Clock()


# -- validation -----------------------------------------------------------------------------

def _parts(x: Any) -> list[tuple[str, Any]]:
    """The outputs of a result: one array, a tuple/list of arrays, or a dict of them."""
    if isinstance(x, Mapping):
        return [(str(k), v) for k, v in x.items()]
    if isinstance(x, (list, tuple)):
        return [(f"output {i}", v) for i, v in enumerate(x)]
    return [("output", x)]


def validate(fn: Callable[[], Any], clock: Clock, reference: Any, output: Any,
             args: Sequence[Any], tolerance: float,
             kwargs: Mapping[str, Any] | None = None) -> core.Verdict:
    """One call, then each output against the reference by the core's rule
    (``core.validate``): the same shape, every element finite, the relative norm error
    within ``tolerance``. Arrays named by ``output`` (those the function writes in place)
    are poisoned with NaN before the call, so an element it never writes fails as in a run;
    a returned array must be finite."""

    def poison() -> None:
        for _, a in _parts(output) if output is not None else []:
            if dtype_name(a) is not None:
                clock.poison(a)

    def call() -> Any:
        result = fn()
        clock.sync()
        return result

    return core.validate(poison, call, lambda result: _outputs(
        result, clock, reference, output, args, kwargs), tolerance)


def _outputs(result: Any, clock: Clock, reference: Any, output: Any, args: Sequence[Any],
             kwargs: Mapping[str, Any] | None) -> Iterator[core.Output]:
    """What the call produced (``output``, else what it returned) beside the reference
    (called on the arguments after the call), as float64 arrays where they are checked."""
    produced = output if output is not None else result
    if produced is None:
        raise core.Unchecked("the function returned None: pass output= (the arrays it "
                             "writes) to validate them")
    ref = reference(*args, **(kwargs or {})) if callable(reference) else reference
    outs, refs = _parts(produced), _parts(ref)
    if len(outs) != len(refs):
        raise core.Unchecked(f"{len(outs)} output(s) against {len(refs)} reference(s)")
    for (name, o), (_, r) in zip(outs, refs, strict=True):
        o_arr, xp = clock.host(o)
        r_arr = clock.host(r)[0]
        out64 = xp.array(o_arr, dtype=xp.float64)  # a copy: check_output overwrites it
        yield name, out64, xp.asarray(r_arr, dtype=xp.float64), xp


# -- where its bytes are placed -------------------------------------------------------------

def working_set(args: Sequence[Any], output: Any = None) -> int:
    """Bytes of the distinct arrays among the arguments and ``output``: a numpy view is its
    base array's (counted once, at its largest view), any other array its ``nbytes`` per
    data pointer. What the call's data occupies, the figure placement compares with a
    cache (roofline.place)."""
    seen: dict[Any, int] = {}
    extra = [a for _, a in _parts(output)] if output is not None else []
    for a in [*array_args(args), *array_args(extra)]:
        if isinstance(a, np.ndarray):
            root = a
            while isinstance(root.base, np.ndarray):
                root = root.base
            key: Any = ("np", id(root))
        else:
            ptr = getattr(a, "data_ptr", None)
            key = ("ptr", ptr()) if callable(ptr) else ("id", id(a))
        seen[key] = max(seen.get(key, 0), int(getattr(a, "nbytes", 0)))
    return sum(seen.values())


def placement_line(rec: CaseResult) -> str | None:
    """One line when the case's data fits in a cache level and is placed there, else None."""
    pl = rec.roofline.placement
    if pl is None or pl.level == "dram" or pl.capacity_bytes is None:
        return None
    cores = f"{pl.cores} core(s)" if pl.cores else "the cores the roofs were measured on"
    label = LEVEL_LABELS.get(pl.level, pl.level)
    data = ("its declared traffic, which bounds its data" if
            rec.evidence.extra.get("working_set") == DECLARED_BOUND else "its data")
    return (f"{rec.key}: {data} ({si(pl.working_set_bytes, 'B')}) fits in {label} "
            f"({si(pl.capacity_bytes, 'B')} on {cores}): placed against the {label} roof"
            + (f" ({rec.roofline.limiting_roof})" if rec.roofline.limiting_roof else ""))


# -- the record -----------------------------------------------------------------------------

def measure_callable(call: Call, *, clock: Clock, cfg: TimerConfig,
                     roofs: RoofSet | None) -> CaseResult:
    """Validate (when the check has a reference), time and place one call: the record a run
    would write for a workload, with the call's name as 'workload/variant' (variant
    'default')."""
    n, chk, args = call.counts, call.check, call.args
    workload, _, variant = call.name.partition("/")
    tol = chk.tolerance_for(n.dtype)
    phases: dict[str, float] = {}
    fn, kw = call.fn, call.kwargs

    def run() -> Any:
        return fn(*args, **kw)

    rec = CaseResult(
        Identity(workload=workload, variant=variant or "default", backend=clock.backend_name,
                 dtype=n.dtype, size=list(n.size), precision=n.precision, cores=n.cores),
        Declaration(flops=n.flops, bytes=dict(n.bytes), ai=n.ai,
                    tolerance=tol if chk.given else None),
        Outcome(status="ok", checked=chk.given),
        measurement=Measurement(phases=phases),
        evidence=Evidence(extra={"measured_by": "roofbench.measure",
                            "callable": getattr(fn, "__qualname__", repr(fn)),
                            "array_module": clock.array_module}))
    clock_phases = core.PhaseClock(phases)
    if chk.given:
        with clock_phases("validate"):
            ok, err, why = validate(run, clock, chk.reference, chk.output, args, tol, kw)
        rec.outcome.rel_error = err
        if not ok:
            rec.outcome.status, rec.outcome.error = "invalid", f"validation failed: {why}"
            rec.evidence.extra["validation"] = "failed"
            return rec
        rec.evidence.extra["validation"] = "relative norm error against the reference"
    else:
        rec.evidence.extra["validation"] = "none: no reference given"
    # On a CPU: placed on the level its working set fits in, timed beside that level's roof.
    # No array in sight (a closure with counts): its declared DRAM traffic bounds the data it
    # touches, so traffic that fits a cache is placed there, as the same call with its arrays.
    ws = (working_set(args, chk.output) or None) if clock.kind == "cpu" else None
    if ws is None and clock.kind == "cpu" and n.bytes.get("dram"):
        ws = n.bytes["dram"]
        rec.evidence.extra["working_set"] = DECLARED_BOUND
    timing = core.paired_time(clock, run, cfg, rec, roofs, ws, clock_phases, arrays=n.arrays)
    rec.evidence.extra.update(clock.extra())
    core.fill_metrics(rec, timing, roofs, ws)
    return rec


# evidence.extra["working_set"] of a call placed by the bytes it declares, not its arrays
DECLARED_BOUND = "at most its declared bytes (no array among its arguments)"
