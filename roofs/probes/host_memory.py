"""How much memory a CPU run may use: what the machine has free, and a case's share of it."""

from __future__ import annotations

from pathlib import Path

GiB = 1 << 30


def available_memory_bytes(meminfo: str | None = None) -> int:
    """MemAvailable from /proc/meminfo (or the given text), else 4 GiB; never more than the
    address space this process may still map (RLIMIT_AS, `ulimit -v`)."""
    free = 4 * GiB
    try:
        text = Path("/proc/meminfo").read_text() if meminfo is None else meminfo
        for line in text.splitlines():
            if line.startswith("MemAvailable:"):
                free = int(line.split()[1]) * 1024
                break
    except (OSError, ValueError, IndexError):
        pass
    return min(free, address_space_left())


def address_space_left(status: str | None = None) -> int:
    """Bytes of address space left under RLIMIT_AS (its soft limit less what this process
    maps now, VmSize); a very large number when there is no limit."""
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY or soft < 0:
        return 1 << 62
    mapped = 0
    try:
        text = Path("/proc/self/status").read_text() if status is None else status
        for line in text.splitlines():
            if line.startswith("VmSize:"):
                mapped = int(line.split()[1]) * 1024
                break
    except (OSError, ValueError, IndexError):
        pass
    return max(soft - mapped, 0)


def case_memory_budget(available: int) -> int:
    """Bytes one benchmark case may allocate on a CPU: a third of what is free, at most
    2 GiB (make bench stays well under 8 GB on a 24 GB machine: the float64 reference and the
    inputs sit beside the case's buffers)."""
    return int(min(max(available, 0) // 3, 2 * GiB))
