"""roofbench.measure on a CPU with cache roofs: arguments that fit a cache are placed on it,
and one line says so; DRAM-sized ones stay on DRAM, silently."""

from __future__ import annotations

import json

import numpy as np
from cache_layouts import cache_roofset
from roofbench.bench.measure.callables import working_set

import roofbench


def add(a, b, c):
    np.add(a, b, out=c)


def test_arguments_that_fit_l2_are_placed_there_in_one_line(capsys) -> None:
    n = 1 << 17  # 1 MiB per fp64 array: 3 MiB in all, the VM's two L2s hold 4 MiB
    a, b, c = np.ones(n), np.ones(n), np.empty(n)
    rec = roofbench.measure(add, a, b, c, flops=n, reads=[a, b], writes=c, name="add/l2",
                            roofs=cache_roofset(), reference=lambda a, b, c: a + b, output=c)
    assert rec.roofline.placement is not None and rec.roofline.placement.level == "l2"
    assert rec.roofline.placement.working_set_bytes == 3 * 8 * n
    assert rec.roofline.limiting_roof.startswith("l2 sweep")
    lines = [ln for ln in capsys.readouterr().err.splitlines() if "fits in" in ln]
    assert len(lines) == 1 and "fits in L2" in lines[0] and "add/l2" in lines[0]


def test_dram_sized_arguments_stay_on_dram_and_nothing_is_said(capsys) -> None:
    n = 1 << 26  # 512 MiB per array: past the sweep's 360 MiB that ran at DRAM speed
    a = np.ones(n)
    rec = roofbench.measure(np.sum, a, flops=n, reads=a, name="sum/dram",
                            roofs=cache_roofset())
    assert rec.roofline.placement is not None and rec.roofline.placement.level == "dram"
    assert rec.roofline.limiting_roof == "dram stream-add-nt"
    assert "fits in" not in capsys.readouterr().err


def test_the_working_set_counts_each_buffer_once() -> None:
    a, b = np.ones(1000), np.ones(500)
    assert working_set([a, a[10:], b]) == 8000 + 4000  # a view is its base's
    assert working_set([a], output=b) == 12000
    assert working_set([a], output=(a, b)) == 12000


pytest_plugins = ["pytester"]

FIXTURE_TEST = '''
import json

import numpy as np

N = 1 << 17  # 1 MiB per fp64 array


def test_add_in_l2(roofline):
    a, b, c = np.ones(N), np.ones(N), np.empty(N)
    rec = roofline(np.add, a, b, c, flops=N, reads=[a, b], writes=c)
    assert rec.roofline.placement.level == "l2"
'''


def test_the_fixture_places_its_arguments_and_says_so(pytester, monkeypatch) -> None:
    from roofbench.bench.backends.cpu import cpu_model

    for k in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(k, raising=False)
    pytester.makepyfile(test_l2=FIXTURE_TEST)
    roofs = pytester.path / "roofs.json"
    roofs.write_text(json.dumps(cache_roofset(device=cpu_model()).to_dict()))
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:benchmark",
                                      "--roofline-quick", "--roofline-roofs", str(roofs),
                                      timeout=600)
    r.assert_outcomes(passed=1)
    r.stdout.fnmatch_lines(["*test_add_in_l2*of l2 sweep-read (its data fits in L2: placed "
                            "there)*"])
