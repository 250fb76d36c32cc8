"""`roofbench tune SCRIPT`: a script defining TUNE over the simulated machine
(tune_simulated.py: the clock and the wall clock are the script's own keywords), its files and
exit codes, the flags over the script's keywords, and the one-line refusals (exit 2)."""

from __future__ import annotations

import json

import pytest
from cli_run import run_cli

SCRIPT = '''
import numpy as np
import tune_simulated as ts

m = ts.Machine(0)
a = np.arange(ts.N, dtype=np.float32)
s = ts.Sim(m, ts.SimClock(m), a, np.zeros_like(a))
EFF = {effs}
build = s.builder(lambda c: EFF[c["B"]], wrong=lambda c: c["B"] == {wrong})
kw = s.kw()
TUNE = dict(build=build, space={{"B": sorted(EFF)}}, args=(a, s.out), **kw)
'''


def script(tmp_path, effs, wrong=-1):
    path = tmp_path / "kernel.py"
    path.write_text(SCRIPT.format(effs=effs, wrong=wrong))
    return str(path)


def test_tune_writes_its_folder_and_says_the_chosen(tmp_path, capsys):
    out = tmp_path / "t"
    rc, text, err = run_cli(["tune", script(tmp_path, {1: 0.5, 2: 0.95, 3: 0.6}), "--out",
                             str(out)], capsys)
    assert rc == 0, err
    assert "chosen: B=2" in text and "stopped: target" in text
    doc = json.loads((out / "tune.json").read_text())
    assert doc["name"] == "kernel" and doc["best"] == {"B": 2}
    assert [t["status"] for t in doc["trials"]] == ["ok", "ok", "untried"]


def test_flags_override_the_script(tmp_path, capsys):
    out = tmp_path / "t"
    rc, text, err = run_cli(["tune", script(tmp_path, {1: 0.5, 2: 0.95, 3: 0.6}), "--out",
                             str(out), "--exhaustive", "--target", "0.99", "--no-drop"],
                            capsys)
    assert rc == 0, err
    doc = json.loads((out / "tune.json").read_text())
    assert doc["exhaustive"] and doc["target"] == 0.99 and doc["drop_at"] is None
    assert [t["status"] for t in doc["trials"]] == ["ok", "ok", "ok"]
    assert text.index("1. B=2") < text.index("2. B=3") < text.index("3. B=1")  # best first


def test_a_configuration_that_computes_wrong_fails_the_command(tmp_path, capsys):
    rc, text, _ = run_cli(["tune", script(tmp_path, {1: 0.5, 2: 0.95, 3: 0.6}, wrong=2),
                           "--out", str(tmp_path / "t")], capsys)
    assert rc == 1
    assert "B=2: invalid: validation failed" in text and "chosen: B=3" in text


@pytest.mark.parametrize("argv, words", [
    (["--target", "x"], "not a number"), (["--budget", "0"], "seconds > 0"),
    (["--budget", "inf"], "seconds > 0"), (["--budget", "nan"], "seconds > 0"),
    (["--budget", "x"], "not a number of seconds: 'x'"),
    (["--drop-at", "1"], "factor > 1"), (["--drop-at", "inf"], "factor > 1"),
    (["--drop-at", "x"], "not a number: 'x'"), (["--order", "random"], "invalid choice"),
    (["--target", "1.5"], "target= must be a fraction"),
])
def test_bad_flags_are_one_line_and_exit_2(tmp_path, capsys, argv, words):
    rc, text, err = run_cli(["tune", script(tmp_path, {1: 0.5}), "--out",
                             str(tmp_path / "t"), *argv], capsys)
    assert rc == 2 and words in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "t").exists()


def test_a_tune_factory_that_raises_is_the_users_failure_in_one_line(tmp_path, capsys):
    (tmp_path / "f.py").write_text("def TUNE():\n    raise OSError('no data here')\n")
    rc, _, err = run_cli(["tune", str(tmp_path / "f.py")], capsys)
    assert rc == 2 and "TUNE() raised OSError: no data here" in err
    assert len(err.strip().splitlines()) == 1


def test_a_script_without_tune_is_one_line(tmp_path, capsys):
    (tmp_path / "empty.py").write_text("x = 1\n")
    rc, _, err = run_cli(["tune", str(tmp_path / "empty.py")], capsys)
    assert rc == 2 and "defines no TUNE" in err
    rc, _, err = run_cli(["tune", str(tmp_path / "missing.py")], capsys)
    assert rc == 2 and "no such file" in err
