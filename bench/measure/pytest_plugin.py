"""The pytest plugin (the ``pytest11`` entry point ``roofbench``: installing roofbench is
enough; from a checkout without an install, ``-p roofbench.bench.measure.pytest_plugin``).

- the ``roofline`` fixture: ``roofline(fn, *args, flops=..., reads=..., writes=...)`` takes
  every keyword of ``roofbench.measure`` and returns the case record; a case that fails
  validation fails its test (after it is recorded). Its name is the test's ("test_add", and
  the parameters' id as the variant: "test_add/fp32").
- ``pytest --roofline-out DIR``: one results.json of the session's cases, with report.md,
  report.html and the roofline, written when the session ends; DIR holding a run already
  gets a sibling (DIR-2, ...), never written over; under pytest-xdist the workers' cases are
  merged into that one run at the end.
- with pytest-benchmark active, ``roofline`` also hands the callable to its ``benchmark``
  fixture (the first call of a test: pytest-benchmark times one callable per test), with
  FLOPs, bytes, dtype and device in ``extra_info``, and ``--benchmark-json`` files carry the
  device's roofs under a ``roofbench`` key: `roofbench report` and `plot` read them
  (roofbench/pytest_benchmark.py).

Imports of the measuring code wait for the first use: a pytest run that never asks for the
fixture pays nothing for it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

_STATE = pytest.StashKey["_State"]()


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("roofline", "roofbench: your kernels on this device's roofline")
    g.addoption("--roofline-out", metavar="DIR",
                help="write the session's cases as a run: DIR/results.json, report.md, "
                     "report.html, roofline.png")
    g.addoption("--roofline-roofs", metavar="FILE",
                help="place the cases under this roofs file, not the calibration cache")
    g.addoption("--roofline-quick", action="store_true",
                help="short timing (a smoke test; the figures are noisier)")


class _State:
    """The session every ``roofline`` call of this pytest run adds its case to.

    The options are checked here, once, at start (``pytest.UsageError``: one line, not a
    traceback in every test); ``--roofline-out`` is resolved against the invocation folder.
    Under pytest-xdist each worker saves its cases into a folder of its own under a
    temporary folder the controller hands it, and the controller merges them into one run
    at the end (``merge_workers``)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        base = Path(config.invocation_params.dir)
        self.out = _checked_out(config.getoption("roofline_out"), base)
        self.roofs = _checked_roofs(config.getoption("roofline_roofs"), base)
        self.quick = bool(config.getoption("roofline_quick"))
        self._session: Any = None
        self.written: list[Path] = []
        self.merged: Any = None  # the controller's run, merged from its workers
        self.parts: Path | None = None  # the controller's folder of the workers' runs
        self.worker = getattr(config, "workerinput", None)
        if self.worker is not None and self.out is not None:
            parts = self.worker.get("roofbench_parts")
            self.out = Path(parts) / str(self.worker.get("workerid", "gw")) if parts else None

    @property
    def session(self) -> Any:
        if self._session is None:
            from .api import Session

            self._session = Session(out=self.out, roofs=self.roofs, quick=self.quick)
        return self._session

    @property
    def run(self) -> Any:
        if self.merged is not None:
            return self.merged
        return self._session.run if self._session is not None else None

    def finish(self, interrupted: bool) -> None:
        if self.parts is not None:
            self.merged, self.written = merge_workers(self.parts, self.out, interrupted)
        elif self._session is not None and self._session.run is not None:
            self.written = self._session.close(interrupted=interrupted,
                                               reports=self.worker is None)


def _checked_out(out: str | None, base: Path) -> Path | None:
    if out is None:
        return None
    if not out.strip():
        raise pytest.UsageError("--roofline-out is empty: give a folder")
    path = base / out
    p = path
    while not p.exists() and p != p.parent:
        p = p.parent
    if not p.is_dir():
        raise pytest.UsageError(f"--roofline-out {out}: {p} is a file, not a folder")
    if not os.access(p, os.W_OK | os.X_OK):
        raise pytest.UsageError(f"--roofline-out {out}: {p} is not writable")
    return path


def _checked_roofs(roofs: str | None, base: Path) -> Any:
    if roofs is None:
        return None
    from roofbench.roofs.files import RoofsFileError, load_roofs

    try:
        return load_roofs(base / roofs)
    except RoofsFileError as e:
        raise pytest.UsageError(f"--roofline-roofs: {e}") from None


def merge_workers(parts: Path, out: Path | None, interrupted: bool) -> tuple[Any, list[Path]]:
    """The workers' runs (``parts/<worker>/results.json``) as one run of every case, written
    as a session writes it (a folder that holds a run is never written over); the workers'
    folders are removed once it is saved."""
    import shutil

    from ..present.outputs import write_outputs
    from ..results import claim_folder, load_run, save_run

    runs = [load_run(p) for p in sorted(parts.glob("*/results.json"))]
    if not runs or out is None:
        shutil.rmtree(parts, ignore_errors=True)
        return None, []
    run = runs[0]
    for other in runs[1:]:
        run.cases.extend(other.cases)
        run.notes.extend(n for n in other.notes if n not in run.notes)
        run.interrupted = run.interrupted or other.interrupted
        if (other.roofs.to_dict() if other.roofs else None) != (
                run.roofs.to_dict() if run.roofs else None):
            run.notes.append(f"the pytest-xdist workers placed their cases under different "
                             f"roofs ({other.roofs.device if other.roofs else 'none'})")
    run.notes.append(f"merged from {len(runs)} pytest-xdist workers")
    if interrupted:
        run.interrupted = True
    folder = claim_folder(out)
    written = [save_run(run, folder), *write_outputs(run, folder)]
    shutil.rmtree(parts, ignore_errors=True)
    return run, written


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_STATE] = _State(config)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """pytest-xdist, on the controller: the folder this worker saves its cases into."""
    state = node.config.stash.get(_STATE, None)
    if state is None or state.out is None:
        return
    if state.parts is None:
        import tempfile

        state.parts = Path(tempfile.mkdtemp(prefix="roofbench-xdist-"))
    node.workerinput["roofbench_parts"] = str(state.parts)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    state = session.config.stash.get(_STATE, None)
    if state is not None:
        state.finish(interrupted=exitstatus == pytest.ExitCode.INTERRUPTED)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int,
                            config: pytest.Config) -> None:
    state = config.stash.get(_STATE, None)
    if state is None or state.run is None or state.worker is not None:
        return
    run = state.run
    ok = [c for c in run.cases if c.outcome.status == "ok"]
    terminalreporter.section("roofline")
    for c in run.cases:
        where = (
            f"{c.roofline.efficiency:.0%} of {c.roofline.limiting_roof}"
            if c.roofline.efficiency
            else c.outcome.error or "not placed (no roofs)"
        )
        if c.roofline.efficiency and c.declaration.flops == 0:
            where += " (0 FLOPs: its bytes/s over the memory roof)"
        if c.roofline.placement is not None and c.roofline.placement.level != "dram":
            where += f" (its data fits in {c.roofline.placement.level.upper()}: placed there)"
        terminalreporter.write_line(f"{c.key}: {c.outcome.status}, {where}")
    if state.written:
        shown = _shown_path(state.written[0], Path(config.invocation_params.dir))
        terminalreporter.write_line(f"{len(ok)} case(s) on the roofline of {run.device}: "
                                    f"{shown}")


def _shown_path(p: Path, base: Path) -> str:
    """A path under the folder pytest was started in, as the user gave it (relative)."""
    try:
        return str(p.relative_to(base))
    except ValueError:
        return str(p)


@pytest.hookimpl(optionalhook=True)
def pytest_benchmark_update_json(config: pytest.Config, benchmarks: Any,
                                 output_json: dict[str, Any]) -> None:
    """The device and its roofs beside pytest-benchmark's entries, for `roofbench report`."""
    state = config.stash.get(_STATE, None)
    if state is None or state._session is None or state._session.run is None:
        return
    from roofbench.pytest_benchmark import EXTRA_SCHEMA

    run = state._session.run
    output_json["roofbench"] = {"schema": EXTRA_SCHEMA, "device": run.device,
                                "backend": run.backend,
                                "roofs": run.roofs.to_dict() if run.roofs else None}


def extra_info(rec: Any) -> dict[str, Any]:
    """What a pytest-benchmark entry carries of a case: enough to place it on a roofline."""
    return {
        "flops": rec.declaration.flops,
        "bytes": dict(rec.declaration.bytes),
        "dtype": rec.identity.dtype,
        "precision": rec.identity.precision,
        "size": list(rec.identity.size),
        "workload": rec.identity.workload,
        "variant": rec.identity.variant,
        "backend": rec.identity.backend,
        "valid": rec.valid,
        "checked": rec.outcome.checked,
        "rel_error": rec.outcome.rel_error,
        "tolerance": rec.declaration.tolerance,
    }


@pytest.fixture
def roofline(request: pytest.FixtureRequest) -> Callable[..., Any]:
    """``roofline(fn, *args, flops=..., reads=..., writes=..., **measure_options)``."""
    state: _State = request.config.stash[_STATE]
    bench = None
    if request.config.pluginmanager.has_plugin("benchmark"):
        bench = request.getfixturevalue("benchmark")
    node = request.node
    callspec = getattr(node, "callspec", None)
    default = getattr(node, "originalname", node.name) + (f"/{callspec.id}" if callspec else "")
    handed: list[str] = []

    def measure(fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        from .door import MeasureError

        kw.setdefault("name", default)
        try:
            rec = state.session.measure(fn, *args, **kw)
        except MeasureError as e:  # a malformed call: one line, the test fails
            pytest.fail(f"roofline: {e}", pytrace=False)
        if rec.outcome.status == "invalid":
            pytest.fail(f"{rec.key}: {rec.outcome.error}", pytrace=False)
        if bench is not None and not handed:
            handed.append(rec.key)
            bench.extra_info.update(extra_info(rec), device=state.session.run.device)
            from .ab import load_during  # the load while it timed: the gate's load rule

            # pytest-benchmark's own timing, for its table and JSON
            bench.extra_info["outside_load"] = load_during(lambda: bench(fn, *args))
        return rec

    return measure


# The A/B fixture (base and new alternately in one test): its own module, registered here.
from .pytest_ab import _roofline_ab_runs, roofline_ab  # noqa: E402,F401
