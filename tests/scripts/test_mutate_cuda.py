"""scripts/mutate_cuda.py, the mutation test of the CUDA sources: its catalogue applies to the
tree as it is (one mutant per exact snippet, at least one per CUDA file), outcomes are
classified as stated (an abort or a build failure is never a kill), and a small fixed subset is
killed by the real checks here (the whole catalogue runs on demand: docs/hopper-emulation.md)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from codegen_store import folder
from testpaths import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import mutate_cuda as mc  # noqa: E402
from cuda_mutants import MUTANTS  # noqa: E402

# Cheap to build (one counting library each) and each caught by a different check: bytes of a
# kernel, bytes of the STREAM probe (the quarter-reading probe of issue 30), bytes of the L2 one.
SUBSET = ("va_scalar_block_stride", "stream_read_quarter", "l2_copy_no_tail")


def test_catalogue_applies_to_the_tree():
    assert mc.check_catalogue(MUTANTS) == []


def test_every_cuda_file_has_mutants():
    files = sorted(p.relative_to(ROOT).as_posix() for d in ("kernels/cuda", "roofs/probes/cuda")
                   for p in (ROOT / d).iterdir() if p.suffix in (".cu", ".cuh"))
    covered = {m.file for m in MUTANTS}
    assert [f for f in files if f not in covered] == []
    assert all(m.tests and m.what for m in MUTANTS)
    assert all(len(m.equivalent) > 20 for m in MUTANTS if m.equivalent)  # a stated reason


@pytest.mark.parametrize("rc,fails,timed_out,want", [
    (0, [], False, "survived"),
    (1, ["t: AssertionError: wrong"], False, "killed"),
    (1, ["t: AssertionError: emulation build of x.cu failed:"], False, "stillborn"),
    (-11, [], False, "aborted"),  # a segfault
    (134, ["t: something"], False, "aborted"),  # an abort: never a kill
    (1, [], False, "aborted"),  # failed, yet no report of a failure: the process died
    (None, [], True, "timeout"),
    (5, [], False, "error"),  # nothing collected
])
def test_outcomes_are_classified_as_stated(rc, fails, timed_out, want):
    assert mc.classify(rc, fails, timed_out) == want


def test_union_of_selections_keeps_the_k_expressions():
    a, b = (m for m in MUTANTS if m.name in ("va_tail_short", "l2_sqrt_squares"))
    sel = mc.union([a, b])
    assert sel[-2] == "-k" and sel[-1] == "(vector_add) or (l2norm)"


@pytest.mark.slow
def test_fixed_subset_is_killed():
    """Each mutant applied to a temporary copy, its narrow tests run there: all killed, and the
    tree itself untouched. The emulated builds are the test store's (its emu/ folder as
    RB_EMU_CACHE, as the tool's docstring suggests; they are keyed by what they are built
    from): a session with the store warm builds no mutant again, and the builds the mutants'
    tests need unmutated are the session's own."""
    before = {m.file: (ROOT / m.file).read_text() for m in MUTANTS if m.name in SUBSET}
    env = dict(os.environ)
    emu = folder("emu")
    if emu is not None:
        env.setdefault("RB_EMU_CACHE", str(emu))
    t0 = time.time()
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "mutate_cuda.py"), "--only",
                        ",".join(SUBSET), "--no-baseline"], capture_output=True, text=True,
                       timeout=1800, env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert f"score: {len(SUBSET)}/{len(SUBSET)} killed (100.0%)" in r.stdout
    for name in SUBSET:
        assert f"{name}: killed" in r.stdout
    assert {f: (ROOT / f).read_text() for f in before} == before
    if emu is not None and env["RB_EMU_CACHE"] == str(emu):  # the mutants' builds kept there
        used = [p for p in emu.glob("*.so") if p.stat().st_mtime >= t0 - 1]
        assert len(used) >= len(SUBSET), sorted(p.name for p in used)


def test_failed_ids_are_read_from_the_short_summary():
    log = ("..F\n=== short test summary info ===\n"
           "FAILED tests/k/test_a.py::test_x[fp16-3] - AssertionError: bytes\n"
           "ERROR tests/k/test_b.py - ImportError\nFAILED tests/k/test_a.py::test_x[fp16-3]\n")
    assert mc.failed_ids(log) == ("tests/k/test_a.py::test_x[fp16-3]", "tests/k/test_b.py")


def test_a_kill_counts_only_when_its_test_passes_unmutated(tmp_path):
    """The kills' tests run once on the clean copy (all of them, not stopping at the first):
    a kill whose failed test fails there too, or that names none, is not a kill."""
    m = MUTANTS[0]
    outs = [mc.Outcome(m, "killed", 1.0, "a", ("t::ok",)),
            mc.Outcome(m, "killed", 1.0, "b", ("t::broken",)),
            mc.Outcome(m, "killed", 1.0, "c", ()),
            mc.Outcome(m, "survived", 1.0)]
    calls = []

    def fake_run(tree, ids, tag, timeout, log, stop_first=True):
        calls.append((ids, stop_first))
        (log / f"{tag}.log").write_text("FAILED t::broken - AssertionError\n")
        return 1, ["broken: AssertionError"], False

    got = mc.confirm_kills(tmp_path, outs, 10.0, tmp_path, run=fake_run)
    assert calls == [(("t::ok", "t::broken"), False)]
    assert [o.status for o in got] == ["killed", "unconfirmed", "unconfirmed", "survived"]
    assert got[1].detail.startswith("fails on the unmutated copy too")

    def timed_out(tree, ids, tag, timeout, log, stop_first=True):
        return None, [], True

    got = mc.confirm_kills(tmp_path, outs[:1], 10.0, tmp_path, run=timed_out)
    assert got[0].status == "unconfirmed"  # no clean verdict: no kill confirmed


def test_a_mutant_written_as_its_change_applies_it_once():
    import cuda_mutants as cm

    m = cm.E("x", "f.cu", "a[i] = b[i] + c[i];", "c[i]", "b[i]", "what", ("t",), cls="bytes")
    assert (m.old, m.new, m.cls) == ("a[i] = b[i] + c[i];", "a[i] = b[i] + b[i];", "bytes")
    with pytest.raises(ValueError, match="occurs 2 times"):
        cm.E("x", "f.cu", "a[i] = b[i] + b[i];", "b[i]", "c[i]", "what", ("t",))
