"""The one SI formatter and the one first_line: every report, table and message uses them."""

from __future__ import annotations

import math

import pytest
from testpaths import ROOT

from roofbench.errors_text import first_line
from roofbench.units import si


@pytest.mark.parametrize("value, unit, want", [
    (3.914e12, "B/s", "3.91 TB/s"),
    (989e12, "FLOP/s", "989 TFLOP/s"),
    (1.249e15, "FLOP/s", "1.25 PFLOP/s"),
    (600e9, "B/s", "600 GB/s"),
    (5e9, "B/s", "5 GB/s"),
    (2048, "B", "2.05 kB"),
    (512, "B", "512 B"),
    (0.5, "", "0.5"),          # no unit: no trailing space
    (0, "B/s", "0 B/s"),
    (-2.5e9, "B/s", "-2.5 GB/s"),  # the prefix follows the magnitude
])
def test_si_three_significant_digits(value, unit, want):
    assert si(value, unit) == want


def test_si_picks_the_prefix_after_rounding():
    # .3g of 999.7 is '1e+03': the figure moves up a prefix instead
    assert si(999.7e9, "B/s") == "1 TB/s"
    assert si(999.96, "B") == "1 kB"
    assert si(999.4e9, "B/s") == "999 GB/s"


@pytest.mark.parametrize("missing", [None, math.nan, math.inf, -math.inf])
def test_si_missing_is_a_dash(missing):
    assert si(missing, "B/s") == "-"


def test_si_digits_and_the_value_is_not_changed():
    v = 3.91449e12
    assert si(v, "B/s", digits=5) == "3.9145 TB/s"
    assert v == 3.91449e12  # display only


def test_first_line():
    assert first_line(ValueError("bad value\nsecond line")) == "ValueError: bad value"
    assert first_line(KeyError()) == "KeyError"
    assert first_line(RuntimeError("  \n  ")) == "RuntimeError"
    assert first_line(OSError("\n  disk full  \nmore")) == "OSError: disk full"
    assert first_line(ValueError("bad\nmore"), typed=False) == "bad"
    assert first_line(ValueError(""), typed=False) == "ValueError"
    assert first_line("reason one\nreason two") == "reason one"
    assert first_line("   ") == ""


def test_no_second_si_formatter_or_first_line():
    """One of each: a module that re-defines them is the duplication this test keeps out."""
    import re

    root = ROOT
    pat = re.compile(r"^def (_si|_fmt|fmt_value|_fmt_rate|_first|first_line|si)\(", re.M)
    found = {str(p.relative_to(root)) for folder in ("bench", "roofs", "kernels", "roofbench")
             for p in (root / folder).rglob("*.py") if pat.search(p.read_text())}
    assert found == {"roofbench/units.py", "roofbench/errors_text.py"}
