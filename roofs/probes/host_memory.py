"""How much memory a CPU run may use: what the machine has free, and a case's share of it."""

from __future__ import annotations

from pathlib import Path

GiB = 1 << 30


def available_memory_bytes(meminfo: str | None = None) -> int:
    """MemAvailable from /proc/meminfo (or the given text), else 4 GiB."""
    try:
        text = Path("/proc/meminfo").read_text() if meminfo is None else meminfo
        for line in text.splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 4 * GiB


def case_memory_budget(available: int) -> int:
    """Bytes one benchmark case may allocate on a CPU: a third of what is free, at most
    2 GiB (make bench stays well under 8 GB on a 24 GB machine: the float64 reference and the
    inputs sit beside the case's buffers)."""
    return int(min(max(available, 0) // 3, 2 * GiB))
