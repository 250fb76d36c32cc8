"""argparse pieces shared by the commands: numbers read, then checked, with one-line errors
that say the rule ("must be >= 1, got 0"); the arguments of a command on a stored run; the
``--out`` of a command that writes a new run folder."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T", int, float)


def checked(convert: Callable[[str], T], ok: Callable[[T], bool], rule: str,
            what: str = "a number") -> Callable[[str], T]:
    """An argparse ``type``: ``convert`` the text, then require ``ok`` of the value."""

    def parse(s: str) -> T:
        try:
            v = convert(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not {what}: {s!r}") from None
        if not ok(v):
            raise argparse.ArgumentTypeError(f"{rule}, got {s}")
        return v

    return parse


def stored_run_parser(sub: argparse._SubParsersAction, name: str, help: str,
                      out_help: str) -> argparse.ArgumentParser:
    """A command that rebuilds something from a stored run: its ``run`` and ``--out``."""
    p = sub.add_parser(name, help=help)
    p.add_argument("run", help="run folder or its results.json")
    p.add_argument("--out", help=out_help)
    return p


def out_folder(p: argparse.ArgumentParser, name: str) -> None:
    """``--out DIR``, said with the folder a run gets without it (``make_run_dir``'s
    results/<device>/<stamp>-``name``)."""
    p.add_argument("--out", metavar="DIR",
                   help=f"output folder (default results/<device>/<stamp>-{name})")
