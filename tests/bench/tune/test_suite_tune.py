"""A suite kernel tuned over its declared space (bench/tune/suite.py) on the simulated clock
(tune_simulated.py: every configuration really computes and is validated; only time is
simulated): the space's constraints and counts reach the search, the choice is stored for the
device, a tune on a new device starts from the nearest device's best; `roofbench tune
--workload`'s refusals; and `roofbench run` running a stored configuration and saying so."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import tune_simulated as ts
from cli_run import run_cli
from roof_sets import write_roofs
from roofbench.bench.results import load_run
from roofbench.bench.suite import tuned as store
from roofbench.bench.tune.suite import tunable_cases, tune_case
from roofbench.kernels.registry import workloads
from roofbench.kernels.spec import Case

from roofbench.timing import RoofPair, TimerConfig, Timing, sample_loop

SIZE = (48, 40, 36)


class FlatClock(ts.SimClock):
    """The simulated clock, every call of the kernel one virtual millisecond at half its roof
    (the suite's kernels do not spend simulated time themselves)."""

    def time(self, fn: Callable[[], None], cfg: TimerConfig,
             pair: RoofPair | None = None) -> Timing:
        m = self.machine

        def one() -> float:
            fn()
            m.spend(0.5)
            assert m.last is not None
            return m.last

        fake = RoofPair("memory:dram:stream-add-nt", m.probe) if self.paired else None
        return sample_loop(one, cfg, clock=m.clock, pair=fake)


def _tune(tmp_path, **kw: Any):
    m = ts.Machine(0)
    wl = workloads()["gemm"]
    case = Case(wl, wl.variants["tiled"], "fp32", SIZE)
    return tune_case(case, out=None, roofs=ts.roofs(), store_root=tmp_path,
                     clock=FlatClock(m), now=m.clock, timer=ts.TIMER, **kw)


def test_the_declared_space_is_searched_and_the_choice_stored(tmp_path):
    done = _tune(tmp_path, exhaustive=True)
    rec, ts_ = done.record, done.case.variant.tune["cpu"]
    want = ts_.configs(SIZE, "fp32")
    assert [t.config for t in rec.trials] == want  # in the declared order, every one kept
    assert {lbl for lbl, _ in rec.excluded} == {
        f"TILE={c['TILE']},KC_BYTES={c['KC_BYTES']}" for c in ts_.all_configs()
        if c not in want}
    assert all(t.status == "ok" for t in rec.trials)  # each validated against the reference
    assert all(t.flops == 2 * 48 * 40 * 36 for t in rec.trials)
    assert all(t.bytes == {"dram": (48 * 36 + 36 * 40 + 48 * 40) * 4} for t in rec.trials)
    assert done.stored == tmp_path / "tuned" / "simulated-vm.json"
    got = store.lookup(ts.DEVICE, store.entry_key("gemm", "tiled", "cpu", "fp32", SIZE),
                       tmp_path)
    assert got is not None and rec.best is not None and got.config == rec.best.config
    assert done.started_from is None


def test_a_new_device_starts_from_the_nearest_devices_best(tmp_path):
    key = store.entry_key("gemm", "tiled", "cpu", "fp32", SIZE)
    store.save("Other box", key, {"TILE": 32, "KC_BYTES": 256}, "TILE=32,KC_BYTES=256", "t",
               "20261207T000000Z", kind="cpu", roofs={"compute": 1e12, "dram": 1e11},
               root=tmp_path)
    done = _tune(tmp_path, exhaustive=True, save=False)
    assert done.record.trials[0].config == {"TILE": 32, "KC_BYTES": 256}
    assert done.started_from is not None and "Other box" in done.started_from
    assert "nearest by roofs" in done.started_from
    assert done.stored is None
    assert store.lookup(ts.DEVICE, key, tmp_path) is None


def test_with_no_device_s_choice_the_variant_s_default_is_tried_first(tmp_path):
    # At 64x64x1100 the default (TILE=64, KC_BYTES=4096: 1024 floats < K) is in the space, and
    # not its first in the declared order: the tune starts from it and says so.
    m = ts.Machine(0)
    wl = workloads()["gemm"]
    size = (64, 64, 1100)
    case = Case(wl, wl.variants["tiled"], "fp32", size)
    space = case.variant.tune["cpu"]
    assert space.configs(size, "fp32")[0] != space.default()
    done = tune_case(case, out=None, roofs=ts.roofs(), store_root=tmp_path, save=False,
                     clock=FlatClock(m), now=m.clock, timer=ts.TIMER, exhaustive=True)
    assert done.record.trials[0].config == {"TILE": 64, "KC_BYTES": 4096}
    assert done.started_from == "TILE=64,KC_BYTES=4096 (the variant's default)"
    assert len(done.record.trials) == len(space.configs(size, "fp32"))


def test_a_stored_configuration_the_space_excludes_is_not_the_start(tmp_path):
    key = store.entry_key("gemm", "tiled", "cpu", "fp32", SIZE)
    store.save("Other box", key, {"TILE": 32, "KC_BYTES": 16384}, "TILE=32,KC_BYTES=16384",
               "t", "20261207T000000Z", kind="cpu", roofs=None, root=tmp_path)
    done = _tune(tmp_path, exhaustive=True, save=False)
    assert done.started_from is None
    assert done.record.trials[0].config == {"TILE": 16, "KC_BYTES": 256}


@pytest.mark.parametrize("args,needle", [
    (["tune"], "a SCRIPT or --workload"),
    (["tune", "x.py", "--workload", "gemm"], "a SCRIPT or --workload"),
    (["tune", "x.py", "--variant", "tiled"], "give --workload"),
    (["tune", "--workload", "nope"], "unknown workload 'nope'"),
    (["tune", "--workload", "vector_add"], "declares no tunable variant"),
    (["tune", "--workload", "gemm", "--variant", "naive"], "the tunable variants are: "
                                                           "regblock, tiled"),
    (["tune", "--workload", "gemm", "--size", "10"], "3 dimension(s)"),
    (["tune", "--workload", "gemm", "--dtype", "fp7"], "unknown dtype 'fp7'"),
])
def test_tune_workload_refusals_are_one_line(args, needle, capsys):
    rc, _, err = run_cli(args, capsys)
    assert rc == 2 and needle in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_tunable_cases_select_as_a_run(monkeypatch):
    got = tunable_cases("gemm", None, None, "64x64x64")
    assert sorted(c.variant.name for c in got) == ["regblock", "tiled"]
    assert {c.dtype for c in got} == {"fp32"} and {c.size for c in got} == {(64, 64, 64)}


def test_run_uses_a_stored_configuration_and_says_so(tmp_path, monkeypatch, capsys):
    from roofbench.bench.backends.cpu import CpuBackend

    monkeypatch.setenv("ROOFBENCH_HOME", str(tmp_path / "home"))
    key = store.entry_key("gemm", "tiled", "cpu", "fp32", (64, 64, 64))
    store.save(CpuBackend().device_name(), key, {"TILE": 16, "KC_BYTES": 256},
               "TILE=16,KC_BYTES=256", "t", "20261207T000000Z", kind="cpu", roofs=None)
    roofs = write_roofs(tmp_path / "roofs.json")
    out = tmp_path / "out"
    rc, text, err = run_cli(["run", "--backend", "cpu", "--quick", "--workload", "gemm",
                             "--dtype", "fp32", "--size", "64x64x64", "--roofs", str(roofs),
                             "--out", str(out)], capsys)
    assert rc == 0, err
    (path,) = out.glob("*/*/results.json")
    run = load_run(path)
    by_key = {c.key: c for c in run.cases}
    tiled = by_key["gemm/tiled/fp32/64x64x64"]
    assert tiled.outcome.status == "ok"
    assert tiled.evidence.extra["tuned"] == "TILE=16,KC_BYTES=256"
    assert "tuned" not in by_key["gemm/regblock/fp32/64x64x64"].evidence.extra
    assert any("runs the tuned configuration TILE=16,KC_BYTES=256" in n for n in run.notes)
    assert "tuned: TILE=16,KC_BYTES=256" in text.replace("\n", "")
    assert "TILE=16,KC_BYTES=256" in (path.parent / "report.md").read_text()
