"""The session's cost by file (tests/conftest.py's "slowest files", printed with --durations):
the wall time and the CPU of each file's tests, children included, through xdist's workers."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from patience import patience
from testpaths import TESTS

# CPU spent for sure (process time, not wall: load cannot shorten or stretch it)
BURN = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass\n"
FILES = {
    "test_burn.py": f"import subprocess, sys\nBURN = {BURN!r}\n"
                    "def test_here():\n    exec(BURN)\n"
                    "def test_child():\n"
                    "    subprocess.run([sys.executable, '-c', BURN], check=True)\n",
    "test_sleep.py": "import time\ndef test_sleep():\n    time.sleep(0.3)\n",
}


def _session(tmp_path, *args: str) -> str:
    """pytest on FILES with the suite's conftest as a plug-in (loaded by path: tests/ on the
    path would shadow the roofbench package with tests/roofbench/)."""
    suite, plugin = tmp_path / "suite", tmp_path / "plugin"
    suite.mkdir(), plugin.mkdir()
    for name, text in FILES.items():
        (suite / name).write_text(text)
    (plugin / "suite_conftest.py").write_text(
        f"import runpy\nglobals().update(runpy.run_path({str(TESTS / 'conftest.py')!r}))\n")
    env = dict(os.environ, PYTHONPATH=str(plugin), RB_TEST_STORE="off")
    for k in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID",
              "PYTEST_ADDOPTS"):
        env.pop(k, None)
    p = subprocess.run([sys.executable, "-m", "pytest", "-p", "suite_conftest", "-q",
                        "-p", "no:cacheprovider", "-p", "no:randomly", *args, str(suite)],
                       capture_output=True, text=True, cwd=suite, env=env,
                       timeout=patience(300))
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    return p.stdout


def test_slowest_files_sum_each_files_wall_and_cpu_with_children(tmp_path):
    out = _session(tmp_path, "-n", "1", "--durations=0")  # a worker: the CPU rides its reports
    section = out.split("slowest files", 1)[1]
    rows = {m[3]: (float(m[1]), float(m[2]))
            for m in re.finditer(r"^\s*([\d.]+)\s+([\d.]+)\s+(\S+\.py)$", section, re.M)}
    assert set(rows) == {"test_burn.py", "test_sleep.py"}, section
    (burn_wall, burn_cpu), (sleep_wall, sleep_cpu) = rows["test_burn.py"], rows["test_sleep.py"]
    assert burn_cpu >= 0.6 and burn_wall >= burn_cpu - 0.05  # its own 0.3 s and its child's
    assert sleep_wall >= 0.3 and sleep_cpu < 0.3  # waited, not spent
    assert "(2 files:" in section


def test_slowest_files_only_where_durations_are_asked_for(request):
    suite = request.config.pluginmanager.get_plugin(str(TESTS / "conftest.py"))
    costs = {"b.py": [1.0, 3.0], "a.py": [2.0, 0.5], "c.py": [1.0, 0.0]}
    assert suite.slowest_files(costs, n=2) == [
        "  wall s    CPU s  file (3 files: 4.0 s wall, 3.5 s CPU in tests)",
        "     2.0      0.5  a.py", "     1.0      3.0  b.py"]

    class Reporter:
        def __init__(self):
            self.lines = []

        def section(self, title):
            self.lines.append(f"== {title}")

        def write_line(self, line):
            self.lines.append(line)

        stats: dict = {}

    class Config:
        def __init__(self, durations):
            self.durations = durations

        def getoption(self, name, default=None):
            return self.durations if name == "durations" else default

    quiet, asked = Reporter(), Reporter()
    suite.pytest_terminal_summary(quiet, 0, Config(None))
    suite.pytest_terminal_summary(asked, 0, Config(25))
    assert quiet.lines == [] and asked.lines[0] == "== slowest files"
    # --durations=0 lists every file, not the 15 slowest: where all the minutes go
    many = {f"t{i:02d}.py": [float(i), 0.0] for i in range(suite.SLOWEST_FILES + 5)}
    saved = dict(suite._FILE_COSTS)
    try:
        suite._FILE_COSTS.clear()
        suite._FILE_COSTS.update(many)
        top, every = Reporter(), Reporter()
        suite.pytest_terminal_summary(top, 0, Config(25))
        suite.pytest_terminal_summary(every, 0, Config(0))
    finally:
        suite._FILE_COSTS.clear()
        suite._FILE_COSTS.update(saved)
    assert len(top.lines) == 2 + suite.SLOWEST_FILES and len(every.lines) == 2 + len(many)
