"""What a numba CPU probe ran with (threads, threading layer, target), and its timing, for
the evidence of a roof. Timings are duck-typed (``.to_dict()`` or ``.summary()``)."""

from __future__ import annotations

from typing import Any

import numba


def threads() -> int:
    return int(numba.get_num_threads())


def env() -> dict[str, Any]:
    try:
        layer = numba.threading_layer()
    except ValueError:  # no parallel region has run yet
        layer = None
    return {"numba": numba.__version__, "numba_threading_layer": layer,
            # numba.config sets its settings at run time: numba's types do not list them
            "numba_cpu_name": numba.config.CPU_NAME,  # type: ignore[attr-defined]
            "numba_cpu_features": numba.config.CPU_FEATURES}  # type: ignore[attr-defined]


def timing_evidence(timing: Any) -> dict[str, Any]:
    to_dict = getattr(timing, "to_dict", None)
    d = dict(to_dict()) if callable(to_dict) else dict(timing.summary())
    d.pop("config", None)
    return d
