"""Non-temporal-store CPU kernels: right at any size and alignment, really non-temporal, and taken
only for outputs larger than the last-level cache."""

from __future__ import annotations

import re

import numba
import numpy as np
import pytest
from roofbench.bench.backends.cpu import CpuBackend
from roofbench.bench.suite.runner import validate
from roofbench.kernels import l2norm, rownorm, vector_add
from roofbench.kernels import nt_stores as cs
from roofbench.kernels.registry import workloads
from roofbench.kernels.spec import Case

from roofbench.cpu_cache import llc_from_sysfs

# Elements in one 64 KiB chunk: FP32 16384, FP64 8192. The sizes cover n < W, odd n, a chunk
# boundary with a peel in the second chunk (misaligned views), and several chunks.
SIZES = [1, 3, 7, 15, 17, 1001, 8192 + 9, 16384 * 2 + 21]
KERNELS = {  # name: (non-temporal-store kernel, number of inputs, numpy reference)
    "square": (cs.square, 1, lambda x: x * x),
    "sqrt": (cs.sqrt, 1, np.sqrt),
    "add": (cs.add, 2, lambda x, y: x + y),
    "hypot": (cs.hypot, 2, lambda a, b: np.sqrt(a * a + b * b)),
}


def _views(n: int, dtype, offset: int, count: int, rng) -> list[np.ndarray]:
    # arr[offset:]: a view that starts `offset` elements past numpy's (64-byte) aligned start.
    return [rng.uniform(0.25, 1.0, n + offset).astype(dtype)[offset:] for _ in range(count)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_nt_store_kernels_match_numpy(name, dtype):
    fn, n_in, ref = KERNELS[name]
    rng = np.random.default_rng(11)
    for offset in (0, 1, 3):
        for n in SIZES:
            ins = _views(n, dtype, offset, n_in, rng)
            out = np.full(n + offset + 1, np.nan, dtype)[offset:offset + n]
            guard = out.base  # the element past the end must stay untouched
            fn(*ins, out, n)
            # Same operations, same rounding (no FMA contraction): exactly numpy's values.
            assert np.array_equal(out, ref(*ins)), (name, dtype, offset, n)
            assert np.isnan(guard[offset + n])


@pytest.mark.parametrize("dtype", ["fp32", "fp64"])
@pytest.mark.parametrize("w,v", [("l2norm", "naive"), ("l2norm", "fused"),
                                 ("vector_add", "scalar"), ("rownorm", "naive"),
                                 ("rownorm", "fused"), ("rownorm", "onepass")])
@pytest.mark.parametrize("threshold", ["0", str(1 << 60)])  # non-temporal / cached
def test_workloads_validate_on_both_paths(w, v, dtype, threshold, monkeypatch):
    monkeypatch.setenv(cs.THRESHOLD_ENV, threshold)
    wl = workloads()[w]
    # rownorm: odd rows, so that most rows start off a 64-byte line and end in a tail.
    size = (37, 1001) if w == "rownorm" else (40_007,)
    case = Case(wl, wl.variants[v], dtype, size)
    inputs = wl.make_inputs(size, dtype, np.random.default_rng(5))
    prep = CpuBackend().prepare(case, inputs)
    prep.poison()
    prep.run()
    ok, err, why = validate(case, prep.outputs(), wl.expected(inputs, size, dtype))
    assert ok, why
    assert err <= wl.tolerance[dtype]


def test_cpu_tables_give_every_elementwise_kernel_nt_stores():
    # One rule for naive and fused: every l2norm kernel and vector_add's add can store
    # non-temporally, and
    # every rownorm kernel whose output is as large as x.
    for fn in (*l2norm.CPU.values(), vector_add.WORKLOAD.variants["scalar"].impls["cpu"]["add"]):
        assert isinstance(fn, cs.NtStoreKernel)
    assert l2norm.WORKLOAD.variants["fused"].impls["cpu"]["fused"] is l2norm.CPU["fused"]
    rn = rownorm.WORKLOAD.variants
    for fn in (rn["naive"].impls["cpu"]["square"], rn["naive"].impls["cpu"]["scale"],
               rn["fused"].impls["cpu"]["fused"], rn["onepass"].impls["cpu"]["onepass"]):
        assert isinstance(fn, cs.NtStoreKernel)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_scale_row_stores_any_row_non_temporally(dtype):
    # y[i] = x[i] * r[i] row by row through nt_stores.scale_row, rows misaligned by the odd
    # hidden size: exactly numpy's products in the head, the non-temporal lines and the tail.
    rng = np.random.default_rng(3)
    for batch, hidden, rows in ((1, 1, 1), (3, 7, 2), (5, 1001, 2), (9, 4099, 4)):
        x = rng.uniform(0.5, 2.0, (batch, hidden)).astype(dtype)
        r = rng.uniform(0.5, 2.0, batch).astype(dtype)
        y = np.full((batch, hidden), np.nan, dtype)
        rownorm._scale_rows_nt(x, r, y, batch, hidden, rows)
        assert np.array_equal(y, x * r[:, None]), (batch, hidden, rows)


# ----------------------------------------------------------------------------- machine code


def _asm(fn, n_in: int, dtype) -> str:
    # A fresh compile: code loaded from numba's cache cannot be inspected.
    f = numba.njit(parallel=True)(fn.py_func)
    x = np.ones(100, dtype)
    f(*([x] * n_in), np.empty(100, dtype), 100)
    return f.inspect_asm(f.signatures[0])


@pytest.mark.parametrize("dtype,mnemonic", [(np.float32, "ntps"), (np.float64, "ntpd")])
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_nt_store_kernels_store_whole_vectors_non_temporally(name, dtype, mnemonic):
    fn, n_in, _ = KERNELS[name]
    asm = _asm(fn, n_in, dtype)
    if not re.search(r"\bv?movnt", asm):
        pytest.skip("this target has no x86 non-temporal stores")
    nt = re.findall(r"\b(v?movnt\w*)\s+%([xyz])mm", asm)
    assert nt, "no non-temporal vector store"
    assert {m for m, _ in nt} <= {f"movnt{mnemonic[2:]}", f"vmovnt{mnemonic[2:]}"}, nt
    # The vector is 64 bytes: one zmm, or the ymm/xmm halves a narrower target splits it into.
    assert not re.search(r"\bv?movnt(?:i|ss|sd)\b", asm), "scalar non-temporal store"


def test_cached_kernels_store_through_the_cache():
    asm = _asm(l2norm._fused_cached, 2, np.float32)
    assert not re.search(r"\bv?movnt", asm)


# ----------------------------------------------------------------------------- threshold


def _fake_cache(root, cpu: int, index: int, level: int, ctype: str, size: str, shared: str):
    d = root / f"cpu{cpu}" / "cache" / f"index{index}"
    d.mkdir(parents=True)
    for name, text in (("level", str(level)), ("type", ctype), ("size", size),
                       ("shared_cpu_list", shared)):
        (d / name).write_text(text + "\n")


def test_llc_is_the_total_of_the_top_level_over_its_instances(tmp_path):
    # Two CCDs with 32 MiB of L3 each, private 1 MiB L2s: the LLC is 64 MiB.
    for cpu in range(4):
        ccd = "0-1" if cpu < 2 else "2-3"
        _fake_cache(tmp_path, cpu, 0, 1, "Data", "48K", str(cpu))
        _fake_cache(tmp_path, cpu, 1, 1, "Instruction", "32K", str(cpu))
        _fake_cache(tmp_path, cpu, 2, 2, "Unified", "1024K", str(cpu))
        _fake_cache(tmp_path, cpu, 3, 3, "Unified", "32768K", ccd)
    assert llc_from_sysfs(tmp_path) == 64 << 20
    assert llc_from_sysfs(tmp_path / "missing") is None


def test_nt_stores_only_above_the_simulated_llc(monkeypatch):
    monkeypatch.delenv(cs.THRESHOLD_ENV, raising=False)
    monkeypatch.setattr(cs, "llc_bytes", lambda: 1 << 20)
    calls: list[str] = []
    k = cs.NtStoreKernel(lambda x, y, n: calls.append("cached"),
                           lambda x, y, n: calls.append("nt"), out_arg=1)
    fits = np.empty((1 << 20) // 4, np.float32)  # exactly the LLC: stays cached
    over = np.empty((1 << 20) // 4 + 16, np.float32)
    k(over, fits, 0)
    k(fits, over, 0)  # the output decides, not the input
    assert calls == ["cached", "nt"]
    monkeypatch.setenv(cs.THRESHOLD_ENV, str(1 << 30))
    k(fits, over, 0)
    assert calls[-1] == "cached"
    assert cs.use_nt_stores(over, threshold=0) and not cs.use_nt_stores(over, threshold=1 << 30)


def test_llc_bytes_reads_this_machine():
    assert cs.llc_bytes() >= 1 << 20
