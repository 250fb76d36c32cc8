"""`roofbench ab`'s inputs: a case whose args are not a tuple is one line naming the file,
BASE and NEW alike (it was an internal error, exit 70, as BASE), and a side's file finds a
module beside it, as Python finds one for a script."""

from __future__ import annotations

import pytest
from cli_run import run_cli

GOOD = "AB_CASES = {'x': dict(fn=lambda *a: None, args=(), flops=1, reads=8, writes=8)}\n"
BAD = "AB_CASES = {'x': dict(fn=lambda *a: None, args=5, flops=1, reads=8, writes=8)}\n"


@pytest.mark.parametrize("bad_side", ["base", "new"])
def test_args_not_a_tuple_is_one_line_naming_the_file(tmp_path, capsys, bad_side):
    (tmp_path / "good.py").write_text(GOOD)
    (tmp_path / "args_not_tuple.py").write_text(BAD)
    bad, good = str(tmp_path / "args_not_tuple.py"), str(tmp_path / "good.py")
    sides = [bad, good] if bad_side == "base" else [good, bad]
    rc, _, err = run_cli(["ab", *sides, "--out", str(tmp_path / "o")], capsys)
    assert rc == 2, err
    assert len(err.strip().splitlines()) == 1
    assert "args_not_tuple.py: AB_CASES['x']['args'] must be a tuple" in err
    assert "got int 5" in err
    assert not (tmp_path / "o").exists()  # refused before a folder is claimed


KVER = "SCALE = {scale}\n"
SIDE = '''
import kver

def f():
    pass

AB_CASES = {"x": dict(fn=f, args=(), flops=1, reads=8, writes=8)}
SEEN = kver.SCALE
'''


def test_a_side_imports_the_module_beside_it_and_not_the_other_sides(tmp_path):
    from roofbench.bench.cli.ab import load_side

    for side, scale in (("one", 1), ("two", 2)):
        (tmp_path / side).mkdir()
        (tmp_path / side / "kver.py").write_text(KVER.format(scale=scale))
        (tmp_path / side / "case.py").write_text(SIDE)
    path, modules = list(__import__("sys").path), dict(__import__("sys").modules)
    try:
        a = load_side(str(tmp_path / "one" / "case.py"), "base")
        b = load_side(str(tmp_path / "two" / "case.py"), "new")
        # each its own kver: without the folder on sys.path, 'No module named kver' (exit 2)
        assert (a.SEEN, b.SEEN) == (1, 2)
    finally:
        import sys

        sys.path[:] = path
        for name in set(sys.modules) - set(modules):
            del sys.modules[name]
