"""`roofbench ARGS` called in this process, as the console script calls it: its exit status
(argparse's own SystemExit included) and what it printed. Shared by the CLI tests that read
a command's one-line refusals."""

from __future__ import annotations

import pytest
from roofbench.bench.cli import main


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        rc = main(argv)
    except SystemExit as e:  # argparse's refusals (2) and --help (0)
        rc = int(e.code or 0)
    out, err = capsys.readouterr()
    return rc, out, err
