"""The codegen matrix's facts kept between sessions (tests/standins/codegen_store.py): read
back only under the same inputs, computed afresh when any source, setting or argument moves."""

from __future__ import annotations

import json

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

    body = '#include "common.cuh"\nint k;\n'
    here, elsewhere = wrapper_key("clone-a", body), wrapper_key("clone-b", body)
    mutant = wrapper_key("clone-c", '#include "common.cuh"\nint k = 1;\n')
    edited_header = wrapper_key("clone-d", body, header="// no barrier\n")
    # a header beside a body that does not include it cannot change its build
    unread = wrapper_key("clone-e", "int k;\n", header="// no barrier\n")
    assert here == elsewhere
    assert len({here, mutant, edited_header}) == 3
    assert unread == wrapper_key("clone-f", "int k;\n")


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


# A compiling child that says which files it loaded (codegen_matrix calls record_loaded at
# import): its facts are kept with those files, not with every source of the checkout.
RECORDING_CHILD = """import sys
sys.path[:0] = [sys.argv[1], sys.argv[2]]
import codegen_store
codegen_store.record_loaded()
from pkg.used import X
print(X)
"""


def _tree(tmp_path):
    root = (tmp_path / "tree").resolve()
    for folder in ("pkg", "other"):
        (root / folder).mkdir(parents=True)
    (root / "pkg" / "used.py").write_text("X = 1\n")
    (root / "pkg" / "beside.py").write_text("Y = 1\n")
    (root / "other" / "cli.py").write_text("Z = 1\n")
    return root


def _recording(root, calls, env_extra=None):
    """A compute that runs RECORDING_CHILD in ``root`` as compile_for runs its child."""
    import os
    import subprocess
    import sys

    from patience import patience
    from testpaths import STANDINS

    def compute():
        calls.append(1)
        env = os.environ | store.recording_env() | (env_extra or {})
        # no bytecode: an edit of the same size within a second would read the old .pyc
        env = {k: v for k, v in env.items() if k != "PYTHONPYCACHEPREFIX"}
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        p = subprocess.run([sys.executable, "-c", RECORDING_CHILD, str(STANDINS), str(root)],
                           capture_output=True, text=True, env=env, timeout=patience(120))
        assert p.returncode == 0, p.stderr[-2000:]
        return {"x": int(p.stdout.split()[-1]), "n": len(calls)}
    return compute


def test_facts_are_kept_with_the_files_their_child_loaded(tmp_path, kept_in, monkeypatch):
    root = _tree(tmp_path)
    monkeypatch.setattr(store, "ROOT", root)
    calls: list[int] = []
    compute = _recording(root, calls)
    assert store.kept("child", [7], compute) == {"x": 1, "n": 1}
    (entry,) = kept_in.glob("child-*.json")
    sources = json.loads(entry.read_text())["sources"]
    assert sources["pkg/used.py"] and sources["pkg/"] == ["beside.py", "used.py"]
    assert not any(k.startswith("other") for k in sources)  # never loaded by the child

    (root / "other" / "cli.py").write_text("Z = 2\n")  # the CLI edited: not compiled
    (root / "pkg" / "beside.py").write_text("Y = 2\n")  # a neighbour edited, not loaded
    assert store.kept("child", [7], compute) == {"x": 1, "n": 1} and len(calls) == 1
    assert store.kept("child", [8], compute)["n"] == 2  # other arguments: computed

    (root / "pkg" / "used.py").write_text("X = 3\n")  # a loaded file edited
    assert store.kept("child", [7], compute) == {"x": 3, "n": 3}
    (root / "pkg" / "new.py").write_text("")  # a module added beside a loaded one
    assert store.kept("child", [7], compute) == {"x": 3, "n": 4}
    (root / "pkg" / "new.py").unlink()  # back as it was: the entry of that tree serves
    assert store.kept("child", [7], compute) == {"x": 3, "n": 3} and len(calls) == 4


def test_a_hand_edited_loaded_entry_is_computed_again(tmp_path, kept_in, monkeypatch):
    root = _tree(tmp_path)
    monkeypatch.setattr(store, "ROOT", root)
    calls: list[int] = []
    compute = _recording(root, calls)
    store.kept("child", [9], compute)
    (entry,) = kept_in.glob("child-*.json")
    kept = json.loads(entry.read_text())
    kept["sources"]["pkg/used.py"] = "0" * 64  # a stale entry made to look current
    entry.write_text(json.dumps(kept))
    assert store.kept("child", [9], compute)["n"] == 2


def test_a_child_that_cannot_say_what_it_loaded_fails(tmp_path, kept_in, monkeypatch):
    """A short list would keep facts past an edit of the file left off it: the child fails
    (its compute with it), the caller's environment is as it was, nothing is kept."""
    import os

    root = _tree(tmp_path)
    monkeypatch.setattr(store, "ROOT", root)
    (tmp_path / "a-file").write_text("")
    compute = _recording(root, [], {store.LOADED_ENV: str(tmp_path / "a-file" / "under")})
    with pytest.raises(AssertionError, match="cannot record the loaded files"):
        store.kept("child", [10], compute)
    assert store.LOADED_ENV not in os.environ and store.recording_env() == {}
    assert list(kept_in.glob("child-*.json")) == []


def test_a_loaded_file_edited_while_it_computes_keeps_nothing(tmp_path, kept_in, monkeypatch):
    """Another session edits a kernel while the fan-out compiles: which bytes the child read
    is unknown, so the facts are returned, not kept under either version."""
    root = _tree(tmp_path)
    monkeypatch.setattr(store, "ROOT", root)
    calls: list[int] = []
    child = _recording(root, calls)

    def compute():
        value = child()
        (root / "pkg" / "used.py").write_text("X = 5\n")  # after the child loaded X = 1
        return value

    assert store.kept("child", [11], compute) == {"x": 1, "n": 1}
    assert list(kept_in.glob("child-*.json")) == []
    assert store.kept("child", [11], compute) == {"x": 5, "n": 2}
