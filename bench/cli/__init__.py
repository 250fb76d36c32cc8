"""The `roofbench` command line.

Each subcommand lives in a module of this folder that defines
``register(subparsers)``; add the module to COMMANDS to expose it. Errors a user can cause are
raised as UserError and printed as one line (exit 2); no traceback reaches the user for them.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import NoReturn

from ...plugins import PluginError
from ..errors import UserError

COMMANDS = [
    "roofbench.bench.cli.listing",
    "roofbench.bench.cli.run",
    "roofbench.bench.cli.plot",
    "roofbench.bench.cli.report",
    "roofbench.bench.cli.compare",
    "roofbench.bench.cli.fleet",
    "roofbench.bench.cli.distributed",
    "roofbench.bench.cli.calibrate",
    "roofbench.bench.cli.roofs",
    "roofbench.bench.cli.specs",
]


class _Parser(argparse.ArgumentParser):
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
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (UserError, PluginError) as e:  # a bad $ROOFBENCH_PLUGINS entry is a user error
        print(f"roofbench: error: {e}", file=sys.stderr)
        return e.code
    except KeyboardInterrupt:
        print("roofbench: interrupted", file=sys.stderr)
        return 130

