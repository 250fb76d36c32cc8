"""The cases of a results.json as flat dicts, whatever its version: a test that reads a file
a run has just written (nested, version 4 on) asks for fields by their names alone."""

from __future__ import annotations

from typing import Any

from roofbench.legacy import FLAT_CASE_GROUPS


def flat_case(c: dict[str, Any]) -> dict[str, Any]:
    """A case with every group's fields side by side, and ``valid`` beside the status (as
    versions 1 to 3 stored it); a flat case as it is."""
    if "identity" not in c:
        return c
    out = {k: v for g in FLAT_CASE_GROUPS for k, v in c[g].items()}
    return {**out, "valid": out["status"] == "ok"}


def flat_cases(d: dict[str, Any]) -> list[dict[str, Any]]:
    return [flat_case(c) for c in d["cases"]]
