"""Display formatting of rates and sizes, shared by every folder (reports, plots, calibrate,
fleet, the distributed model): one precision everywhere, so a figure reads the same in
report.md, on the plot and in calibrate's table.

Display only: stored numbers (results.json, roofs files) are never rounded.
"""

from __future__ import annotations

import math

# Three significant digits: run-to-run noise of a roof or a kernel is about a percent, so a
# fourth digit would be noise (report.md, report.html, the plots and fleet.md always used 3).
DIGITS = 3
MISSING = "-"
_PREFIXES = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def si(value: float | None, unit: str = "", digits: int = DIGITS) -> str:
    """'3.35 TB/s', '989 TFLOP/s', '512 B'; '-' for None, NaN or infinity.

    The prefix is chosen after rounding, so 999.7e9 B/s reads '1 TB/s', never '1e+03 GB/s'."""
    if value is None or not math.isfinite(value):
        return MISSING
    for scale, prefix in _PREFIXES:
        if abs(float(f"{value / scale:.{digits}g}")) >= 1:
            return f"{value / scale:.{digits}g} {prefix}{unit}"
    return f"{value:.{digits}g} {unit}".rstrip()


def duration(seconds: float | None) -> str:
    """'207 us', '1.23 ms', '2.5 s' (three significant digits); '-' for None."""
    if seconds is None:
        return MISSING
    if seconds < 1e-3:
        return f"{seconds * 1e6:.3g} us"
    if seconds < 1:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds:.3g} s"
