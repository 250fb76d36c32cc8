"""Wall-clock limits in tests are hang guards, never races: every one is scaled by how busy
the machine is, so that a slow or loaded machine waits longer instead of failing.

    subprocess.run(cmd, timeout=patience(120))

``patience(s)`` is ``s`` times ``scale()``: the load average per core (never below 1; a 2-core
machine at load 20 waits 10 times as long) times $ROOFBENCH_TEST_PATIENCE (default 1; raise it
for a machine slower than its load says, e.g. under emulation). A test that asserts how long
something took asserts against ``patience(limit)`` too, or better, asserts an order of events.
"""

from __future__ import annotations

import math
import os

ENV = "ROOFBENCH_TEST_PATIENCE"


def _env_factor() -> float:
    raw = os.environ.get(ENV, "")
    try:
        v = float(raw) if raw else 1.0
    except ValueError:
        v = 1.0
    return v if v >= 1 else 1.0


def load_per_core() -> float:
    """The 1-minute load average per core this process may run on (0 where unknown)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    try:
        return os.getloadavg()[0] / max(1, cores)
    except OSError:
        return 0.0


def scale() -> float:
    """How many times longer than on an idle machine a limit should allow, now."""
    return max(1.0, load_per_core()) * _env_factor()


def patience(seconds: float) -> float:
    """``seconds`` as a hang guard on this machine, now."""
    return seconds * scale()


def whole_scale(headroom: float = 1.0) -> int:
    """``scale() * headroom`` as a whole number >= 1, for scripts whose limits are integers
    (scripts/gpu_check.sh's GPU_CHECK_TIME_SCALE)."""
    return max(1, math.ceil(scale() * headroom))
