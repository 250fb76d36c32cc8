"""`roofbench compare` as a CI gate: exit codes, compare.json, the one-line refusals, on a
real CPU run, its copy with one case slowed by 10%, another device's and a disjoint one."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from cli_run import run_cli
from real_samples import REAL, narrow, with_samples
from roofbench.bench.results import load_run, save_run

from roofbench.gate import Comparison
from roofbench.readers import read_case
from roofbench.records import RunResult


def _save(run: RunResult, folder: Path) -> Path:
    save_run(run, folder)
    return folder


@pytest.fixture(scope="module")
def cpu_pair(tmp_path_factory):
    """A real CPU run, the same run with one case 10% slower, and the same on another device."""
    tmp = tmp_path_factory.mktemp("gate")
    path = next(p for p in REAL if load_run(p).backend == "cpu"
                and sum(c.valid and c.measurement.timing is not None and narrow(c, load_run(p))
                                   for c in load_run(p).cases) >= 3)
    run = load_run(path)
    victim = next(c for c in run.cases if c.valid and c.measurement.timing and narrow(c, run))
    slow = with_samples(run, lambda k, s: [x * 1.1 for x in s] if k == victim.key else s)
    other = copy.deepcopy(run)
    other.device = "Another CPU"
    disjoint = copy.deepcopy(run)
    for c in disjoint.cases:  # each its own name still: attention and attention_causal share keys
        c.identity.workload = f"elsewhere-{c.identity.workload}"
    return {"a": _save(run, tmp / "a"), "slow": _save(slow, tmp / "slow"),
            "other": _save(other, tmp / "other"), "disjoint": _save(disjoint, tmp / "disj"),
            "victim": f"{victim.identity.backend}/{victim.key}", "tmp": tmp}


def test_cli_gate_passes_repeats_and_fails_planted(cpu_pair, capsys):
    out = cpu_pair["tmp"] / "cmp-same"
    rc, text, _ = run_cli(["compare", str(cpu_pair["a"]), str(cpu_pair["a"]), "--fail-on",
                            "slower:5%", "--out", str(out)], capsys)
    assert rc == 0 and "gate failed" not in text
    cmp = Comparison.from_dict(json.loads(out.with_suffix(".json").read_text()))
    assert cmp.failed == [] and cmp.fail_on == ["slower:5%"] and cmp.threshold == 0.05
    assert out.with_suffix(".png").exists() and out.with_suffix(".html").exists()

    out = cpu_pair["tmp"] / "cmp-slow"
    rc, text, _ = run_cli(["compare", str(cpu_pair["a"]), str(cpu_pair["slow"]), "--fail-on",
                            "slower:5%", "--out", str(out)], capsys)
    assert rc == 1 and f"gate failed (slower:5%): {cpu_pair['victim']}" in text
    d = json.loads(out.with_suffix(".json").read_text())
    assert d["failed"] == [cpu_pair["victim"]] and d["counts"]["slower"] == 1
    assert Comparison.from_dict(d).to_dict() == d
    # a 20% threshold lets the 10% through; so does a compare without a gate
    rc, _, _ = run_cli(["compare", str(cpu_pair["a"]), str(cpu_pair["slow"]), "--fail-on",
                         "slower:20%", "--out", str(out)], capsys)
    assert rc == 0
    rc, text, _ = run_cli(["compare", str(cpu_pair["a"]), str(cpu_pair["slow"]), "--out",
                            str(out)], capsys)
    assert rc == 0 and "slower" in text


def test_cli_other_device_and_no_common_case(cpu_pair, capsys):
    out = str(cpu_pair["tmp"] / "cmp-dev")
    for b, needle in (("other", "nothing compared: A ran on"),
                      ("disjoint", "nothing compared: the runs have no case in common")):
        rc, text, err = run_cli(["compare", str(cpu_pair["a"]), str(cpu_pair[b]), "--out", out],
                                 capsys)
        assert rc == 0 and f"note: {needle}" in text  # a plot of both is still a use
        rc, text, err = run_cli(["compare", str(cpu_pair["a"]), str(cpu_pair[b]), "--fail-on",
                                  "slower:5%", "--out", out], capsys)
        assert rc == 2 and err.count("\n") == 1 and needle in err and "Traceback" not in err
        assert Path(out).with_suffix(".json").exists()


def test_cli_invalid_in_b(cpu_pair, capsys):
    run = load_run(cpu_pair["a"])
    broken = copy.deepcopy(run)
    c = next(c for c in broken.cases if c.valid)
    c.outcome.status, c.outcome.error = "invalid", "validation failed: planted"
    b = _save(broken, cpu_pair["tmp"] / "broken")
    out = str(cpu_pair["tmp"] / "cmp-inv")
    rc, text, _ = run_cli(["compare", str(cpu_pair["a"]), str(b), "--fail-on", "slower:5%",
                            "--out", out], capsys)
    assert rc == 0 and "invalid in B" in text
    for gate in (["--fail-on", "slower:5%,invalid"], ["--fail-on-regression"]):
        rc, text, _ = run_cli(["compare", str(cpu_pair["a"]), str(b), *gate, "--out", out], capsys)
        assert rc == 1 and f"{c.identity.backend}/{c.key}" in text


def test_cli_nan_time_is_named(cpu_pair, capsys):
    """A results file whose case times are NaN (edited, as a hostile file would be)."""
    d = json.loads((cpu_pair["a"] / "results.json").read_text())
    c = next(c for c in load_run(cpu_pair["a"]).cases if c.valid and c.measurement.timing)
    raw = next(x["measurement"] for x in d["cases"]
               if read_case(x).key == c.key)  # as saved: nested (results version 4)
    raw["median_s"] = float("nan")
    raw["timing"]["samples_s"] = [float("nan")] * len(raw["timing"]["samples_s"])
    b = cpu_pair["tmp"] / "nan"
    b.mkdir()
    (b / "results.json").write_text(json.dumps(d))
    out = cpu_pair["tmp"] / "cmp-nan"
    rc, text, _ = run_cli(["compare", str(cpu_pair["a"]), str(b), "--fail-on", "slower:5%",
                            "--out", str(out)], capsys)
    # a B the gate cannot read fails it (it used to be named and pass: exit 0, issue 57)
    assert rc == 1 and "nanx" not in text and "unreadable" in text
    assert "(unreadable in B)" in text
    v = {v.key: v for v in Comparison.from_dict(json.loads(out.with_suffix(".json")
                                                           .read_text())).cases}
    assert v[f"{c.identity.backend}/{c.key}"].verdict == "unreadable"


# The threshold's three spellings, --threshold N, --threshold N% and --fail-on slower:N%, read
# N by one rule (compare.fraction): a bad N is refused the same way in each.
SPELLINGS = ("--threshold={}", "--threshold={}%", "--fail-on=slower:{}%")
BAD_NUMBERS = {"nan": "must be a finite number >= 0", "-1": "must be a finite number >= 0",
               "inf": "must be a finite number >= 0", "abc": "not a number or a percentage"}


@pytest.mark.parametrize("flags,needle", [
    *[([spelling.format(n)], needle) for spelling in SPELLINGS
      for n, needle in BAD_NUMBERS.items()],
    (["--fail-on", "slower:5"], "as a percentage"),
    (["--fail-on", "faster:5%"], "unknown gate"),
    (["--fail-on", "slower:5%", "--threshold", "0.1"], "two thresholds given"),
])
def test_cli_refuses_bad_thresholds(cpu_pair, capsys, flags, needle):
    rc, _, err = run_cli(["compare", str(cpu_pair["a"]), str(cpu_pair["a"]), *flags, "--out",
                           str(cpu_pair["tmp"] / "never")], capsys)
    assert rc == 2 and needle in err and err.count("\n") == 1
    assert not (cpu_pair["tmp"] / "never.json").exists()


def test_cli_threshold_as_percentage_agrees(cpu_pair, capsys):
    out = cpu_pair["tmp"] / "cmp-pct"
    rc, _, _ = run_cli(["compare", str(cpu_pair["a"]), str(cpu_pair["slow"]), "--threshold", "5%",
                         "--fail-on", "slower:5%", "--out", str(out)], capsys)
    assert rc == 1
    assert json.loads(out.with_suffix(".json").read_text())["threshold"] == 0.05
