"""A run whose figures contradict themselves, found before anything is judged on it.

Every number of a case is checked alone when it is read (``readers.case_problem``); what
is checked here holds between figures: the median a case stores is the median of the
samples it stores (a measurement writes both from one Timing, so a file where they differ
was edited or corrupted, and judging it would show one figure and decide on the other),
and no case key occurs twice for one backend (which of the two a verdict is about cannot
be said). ``compare`` refuses such a file in one line (exit 2).
"""

from __future__ import annotations

import statistics
from collections import Counter

from .records import RunResult

# A stored median and its samples' median are one float written twice: any difference
# beyond rounding in the last digits is a contradiction.
MEDIAN_RTOL = 1e-6


def contradiction(run: RunResult) -> str | None:
    """The first contradiction between a run's figures, in words; None when there is none."""
    seen = Counter((c.identity.backend, c.key) for c in run.cases)
    dup = next((k for k, n in seen.items() if n > 1), None)
    if dup is not None:
        return (f"case {dup[0]}/{dup[1]} occurs {seen[dup]} times: which one a verdict is "
                "about cannot be said")
    for c in run.cases:
        t, stored = c.measurement.timing, c.measurement.median_s
        if t is None or not t.samples or stored is None:
            continue
        med = statistics.median(t.samples)
        if abs(stored - med) > MEDIAN_RTOL * max(abs(med), abs(stored)):
            return (f"case {c.key} stores a median of {stored:.6g} s but its "
                    f"{len(t.samples)} samples have a median of {med:.6g} s")
    return None
