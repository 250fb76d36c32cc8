"""How much memory a CPU run may use: what the machine has free, and a case's share of it."""

from __future__ import annotations

from pathlib import Path

GiB = 1 << 30


def _kib_field(path: Path, text: str | None, key: str) -> int | None:
    """Bytes of the first ``key`` line (``key  123 kB``) of ``text`` (else the file at
    ``path``); None when the file, the line or its number is missing."""
    try:
        for line in (path.read_text() if text is None else text).splitlines():
            if line.startswith(key):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def available_memory_bytes(meminfo: str | None = None) -> int:
    """MemAvailable from /proc/meminfo (or the given text), else 4 GiB; never more than the
    address space this process may still map (RLIMIT_AS, `ulimit -v`)."""
    free = _kib_field(Path("/proc/meminfo"), meminfo, "MemAvailable:")
    return min(4 * GiB if free is None else free, address_space_left())


def address_space_left(status: str | None = None) -> int:
    """Bytes of address space left under RLIMIT_AS (its soft limit less what this process
    maps now, VmSize); a very large number when there is no limit."""
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY or soft < 0:
        return 1 << 62
    mapped = _kib_field(Path("/proc/self/status"), status, "VmSize:")
    return max(soft - (mapped or 0), 0)


def case_memory_budget(available: int) -> int:
    """Bytes one benchmark case may allocate on a CPU: a third of what is free, at most
    2 GiB (make bench stays well under 8 GB on a 24 GB machine: the float64 reference and the
    inputs sit beside the case's buffers)."""
    return int(min(max(available, 0) // 3, 2 * GiB))
