"""The GPU roof probes run through CuPy: the roofs of a GPU backend other than CuPy's own
(PyCUDA, Numba CUDA) are measured by opening the CuPy backend (by registry name, so no backend
module imports another), and every GPU backend's roof samplers (the pairs of
roofs/probes/gpu_pairs.py) run on CuPy's probe adapter too."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from roofbench.roofs.probes.gpu_pairs import PairDevice

from roofbench.roof_records import RoofSet

from .base import backend_class, unavailable_reason
from .cuda_timer import EventOps, event_seconds


def roofs_through_cupy(quick: bool, progress: Callable[[str], None] | None,
                       checkpoint: Callable[[RoofSet], None] | None = None) -> RoofSet:
    """Measure with the CuPy backend when it is available; a one-line UserError otherwise."""
    from ..errors import UserError

    why = unavailable_reason("cuda")
    if why is not None:
        raise UserError(f"GPU roofs are measured through CuPy, which is unavailable ({why}); "
                        "pass --roofs FILE with calibrated roofs")
    be = backend_class("cuda")()
    try:
        return be.measure_roofs(quick=quick, progress=progress, checkpoint=checkpoint)
    finally:
        be.close()


def pair_device_through_cupy(index: int, stream: Any = None) -> PairDevice | None:
    """Where a GPU backend's roof samples run: CuPy's probe adapter on device ``index`` (the
    roofs were measured through it), each sample timed by CUDA events on ``stream`` (a CuPy
    stream: the run's, for CuPy's own backend); None, a stream of its own: a backend that
    launches through another binding (PyCUDA, Numba, Triton) shares the device's primary
    context with CuPy, and a sample needs only its own events around its own work, the
    case's sample having ended before it. None without CuPy (no pairs then)."""
    if unavailable_reason("cuda") is not None:
        return None
    import cupy
    from roofbench.roofs.probes.gpu_device import CupyGpu

    s = stream if stream is not None else cupy.cuda.Stream(non_blocking=True)
    timed = event_seconds(EventOps(
        new_event=cupy.cuda.Event, record=lambda ev: ev.record(s),
        wait=lambda ev: ev.synchronize(),
        elapsed_s=lambda a, b: cupy.cuda.get_elapsed_time(a, b) / 1e3))

    def on_stream(fn: Callable[[], None]) -> float:
        with s:  # the adapter launches on CuPy's current stream: this one
            return timed(fn)
    return PairDevice(CupyGpu(index), on_stream, f"cuda:{index}")


class CupyRoofPairs:
    """What a GPU backend mixes in to pair its samples with the roof's (its ``time`` passes
    ``pair`` to ``cuda_time``): the device its samplers run on, made once."""

    pairs_roofs = True  # bench/measure/pairs.py
    index: int = 0  # the CUDA device (a backend of device 0 only keeps this)
    _pairs: PairDevice | None = None

    def pair_stream(self) -> Any:
        """The CuPy stream the samples are timed on (None: one of their own)."""
        return None

    def pair_device(self) -> PairDevice | None:
        if self._pairs is None:
            self._pairs = pair_device_through_cupy(self.index, self.pair_stream())
        return self._pairs
