"""What the pytest plug-in keeps for one pytest run (``PluginState``, under the config's
stash key ``STATE``): its options checked once, the measuring session its fixtures add to,
the pytest-xdist workers' runs merged at the end (``merge_workers``). Both fixture modules,
``plugin`` (``roofline``) and ``ab_fixture`` (``roofline_ab``), read it from here;
it imports neither.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest


class PluginState:
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
            from roofbench.bench.measure.api import Session

            self._session = Session(out=self.out, roofs=self.roofs, quick=self.quick)
        return self._session

    @property
    def run(self) -> Any:
        if self.merged is not None:
            return self.merged
        return self.own_run

    @property
    def own_run(self) -> Any:
        """This process's run (None before its first case): never the workers' merged one."""
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

    from roofbench.bench.present.outputs import write_outputs
    from roofbench.bench.results import claim_folder, load_run, save_run

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


STATE = pytest.StashKey[PluginState]()
