"""What a command that measures nothing costs to start: `roofbench --help` and `roofbench
compare` import neither pandas (results.csv's table) nor Numba (the CPU kernels and the roof
samplers), about a second of CPU each at every start; they load where a command uses them."""

from __future__ import annotations

import subprocess
import sys

from patience import patience
from roofbench.bench.results import load_run, save_run

HEAVY = ("pandas", "numba")
# A module every command imports, watched beside them: the probe is seen to see an import,
# so that an answer without pandas and Numba is a finding, not a blind probe.
WITNESS = "argparse"
# The command run as `python -m roofbench.bench.cli` runs it, and at exit (whichever way the
# command ends) the watched modules it imported, on one line.
PROBE = """
import atexit, runpy, sys
atexit.register(lambda: print("IMPORTED:" + ",".join(
    m for m in {watched!r} if m in sys.modules), file=sys.stderr, flush=True))
sys.argv = ["roofbench", *sys.argv[1:]]
runpy.run_module("roofbench.bench.cli", run_name="__main__")
"""


def watched_imports(*args: str) -> tuple[int, list[str]]:
    """(exit code, the watched modules imported) of `roofbench ARGS` in a fresh process."""
    p = subprocess.run([sys.executable, "-c", PROBE.format(watched=(WITNESS, *HEAVY)), *args],
                       capture_output=True, text=True, timeout=patience(120))
    (line,) = [x for x in p.stderr.splitlines() if x.startswith("IMPORTED:")]
    return p.returncode, [m for m in line.removeprefix("IMPORTED:").split(",") if m]


def test_help_imports_neither_pandas_nor_numba():
    assert watched_imports("--help") == (0, [WITNESS])


def test_compare_imports_neither_pandas_nor_numba(run_dir, tmp_path):
    """compare reads two runs and writes its report and figure: no table, no kernel. The runs
    are written as today's runs are (a file of before version 3 asks the workloads for its
    buffers, which imports their kernels)."""
    run = load_run(run_dir)
    for side in ("a", "b"):
        (tmp_path / side).mkdir()
        save_run(run, tmp_path / side)
    assert watched_imports("compare", str(tmp_path / "a"), str(tmp_path / "b"), "--out",
                           str(tmp_path / "cmp")) == (0, [WITNESS])
