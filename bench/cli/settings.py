"""Every setting a command reads, checked before any work starts: one line, exit 2.

The flags (empty values refused; a single-valued flag given twice with two values refused,
``Once``; the repeatable ``--workload``/``--kernel`` and ``--dtype`` deduplicated, in the
order given; ``--seed`` in [0, 2^63); ``--size`` parsed in Python integers) and the
``ROOFBENCH_*`` environment variables (``ENVIRONMENT``; an empty value is the same as unset;
an unknown name is said in one warning line, since a typo would otherwise be ignored).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..errors import UserError

MAX_SEED = 1 << 63


class Once(argparse.Action):
    """The default action of every flag that takes one value: given twice with two values,
    the command is refused (which one was meant is not for roofbench to guess); given twice
    with the same value, it is taken once."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: str | Sequence[Any] | None, option_string: str | None = None) -> None:
        seen = namespace.__dict__.setdefault("_given", {})
        if option_string and self.dest in seen and seen[self.dest] != values:
            parser.error(f"{'/'.join(self.option_strings)} given twice "
                         f"({seen[self.dest]!r}, {values!r}): give it once")
        if option_string:
            seen[self.dest] = values
        setattr(namespace, self.dest, values)


def _positive_int(name: str, raw: str) -> None:
    try:
        ok = int(raw) >= 0
    except ValueError:
        ok = False
    if not ok:
        raise UserError(f"{name}={raw!r}: give a number of bytes (an integer >= 0)")


def _timeout(name: str, raw: str) -> None:
    from roofbench.bench.suite.isolation import case_timeout

    case_timeout()  # reads the variable itself: a UserError when not a positive number


def _flag01(name: str, raw: str) -> None:
    if raw not in ("0", "1"):
        raise UserError(f"{name}={raw!r}: give 1 (on) or 0 (off)")


def _folder(name: str, raw: str) -> None:
    p = Path(raw)
    while not p.exists() and p != p.parent:
        p = p.parent
    if p.exists() and not p.is_dir():
        raise UserError(f"{name}={raw!r}: {p} is a file, not a folder")


def _plugins(name: str, raw: str) -> None:
    from roofbench.plugins import plugin_modules

    plugin_modules()  # a plug-in that does not import (or exits) is a PluginError, one line


def _ncu(name: str, raw: str) -> None:
    if not (Path(raw).is_file() and os.access(raw, os.X_OK)):
        raise UserError(f"{name}={raw!r}: not an executable file (the Nsight Compute CLI)")


def _anything(name: str, raw: str) -> None:
    return None


# name -> its check (raises UserError); read where they are used, checked here first.
ENVIRONMENT: dict[str, Callable[[str, str], None]] = {
    "ROOFBENCH_HOME": _folder,
    "ROOFBENCH_PLUGINS": _plugins,
    "ROOFBENCH_NT_THRESHOLD": _positive_int,
    "ROOFBENCH_STREAM_THRESHOLD": _positive_int,
    "ROOFBENCH_CASE_TIMEOUT_S": _timeout,
    "ROOFBENCH_BOUNDED_WAIT": _flag01,
    "ROOFBENCH_NCU": _ncu,
    "ROOFBENCH_DEBUG": _anything,
    "ROOFBENCH_NO_INSTALL": _anything,  # read by scripts/setup_env.sh
    "ROOFBENCH_UPDATE_DOCS": _anything,  # read by tests that regenerate docs figures
}


def check_environment(environ: dict[str, str] | None = None) -> None:
    env = os.environ if environ is None else environ
    for name, raw in sorted(env.items()):
        if not name.startswith("ROOFBENCH_") or not raw:
            continue
        check = ENVIRONMENT.get(name)
        if check is None:
            print(f"roofbench: warning: {name} is not a roofbench setting (ignored); known: "
                  f"{', '.join(sorted(ENVIRONMENT))}", file=sys.stderr)
            continue
        check(name, raw)


def check_flags(args: argparse.Namespace) -> None:
    vars(args).pop("_given", None)  # Once's record of the flags given
    for dest, v in vars(args).items():
        flag = "--" + dest.replace("_", "-")
        if isinstance(v, str) and not v.strip():
            raise UserError(f"{flag} is empty: give a value, or leave {flag} out for the default")
        if isinstance(v, list) and any(isinstance(x, str) and not x.strip() for x in v):
            raise UserError(f"{flag} has an empty value")
    for dest in ("workload", "dtype"):
        v = getattr(args, dest, None)
        if isinstance(v, list):
            setattr(args, dest, list(dict.fromkeys(v)))  # repeated: taken once, in order
    seed = getattr(args, "seed", None)
    if seed is not None and not 0 <= seed < MAX_SEED:
        raise UserError(f"--seed must be in [0, 2^63), got {seed}")
    size = getattr(args, "size", None)
    if isinstance(size, str) and getattr(args, "func", None) is not None and \
            getattr(args, "command", "") in ("run", "bench"):
        from roofbench.bench.suite.session import parse_size

        parse_size(size)
    for dest in ("threshold", "timeout", "margin"):
        v = getattr(args, dest, None)
        if isinstance(v, float) and not math.isfinite(v):
            raise UserError(f"--{dest} must be a finite number, got {v}")


def check_settings(args: argparse.Namespace) -> None:
    """The flags of this command, then the environment: one line and exit 2 for the first
    that is wrong, before anything is measured or written."""
    check_flags(args)
    check_environment()
