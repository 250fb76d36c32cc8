"""`roofbench model SCRIPT.py [--entry NAME] [--out DIR]` (bench/cli/model.py): a script's
program profiled and written; a script that cannot be used is one line and exit 2."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")

from roofbench.bench.cli import main  # noqa: E402

from ..profile.test_torch_program import ROOFS  # noqa: E402

SCRIPT = '''
import torch

def program():
    return (lambda a, b: torch.sqrt(a * a + b * b)), (torch.randn(512), torch.randn(512))

def other():
    return "not a program"
'''


@pytest.fixture
def script(tmp_path):
    p = tmp_path / "prog.py"
    p.write_text(SCRIPT)
    roofs = tmp_path / "roofs.json"
    roofs.write_text(json.dumps(ROOFS.to_dict()))
    return p, roofs


def test_model_profiles_the_entry_and_writes_the_files(script, tmp_path, capsys):
    p, roofs = script
    out = tmp_path / "out"
    assert main(["model", str(p), "--roofs", str(roofs), "--out", str(out),
                 "--threads", "1"]) == 0
    said = capsys.readouterr().out
    assert "prog.program: 4 calls, 3 distinct ops; program 1536 FLOPs, 18432 B" in said
    assert sorted(f.name for f in out.iterdir()) == [
        "profile.json", "profile.md", "report.html", "results.csv", "results.json",
        "roofline.png", "roofline.svg"]
    assert "mul -> mul -> add -> sqrt" in (out / "profile.md").read_text()


@pytest.mark.parametrize("args, why", [
    (["missing.py"], "missing.py: no such file"),
    (["{p}", "--entry", "nope"], "defines no function 'nope'"),
    (["{p}", "--entry", "other"], "must return (fn_or_module, args)"),
])
def test_a_script_that_cannot_be_used_is_one_line(script, capsys, args, why):
    p, roofs = script
    argv = ["model", *[a.format(p=p) for a in args], "--roofs", str(roofs)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert why in err and len(err.splitlines()) == 1
