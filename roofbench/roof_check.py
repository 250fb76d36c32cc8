"""One schema for a roof as stored: every field checked before a Roof is made of it.

A roofs file (the calibration cache, a bare roof set, a run's results.json, a fleet file) is
read through ``checked_roof`` and ``check_names``: a field of the wrong type (a boolean or a
string for a value), a number that is not finite and positive, an unknown kind, source,
memory level or precision, a misspelled field, or two roofs of one name are one line naming
the roof and the field (``SchemaError``), never a figure of 793,632,553% efficiency.
``figures_problem`` names the cases of a results file whose stored attainable and
efficiency do not follow from its own roofs (a file edited by hand, or roofs swapped).
"""

from __future__ import annotations

import math
from typing import Any

from roofbench.records import CaseResult
from roofbench.roof_records import SOURCE_ORDER, Roof, RoofSet
from roofbench.roofline import LEVELS, PRECISIONS

from .cache_records import read_cache_sweep

KINDS = ("memory", "compute", "interconnect")
FIELDS = {"name", "kind", "value", "source", "level", "precision", "evidence", "median",
          "cache", "unit"}  # "unit" is written (derived from the kind) and ignored on reading


class RoofError(ValueError):
    """A roof as stored that is not a roof (one line naming it and the field)."""


def _where(i: int, d: dict[str, Any]) -> str:
    name = d.get("name")
    return f"roof {i}" + (f" ({name!r})" if isinstance(name, str) else "")


def checked_roof(d: Any, i: int = 0) -> Roof:
    """A Roof from its stored dict, every field checked (``RoofError`` otherwise)."""
    if not isinstance(d, dict):
        raise RoofError(f"roof {i} is {type(d).__name__}, not an object")
    where = _where(i, d)
    unknown = sorted(str(k) for k in d if k not in FIELDS)
    if unknown:
        raise RoofError(f"{where}: unknown field {unknown[0]!r} (a roof has "
                        f"{', '.join(sorted(FIELDS - {'unit'}))})")
    name, kind, value, source = d.get("name"), d.get("kind"), d.get("value"), d.get("source")
    if not isinstance(name, str) or not name.strip():
        raise RoofError(f"{where}: name must be a non-empty string, got {name!r}")
    if kind not in KINDS:
        raise RoofError(f"{where}: kind {kind!r} is not one of {', '.join(KINDS)}")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RoofError(f"{where}: value must be a number, got {type(value).__name__} "
                        f"{value!r}")
    if not (math.isfinite(value) and value > 0):
        raise RoofError(f"{where}: value must be a positive finite number, got {value!r}")
    if source not in SOURCE_ORDER:
        raise RoofError(f"{where}: source {source!r} is not one of {', '.join(SOURCE_ORDER)}")
    level, precision = d.get("level"), d.get("precision")
    if kind == "memory" and level not in LEVELS:
        raise RoofError(f"{where}: memory level {level!r} is not one of {', '.join(LEVELS)}")
    if kind == "interconnect" and (not isinstance(level, str) or not level):
        raise RoofError(f"{where}: an interconnect roof needs a level (a link), got {level!r}")
    if kind == "compute" and precision not in PRECISIONS:
        raise RoofError(f"{where}: precision {precision!r} is not one of "
                        f"{', '.join(PRECISIONS)}")
    if kind != "compute" and precision is not None:
        raise RoofError(f"{where}: a {kind} roof has no precision, got {precision!r}")
    if kind == "compute" and level is not None:
        raise RoofError(f"{where}: a compute roof has no level, got {level!r}")
    evidence = d.get("evidence")
    if evidence is not None and not isinstance(evidence, dict):
        raise RoofError(f"{where}: evidence must be an object, got {type(evidence).__name__}")
    median = d.get("median")  # the probe's median beside its best (absent before, datasheet)
    if median is not None and (isinstance(median, bool) or not isinstance(median, (int, float))
                               or not (math.isfinite(median) and median > 0)):
        raise RoofError(f"{where}: median must be a positive finite number, got {median!r}")
    cache = d.get("cache")  # a CPU cache level's sweep (absent on every other roof)
    if cache is not None and not isinstance(cache, dict):
        raise RoofError(f"{where}: cache must be an object, got {type(cache).__name__}")
    return Roof(name=name, kind=kind, value=value, source=source, level=level,
                precision=precision, evidence=dict(evidence or {}), median=median,
                cache=read_cache_sweep(cache) if cache is not None else None)


def check_names(roofs: list[Roof]) -> None:
    """Two roofs of one name in a set: which one a case's ``limiting_roof`` means is lost."""
    seen: set[str] = set()
    for r in roofs:
        if r.name in seen:
            raise RoofError(f"two roofs are named {r.name!r}: each roof needs a name of its own")
        seen.add(r.name)


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=0.0)


def figures_problem(c: CaseResult, roofs: RoofSet) -> str | None:
    """Why a case's stored attainable or efficiency does not follow from ``roofs`` (None
    when it does, or when the case was not placed)."""
    if c.roofline.attainable is None or not c.roofline.limiting_roof:
        return None
    roof = next((r for r in roofs.roofs if r.name == c.roofline.limiting_roof), None)
    if roof is None:
        return f"its roof {c.roofline.limiting_roof!r} is not in the file's roofs"
    if roof.kind == "compute":
        expected: float | None = roof.value
    else:
        ai = c.declaration.ai.get(roof.level or "")
        expected = roof.value * ai if ai else None
    if expected is not None and not _close(expected, c.roofline.attainable):
        return (f"attainable {c.roofline.attainable:.4g} but {roof.name!r} gives {expected:.4g}")
    r = c.roofline
    if r.paired is not None:  # the pairs' median; the rate over the attainable beside it
        if r.efficiency is None or not _close(r.efficiency, r.paired.efficiency):
            return (f"efficiency {r.efficiency!r} is not its pairs' median "
                    f"{r.paired.efficiency:.4g}")
        if r.flop_per_s and r.attainable and r.paired.of_ceiling is not None and not _close(
                r.paired.of_ceiling, r.flop_per_s / r.attainable):
            return (f"efficiency of the best state {r.paired.of_ceiling:.4g} is not its rate "
                    "over its attainable")
    elif r.efficiency is not None and r.flop_per_s and r.attainable and not _close(
            r.efficiency, r.flop_per_s / r.attainable):
        return f"efficiency {r.efficiency:.4g} is not its rate over its attainable"
    return None


def figures_note(cases: list[CaseResult], roofs: RoofSet | None) -> str | None:
    """One note naming the cases whose stored figures contradict the file's roofs."""
    if roofs is None:
        return None
    bad = [(c.key, why) for c in cases if (why := figures_problem(c, roofs))]
    if not bad:
        return None
    shown = "; ".join(f"{k}: {why}" for k, why in bad[:3])
    more = f" (and {len(bad) - 3} more)" if len(bad) > 3 else ""
    return (f"stored figures contradict this file's roofs in {len(bad)} case(s): {shown}{more}"
            " - the roofs or the figures were changed after the run")
