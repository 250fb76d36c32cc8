"""How big this CPU's last-level cache is: sysfs, then ``lscpu -B``, then a default.

numba-free, so kernels/ (the non-temporal-store threshold) and the probes (the STREAM size rule)
read the same figure the same way.
"""

from __future__ import annotations

import re
import subprocess
from functools import cache
from pathlib import Path

MiB = 1 << 20
DEFAULT_LLC = 32 * MiB  # used only when sysfs and lscpu both fail


def parse_size(text: str) -> int:
    text = text.strip().upper().removesuffix("B").removesuffix("I")
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    return int(float(text.rstrip("KMG").strip()) * mult)


def llc_from_sysfs(cpu_root: Path = Path("/sys/devices/system/cpu")) -> int | None:
    """Total last-level cache bytes from sysfs (``cpu*/cache/index*``), or None.

    Highest level, data or unified; instances told apart by ``shared_cpu_list`` (Intel: one
    L3 shared by every core; AMD: one L3 per CCD/CCX, each listed by the cores sharing it).
    """
    instances: dict[tuple[int, str], int] = {}
    for idx in cpu_root.glob("cpu[0-9]*/cache/index[0-9]*"):
        try:
            if (idx / "type").read_text().strip() == "Instruction":
                continue
            level = int((idx / "level").read_text())
            shared = (idx / "shared_cpu_list").read_text().strip()
            instances[(level, shared)] = parse_size((idx / "size").read_text())
        except (OSError, ValueError):
            continue
    if not instances:
        return None
    top = max(level for level, _ in instances)
    return sum(size for (level, _), size in instances.items() if level == top)


def llc_from_lscpu(text: str) -> int | None:
    """Total last-level cache bytes from ``lscpu`` or ``lscpu -B`` output, or None.

    lscpu prints the total over all instances ("L3 cache: 256 MiB (8 instances)", or bytes
    with -B); the highest level listed wins (a CPU without L3 reports its L2).
    """
    best: tuple[int, int] | None = None
    for line in text.splitlines():
        m = re.match(r"\s*L(\d)d? cache:\s*([\d.]+\s*[KMG]?i?B?)", line)
        if m and not line.lstrip().startswith("L1i"):
            level, size = int(m.group(1)), parse_size(m.group(2))
            if best is None or level > best[0]:
                best = (level, size)
    return best[1] if best else None


@cache
def last_level_cache_bytes() -> int:
    """Total bytes of the last-level cache over all its instances (e.g. every CCD's L3).

    sysfs first, then ``lscpu -B``, then 32 MiB. The total, not one instance: a STREAM array
    must not fit in the caches of all cores together.
    """
    found = llc_from_sysfs()
    if found:
        return found
    try:
        out = subprocess.run(["lscpu", "-B"], capture_output=True, text=True, timeout=5).stdout
        found = llc_from_lscpu(out)
        if found:
            return found
    except (OSError, subprocess.SubprocessError):
        pass
    return DEFAULT_LLC
