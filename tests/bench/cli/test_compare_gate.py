"""`roofbench compare` never passes in silence (issue 57): a gate whose cases are mostly
`uncertain` says so in its last line, `--fail-on uncertain` fails it, and its table labels the
raw medians apart from the statistic the verdict read. Real CPU runs, samples cut or slowed."""

from __future__ import annotations

import json

import pytest
from cli_run import run_cli
from real_samples import REAL, with_samples
from roofbench.bench.present.deltas import COLUMNS
from roofbench.bench.results import load_run, save_run


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A real CPU run of >= 4 timed cases; the same with every case 1.3x slower and cut to 5
    samples (no interval: each slowdown `uncertain`); A cut to 5 samples likewise."""
    tmp = tmp_path_factory.mktemp("silent")
    path = next(p for p in REAL if load_run(p).backend == "cpu"
                and sum(c.valid and c.measurement.timing is not None
                        for c in load_run(p).cases) >= 4)
    run = load_run(path)
    run.cases = [c for c in run.cases if c.valid and c.measurement.timing is not None][:6]
    short = with_samples(run, lambda k, s: s[:5])
    slow = with_samples(run, lambda k, s: [1.3 * x for x in s[:5]])
    for name, r in (("a", run), ("short", short), ("slow", slow)):
        save_run(r, tmp / name)
    return tmp, len(run.cases)


def _last_line(text: str) -> str:
    return text.strip().splitlines()[-1]


def test_an_all_uncertain_gate_says_so_last_and_passes_only_without_fail_on_uncertain(
        runs, capsys):
    tmp, n = runs
    rc, text, _ = run_cli(["compare", str(tmp / "short"), str(tmp / "slow"), "--fail-on",
                            "slower:5%", "--out", str(tmp / "c1")], capsys)
    assert rc == 0, text  # nothing judged slower: the gate asked for does not fail ...
    last = _last_line(text)  # ... but its last line says that it judged nothing
    assert last.startswith(f"judged 0 of {n} cases ({n} uncertain")
    assert "the runs are too noisy or too short" in last and "roofbench ab" in last

    rc, text, _ = run_cli(["compare", str(tmp / "short"), str(tmp / "slow"), "--fail-on",
                            "slower:5%,uncertain", "--out", str(tmp / "c2")], capsys)
    assert rc == 1, text
    assert "gate failed (slower:5% or uncertain):" in text and "(uncertain)" in text
    assert _last_line(text).startswith(f"judged 0 of {n} cases")
    d = json.loads((tmp / "c2.json").read_text())
    assert len(d["failed"]) == n and d["fail_on"] == ["slower:5%", "uncertain"]


def test_a_judged_gate_ends_with_its_count_and_passes_fail_on_uncertain(runs, capsys):
    tmp, n = runs
    # a quiet run: each case's samples within 1% of their median, so two copies bound any
    # change beyond 5% and every case is `same`
    quiet = with_samples(load_run(tmp / "a" / "results.json"), lambda k, s: [
        sorted(s)[len(s) // 2] * (1 + 0.01 * ((i % 5) - 2) / 2) for i in range(len(s))])
    save_run(quiet, tmp / "quiet")
    rc, text, _ = run_cli(["compare", str(tmp / "quiet"), str(tmp / "quiet"), "--fail-on",
                            "slower:5%,uncertain", "--out", str(tmp / "c3")], capsys)
    assert rc == 0, text
    cases = json.loads((tmp / "c3.json").read_text())["cases"]
    assert {c["verdict"] for c in cases} == {"same"}
    assert _last_line(text) == f"judged {n} of {n} cases"


def test_a_noisy_run_against_itself_fails_fail_on_uncertain_where_its_intervals_are_wide(
        runs, capsys):
    """A real run against itself: ratio 1 everywhere, but a case whose samples spread beyond
    the threshold ([0.868, 1.153] for one) cannot exclude a 5% change: `uncertain`, named in
    the reason, and `--fail-on uncertain` fails it; never `slower`/`faster`."""
    tmp, n = runs
    rc, text, _ = run_cli(["compare", str(tmp / "a"), str(tmp / "a"), "--fail-on",
                            "slower:5%,uncertain", "--out", str(tmp / "c5")], capsys)
    cases = json.loads((tmp / "c5.json").read_text())["cases"]
    wide = [c for c in cases if not (c["ratio_lo"] >= 1 / 1.05 and c["ratio_hi"] <= 1.05)]
    assert wide  # the real run holds noisy cases: else this test tests nothing
    assert {c["verdict"] for c in cases} <= {"same", "uncertain"}
    assert all(c["verdict"] == "uncertain" and "wider than the threshold" in c["reason"]
               for c in wide)
    assert rc == 1, text
    assert sorted(json.loads((tmp / "c5.json").read_text())["failed"]) == sorted(
        c["key"] for c in wide)


def test_the_table_labels_raw_medians_apart_from_the_judged_ratio(runs, capsys):
    tmp, _ = runs
    rc, text, _ = run_cli(["compare", str(tmp / "a"), str(tmp / "a"), "--out",
                            str(tmp / "c4")], capsys)
    flat = " ".join(text.split())
    assert rc == 0
    assert COLUMNS[1] == "A: raw median" and COLUMNS[4].startswith("B/A judged")
    assert "raw median: the times as measured; judged: the statistic the verdict read" in flat
    assert "raw medians" in flat  # the row says what its ratio was judged on
