"""The environment of a CPU probe process: its cores, its thread counts, never the caller's.

A roof must not depend on the shell it is measured from. Performance users routinely carry
thread and binding variables (``OMP_NUM_THREADS=1``, ``OMP_PROC_BIND=close``,
``GOMP_CPU_AFFINITY``, ``MKL_NUM_THREADS``, ``NUMBA_NUM_THREADS`` ... set by HPC modules and
job schedulers); under them a probe measures one core, or all threads stacked on one, and the
roof comes out at a fraction of the machine's. So each probe process

- runs with the cores the machine allows it: the cgroup's effective cpuset (else the online
  cores), narrowed only by what the caller chose on purpose: its affinity at start (taskset, a
  cgroup of its own) or ``--cores``; it sets that affinity itself (``pin``);
- starts with a clean environment (``probe_env``): the caller's thread and binding variables
  left out (Numba reads ``NUMBA_NUM_THREADS`` only at import, libgomp its variables at load:
  only a new process can drop them), one thread per core for Numba, OpenMP and BLAS;
- records what it found and what it set (``ProbeEnvironment`` in the roof set).
"""

from __future__ import annotations

import contextlib
import os
import platform
from pathlib import Path

from roofbench.roof_context import CoresFrom, ProbeEnvironment, cpu_list, parse_cpu_list

# Thread and binding variables of OpenMP runtimes (GNU, LLVM/Intel), BLAS libraries, Numba and
# friends. A probe process runs without any of them; they are recorded as found.
THREAD_VARIABLES = (
    "OMP_NUM_THREADS", "OMP_PROC_BIND", "OMP_PLACES", "OMP_DYNAMIC", "OMP_THREAD_LIMIT",
    "OMP_MAX_ACTIVE_LEVELS", "OMP_NESTED", "OMP_WAIT_POLICY", "OMP_SCHEDULE",
    "GOMP_CPU_AFFINITY", "GOMP_SPINCOUNT", "KMP_AFFINITY", "KMP_HW_SUBSET", "KMP_BLOCKTIME",
    "KMP_NUM_THREADS", "MKL_NUM_THREADS", "MKL_DYNAMIC", "MKL_DOMAIN_NUM_THREADS",
    "OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "BLIS_NUM_THREADS", "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS", "NUMEXPR_MAX_THREADS", "NUMBA_NUM_THREADS",
    "NUMBA_THREADING_LAYER", "NUMBA_DEFAULT_NUM_THREADS", "TBB_NUM_THREADS")
# Set in a probe's environment, one thread per core it runs on.
SET_PER_CORE = ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                "MKL_NUM_THREADS")
CORES_ENV = "ROOFBENCH_PROBE_CORES"  # the cores a probe child pins itself to ("0-3")

_chosen: list[int] | None = None  # --cores of this process (``choose_cores``)


def found_variables(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The caller's thread and binding variables, as set (empty values left out)."""
    env = os.environ if environ is None else environ
    return {k: env[k] for k in THREAD_VARIABLES if env.get(k)}


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def cgroup_cpuset(root: Path = Path("/sys/fs/cgroup"),
                  proc_cgroup: Path = Path("/proc/self/cgroup")) -> list[int] | None:
    """The cores this process's cgroup allows (cgroup v2 ``cpuset.cpus.effective`` of its own
    group, else the root's; cgroup v1 ``cpuset.effective_cpus``); None where there is none."""
    groups = []
    text = _read(proc_cgroup) or ""
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3 and (parts[0] == "0" or "cpuset" in parts[1].split(",")):
            groups.append((parts[0] == "0", parts[2].lstrip("/")))
    candidates = [root / g / "cpuset.cpus.effective" for v2, g in groups if v2]
    candidates += [root / "cpuset" / g / "cpuset.effective_cpus" for v2, g in groups if not v2]
    candidates += [root / "cpuset.cpus.effective", root / "cpuset" / "cpuset.effective_cpus"]
    for path in candidates:
        found = _read(path)
        if found:
            with contextlib.suppress(ValueError):
                return parse_cpu_list(found)
    return None


def online_cores(path: Path = Path("/sys/devices/system/cpu/online")) -> list[int] | None:
    text = _read(path)
    if text:
        with contextlib.suppress(ValueError):
            return parse_cpu_list(text)
    return None


def affinity() -> list[int]:
    """This thread's affinity (all cores where the OS has no affinity call)."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def caller_cores(tasks: Path = Path("/proc/self/task")) -> list[int]:
    """The cores the caller chose for this process: its affinity when roofbench was imported,
    joined with every thread's now. An OpenMP runtime started with binding variables pins the
    main thread to one core (and each of its threads to a place); taskset or a cgroup
    restricts every thread alike, so the union never goes past the caller's choice."""
    import roofbench

    cores = set(affinity()) | set(roofbench.START_AFFINITY or ())
    with contextlib.suppress(OSError):
        for task in tasks.iterdir():
            for line in (_read(task / "status") or "").splitlines():
                if line.startswith("Cpus_allowed_list:"):
                    with contextlib.suppress(ValueError):
                        cores.update(parse_cpu_list(line.split(":", 1)[1]))
    return sorted(cores)


def machine_cores() -> list[int]:
    """The cores the machine allows this process: its cgroup's cpuset within the online cores,
    else the online cores, else its affinity."""
    cg, online = cgroup_cpuset(), online_cores()
    if cg and online:
        both = sorted(set(cg) & set(online))
        if both:
            return both
    return cg or online or affinity()


def choose_cores(cores: list[int]) -> None:
    """``--cores``: measure on these cores (each one the machine allows); this process runs
    on them from now on, and every probe child it starts. ValueError names the others."""
    global _chosen
    allowed = set(machine_cores())
    bad = sorted(set(cores) - allowed)
    if bad:
        raise ValueError(f"--cores {cpu_list(bad)}: not allowed here (this process may run "
                         f"on {cpu_list(sorted(allowed))})")
    pin(cores)
    _chosen = sorted(set(cores))


def probe_cores() -> tuple[list[int], CoresFrom]:
    """The cores a probe runs on, and why: ``--cores``, else this process's affinity where it
    is narrower than the machine's (taskset, a cgroup of its own), else the machine's."""
    if _chosen is not None:
        return list(_chosen), "option"
    mine, machine = caller_cores(), machine_cores()
    usable = sorted(set(mine) & set(machine)) or mine
    return usable, ("machine" if set(usable) >= set(machine) else "affinity")


def probe_env(cores: list[int], environ: dict[str, str] | None = None,
              **extra: str) -> dict[str, str]:
    """The environment of a probe child: the caller's, without its thread and binding
    variables, with one thread per core for Numba, OpenMP and BLAS, and the cores to pin."""
    env = {k: v for k, v in (os.environ if environ is None else environ).items()
           if k not in THREAD_VARIABLES}
    n = str(len(cores))
    env.update({k: n for k in SET_PER_CORE})
    env[CORES_ENV] = cpu_list(cores)
    env.update(extra)
    return env


def pin(cores: list[int]) -> list[int]:
    """Set this process's affinity to ``cores`` (where the OS allows it); what it now is."""
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, set(cores))
    return affinity()


def pin_from_env() -> list[int] | None:
    """In a probe child: pin to the cores its parent chose (``CORES_ENV``); None without."""
    text = os.environ.get(CORES_ENV)
    return pin(parse_cpu_list(text)) if text else None


def thread_counts() -> dict[str, int | None]:
    """The thread counts in effect: Numba's (and its pool), BLAS's and OpenMP's, as the
    libraries report them (threadpoolctl where installed, else OpenBLAS asked directly)."""
    import numba

    out: dict[str, int | None] = {
        "numba": int(numba.get_num_threads()),
        "numba_pool": int(vars(numba.config)["NUMBA_NUM_THREADS"]),
        "blas": None, "openmp": None}
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        from .cpu_blas import openblas_runtime

        out["blas"] = openblas_runtime().get("threads")
        return out
    for pool in threadpool_info():
        key = "blas" if pool.get("user_api") == "blas" else "openmp"
        n = pool.get("num_threads")
        if isinstance(n, int):
            out[key] = max(out[key] or 0, n)
    return out


def limit_threads(n: int) -> None:
    """One thread per core in this process: Numba's and, with threadpoolctl, BLAS's and
    OpenMP's (the environment a probe child starts with already says so)."""
    import numba

    numba.set_num_threads(min(n, int(vars(numba.config)["NUMBA_NUM_THREADS"])))
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return
    threadpool_limits(n)


def fingerprint(cores: list[int]) -> dict[str, str]:
    """What keys the calibration cache: a change of any of these measures the roofs again."""
    import llvmlite
    import numba
    import numpy as np

    from roofbench.cpu_cache import last_level_cache_bytes

    return {"cpu": _cpu_model(), "machine": platform.machine(), "cores": cpu_list(cores),
            "memory_bytes": str(_mem_total()), "llc_bytes": str(last_level_cache_bytes()),
            "numpy": np.__version__, "numba": numba.__version__,
            "llvmlite": llvmlite.__version__, "probes": probe_code()}


def probe_code() -> str:
    """A digest of the CPU probes' own source (this folder's cpu*.py and the FMA model): a
    roofbench whose probes measure differently (a new sweep pass, another count of bytes)
    measures again instead of reading roofs an older probe wrote."""
    import hashlib

    here = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for f in sorted([*here.glob("cpu*.py"), here / "fma_model.py"]):
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:12]


def probe_environment(cores: list[int], cores_from: CoresFrom,
                      variables: dict[str, str]) -> ProbeEnvironment:
    """The record of a probe process (call it where the probe ran: threads are its own)."""
    return ProbeEnvironment(cores=affinity(), machine_cores=machine_cores(),
                            cores_from=cores_from, variables=dict(variables),
                            threads=thread_counts(), fingerprint=fingerprint(cores))


def current_fingerprint() -> dict[str, str]:
    """This machine's fingerprint for the cores a probe here would run on."""
    return fingerprint(probe_cores()[0])


def _cpu_model() -> str:
    for line in (_read(Path("/proc/cpuinfo")) or "").splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine() or "unknown CPU"


def _mem_total() -> int:
    for line in (_read(Path("/proc/meminfo")) or "").splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024
    return 0


def describe(pe: ProbeEnvironment) -> str:
    """One line for a report or a note."""
    how = {"machine": "every core the machine allows",
           "affinity": "the cores this process was restricted to (taskset or a cgroup)",
           "option": "the cores chosen with --cores"}[pe.cores_from]
    found = ", ".join(f"{k}={v}" for k, v in pe.variables.items())
    th = ", ".join(f"{k} {v}" for k, v in pe.threads.items() if v is not None)
    return (f"CPU roofs measured on cores {pe.cores_text} ({how}; the machine allows "
            f"{cpu_list(pe.machine_cores)}), threads: {th}"
            + (f"; the caller's {found} left out of the probes" if found else ""))
