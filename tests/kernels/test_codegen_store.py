"""The codegen matrix's facts kept between sessions (tests/standins/codegen_store.py): read
back only under the same inputs, computed afresh when any source, setting or argument moves."""

from __future__ import annotations

import codegen_store as store
import pytest


@pytest.fixture()
def kept_in(tmp_path, monkeypatch):
    monkeypatch.setenv(store.ENV, str(tmp_path / "store"))
    return tmp_path / "store" / "codegen"


def counting():
    calls = []

    def compute(value=None):
        calls.append(1)
        return value if value is not None else {"rows": ("a", 1)}
    return calls, compute


def test_a_second_session_reads_what_the_first_computed(kept_in):
    calls, compute = counting()
    first = store.kept("child", ["znver4", ["all"], None], compute)
    again = store.kept("child", ["znver4", ["all"], None], compute)
    assert calls == [1] and first == again == {"rows": ["a", 1]}  # as JSON reads it, both
    assert len(list(kept_in.glob("child-*.json"))) == 1


def test_other_arguments_or_numba_settings_compute_afresh(kept_in, monkeypatch):
    calls, compute = counting()
    store.kept("child", ["znver4", ["all"], None], compute)
    store.kept("child", ["znver4", ["all"], "+avx512f"], compute)
    store.kept("fanout", ["znver4", ["all"], None], compute)
    monkeypatch.setenv("NUMBA_OPT", "2")
    store.kept("child", ["znver4", ["all"], None], compute)
    assert len(calls) == 4


def test_an_edited_source_changes_the_key(tmp_path, monkeypatch):
    for top in store.SOURCES[:-1]:
        (tmp_path / top).mkdir(parents=True)
    (tmp_path / store.SOURCES[-1]).parent.mkdir(parents=True)
    (tmp_path / store.SOURCES[-1]).write_text("")
    (tmp_path / "kernels" / "gemv.py").write_text("x = 1\n")
    before = store.sources_digest(tmp_path)
    (tmp_path / "kernels" / "gemv.py").write_text("x = 2\n")
    edited = store.sources_digest(tmp_path)
    (tmp_path / "roofs" / "new.py").write_text("")
    added = store.sources_digest(tmp_path)
    (tmp_path / store.SOURCES[-1]).write_text("# the child edited\n")
    child = store.sources_digest(tmp_path)
    assert len({before, edited, added, child}) == 4
    # the real tree's digest covers the stand-ins that pick and read the kernels
    assert (store.ROOT / "tests" / "standins" / "codegen_fanout.py").is_file()


def test_off_always_computes_and_keeps_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv(store.ENV, "off")
    monkeypatch.chdir(tmp_path)
    calls, compute = counting()
    store.kept("child", [1], compute)
    store.kept("child", [1], compute)
    assert calls == [1, 1] and store.folder() is None


def test_a_damaged_file_is_computed_again(kept_in):
    calls, compute = counting()
    store.kept("child", [2], compute)
    (path,) = kept_in.glob("child-*.json")
    path.write_text('{"rows": [')  # cut short
    assert store.kept("child", [2], compute) == {"rows": ["a", 1]} and len(calls) == 2


def test_what_was_not_used_for_two_weeks_is_removed(kept_in):
    import os
    import time

    calls, compute = counting()
    store.kept("child", [3], compute)
    (old,) = kept_in.glob("child-*.json")
    month = time.time() - 30 * 86400
    os.utime(old, (month, month))
    store.kept("child", [4], compute)  # a write prunes
    assert not old.exists() and len(list(kept_in.glob("child-*.json"))) == 1
    store.kept("child", [4], compute)  # a read keeps its entry young
    assert len(calls) == 2


def test_an_emulated_build_is_kept_by_what_it_includes_not_where(tmp_path):
    """A driver wrapper includes its body by absolute path (a fresh clone's, a mutant's
    temporary folder): the same bytes in another folder take the kept build; other bytes, or
    an edited header beside the body (its quoted includes find it first), do not."""
    import cuda_tools as ct

    def wrapper_key(where: str, body_text: str, header: str | None = None) -> str:
        folder = tmp_path / where
        folder.mkdir()
        body = folder / "k.mutant.cu"
        body.write_text(body_text)
        if header is not None:
            (folder / "common.cuh").write_text(header)
        wrapper = folder / "driver_k.cpp"
        wrapper.write_text(f'#include "{body}"\nRB_ENTRY(k)\n')
        return ct.build_key(wrapper, ("-O1",))

    here, elsewhere = wrapper_key("clone-a", "int k;\n"), wrapper_key("clone-b", "int k;\n")
    mutant = wrapper_key("clone-c", "int k = 1;\n")
    edited_header = wrapper_key("clone-d", "int k;\n", header="// no barrier\n")
    assert here == elsewhere
    assert len({here, mutant, edited_header}) == 3


NUMBA_KERNEL = """from numba import njit

from kernels.scale import SCALE


@njit(cache=True)
def bump(x):
    return x * SCALE + 1.0
"""
NUMBA_CALL = """import json, sys
sys.path.insert(0, sys.argv[1])
from kernels.bump import bump
bump(2.0)
print(json.dumps([len(bump.stats.cache_hits), len(bump.stats.cache_misses), bump(2.0)]))
"""


def _clone(tmp_path, name, scale="3.0"):
    root = tmp_path / name
    for top in store.NUMBA_TOPS:
        (root / top).mkdir(parents=True)
    (root / "kernels" / "bump.py").write_text(NUMBA_KERNEL)
    (root / "kernels" / "scale.py").write_text(f"SCALE = {scale}\n")
    return root


def _call(root):
    """(cached functions loaded, compiled, value) of bump(2.0) in a fresh process in ``root``."""
    import json
    import os
    import subprocess
    import sys

    from patience import patience

    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}  # in the tree
    p = subprocess.run([sys.executable, "-c", NUMBA_CALL, str(root)], capture_output=True,
                       text=True, timeout=patience(120), cwd=root, env=env)
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_numba_cache_of_one_clone_serves_the_next_and_not_other_sources(tmp_path, monkeypatch):
    monkeypatch.setenv(store.ENV, str(tmp_path / "store"))
    first = _clone(tmp_path, "first")
    assert _call(first) == [0, 1, 7.0]  # compiled, into the tree's __pycache__
    assert store.numba_keep(first) == 1
    assert store.numba_keep(first) == 0  # the store already holds as many

    fresh = _clone(tmp_path, "fresh")  # a clone at another path: nothing of numba's in it
    assert store.numba_restore(fresh) == 1
    assert _call(fresh) == [1, 0, 7.0]  # loaded, not compiled
    assert store.numba_restore(fresh) == 0  # the tree's own index is never overwritten

    # the inlined constant lives in another file, which numba's own check does not read
    edited = _clone(tmp_path, "edited", scale="5.0")
    assert store.numba_restore(edited) == 0
    assert _call(edited) == [0, 1, 11.0]


def test_numba_store_off_keeps_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv(store.ENV, "off")
    root = _clone(tmp_path, "root")
    _call(root)
    assert store.numba_keep(root) == 0 and store.numba_restore(root) == 0
