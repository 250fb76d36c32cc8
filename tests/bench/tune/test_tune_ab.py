"""scripts/tune_ab.py: the search's and the exhaustive's chosen configurations timed against
each other in one A/B job (the gate's paired statistic), read against 0.97; the same choice is
1 by construction and times nothing; records it cannot compare are refused in one line."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from roof_sets import write_roofs
from testpaths import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import tune_ab  # noqa: E402

SIZE = "48x40x36"  # gemm tiled there: TILE 16, 32 and 64 (the least covering 48), KC 256


def record(folder: Path, config: dict[str, Any], name: str = "gemm.tiled",
           size: str = SIZE) -> str:
    """A tune.json as `roofbench tune` writes it, cut to what the script reads."""
    folder.mkdir(parents=True)
    lbl = ",".join(f"{k}={v}" for k, v in config.items())
    (folder / "tune.json").write_text(json.dumps({
        "schema": "roofbench.tune", "version": 1, "name": name, "best": config,
        "trials": [{"config": config, "key": f"{name}/{lbl}/fp32/{size}"}]}))
    return str(folder)


def test_the_same_choice_is_one_by_construction_and_times_nothing(tmp_path, monkeypatch):
    def refuse(*a: Any, **k: Any) -> None:
        raise AssertionError("nothing is timed for the same configuration")

    monkeypatch.setattr(tune_ab, "AbSession", refuse)
    c = {"TILE": 32, "KC_BYTES": 256}
    row = tune_ab.compare(tune_ab.load(record(tmp_path / "s", c)),
                          tune_ab.load(record(tmp_path / "e", c)))
    assert row.same and (row.ratio, row.lo, row.hi) == (1.0, 1.0, 1.0)
    assert row.reading == "same configuration" and "by construction" in row.why


@pytest.mark.parametrize(("lo", "hi", "want"), [
    (0.97, 1.2, "met"), (0.99, 1.01, "met"), (0.90, 0.969, "not met"),
    (0.95, 1.01, "undecided"), (None, None, "undecided")])
def test_the_interval_is_read_against_the_fraction(lo, hi, want):
    assert tune_ab.reading(lo, hi, 0.97) == want


def test_a_small_real_pair_is_timed_in_one_job_on_the_gates_paired_statistic(
        tmp_path, monkeypatch):
    """Two configurations of gemm tiled at a small size, on the real clock (quick timer, a
    short cap): A is the exhaustive's choice, B the search's; the row's ratio is the rate
    ratio, the inverse of the gate's time B / time A, its interval inverted; structure only,
    never a time."""
    seen: list[Any] = []
    real = tune_ab.AbSession

    class Kept(real):  # type: ignore[misc, valid-type]
        def measure(self, *a: Any, **k: Any) -> Any:
            got = super().measure(*a, **k)
            seen.append((self.labels, got))
            return got

    monkeypatch.setattr(tune_ab, "AbSession", Kept)
    roofs = write_roofs(tmp_path / "roofs.json")
    s = record(tmp_path / "search", {"TILE": 16, "KC_BYTES": 256})
    e = record(tmp_path / "exhaustive", {"TILE": 32, "KC_BYTES": 256})
    out = tmp_path / "ab.json"
    assert tune_ab.main([s, e, "--roofs", str(roofs), "--quick", "--budget", "0.05",
                         "--cap", "0.3", "--json", str(out)]) == 0
    (labels, got), = seen
    assert labels == ("exhaustive", "search")
    v = got.verdict
    assert v.paired and got.a.valid and got.b.valid
    row, = json.loads(out.read_text())
    assert not row["same"] and row["pairs"] == v.n_a == v.n_b >= 2
    assert row["ratio"] == pytest.approx(1 / v.ratio)
    if v.ratio_lo is None:  # the cap stopped it before an interval: none claimed
        assert row["lo"] is None and row["hi"] is None and row["reading"] == "undecided"
    else:
        assert (row["lo"], row["hi"]) == pytest.approx((1 / v.ratio_hi, 1 / v.ratio_lo))
    assert row["reading"] == tune_ab.reading(row["lo"], row["hi"], 0.97)
    assert row["statistic"].endswith("ABBA pairs")


def test_records_it_cannot_compare_are_refused_in_one_line(tmp_path, capsys):
    s = record(tmp_path / "s", {"TILE": 16, "KC_BYTES": 256})
    other = record(tmp_path / "o", {"TILE": 16, "KC_BYTES": 256}, size="64x64x64")
    gone = record(tmp_path / "g", {"TILE": 24, "KC_BYTES": 256})
    (tmp_path / "empty").mkdir()
    kept = tmp_path / "kept.json"
    kept.write_text("[]")
    for args, words in (([s], "in pairs"), ([s, str(tmp_path / "empty")], "cannot read"),
                        ([s, s, "--json", str(kept)], "not written over"),
                        ([s, other], "different cases"),
                        ([s, gone], "TILE=24,KC_BYTES=256 is not a configuration")):
        assert tune_ab.main(args) == 2
        err = capsys.readouterr().err.strip()
        assert words in err and len(err.splitlines()) == 1, err
    assert kept.read_text() == "[]"
