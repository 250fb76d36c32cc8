"""argparse types shared by the commands: a number read, then checked, with one-line errors
that say the rule ("must be >= 1, got 0")."""

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
