"""The spaces the suite's kernels declare (``Variant.tune``, kernels/spec.py ``TuneSpace``):
their constraints at a size, their counts per configuration, the default configuration as the
variant runs (same kernels, counts and bits), every configuration's answer against the float64
reference; and the tuned configurations kept per device (bench/suite/tuned.py): stored, the
nearest device's found by the stated rule, and a run's case running the stored one."""

from __future__ import annotations

import functools
import json

import numpy as np
import pytest
from roofbench.bench.suite import tuned as store
from roofbench.bench.tune.suite import space_of
from roofbench.kernels import nt_stores
from roofbench.kernels.registry import workloads
from roofbench.kernels.spec import Case, covers_once

TUNABLE = [("gemm", "tiled", (70, 300, 140)), ("gemm", "regblock", (67, 130, 1100)),
           ("rownorm", "fused", (5, 1000)), ("rownorm", "onepass", (64, 4096)),
           ("attention", "flash", (1, 2, 131, 64)),
           ("attention_causal", "flash", (1, 1, 67, 37))]


def _case(w: str, v: str, size, dtype: str = "fp32") -> Case:
    wl = workloads()[w]
    return Case(wl, wl.variants[v], dtype, size)


def _run(case: Case, inputs: dict) -> dict[str, np.ndarray]:
    """The case's launches on the host, its outputs (poisoned with NaN first)."""
    arrays = {n: inputs[n] if b.role == "input" else np.full(b.shape, np.nan, inputs[
        next(iter(inputs))].dtype) for n, b in case.buffers().items()}
    table = case.variant.impls["cpu"]
    for launch in case.launches():
        table[launch.kernel](*(arrays[a] if isinstance(a, str) else a for a in launch.args))
    return {n: arrays[n] for n, b in case.buffers().items() if b.role == "output"}


def test_the_suite_declares_its_cpu_spaces():
    ws = workloads()
    have = sorted(f"{w}/{v}" for w in ws for v in ws[w].variants
                  if "cpu" in ws[w].variants[v].tune)
    assert have == ["attention/flash", "attention_causal/flash", "gemm/regblock",
                    "gemm/tiled", "rownorm/fused", "rownorm/onepass"]


def test_covers_once_keeps_one_block_that_covers_the_extent():
    vals = (16, 32, 64, 128)
    assert [v for v in vals if covers_once(vals, v, 50)] == [16, 32, 64]
    assert [v for v in vals if covers_once(vals, v, 64)] == [16, 32, 64]
    assert [v for v in vals if covers_once(vals, v, 1)] == [16]
    assert [v for v in vals if covers_once(vals, v, 1000)] == [16, 32, 64, 128]


def test_gemm_constraints_at_a_size():
    case = _case("gemm", "tiled", (70, 300, 140))
    ts = case.variant.tune["cpu"]
    # M, N = 70, 300: every tile is below 300. K = 140 fp32 values: 256 B (64 values) is
    # below it, 1024 B (256 values) the least that covers it; 4096 and 16384 B run as that.
    kept = ts.configs(case.size, case.dtype)
    assert {c["KC_BYTES"] for c in kept} == {256, 1024} and len(kept) == 10
    sp = space_of(ts, case)
    excluded = sp.excluded()
    assert len(excluded) == 10 and {c["KC_BYTES"] for c, _ in excluded} == {4096, 16384}
    assert all(why.startswith("KC_BYTES / itemsize < K") for _, why in excluded)
    # fp64: 1024 B is 128 values (below K = 140), 4096 B (512) the least that covers it
    kept64 = ts.configs(case.size, "fp64")
    assert {c["KC_BYTES"] for c in kept64} == {256, 1024, 4096}
    small = ts.configs((20, 20, 20), "fp32")
    assert small == [{"TILE": 16, "KC_BYTES": 256}, {"TILE": 32, "KC_BYTES": 256}]


def test_attention_flash_constraints_at_a_size():
    ts = workloads()["attention"].variants["flash"].tune["cpu"]
    got = ts.configs((1, 1, 20, 64), "fp32")  # N = 20: 8, 16 below it; 32 the least covering
    assert {c["QB"] for c in got} == {8, 16, 32} and {c["KB"] for c in got} == {16, 32}
    assert len(ts.configs((1, 1, 4096, 64), "fp32")) == 25


def test_rownorm_constraints_follow_the_stores_auto_picks(monkeypatch):
    ts = workloads()["rownorm"].variants["fused"].tune["cpu"]
    size = (64, 4096)  # 1 MiB of y in fp32
    monkeypatch.setenv(nt_stores.THRESHOLD_ENV, str(8 << 20))  # y below it: auto is cached
    small = ts.configs(size, "fp32")
    assert {c["STORES"] for c in small} == {"auto", "nt"}
    assert all(c["ROWS"] == 0 for c in small if c["STORES"] == "auto")
    assert {c["ROWS"] for c in small if c["STORES"] == "nt"} == {0, 1, 16, 256}
    monkeypatch.setenv(nt_stores.THRESHOLD_ENV, str(1 << 16))  # y above it: auto is nt
    big = ts.configs(size, "fp32")
    assert {c["STORES"] for c in big} == {"auto", "cached"}
    assert [c for c in big if c["STORES"] == "cached"] == [{"STORES": "cached", "ROWS": 0}]
    # ROWS = 4 is the default rule's at hidden 4096 fp32 (64 KiB of y per chunk): never listed
    assert nt_stores.rows_per_chunk(4096, 4) not in {c["ROWS"] for c in big} - {0}
    why = ts.why_excluded({"STORES": "cached", "ROWS": 16}, size, "fp32")
    assert why == "ROWS applies to non-temporal stores only"


@pytest.mark.parametrize("w,v,size", TUNABLE[:4] + TUNABLE[4:5])
def test_counts_per_configuration(w, v, size, monkeypatch):
    case = _case(w, v, size)
    ts = case.variant.tune["cpu"]
    # an LLC smaller than y: cached stores read y for ownership
    monkeypatch.setattr(nt_stores, "llc_bytes", lambda: 1 << 12)
    monkeypatch.setenv(nt_stores.THRESHOLD_ENV, str(1 << 12))
    for c in ts.all_configs():
        got = Case(case.workload, case.variant.configured("cpu", c), case.dtype, size)
        assert got.flops == case.flops
        if w == "rownorm" and c["STORES"] == "cached":
            n = size[0] * size[1] * 4
            assert got.bytes() == {"dram": 3 * n} and case.bytes() == {"dram": 2 * n}
        else:
            assert got.bytes() == case.bytes(), c


def test_cached_stores_below_the_llc_move_no_more(monkeypatch):
    case = _case("rownorm", "onepass", (64, 4096))
    monkeypatch.setattr(nt_stores, "llc_bytes", lambda: 64 << 20)
    got = Case(case.workload, case.variant.configured(
        "cpu", {"STORES": "cached", "ROWS": 0}), "fp32", case.size)
    assert got.bytes() == case.bytes()


@pytest.mark.parametrize("w,v,size", TUNABLE)
def test_default_configuration_is_the_variant_and_every_one_is_right(w, v, size):
    case = _case(w, v, size)
    ts = case.variant.tune["cpu"]
    default = case.variant.configured("cpu", ts.default())
    assert [launch.flops for launch in Case(case.workload, default, "fp32", size).launches()] \
        == [launch.flops for launch in case.launches()]
    inputs = case.workload.make_inputs(size, "fp32", np.random.default_rng(0))
    base = _run(case, inputs)
    same = _run(Case(case.workload, default, "fp32", size), inputs)
    assert all(np.array_equal(base[k], same[k]) for k in base)  # bit for bit
    expected = case.workload.expected(inputs, size, "fp32")
    tol = case.workload.tolerance["fp32"]
    for c in ts.configs(size, "fp32"):
        out = _run(Case(case.workload, case.variant.configured("cpu", c), "fp32", size), inputs)
        for k, ref in expected.items():
            err = np.linalg.norm(out[k] - ref) / np.linalg.norm(ref)
            assert err <= tol, (c, err)


def test_configured_runs_the_configuration():
    v = workloads()["gemm"].variants["regblock"]
    fn = v.configured("cpu", {"TILE": 32, "KC_BYTES": 1024}).impls["cpu"]["regblock"]
    assert isinstance(fn, functools.partial) and fn.keywords == {"tile": 32, "kc_bytes": 1024}
    assert v.configured("cpu", v.tune["cpu"].default()).impls["cpu"] == v.impls["cpu"]
    assert v.configured("cpu", {"TILE": 32, "KC_BYTES": 1024}).tuned == \
        "TILE=32,KC_BYTES=1024"
    assert v.tune["cpu"].unknown({"TILE": 32}) is not None
    assert v.tune["cpu"].unknown({"TILE": 48, "KC_BYTES": 1024}).startswith("TILE=48")


# ------------------------------------------------------------------ the store, per device
def test_stored_configuration_runs_in_a_case(tmp_path):
    key = store.entry_key("gemm", "tiled", "cpu", "fp32", (64, 64, 64))
    path = store.save("Box A", key, {"TILE": 16, "KC_BYTES": 256}, "TILE=16,KC_BYTES=256",
                      "t1", "20261207T000000Z", kind="cpu",
                      roofs={"compute": 1e11, "dram": 1e10}, root=tmp_path)
    assert path == tmp_path / "tuned" / "box-a.json"
    cases = [_case("gemm", "tiled", (64, 64, 64)), _case("gemm", "regblock", (64, 64, 64))]
    got, notes = store.tuned_cases(cases, "Box A", "cpu", root=tmp_path)
    assert got[0].variant.tuned == "TILE=16,KC_BYTES=256" and got[1] is cases[1]
    assert got[0].variant.impls["cpu"]["tiled"].keywords == {"tile": 16, "kc_bytes": 256}
    assert len(notes) == 1 and "runs the tuned configuration TILE=16,KC_BYTES=256" in notes[0]
    # another device, or another size: the default runs, nothing said
    assert store.tuned_cases(cases, "Box B", "cpu", root=tmp_path)[0] == cases
    # a stored configuration the space no longer has (older code): said, and the default runs
    store.save("Box A", key, {"TILE": 48, "KC_BYTES": 256}, "TILE=48,KC_BYTES=256", "t2",
               "20261207T010000Z", kind="cpu", roofs=None, root=tmp_path)
    got, notes = store.tuned_cases(cases, "Box A", "cpu", root=tmp_path)
    assert got[0] is cases[0] and "is not used (TILE=48 is not one of" in notes[0]


def test_a_broken_store_is_one_line(tmp_path):
    (tmp_path / "tuned").mkdir()
    (tmp_path / "tuned" / "box-a.json").write_text("{nope")
    with pytest.raises(Exception, match="not a tuned-configurations file") as e:
        store.lookup("Box A", "k", tmp_path)
    assert "\n" not in str(e.value)


def test_nearest_device_by_its_roofs(tmp_path):
    key = "gemm/tiled/cpu/fp32/64x64x64"

    def put(dev, kind, roofs, tile, chosen):
        store.save(dev, key, {"TILE": tile, "KC_BYTES": 256}, f"TILE={tile}", "t", chosen,
                   kind=kind, roofs=roofs, root=tmp_path)

    put("Near", "cpu", {"compute": 2e11, "dram": 2e10}, 32, "20260101T000000Z")
    put("Far", "cpu", {"compute": 1e13, "dram": 1e12}, 16, "20261201T000000Z")
    put("A GPU", "gpu", {"compute": 1.1e11, "dram": 1.1e10}, 64, "20261202T000000Z")
    got = store.nearest("Here", "cpu", key, {"compute": 1e11, "dram": 1e10}, tmp_path)
    assert got is not None and got[0].device == "Near" and "nearest by roofs" in got[1]
    # this device's own entry is never its own "nearest"
    assert store.nearest("Near", "cpu", key, {"compute": 2e11, "dram": 2e10},
                         tmp_path)[0].device == "Far"
    # no roofs here: the most recently chosen of the same kind
    got = store.nearest("Here", "cpu", key, None, tmp_path)
    assert got is not None and got[0].device == "Far" and "most recent" in got[1]
    assert store.nearest("Here", "cpu", "other/key", None, tmp_path) is None
    doc = json.loads((tmp_path / "tuned" / "near.json").read_text())
    assert doc["format"] == store.FORMAT and doc["kind"] == "cpu"
