"""One line for an error, shared by every folder: reasons in tables, results files and
messages stay one line however long the exception's text is."""

from __future__ import annotations


def first_line(e: BaseException | str, *, typed: bool = True) -> str:
    """'Type: first line of the message' ('Type' alone when the message is empty).

    ``typed=False`` gives the message's first line alone, still the type name when it is
    empty. A string (a reason already in words) gives its first line, '' when blank."""
    lines = str(e).strip().splitlines()
    line = lines[0].strip() if lines else ""
    if isinstance(e, str):
        return line
    name = type(e).__name__
    if not line:
        return name
    return f"{name}: {line}" if typed else line
