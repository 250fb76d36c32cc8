"""The pytest plugin (the ``pytest11`` entry point ``roofbench``: installing roofbench is
enough; from a checkout without an install, ``-p roofbench.bench.pytest.plugin``).

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

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from roofbench.bench.pytest.state import STATE, PluginState


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("roofline", "roofbench: your kernels on this device's roofline")
    g.addoption("--roofline-out", metavar="DIR",
                help="write the session's cases as a run: DIR/results.json, report.md, "
                     "report.html, roofline.png")
    g.addoption("--roofline-roofs", metavar="FILE",
                help="place the cases under this roofs file, not the calibration cache")
    g.addoption("--roofline-quick", action="store_true",
                help="short timing (a smoke test; the figures are noisier)")


# The handlers the plug-in replaced (put back at the end), and the stop it saw.
_HANDLERS = pytest.StashKey[dict[int, Any]]()
_LAST_STOP: list[str] = []  # the interrupt hook has no config: this process's one session


def pytest_configure(config: pytest.Config) -> None:
    state = PluginState(config)
    config.stash[STATE] = state
    _LAST_STOP.clear()
    if state.out is not None:  # a session that saves its cases: a stop is recorded, not a kill
        from roofbench.boundary import install_stop_handler

        config.stash[_HANDLERS] = install_stop_handler()  # roofbench's one stop handler


def pytest_unconfigure(config: pytest.Config) -> None:
    import signal

    for s, h in config.stash.get(_HANDLERS, {}).items():
        signal.signal(s, h)  # the process's handlers as found


def pytest_keyboard_interrupt(excinfo: pytest.ExceptionInfo[BaseException]) -> None:
    """Which stop ended the session (Ctrl-C, SIGTERM, SIGHUP): recorded with the run."""
    from roofbench.boundary import signal_name

    if isinstance(excinfo.value, KeyboardInterrupt):
        _LAST_STOP[:] = [signal_name(excinfo.value)]


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """pytest-xdist, on the controller: the folder this worker saves its cases into."""
    state = node.config.stash.get(STATE, None)
    if state is None or state.out is None:
        return
    if state.parts is None:
        import tempfile

        state.parts = Path(tempfile.mkdtemp(prefix="roofbench-xdist-"))
    node.workerinput["roofbench_parts"] = str(state.parts)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    state = session.config.stash.get(STATE, None)
    if state is None:
        return
    from roofbench.boundary import deferred_stops, signal_name
    from roofbench.records import RunStop

    interrupted = exitstatus == pytest.ExitCode.INTERRUPTED
    run = state.own_run
    if interrupted and run is not None:  # stopped among the tests: the cases so far are kept
        run.stop = RunStop(cause="signal", detail=(_LAST_STOP or ["SIGINT"])[-1],
                           phase="cases")
    try:
        state.finish(interrupted=interrupted)
    except KeyboardInterrupt as e:  # stopped while the report was written: said in the run
        if run is not None and state.out is not None and state.worker is None:
            with deferred_stops():
                run.interrupted = True
                run.stop = RunStop(cause="signal", detail=signal_name(e), phase="report")
                state.session.save()
        raise


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int,
                            config: pytest.Config) -> None:
    state = config.stash.get(STATE, None)
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
    state = config.stash.get(STATE, None)
    if state is None or state.own_run is None:
        return
    from roofbench.pytest_benchmark import EXTRA_SCHEMA

    run = state.own_run
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
    state: PluginState = request.config.stash[STATE]
    bench = None
    if request.config.pluginmanager.has_plugin("benchmark"):
        bench = request.getfixturevalue("benchmark")
    node = request.node
    callspec = getattr(node, "callspec", None)
    default = getattr(node, "originalname", node.name) + (f"/{callspec.id}" if callspec else "")
    handed: list[str] = []

    def measure(fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        from roofbench.bench.measure.caller_settings import kept

        with kept():  # the test's threads, dtype, RNG, flags, environment as found
            return _measure(fn, *args, **kw)

    def _measure(fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        from roofbench.bench.measure.door import MeasureError

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
            # the load while it timed: the gate's load rule
            from roofbench.bench.gate.ab_session import load_during

            # pytest-benchmark's own timing, for its table and JSON
            bench.extra_info["outside_load"] = load_during(lambda: bench(fn, *args))
        return rec

    return measure


# The A/B fixture (base and new alternately in one test): its own module, registered here.
from roofbench.bench.pytest.ab_fixture import ab_runs, roofline_ab  # noqa: E402,F401
