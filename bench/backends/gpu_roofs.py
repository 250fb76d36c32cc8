"""The GPU roof probes run through CuPy: the roofs of a GPU backend other than CuPy's own
(PyCUDA, Numba CUDA) are measured by opening the CuPy backend (by registry name, so no backend
module imports another)."""

from __future__ import annotations

from collections.abc import Callable

from roofbench.roof_records import RoofSet

from .base import backend_class, unavailable_reason


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
