"""`roofbench ab BASE NEW`: two files defining AB_CASES, measured alternately in one job and
judged on their pairs (a planted slowdown of four times the work fails the gate; an
unchanged case does not), and the one-line refusals (exit 2)."""

from __future__ import annotations

import json

import pytest
from cli_run import run_cli
from roofbench.bench.backends.cpu import cpu_model
from roofbench.bench.results import load_run

from roofbench.gate import Comparison, paired_runs

SIDE = '''
import numpy as np

N = 1 << 16


def aligned(value):
    # Both sides' arrays on 64-byte boundaries: malloc's 16-byte ones differ from side to
    # side with the process's history, and np.add of 65536 fp32 on arrays 4 bytes off a
    # line ran 2x slower (2-core Xeon VM): an A/A pair that is not the same work.
    buf = np.full(N + 16, value, np.float32)
    start = (-buf.ctypes.data % 64) // 4
    return buf[start:start + N]


a, b, c = aligned(0.5), aligned(0.25), aligned(0.0)


def add(a, b, c):
    for _ in range({times}):
        np.add(a, b, out=c)


def same(a, b, c):
    np.add(a, b, out=c)


AB_CASES = {{"add": dict(fn=add, args=(a, b, c), flops=N, reads=[a, b], writes=c,
                         reference=np.full(N, 0.75), output=c),
            "same": dict(fn=same, args=(a, b, c), flops=N, reads=[a, b], writes=c),
            "{only}": dict(fn=same, args=(a, b, c), flops=N, reads=[a, b], writes=c)}}
'''

ROOFS = {"device": cpu_model(), "roofs": [
    {"name": "dram", "kind": "memory", "level": "dram", "value": 2e10, "source": "measured"},
    {"name": "fp32", "kind": "compute", "precision": "fp32", "value": 2e11,
     "source": "measured"}]}


def test_ab_finds_the_planted_slowdown(tmp_path, capsys):
    (tmp_path / "base.py").write_text(SIDE.format(times=1, only="base_only"))
    (tmp_path / "new.py").write_text(SIDE.format(times=4, only="new_only"))
    (tmp_path / "roofs.json").write_text(json.dumps(ROOFS))
    out = tmp_path / "ab"
    rc, text, _ = run_cli(["ab", str(tmp_path / "base.py"), str(tmp_path / "new.py"), "--out",
                            str(out), "--quick", "--roofs", str(tmp_path / "roofs.json"),
                            "--fail-on", "slower:50%"], capsys)
    assert rc == 1, text
    assert "'base_only' is defined in" in text and "'new_only' is defined in" in text
    assert "gate failed (slower:50%): cpu/add/default/fp32/65536" in text
    assert paired_runs(load_run(out / "a"), load_run(out / "b"))
    cmp = Comparison.from_dict(json.loads((out / "compare.json").read_text()))
    by = {v.key: v for v in cmp.cases}
    assert by["cpu/add/default/fp32/65536"].paired
    assert by["cpu/same/default/fp32/65536"].verdict == "same"
    # the stored A/B run, judged again by compare alone
    rc, text, _ = run_cli(["compare", str(out), "--fail-on", "slower:50%", "--out",
                            str(tmp_path / "again")], capsys)
    assert rc == 1 and "A/B pairs" in " ".join(text.split())  # the title wraps on a narrow tty


@pytest.mark.parametrize("body,needle", [
    ("X = 1\n", "defines no AB_CASES"),
    ("raise RuntimeError('boom')\n", "does not import: RuntimeError: boom"),
    ("AB_CASES = {'x': dict(args=())}\n", "must be a dict with a callable 'fn'"),
])
def test_ab_refuses_in_one_line(tmp_path, capsys, body, needle):
    (tmp_path / "base.py").write_text(body)
    rc, _, err = run_cli(["ab", str(tmp_path / "base.py"), str(tmp_path / "base.py"), "--out",
                           str(tmp_path / "o")], capsys)
    assert rc == 2 and needle in err and len(err.strip().splitlines()) == 1


def test_compare_of_one_folder_needs_an_ab_run(tmp_path, capsys):
    rc, _, err = run_cli(["compare", str(tmp_path)], capsys)
    assert rc == 2 and "is not an A/B run" in err
