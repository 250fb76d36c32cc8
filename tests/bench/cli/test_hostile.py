"""A hostile user, in-process: every entry of HOSTILE is one attempt (an argument, a file, an
environment, an injected fault) that must end cleanly: the documented exit code, one line on
stderr naming the cause, no traceback, and no input or run file replaced.

``pytest tests/bench/cli/test_hostile.py -q -k count -s`` prints how many attempts the hostile
tests make in all (this table, the property tests and the process tests).
"""

from __future__ import annotations

import errno
import hashlib
import importlib
import io
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from roofbench.bench.cli import main
from roofbench.bench.errors import UserError
from roofbench.bench.results import load_run
from roofbench.bench.suite.session import MAX_ELEMENTS, parse_size
from testpaths import REAL_CPU_RUN

import roofbench.fileio


def _digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in folder.glob("results.*")}


def _bad_case(field_path: str, value: Any) -> Callable[[dict], None]:
    def plant(d: dict) -> None:
        c = d["cases"][0]
        *head, last = field_path.split(".")
        for k in head:
            c = c[int(k)] if isinstance(c, list) else c[k]
        if isinstance(c, list):
            c[int(last)] = value
        else:
            c[last] = value
    return plant


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@dataclass
class Hostile:
    """One attempt: ``argv`` ('{run}', '{tmp}' filled in), what ``setup`` plants first, and
    what must come out (``code``; ``says``: words of the one stderr line; ``note``: words of
    a note the rebuilt report must carry)."""

    id: str
    argv: list[str]
    code: int
    says: str = ""
    env: dict[str, str] = field(default_factory=dict)
    plant: Callable[[dict], None] | None = None  # edits the results.json dict
    setup: Callable[[Path, Path, pytest.MonkeyPatch], None] | None = None
    note: str = ""


def _enospc_on_write(tmp: Path, run: Path, mp: pytest.MonkeyPatch) -> None:
    def full(path: Path, data: bytes, **kw: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(path))
    mp.setattr(roofbench.fileio, "atomic_write_bytes", full)
    for mod in ("roofbench.bench.present.plot",):  # imported here: run alone, it was not yet
        mp.setattr(importlib.import_module(mod), "atomic_write_bytes", full, raising=False)


def _efbig_on_write(tmp: Path, run: Path, mp: pytest.MonkeyPatch) -> None:
    real = roofbench.fileio.os.fdopen

    class Limited(io.RawIOBase):
        def __init__(self, fd: int, mode: str) -> None:
            self.f = real(fd, mode)

        def write(self, b: Any) -> int:
            raise OSError(errno.EFBIG, "File too large")

        def fileno(self) -> int:
            return self.f.fileno()

        def close(self) -> None:
            self.f.close()
    mp.setattr(roofbench.fileio.os, "fdopen", lambda fd, mode: Limited(fd, mode))


def _raise_in_render(exc: BaseException) -> Callable[[Path, Path, pytest.MonkeyPatch], None]:
    def setup(tmp: Path, run: Path, mp: pytest.MonkeyPatch) -> None:
        import roofbench.bench.present.report as report

        def boom(*a: Any, **kw: Any) -> str:
            raise exc
        mp.setattr(report, "render", boom)
    return setup


def _no_search_permission(tmp: Path, run: Path, mp: pytest.MonkeyPatch) -> None:
    real = Path.stat

    def stat(self: Path, *a: Any, **kw: Any) -> Any:  # root ignores chmod 000: injected
        if self.name == "results.json":
            raise PermissionError(errno.EACCES, "Permission denied", str(self))
        return real(self, *a, **kw)
    mp.setattr(Path, "stat", stat)


def _file(name: str, text: str | bytes) -> Callable[[Path, Path, pytest.MonkeyPatch], None]:
    def setup(tmp: Path, run: Path, mp: pytest.MonkeyPatch) -> None:
        p = tmp / name
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            p.write_bytes(text)
        else:
            p.write_text(text)
    return setup


def _copy_results_as(name: str) -> Callable[[Path, Path, pytest.MonkeyPatch], None]:
    def setup(tmp: Path, run: Path, mp: pytest.MonkeyPatch) -> None:
        (tmp / name).write_bytes((run / "results.json").read_bytes())
    return setup


def _exiting_plugin(tmp: Path, run: Path, mp: pytest.MonkeyPatch) -> None:
    (tmp / "exits_on_import.py").write_text("import sys\nsys.exit(3)\n")
    mp.syspath_prepend(str(tmp))
    from roofbench import plugins
    plugins._load.cache_clear()


RUN = ["run", "--backend", "cpu", "--quick", "--kernel", "vector_add", "--dtype", "fp32"]

HOSTILE: list[Hostile] = [
    # -- outputs that would replace an input or a run's own files
    Hostile("report-out-onto-results.json", ["report", "{run}", "--out", "{run}/results.json"],
            2, "results.json"),
    Hostile("report-out-onto-results.csv", ["report", "{run}", "--out", "{run}/results.csv"],
            2, "run's own file"),
    Hostile("report-out-onto-renamed-results", ["report", "{run}", "--out", "{tmp}/copy.md"],
            2, "results file", setup=_copy_results_as("copy.md")),
    Hostile("report-out-html-onto-results", ["report", "{run}", "--out", "{tmp}/x.md"], 2,
            "results file", setup=_copy_results_as("x.html")),
    Hostile("plot-out-onto-results", ["plot", "{run}", "--out", "{tmp}/p"], 2, "results file",
            setup=_copy_results_as("p.png")),
    Hostile("roofs-out-onto-results", ["roofs", "--backend", "cpu", "--quick", "--out",
                                       "{run}/results.json"], 2, "run's own file"),
    Hostile("roofs-out-onto-renamed-results", ["roofs", "--backend", "cpu", "--quick", "--out",
                                               "{tmp}/r.json"], 2, "results file",
            setup=_copy_results_as("r.json")),
    Hostile("roofs-out-a-folder", ["roofs", "--backend", "cpu", "--quick", "--out", "{tmp}"],
            2, "folder"),
    Hostile("roofs-out-under-a-file", ["roofs", "--backend", "cpu", "--quick", "--out",
                                       "{run}/results.json/x.json"], 2, "under a file"),
    Hostile("roofs-compare-onto-input", ["roofs", "--compare", "{run}/results.json",
                                         "{tmp}/b.png", "--out", "{tmp}/b"], 2, "input",
            setup=_copy_results_as("b.png")),
    Hostile("report-out-a-folder", ["report", "{run}", "--out", "{tmp}"], 2, "folder"),
    Hostile("report-out-under-a-file", ["report", "{run}", "--out",
                                        "{run}/results.csv/r.md"], 2, "under a file"),
    Hostile("report-out-empty", ["report", "{run}", "--out", ""], 2, "empty"),
    # -- writes the operating system refuses
    Hostile("report-disk-full", ["report", "{run}", "--out", "{tmp}/r.md"], 3, "ENOSPC",
            setup=_enospc_on_write),
    Hostile("plot-disk-full", ["plot", "{run}", "--out", "{tmp}/p"], 3, "ENOSPC",
            setup=_enospc_on_write),
    Hostile("report-file-size-limit", ["report", "{run}", "--out", "{tmp}/r.md"], 3, "EFBIG",
            setup=_efbig_on_write),
    Hostile("report-memory", ["report", "{run}", "--out", "{tmp}/r.md"], 4, "out of memory",
            setup=_raise_in_render(MemoryError())),
    Hostile("report-ctrl-c", ["report", "{run}", "--out", "{tmp}/r.md"], 130, "SIGINT",
            setup=_raise_in_render(KeyboardInterrupt())),
    Hostile("report-recursion", ["report", "{run}", "--out", "{tmp}/r.md"], 2, "nested",
            setup=_raise_in_render(RecursionError())),
    Hostile("report-eisdir", ["report", "{run}", "--out", "{tmp}/r.md"], 3, "EISDIR",
            setup=_raise_in_render(IsADirectoryError(errno.EISDIR, "Is a directory", "x"))),
    # -- inputs that are not results files
    Hostile("results-no-search-permission", ["report", "{run}"], 2, "Permission denied",
            setup=_no_search_permission),
    Hostile("results-dev-zero", ["report", "/dev/zero"], 2, "not a regular file"),
    Hostile("results-deeply-nested", ["report", "{tmp}/deep.json"], 2, "nested",
            setup=_file("deep.json", _nested(100_000))),
    Hostile("results-empty-file", ["report", "{tmp}/empty.json"], 2, "not a readable",
            setup=_file("empty.json", "")),
    Hostile("results-binary", ["report", "{tmp}/bin.json"], 2, "not a readable",
            setup=_file("bin.json", b"\xff\xfe\x00garbage")),
    Hostile("results-wrong-schema", ["report", "{tmp}/w.json"], 2, "schema",
            setup=_file("w.json", '{"schema": "other"}')),
    Hostile("results-cases-not-a-list", ["report", "{tmp}/c.json"], 2, "cases",
            setup=_file("c.json", '{"schema": "roofbench.results", "schema_version": 3, '
                                  '"backend": "cpu", "device": "x", "cases": 7}')),
    Hostile("results-missing", ["plot", "{tmp}/nothing"], 2, "no results"),
    Hostile("results-empty-path", ["report", ""], 2, "empty"),
    Hostile("compare-missing", ["compare", "{tmp}/a", "{tmp}/b"], 2, "no results"),
    # -- numbers a reader must not use: the case is named unreadable, the rest rendered
    *[Hostile(f"case-{name}", ["report", "{run}", "--out", "{tmp}/r.md"], 0, note="unreadable",
              plant=_bad_case(path, value))
      for name, path, value in [
          ("nan-time", "median_s", math.nan), ("inf-time", "median_s", math.inf),
          ("negative-time", "median_s", -1e-3), ("zero-time", "median_s", 0.0),
          ("string-time", "median_s", "fast"), ("negative-flops", "flops", -5),
          ("float-flops", "flops", 1.5), ("nan-bytes", "bytes.dram", math.nan),
          ("negative-bytes", "bytes.dram", -1), ("inf-rate", "flop_per_s", math.inf),
          ("nan-sample", "timing.samples_s.0", math.nan),
          ("negative-sample", "timing.samples_s.1", -2.0),
          ("negative-size", "size.0", -4), ("zero-size", "size.0", 0),
          ("size-not-a-list", "size", "big"), ("bool-flops", "flops", True),
          ("launch-negative-flops", "launches.0.flops", -1),
          ("no-workload", "workload", None)]],
    Hostile("case-not-an-object", ["report", "{run}", "--out", "{tmp}/r.md"], 0,
            note="unreadable", plant=lambda d: d["cases"].insert(0, 42)),
    Hostile("plot-nan-time", ["plot", "{run}", "--out", "{tmp}/p"], 0,
            plant=_bad_case("median_s", math.nan)),
    # -- settings, checked before anything runs
    Hostile("size-2^1000", [*RUN, "--size", "2^1000", "--out", "{tmp}/o"], 2, "too large"),
    Hostile("size-3d-int64-wrap", ["run", "--backend", "cpu", "--kernel", "gemm", "--size",
                                   "2^22x2^21x2^21", "--out", "{tmp}/o"], 2, "too large"),
    Hostile("size-huge-exponent", [*RUN, "--size", "10^999999999", "--out", "{tmp}/o"], 2,
            "too large"),
    Hostile("size-empty", [*RUN, "--size", "", "--out", "{tmp}/o"], 2, "empty"),
    Hostile("size-negative-power", [*RUN, "--size", "2^-3", "--out", "{tmp}/o"], 2,
            "positive"),
    Hostile("size-given-twice", [*RUN, "--size", "1k", "--size", "2k"], 2, "twice"),
    Hostile("seed-negative", [*RUN, "--seed", "-1", "--out", "{tmp}/o"], 2, "seed"),
    Hostile("seed-2^64", [*RUN, "--seed", str(2**64), "--out", "{tmp}/o"], 2, "seed"),
    Hostile("out-empty", [*RUN, "--out", ""], 2, "empty"),
    Hostile("out-under-a-file", [*RUN, "--out", "{run}/results.json/o"], 2, "under a file"),
    Hostile("backend-given-twice", ["run", "--backend", "cpu", "--backend", "sim"], 2, "twice"),
    Hostile("env-nt-threshold-garbage", [*RUN, "--out", "{tmp}/o"], 2,
            "ROOFBENCH_STREAM_THRESHOLD", env={"ROOFBENCH_STREAM_THRESHOLD": "garbage"}),
    Hostile("env-nt-threshold-negative", [*RUN, "--out", "{tmp}/o"], 2,
            "ROOFBENCH_NT_THRESHOLD", env={"ROOFBENCH_NT_THRESHOLD": "-1"}),
    Hostile("env-case-timeout-nan", [*RUN, "--out", "{tmp}/o"], 2, "ROOFBENCH_CASE_TIMEOUT_S",
            env={"ROOFBENCH_CASE_TIMEOUT_S": "nan"}),
    Hostile("env-case-timeout-inf", [*RUN, "--out", "{tmp}/o"], 2, "ROOFBENCH_CASE_TIMEOUT_S",
            env={"ROOFBENCH_CASE_TIMEOUT_S": "inf"}),
    Hostile("env-bounded-wait-yes", [*RUN, "--out", "{tmp}/o"], 2, "ROOFBENCH_BOUNDED_WAIT",
            env={"ROOFBENCH_BOUNDED_WAIT": "yes"}),
    Hostile("env-home-a-file", [*RUN], 2, "ROOFBENCH_HOME",
            env={"ROOFBENCH_HOME": "{run}/results.json"}),
    Hostile("env-ncu-not-executable", [*RUN, "--out", "{tmp}/o"], 2, "ROOFBENCH_NCU",
            env={"ROOFBENCH_NCU": "{run}/results.csv"}),
    Hostile("env-plugin-missing", ["list"], 2, "no_such_plugin_module",
            env={"ROOFBENCH_PLUGINS": "no_such_plugin_module"}),
    Hostile("env-plugin-sys-exit", ["list"], 2, "exits_on_import",
            env={"ROOFBENCH_PLUGINS": "exits_on_import"}, setup=_exiting_plugin),
    Hostile("roofs-compare-with-backend", ["roofs", "--compare", "{run}", "{run}", "--backend",
                                           "cpu"], 2, "--backend"),
    Hostile("roofs-compare-with-quick", ["roofs", "--compare", "{run}", "{run}", "--quick"], 2,
            "--quick"),
    Hostile("fleet-timeout-nan", ["fleet", "calibrate", "--timeout", "nan"], 2, "timeout"),
]


def _fill(s: str, tmp: Path, run: Path) -> str:
    return s.replace("{run}", str(run)).replace("{tmp}", str(tmp))


@pytest.mark.parametrize("h", HOSTILE, ids=[h.id for h in HOSTILE])
def test_hostile(h: Hostile, tmp_path: Path, run_dir: Path, monkeypatch, capsys):
    if h.plant is not None:
        d = json.loads((run_dir / "results.json").read_text())
        h.plant(d)
        (run_dir / "results.json").write_text(json.dumps(d, indent=1))
    monkeypatch.chdir(tmp_path)
    for k, v in h.env.items():
        monkeypatch.setenv(k, _fill(v, tmp_path, run_dir))
    if h.setup is not None:
        h.setup(tmp_path, run_dir, monkeypatch)
    before = _digest(run_dir)
    try:
        code = main([_fill(a, tmp_path, run_dir) for a in h.argv])
    except SystemExit as e:  # argparse's own refusals: one line, exit 2
        code = e.code
    err = capsys.readouterr().err
    assert code == h.code, err
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ln.startswith("roofbench")]
    if h.code != 0:
        assert len(lines) == 1, err
        assert h.says.lower() in lines[0].lower(), err
    assert _digest(run_dir) == before  # no input and no run file replaced
    assert not (tmp_path / "o").exists() or not list((tmp_path / "o").rglob("results.json"))
    if h.note:
        assert h.note in (tmp_path / "r.md").read_text()


def test_a_nan_time_is_neither_a_point_nor_in_the_key(run_dir: Path):
    d = json.loads((run_dir / "results.json").read_text())
    bad_key = "/".join(str(d["cases"][0][k]) for k in ("workload", "variant", "dtype"))
    d["cases"][0]["median_s"] = math.nan
    (run_dir / "results.json").write_text(json.dumps(d))
    run = load_run(run_dir)
    from roofbench.bench.present.figure_data import valid_points

    assert len(run.cases) == 3
    run.cases[0].measurement.median_s = math.nan  # in memory too: never a point
    pts = valid_points(run.cases)
    assert len(pts) == 2 and all(math.isfinite(p.flops) and p.ai > 0 for p in pts)
    assert any(n.startswith(f"unreadable case {bad_key}") for n in run.notes)


# -- property-based: sizes, results files, paths ----------------------------------------------

@given(st.text(max_size=24))
@settings(max_examples=300, deadline=None)
def test_any_size_text_parses_or_is_one_line(text: str):
    try:
        dims = parse_size(text)
    except UserError as e:
        assert "\n" not in str(e)
        return
    assert all(isinstance(n, int) and n > 0 for n in dims)
    assert math.prod(dims) <= MAX_ELEMENTS


@given(st.lists(st.one_of(st.integers(0, 2**70), st.integers(0, 80).map(lambda e: f"2^{e}")),
                min_size=1, max_size=4))
@settings(max_examples=300, deadline=None)
def test_big_dimension_products_never_wrap(parts: list):
    text = "x".join(map(str, parts))
    try:
        dims = parse_size(text)
    except UserError:
        values = [p if isinstance(p, int) else 2 ** int(p[2:]) for p in parts]
        assert 0 in values or math.prod(values) > MAX_ELEMENTS
        return
    assert math.prod(dims) <= MAX_ELEMENTS


NUMBERS = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10, 10**20),
                    st.text(max_size=3), st.none(), st.booleans())


@given(st.dictionaries(st.sampled_from(["median_s", "flops", "flop_per_s", "efficiency",
                                        "attainable"]), NUMBERS, max_size=3))
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_any_numbers_in_a_case_read_or_are_named(fields: dict):
    from roofbench.bench.results import declared_buffers

    from roofbench.readers import read_run

    d = json.loads(REAL_CPU_RUN.read_text())
    d["cases"] = d["cases"][:2]
    d["cases"][0].update(fields)
    run = read_run(d, declared_buffers)
    named = [n for n in run.notes if n.startswith("unreadable case")]
    assert len(run.cases) + len(named) == 2
    for c in run.cases:
        for v in (
            c.measurement.median_s,
            c.roofline.flop_per_s,
            c.roofline.efficiency,
            c.roofline.attainable,
        ):
            assert v is None or (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0)


@given(name=st.text(alphabet=st.characters(blacklist_categories=["Cs"],
                                           blacklist_characters="\0/"), min_size=1, max_size=12))
@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_output_path_writes_or_is_one_line(name: str, tmp_path: Path, run_dir: Path,
                                               capsys):
    before = _digest(run_dir)
    out = run_dir / name
    code = main(["report", str(run_dir), "--out", str(out)])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if code == 0:
        assert out.is_file()
    else:
        assert code in (2, 3) and len(err.strip().splitlines()) == 1, err
    assert _digest(run_dir) == before


def test_count(capsys):
    """How many hostile attempts the tests make (printed with -s): this table, the property
    examples, and the process tests (tests/bench/cli/test_hostile_processes.py)."""
    import importlib
    import importlib.util

    def load(path: Path) -> Any:
        spec = importlib.util.spec_from_file_location(f"hostile_{path.stem}", path)
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod

    here = Path(__file__).parent
    procs = load(here / "test_hostile_processes.py")
    PROCESS_ATTEMPTS = procs.PROCESS_ATTEMPTS + procs.FLEET_ATTEMPTS
    # the API, the plugin, roofs files and the user's environment (their own tables)
    users = (load(here.parent / "measure" / "test_hostile_api.py").ATTEMPTS
             + load(here.parent / "pytest" / "test_hostile_plugin.py").PLUGIN_ATTEMPTS
             + load(here / "test_hostile_user.py").ATTEMPTS
             # model, profile(), ab and compare (issue 39)
             + importlib.import_module(f"{__package__}.test_hostile_surfaces").SURFACE_ATTEMPTS
             # issue 57: stops and exits, files and permissions, the test store
             + importlib.import_module(f"{__package__}.test_hostile_stops").STOP_ATTEMPTS
             + load(here / "test_hostile_records.py").RECORD_ATTEMPTS
             + load(here.parents[1] / "kernels" / "test_codegen_store_hostile.py").STORE_ATTEMPTS)

    props = 300 + 300 + 200 + 15  # the max_examples of the four properties
    # besides the table: the NaN point, the run that cannot save, one stamp in 16 threads
    table = len(HOSTILE) + 3
    total = table + props + PROCESS_ATTEMPTS + users
    with capsys.disabled():
        print(f"\nhostile attempts: {table} in-process + up to {props} property examples + "
              f"{PROCESS_ATTEMPTS} in processes (the fleet's under mpirun) + {users} of the "
              f"API, the plugin, roofs files, the environment, the newest surfaces "
              f"(model, profile, ab, compare), stops, files and the test store = {total}")
    assert total > 300


def test_a_run_that_cannot_save_stops_and_records_it(tmp_path: Path, roofs_file: Path,
                                                     monkeypatch, capsys):
    """ENOSPC on the save after the first case (the disk frees again at once): exit 3, one
    line naming the file and the cause; results.json keeps the first case and says the run
    was cut short, in which phase, and why."""
    import roofbench.bench.suite.session as session

    real, calls = session.save_run, []

    def save(run, out):  # noqa: ANN001
        calls.append(len(run.cases))
        if len(calls) == 3:  # folder made, roofs set, then the first case: this save fails
            raise OSError(errno.ENOSPC, "No space left on device", str(out / "results.json"))
        return real(run, out)
    monkeypatch.setattr(session, "save_run", save)
    code = main(["run", "--backend", "cpu", "--quick", "--kernel", "l2norm", "--dtype", "fp32",
                 "--size", "1k", "--roofs", str(roofs_file), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    (line,) = [ln for ln in err.splitlines() if ln.startswith("roofbench")]
    assert code == 3 and "ENOSPC" in line and "results.json" in line, err
    (path,) = (tmp_path / "o").glob("*/*/results.json")
    run = load_run(path)
    assert run.interrupted and run.stop is not None
    assert (run.stop.cause, run.stop.phase) == ("os-error", "cases")
    assert "ENOSPC" in run.stop.detail
    assert len([c for c in run.cases if c.outcome.status != "unsupported"]) == 1


def test_runs_stamped_in_one_instant_get_folders_of_their_own(tmp_path: Path):
    """Sixteen threads make a run folder with one stamp at once: sixteen folders (exclusive
    mkdir, a suffix on collision), each returned to exactly one of them."""
    from concurrent.futures import ThreadPoolExecutor

    from roofbench.bench.results import make_run_dir

    with ThreadPoolExecutor(16) as pool:
        got = list(pool.map(lambda _: make_run_dir(tmp_path, "AMD EPYC", "20261201T000000Z"),
                            range(16)))
    assert len(set(got)) == 16 and all(p.is_dir() for p in got)
    assert sorted(p.name for p in got) == sorted(
        ["20261201T000000Z"] + [f"20261201T000000Z-{i}" for i in range(2, 17)])
