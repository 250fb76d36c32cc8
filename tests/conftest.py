"""Shared fixtures. GPU tests carry the `gpu` marker and skip with a reason without a device."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest


def _keep_bytecode_out_of_the_tree() -> str | None:
    """With PYTHONDONTWRITEBYTECODE (many containers set it) every process the tests start,
    hundreds of CLI runs, compiled roofbench's modules from source again: about 0.25 s of CPU
    each, an eighth of the CLI tests' time on two cores. For this session and the processes it
    starts, the bytecode goes to a folder of its own (PYTHONPYCACHEPREFIX), removed at the
    end; none is written beside the sources, which is what the setting keeps. Returns the
    folder this process made (xdist's workers inherit it)."""
    if not os.environ.get("PYTHONDONTWRITEBYTECODE") or os.environ.get("PYTHONPYCACHEPREFIX"):
        return None
    where = tempfile.mkdtemp(prefix="roofbench-pycache-")
    os.environ.pop("PYTHONDONTWRITEBYTECODE")
    os.environ["PYTHONPYCACHEPREFIX"] = where
    sys.dont_write_bytecode = False
    sys.pycache_prefix = where
    return where


_PYCACHE = _keep_bytecode_out_of_the_tree()


# The stand-ins and helpers every test folder imports (cuda_tools, testpaths): one place.
sys.path.insert(0, str(Path(__file__).resolve().parent / "standins"))
import roofbench.kernels.numba_compat  # noqa: E402, F401  (numpy 2.5 vs numba-cuda 0.30)
from codegen_store import numba_keep, numba_restore  # noqa: E402
from roof_sets import write_roofs  # noqa: E402

# numba's cache of the CPU kernels from an earlier session of the same sources (a fresh clone
# has none): put in before xdist's workers start, kept when the whole session ends.
_CONTROLLER = "PYTEST_XDIST_WORKER" not in os.environ
if _CONTROLLER:
    numba_restore()


def pytest_unconfigure(config):
    if _PYCACHE is not None:
        import shutil

        shutil.rmtree(_PYCACHE, ignore_errors=True)
    if _CONTROLLER:
        numba_keep()


def _gpu_reason() -> str | None:
    try:
        import cupy  # noqa: F401
    except Exception as e:  # ImportError, or a CUDA library error at import
        return f"no GPU: CuPy is not importable ({type(e).__name__})"
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() < 1:
            return "no GPU: CUDA reports no device"
    except Exception as e:
        return f"no GPU: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    return None


def _overwritten_shared_bytes() -> list[int]:
    """The one-byte bytes objects CPython shares process-wide whose byte was overwritten: a C
    library writing into a buffer made as ``b" " * n`` with n == 1 (NVRTC's empty log) turns
    every later b" " of the process into b"\\0" (CI: `embedded null byte` in a test three files
    after the one that did it). Each is put back, so that one test fails, not the rest."""
    import ctypes

    bad = [i for i in range(256) if bytes([i])[0] != i]
    for i in bad:
        ctypes.memset(id(bytes([i])) + bytes.__basicsize__ - 1, i, 1)
    return bad


@pytest.fixture(autouse=True)
def _case_limit_scaled_by_load(monkeypatch):
    """An isolated case's hang guard (bench/suite/isolation.py, 45 s on an idle machine)
    scaled by the load now, as every limit in a test is (patience.py): a CLI run under test on
    one loaded core (`taskset -c 0 make test`) waits longer instead of failing. A test that
    sets or clears the variable itself overrides this."""
    import os

    from patience import patience
    from roofbench.bench.suite.isolation import CASE_TIMEOUT_S, TIMEOUT_ENV

    if TIMEOUT_ENV not in os.environ:
        monkeypatch.setenv(TIMEOUT_ENV, f"{patience(CASE_TIMEOUT_S):.0f}")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    result = yield from _phase_cpu(item)
    if bad := _overwritten_shared_bytes():
        pytest.fail(f"this test overwrote CPython's shared one-byte objects {bad} (a C call "
                    "wrote into a buffer made from a bytes literal; give it a bytearray)")
    return result


def pytest_collection_modifyitems(config, items):
    _long_files_first(items)
    reason = None
    checked = False
    for item in items:
        if "gpu" in item.keywords:
            if not checked:
                reason, checked = _gpu_reason(), True
            if reason:
                item.add_marker(pytest.mark.skip(reason=reason))


def _long_files_first(items) -> None:
    """The files holding a ``slow`` test first, then the rest, each group by its number of
    tests (what xdist's loadfile does alone; make test turns its reordering off so this order
    stands). A worker that drew the numba simulator or the isolation test's hang last ran it
    alone for two minutes under load while the other idled (docs/tests.md)."""
    files: dict[str, list] = {}
    for item in items:
        files.setdefault(item.nodeid.split("::")[0], []).append(item)
    order = sorted(files.values(), key=lambda its: (
        not any(it.get_closest_marker("slow") for it in its), -len(its)))
    items[:] = [it for its in order for it in its]


@pytest.fixture
def roofs_file(tmp_path: Path) -> Path:
    """A small hand-written roof set, so CLI tests need not spend time measuring roofs."""
    return write_roofs(tmp_path / "roofs.json")


# What a newcomer's `make test` could not run, and the command that runs it: the last lines of
# the run (pyproject's -rfEX keeps pytest's own per-test list to failures and errors).
ENABLE = {  # what: (words of its skip reasons, what .ci/run installs for it)
    "browser": (("chromium", "chromedriver", "selenium"), "chromium, chromium-driver"),
    "MPI": (("mpirun", "mpi4py"), "Open MPI"),
}
GPU_HINT = "the gpu tests need a CUDA device: make gpu-check on a GPU machine"


def skip_reasons(reports) -> dict[str, int]:
    """Skipped tests counted by reason, most frequent first."""
    counts: dict[str, int] = {}
    for rep in reports:
        longrepr = getattr(rep, "longrepr", None)
        reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(
            longrepr)
        reason = reason.removeprefix("Skipped: ").strip()
        counts[reason] = counts.get(reason, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def skip_summary(counts: dict[str, int]) -> list[str]:
    """The lines that say what was skipped, why, and how to run it."""
    if not counts:
        return []
    lines = [f"{sum(counts.values())} skipped, by reason:"]
    lines += [f"  {n:4d}  {reason}" for reason, n in counts.items()]
    missing = [what for what, (keys, _) in ENABLE.items()
               if any(k in reason.lower() for reason in counts for k in keys)]
    if missing:
        needs = ", ".join(ENABLE[w][1] for w in missing)
        lines.append(f"to run the {' and '.join(missing)} tests: .ci/run")
        lines.append(f"  (as root: installs {needs} from Debian, then runs make test)")
    if any(reason.startswith("no GPU") for reason in counts):
        lines.append(GPU_HINT)
    lines.append("each skipped test and its reason: pytest -rs")
    return lines


# Where a session's minutes go, by file (docs/tests.md: a slice of the suite, the slow ones):
# each phase's CPU, this process's and the children it waited for (the codegen children, the
# CLI runs), rides on its report to xdist's controller, which sums it with the wall time.
SLOWEST_FILES = 15


def _cpu_s() -> float:
    import resource

    use = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    return sum(u.ru_utime + u.ru_stime for u in use)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    cpu = item.__dict__.pop("_rb_cpu_s", None)
    if cpu is not None:
        report.user_properties.append(("cpu_s", cpu))
    return report


def _phase_cpu(item):
    """Around one phase of ``item``: its CPU seconds, for the report made next."""
    start = _cpu_s()
    try:
        return (yield)
    finally:
        item._rb_cpu_s = _cpu_s() - start


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    return (yield from _phase_cpu(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    return (yield from _phase_cpu(item))

_FILE_COSTS: dict[str, list[float]] = {}


def pytest_runtest_logreport(report):
    cost = _FILE_COSTS.setdefault(report.nodeid.split("::")[0], [0.0, 0.0])
    cost[0] += report.duration
    cost[1] += sum(v for k, v in report.user_properties if k == "cpu_s")


def slowest_files(costs: dict[str, list[float]], n: int = SLOWEST_FILES) -> list[str]:
    """The ``n`` files that took longest (wall: their tests' setup, call and teardown, module
    fixtures included; CPU: theirs and their waited children's), with the session's sums."""
    if not costs:
        return []
    top = sorted(costs.items(), key=lambda kv: (-kv[1][0], kv[0]))[:n]
    wall, cpu = (sum(c[i] for c in costs.values()) for i in (0, 1))
    lines = [f"{'wall s':>8} {'CPU s':>8}  file ({len(costs)} files: {wall:.1f} s wall, "
             f"{cpu:.1f} s CPU in tests)"]
    lines += [f"{w:8.1f} {c:8.1f}  {f}" for f, (w, c) in top]
    return lines


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    lines = skip_summary(skip_reasons(terminalreporter.stats.get("skipped", [])))
    if lines:
        terminalreporter.section("skipped")
        for line in lines:
            terminalreporter.write_line(line)
    durations = config.getoption("durations", None)
    n = len(_FILE_COSTS) if durations == 0 else SLOWEST_FILES  # --durations=0: every file
    if durations is not None and (files := slowest_files(_FILE_COSTS, n)):
        terminalreporter.section("slowest files")
        for line in files:
            terminalreporter.write_line(line)
