"""The `roofbench` command line.

Each subcommand lives in a module of this folder that defines
``register(subparsers)``; add the module to COMMANDS to expose it. Every command runs inside
the one error boundary (roofbench/boundary.py): a refusal (UserError, a bad plug-in), an
OSError, memory exhausted, a stop signal at any moment, each becomes one line and a documented
exit code; no traceback reaches the user for them.
"""

from __future__ import annotations

import argparse
import importlib
from typing import Any, NoReturn

from ...boundary import guarded

COMMANDS = [
    "roofbench.bench.cli.listing",
    "roofbench.bench.cli.run",
    "roofbench.bench.cli.occupancy",
    "roofbench.bench.cli.plot",
    "roofbench.bench.cli.report",
    "roofbench.bench.cli.compare",
    "roofbench.bench.cli.ab",
    "roofbench.bench.cli.tune",
    "roofbench.bench.cli.fleet",
    "roofbench.bench.cli.distributed",
    "roofbench.bench.cli.calibrate",
    "roofbench.bench.cli.roofs",
    "roofbench.bench.cli.specs",
    "roofbench.bench.cli.model",
    "roofbench.bench.cli.trace",
]


class _Parser(argparse.ArgumentParser):
    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        from .settings import Once

        self.register("action", None, Once)  # a one-value flag given twice: refused
        self.register("action", "store", Once)

    def error(self, message: str) -> NoReturn:  # one line, exit 2, like every other user error
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="roofbench", description="GPU kernel micro-benchmarks on the Roofline model.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for mod_name in COMMANDS:
        importlib.import_module(mod_name).register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    def command() -> int:
        args = build_parser().parse_args(argv)
        from .settings import check_settings

        check_settings(args)  # every flag and ROOFBENCH_* variable, before any work
        return int(args.func(args) or 0)

    return guarded(command, late_stop=argv is None)  # the process's own command line

