"""The test store when it cannot be trusted or written (issue 57 #14-16): a read-only mount
or home, a write that fails, an entry edited by hand. The store costs time at worst, never
a value: each case computes, and a kept value is returned only when its digest matches."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import codegen_store as store
import pytest
from testpaths import STANDINS


@pytest.fixture()
def kept_in(tmp_path, monkeypatch):
    monkeypatch.setenv(store.ENV, str(tmp_path / "store"))
    return tmp_path / "store" / "codegen"


def counting():
    calls: list[int] = []

    def compute():
        calls.append(1)
        return {"ok": len(calls)}
    return calls, compute


def test_a_hand_edited_entry_is_computed_again(kept_in):
    calls, compute = counting()
    assert store.kept("child", [1], compute) == {"ok": 1}
    (path,) = kept_in.glob("child-*.json")
    path.write_text(json.dumps({"ok": 999}))  # the edit: the entry replaced
    assert store.kept("child", [1], compute) == {"ok": 2}
    assert store.kept("child", [1], compute) == {"ok": 2} and len(calls) == 2  # rewritten


def test_a_value_edited_under_its_old_digest_is_computed_again(kept_in):
    calls, compute = counting()
    store.kept("child", [2], compute)
    (path,) = kept_in.glob("child-*.json")
    entry = json.loads(path.read_text())
    entry["value"]["ok"] = 999
    path.write_text(json.dumps(entry))
    assert store.kept("child", [2], compute) == {"ok": 2}


def test_a_store_under_a_file_computes(tmp_path, monkeypatch):
    (tmp_path / "file").write_text("x")
    monkeypatch.setenv(store.ENV, str(tmp_path / "file" / "store"))
    calls, compute = counting()
    assert store.kept("child", [3], compute) == {"ok": 1}
    assert store.kept("child", [3], compute) == {"ok": 2}
    assert store.folder() is None and store.folder("emu") is None


def test_a_store_this_process_cannot_write_computes(kept_in, monkeypatch):
    """A folder whose permissions refuse this user (os.access says so)."""
    kept_in.mkdir(parents=True)
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, m, **kw: False if Path(p) == kept_in
                        else real(p, m, **kw))
    calls, compute = counting()
    assert store.kept("child", [4], compute) == {"ok": 1} and store.folder() is None
    assert not list(kept_in.iterdir())


def test_a_write_that_fails_keeps_the_value(kept_in, monkeypatch):
    """ENOSPC (or a store made read-only since the session started) while writing."""
    calls, compute = counting()

    def full(self, *a, **kw):
        raise OSError(errno.ENOSPC, "No space left on device", str(self))

    monkeypatch.setattr(Path, "write_text", full)
    assert store.kept("child", [5], compute) == {"ok": 1}
    monkeypatch.undo()
    assert not list(kept_in.glob("*"))


@pytest.mark.parametrize("what", ["RB_TEST_STORE", "HOME"])
def test_a_read_only_mount_computes_in_a_process(what, tmp_path):
    """The issue's attempt itself: the store (or the home that holds the default store) on
    a read-only bind mount, in a mount namespace of its own (a read-only mount stops root
    too): the value is computed, no traceback, and the numba store's keep and restore find
    nothing to do."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("needs root and unshare(1) for read-only bind mounts")
    ro = tmp_path / "ro"
    ro.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in (store.ENV, "XDG_CACHE_HOME")}
    env["HOME"] = str(ro if what == "HOME" else tmp_path)
    if what == "RB_TEST_STORE":
        env[store.ENV] = str(ro / "store")
    code = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(STANDINS)!r})
        import codegen_store as s
        print(s.kept("child", [6], lambda: {{"ok": 1}}), s.folder(), s.numba_keep(),
              s.numba_restore())
    """)
    (tmp_path / "try_store.py").write_text(code)
    script = (f"mount --bind {ro} {ro} && mount -o remount,bind,ro {ro} && "
              f"exec {sys.executable} {tmp_path / 'try_store.py'}")
    out = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True,
                         text=True, timeout=300, env=env)
    if "mount:" in out.stderr or "unshare:" in out.stderr:
        pytest.skip(f"no read-only bind mounts here: {out.stderr.strip()[:200]}")
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    assert out.stdout.split() == ["{'ok':", "1}", "None", "0", "0"]


# the hand edit (2), a store under a file, one this user cannot write, a failed write, a
# read-only store and a read-only home
STORE_ATTEMPTS = 2 + 1 + 1 + 1 + 2
