"""The Hopper wgmma + TMA GEMM (kernels/cuda/gemm_wgmma.cu), proven without a GPU.

* It compiles for sm_90a through NVRTC exactly as the CuPy backend's launcher does
  (bench/backends/tma_launch.compile_cubin), and through nvcc (pip toolchain).
* Its SASS holds the native Hopper forms: HGMMA 64x256x16 (fp16, bf16; B read transposed),
  QGMMA 64x256x32 E4M3 (fp8), UTMALDG (TMA loads), SYNCS (mbarriers), the setmaxnreg pair with
  the budgets of the source, and no local memory.
* Registers fit: the launch budget of 384 threads, the producer/consumer setmaxnreg budgets,
  and every register the SASS names sits under the budget of its warpgroup's code.
* A CPU model of the schedule (same constants, read from the .cu) covers every output element
  exactly once for odd M, N, K and reproduces A @ B with zero-filled boxes; a model of the
  mbarrier ring (the kernel's parity formulas) never deadlocks nor overwrites a stage in use.
* The shared-memory layouts against CuTe (tests/standins/cute_oracle.cpp): the kernel's descriptors,
  TMA boxes and fp8 transpose, and the emulator's descriptor decode; the fp8 transpose's bank
  wavefronts counted from the header's own index formulas.
* The check build (ROOFBENCH_BOUNDED_WAIT=1) traps where the timed build waits.
* Host plumbing: tensor-map arguments, kernel parameter packing, per-arch dispatch, refusals.
The kernel itself runs on the CPU in tests/kernels/test_cuda_emu.py and
tests/bench/backends/test_cupy_emulated.py.
It has not run on a GPU yet: NOT_VALIDATED_ON_HARDWARE says so until it has.
"""

from __future__ import annotations

import random
import re
import subprocess
from collections import Counter
from collections.abc import Callable
from functools import cache
from pathlib import Path

import cuda_tools as ct
import numpy as np
import pytest
from patience import patience
from roofbench.bench.backends.base import CaseUnsupported  # noqa: E402
from roofbench.bench.backends.gpu_common import ALL_LAUNCHERS, plan_launches  # noqa: E402
from roofbench.bench.backends.tma_launch import param_bytes
from roofbench.kernels import cuda_impl as cu  # noqa: E402
from roofbench.kernels import gemm  # noqa: E402
from roofbench.kernels import wgmma_gemm as wg
from roofbench.kernels.registry import workloads  # noqa: E402
from roofbench.kernels.spec import Case  # noqa: E402
from roofbench.roofs.probes.cuda_driver import KernelParams, pointer_bytes
from testpaths import STANDINS

SRC = wg.WGMMA_SOURCE
DTYPES = ("fp16", "bf16", "fp8")
C = wg.wgmma_constants()
H200 = cu.DeviceProps(cc=(9, 0), sm_count=132, l2_bytes=60 << 20,
                      smem_per_block_optin=227 * 1024, name="fake H200")
A100 = cu.DeviceProps(cc=(8, 0), sm_count=108, l2_bytes=40 << 20, name="fake A100")
REGS_PER_SM = 65536


def has(ops: Counter, prefix: str) -> int:
    return sum(n for op, n in ops.items() if op.startswith(prefix))


# --------------------------------------------------------------------------- compiling
needs_nvcc = pytest.mark.skipif(ct.missing_tools("nvcc", "cuobjdump") is not None,
                                reason=ct.missing_tools("nvcc", "cuobjdump") or "")


@cache
def _nvrtc_cubin(bounded: bool) -> Path:
    """The GEMM's cubin as NVRTC builds it on the backend's path (sm_90a), the check build
    (ROOFBENCH_BOUNDED_WAIT=1) or the timed one: once a session each (the fixture below and
    the bounded-wait test read the same build), the caller's environment left as found."""
    import os

    from roofbench.bench.backends.tma_launch import compile_cubin

    before = os.environ.pop(cu.BOUNDED_WAIT_ENV, None)
    try:
        if bounded:
            os.environ[cu.BOUNDED_WAIT_ENV] = "1"
        cubin = ct._TMP / f"gemm_wgmma.nvrtc.{'check' if bounded else 'timed'}.sm_90a.cubin"
        cubin.write_bytes(compile_cubin(SRC, "sm_90a"))
        return cubin
    finally:
        os.environ.pop(cu.BOUNDED_WAIT_ENV, None)
        if before is not None:
            os.environ[cu.BOUNDED_WAIT_ENV] = before


@pytest.fixture(scope="module")
def nvrtc_sass() -> dict[str, str]:
    """SASS per kernel of the cubin NVRTC builds on the backend's path (sm_90a)."""
    pytest.importorskip("cuda.bindings.nvrtc", reason="cuda-bindings not installed")
    if ct.missing_tools("cuobjdump") or not ct.cuda_include_dirs():
        pytest.skip("pip CUDA toolchain / headers missing: pip install -e '.[cudatools]'")
    cubin = _nvrtc_cubin(bool(cu.bounded_wait_options()))
    out: dict[str, str] = {}
    name = None
    for line in ct.sass_listing(cubin).splitlines():
        if m := re.search(r"Function : (\S+)", line):
            name = m.group(1)
            out[name] = ""
        elif name is not None:
            out[name] += line + "\n"
    return out


@pytest.fixture(scope="module")
def nvcc_sm90a() -> ct.Compiled:
    if ct.missing_tools("nvcc", "cuobjdump"):
        pytest.skip(ct.missing_tools("nvcc", "cuobjdump") or "")
    return ct.compile_cu(SRC, "sm_90a")


def test_nvrtc_builds_every_dtype_for_sm90a(nvrtc_sass):
    assert set(nvrtc_sass) == {f"gemm_wgmma_{d}" for d in DTYPES}


@pytest.mark.parametrize("dtype", DTYPES)
def test_sass_is_native_hopper(nvrtc_sass, dtype):
    text = nvrtc_sass[f"gemm_wgmma_{dtype}"]
    ops = Counter(ct.opcodes(text))
    steps = C["WG_BK_BYTES"] // 32  # one wgmma per 32 bytes of k per stage
    # (the opcode parser stops at the lower-case shape: count the full forms in the text)
    if dtype == "fp8":
        assert len(re.findall(r"QGMMA\.64x256x32\.F32\.E4M3\.E4M3 ", text)) == steps, ops
        assert not has(ops, "HGMMA") and not has(ops, "HMMA")
        # the producer's transpose: shared loads/stores, byte permutes
        assert has(ops, "LDS") and has(ops, "STS.128") and has(ops, "PRMT")
    else:
        bf = r"\.BF16" if dtype == "bf16" else ""
        assert len(re.findall(rf"HGMMA\.64x256x16\.F32{bf} ", text)) == steps, ops
        assert not has(ops, "HMMA") and not has(ops, "QGMMA")
        assert text.count(".tnspB") == steps, "B must be read N-major (transposed)"
    assert has(ops, "UTMALDG.2D"), "no TMA load"
    assert has(ops, "SYNCS.ARRIVE.TRANS64"), "no mbarrier arrive(.expect_tx)"
    assert has(ops, "SYNCS.PHASECHK.TRANS64.TRYWAIT"), "no mbarrier parity wait"
    assert has(ops, "WARPGROUP.ARRIVE") and has(ops, "WARPGROUP.DEPBAR"), ops
    assert not has(ops, "LDL") and not has(ops, "STL"), "local memory"
    # No generic loads/stores to shared memory: the aligned base stays in the shared window.
    assert not has(ops, "LD.E") and not has(ops, "ST.E"), ops


@pytest.mark.parametrize("dtype", DTYPES)
def test_setmaxnreg_budgets(nvrtc_sass, dtype):
    """The SASS carries the source's budgets; they fit the register file; every register a
    warpgroup's code names is under its budget (consumers hold 128 FP32 accumulators)."""
    text = nvrtc_sass[f"gemm_wgmma_{dtype}"]
    prod, cons = C["WG_PRODUCER_REGS"], C["WG_CONSUMER_REGS"]
    assert re.search(rf"USETMAXREG\.DEALLOC\.CTAPOOL 0x{prod:x}\b", text)
    assert re.search(rf"USETMAXREG\.TRY_ALLOC\.CTAPOOL \w+, 0x{cons:x}\b", text)
    wgs = C["WG_THREADS"] // 128
    assert 128 * prod + 128 * (wgs - 1) * cons <= REGS_PER_SM
    assert prod % 8 == 0 and cons % 8 == 0 and 24 <= prod < cons <= 256

    def max_reg(lines: list[str]) -> int:
        regs = [int(r) for ln in lines for r in re.findall(r"\bR(\d+)\b", ln.split(";")[0])]
        return max(regs, default=-1)

    lines = text.splitlines()
    launch_budget = REGS_PER_SM // C["WG_THREADS"] // 8 * 8
    assert max_reg(lines) < min(cons, launch_budget)
    # The producer branch is laid out after its USETMAXREG.DEALLOC up to its final EXIT.
    start = next(i for i, ln in enumerate(lines) if "USETMAXREG.DEALLOC" in ln)
    assert 0 <= max_reg(lines[start:]) < prod


def test_ptxas_resources(nvcc_sm90a):
    launch_budget = REGS_PER_SM // C["WG_THREADS"] // 8 * 8
    for d in DTYPES:
        r = nvcc_sm90a.resources[f"gemm_wgmma_{d}"]
        assert r.spill_stores == r.spill_loads == r.stack == 0, r
        assert 128 < r.registers <= launch_budget, r  # holds the accumulators, fits 384 threads
    assert "warning" not in nvcc_sm90a.log.lower(), nvcc_sm90a.log


@needs_nvcc
@pytest.mark.parametrize("arch", ct.ARCHS)
def test_other_archs_get_a_trap_stub(arch):
    """Non-sm_90a builds (CuPy's default arch) contain no wgmma: the host never launches it."""
    ops = {k: Counter(ct.opcodes(t)) for k, t in ct.sass(SRC, arch).items()}
    for d in DTYPES:
        k = ops[f"gemm_wgmma_{d}"]
        assert not has(k, "HGMMA") and not has(k, "QGMMA") and has(k, "BPT.TRAP"), k


# ------------------------------------------------------------------- shared memory, TMA
@pytest.mark.parametrize("dtype", DTYPES)
def test_shared_memory_fits_and_matches_tma_boxes(dtype):
    smem = wg.wgmma_smem(dtype)
    assert smem <= 227 * 1024
    a, b = wg.wgmma_tensor_maps((4096, 4096, 4096), dtype)
    a_bytes, b_bytes = C["WG_BM"] * C["WG_BK_BYTES"], C["WG_BN"] * C["WG_BK_BYTES"]
    assert a.box_bytes == a_bytes
    if dtype == "fp8":  # one staging box per stage, transposed on chip
        assert b.box_bytes == b_bytes and b.swizzle == "NONE"
        assert b.box[0] * 1 % 16 == 0 and max(b.box) <= 256
    else:  # 4 boxes of 64 columns: the kernel's expect_tx is the whole stage
        assert b.box_bytes * (C["WG_BN"] // b.box[0]) == b_bytes
        assert b.box[0] * 2 == 128  # the 128-byte swizzle span
    assert a.box[0] * cu.itemsize(dtype) == 128 and a.swizzle == "128B"
    assert a.dims == (4096, 4096) and a.strides == (4096 * cu.itemsize(dtype),)


def test_tensor_map_names_exist_in_the_driver_bindings():
    pytest.importorskip("cuda.bindings.driver", reason="cuda-bindings not installed")
    from roofbench.bench.backends.tma_launch import tensor_map_enums

    for d in DTYPES:
        for spec in wg.wgmma_tensor_maps((256, 256, 256), d):
            dt, sw = tensor_map_enums(spec)
            assert dt.name.endswith(spec.data_type) and sw.name.endswith(spec.swizzle)


def test_kernel_params_pack_maps_pointers_and_scalars():
    maps = {"A": bytes(range(128)), "B": bytes(range(128, 256))}
    ptrs = {"C": 0x7F00_1234_5600}
    args = ("A", "B", "C", np.int64(1000), np.int64(256), np.int64(-1))
    values = param_bytes(args, ptrs.__getitem__, maps)
    params = KernelParams(values)
    back = params.read_back([128, 128, 8, 8, 8, 8])
    assert back[0] == maps["A"] and back[1] == maps["B"]
    assert back[2] == pointer_bytes(0x7F00_1234_5600)
    assert [int.from_bytes(x, "little", signed=True) for x in back[3:]] == [1000, 256, -1]


# ---------------------------------------------------------------- schedule (CPU model)
@pytest.mark.parametrize("m,n", [(1, 1), (127, 255), (129, 257), (1000, 130), (2049, 777),
                                 (128 * 9 + 5, 256 * 3 + 1), (4096, 4096)])
def test_tile_schedule_is_a_bijection(m, n):
    tiles_m, tiles_n = wg.wgmma_tiles(m, n)
    seen = [wg.wgmma_tile(b, tiles_m, tiles_n) for b in range(tiles_m * tiles_n)]
    assert sorted(seen) == [(i, j) for i in range(tiles_m) for j in range(tiles_n)]


def test_schedule_groups_tile_rows_for_l2_reuse():
    tiles_m, tiles_n = wg.wgmma_tiles(4096, 4096)
    g = C["WG_GROUP_M"]
    first = [wg.wgmma_tile(b, tiles_m, tiles_n) for b in range(g)]
    assert first == [(i, 0) for i in range(g)]  # consecutive CTAs share a B column block


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,n,k", [(131, 259, 67), (1, 300, 129), (257, 1, 1), (129, 513, 300)])
def test_cpu_model_writes_every_element_once(dtype, m, n, k):
    rng = np.random.default_rng(7)
    a = rng.uniform(-1, 1, (m, k))
    b = rng.uniform(-1, 1, (k, n))
    c, writes = wg.wgmma_model(a, b, dtype)
    assert writes.min() == 1 and writes.max() == 1
    np.testing.assert_allclose(c, a @ b, rtol=1e-12, atol=1e-12)


class _Bar:
    """An mbarrier: `count` arrivals complete a phase; try_wait.parity(p) passes once the
    phase of parity p has completed (a fresh barrier passes parity 1 at once)."""

    def __init__(self, count: int) -> None:
        self.count, self.pending, self.phase = count, count, 0

    def arrive(self) -> None:
        self.pending -= 1
        if self.pending == 0:
            self.phase, self.pending = self.phase + 1, self.count

    def passed(self, parity: int) -> bool:
        return (self.phase & 1) != parity


def _run_ring(stages: int, ktiles: int, seed: int, late: bool = False) -> tuple[bool, int]:
    """One random interleaving of the producer and two consumers: (all finished, the most
    stages a consumer held while it waited for its next tile). The kernel's order releases a
    stage right after the wait_group of the group that read it; ``late`` is the former order
    (wait_group 1 after the next tile's group, then release the previous stage)."""
    full = [_Bar(1) for _ in range(stages)]
    empty = [_Bar(2) for _ in range(stages)]
    slot = [-1] * stages
    reading: list[set[int]] = [set() for _ in range(stages)]
    held_while_waiting = 0

    def producer():
        for kt in range(ktiles):
            s = kt % stages
            if kt >= stages:
                while not empty[s].passed(((kt // stages) & 1) ^ 1):
                    yield
            assert not reading[s], f"stage {s} overwritten while read"
            slot[s] = kt
            full[s].arrive()
            yield

    def release(cid: int, s: int) -> None:
        reading[s].discard(cid)
        empty[s].arrive()

    def consumer(cid: int):
        nonlocal held_while_waiting
        for kt in range(ktiles):
            s = kt % stages
            while not full[s].passed((kt // stages) & 1):
                held = sum(cid in r for r in reading)
                held_while_waiting = max(held_while_waiting, held)
                yield
            assert slot[s] == kt
            reading[s].add(cid)  # wgmma issued and committed
            yield
            if not late:
                release(cid, s)  # wait_group 0: the group that read stage s is done
            elif kt > 0:
                release(cid, (kt - 1) % stages)  # wait_group 1: the previous one is
            yield
        if late:
            release(cid, (ktiles - 1) % stages)

    rnd = random.Random(seed)
    actors = [producer(), consumer(0), consumer(1)]
    for _ in range(100000):
        if not actors:
            return True, held_while_waiting
        a = rnd.choice(actors)
        try:
            next(a)
        except StopIteration:
            actors.remove(a)
    return not actors, held_while_waiting


def test_mbarrier_ring_protocol():
    """The kernel's ring as a model: full[s] (one expect_tx arrival) and empty[s] (every
    consumer thread; one arrival per consumer here) with the parity formulas of
    gemm_wgmma.cu; random interleavings finish without deadlock, deliver tiles in order and
    never overwrite a stage whose wgmma may still read it. A consumer waiting for its next
    tile holds no stage, so the producer can fill all of them (the late release held one:
    3 fp8 stages acted as 2). The emulation (test_cuda_emu) runs the kernel itself."""
    for stages in (C["WG_STAGES_16"], C["WG_STAGES_8"]):
        for ktiles in (1, 2, stages, stages + 1, 3 * stages + 2):
            held = []
            for seed in range(20):
                done, h = _run_ring(stages, ktiles, seed)
                assert done, f"deadlock: {stages} stages, {ktiles}"
                held.append(h)
                done, _ = _run_ring(stages, ktiles, seed, late=True)
                assert done
            assert max(held) == 0, (stages, ktiles)
    late = max(_run_ring(3, 11, seed, late=True)[1] for seed in range(20))
    assert late == 1


def test_mbarrier_model_parity_semantics():
    """The model's barrier follows try_wait.parity: a fresh barrier passes parity 1 at once
    (so the producer's first lap never blocks), parity 0 after the first completed phase."""
    full = _Bar(1)
    assert full.passed(1) and not full.passed(0)
    full.arrive()
    assert full.passed(0) and not full.passed(1)


# ------------------------------------------- the kernel's own C code, compiled by g++
_HARNESS = r"""
#define __device__
#define __forceinline__ inline
#define __restrict__ __restrict
struct uint4 { unsigned x, y, z, w; };
static inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) {
    return uint4{a, b, c, d};
}
// CUDA's __byte_perm: result byte i = byte ((s >> 4i) & 7) of the 8 bytes {y:x}.
static inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
    const unsigned long long b = ((unsigned long long)y << 32) | x;
    unsigned r = 0;
    for (int i = 0; i < 4; ++i)
        r |= (unsigned)((b >> (8 * ((s >> (4 * i)) & 7))) & 0xFF) << (8 * i);
    return r;
}
#include "wgmma_layout.cuh"
extern "C" void rb_transpose(const unsigned* stg, unsigned char* bs) {
    for (int t = 0; t < 128; ++t) transpose_fp8_tile(stg, bs, t);  // the producer warpgroup
}
extern "C" void rb_tile(int bid, int tiles_m, int tiles_n, int* out) {
    wgmma_tile(bid, tiles_m, tiles_n, out[0], out[1]);
}
extern "C" int rb_store_offset(int t, int kc, int s) { return fp8_store_offset(t, kc, s); }
extern "C" int rb_load_word(int t, int kc, int j) { return fp8_load_word(t, kc, j); }
"""


@pytest.fixture(scope="module")
def layout_lib():
    """wgmma_layout.cuh (the text the kernel includes) built for the host with g++."""
    import ctypes
    import shutil

    gxx = shutil.which("g++")
    if gxx is None:
        pytest.skip("g++ not found (the host build of wgmma_layout.cuh needs it)")
    src = ct._TMP / "wgmma_layout_host.cpp"
    so = ct._TMP / "wgmma_layout_host.so"
    src.write_text(_HARNESS)
    p = subprocess.run([gxx, "-std=c++17", "-O1", "-shared", "-fPIC", "-w",
                        f"-I{cu.CUDA_DIR}", str(src), "-o", str(so)],
                       capture_output=True, text=True, timeout=patience(120))
    assert p.returncode == 0, p.stderr
    return ctypes.CDLL(str(so))


def test_fp8_transpose_lands_in_the_swizzled_k_major_layout(layout_lib):
    """The producer's transpose, run on the host: staging [128 k][256 n] -> B[n][k] with the
    16-byte chunk c of row n at chunk c ^ (n % 8), every byte of the tile written once."""
    import ctypes

    bk, bn = C["WG_BK_BYTES"], C["WG_BN"]
    stg = np.random.default_rng(3).integers(0, 256, (bk, bn), dtype=np.uint8)
    out = np.zeros(bn * bk, dtype=np.uint8)
    layout_lib.rb_transpose(stg.ctypes.data_as(ctypes.c_void_p),
                            out.ctypes.data_as(ctypes.c_void_p))
    n = np.arange(bn)[:, None]
    k = np.arange(bk)[None, :]
    addr = n * bk + (((k >> 4) ^ (n & 7)) << 4) + (k & 15)
    assert sorted(addr.ravel().tolist()) == list(range(bn * bk))  # a permutation
    np.testing.assert_array_equal(out[addr], stg.T)


def _wavefronts(addrs: list[int], width: int) -> int:
    """Shared-memory wavefronts of one warp-wide access of ``width`` bytes per lane: 32 banks
    of 4 bytes, one distinct 4-byte word per bank per wavefront (lanes on the same word share
    it), so the access takes as many wavefronts as the most distinct words any bank holds."""
    words = {a // 4 + i for a in addrs for i in range(width // 4)}
    return max(Counter(w % 32 for w in words).values())


def _quarter_wavefronts(addrs: list[int]) -> int:
    """The same for 16-byte accesses served a quarter-warp (8 lanes, 128 bytes) at a time."""
    return sum(_wavefronts(addrs[q:q + 8], 16) for q in range(0, 32, 8))


def test_fp8_transpose_is_free_of_bank_conflicts(layout_lib):
    """Every warp access of the producer's transpose, enumerated from the header's own index
    formulas (fp8_load_word, fp8_store_offset) for the 32 lanes: the 4-byte staging loads take
    1 wavefront, the 16-byte stores the 4 a warp's 512 bytes need at least (rotating the rows
    by (s + n4) & 3 reached only 4 of the 8 chunk positions: 8 wavefronts)."""
    for warp in range(4):  # the producer warpgroup
        lanes = range(32 * warp, 32 * warp + 32)
        kc0 = {t >> 6 for t in lanes}
        assert len(kc0) == 1  # the loop's k chunks are uniform across the warp
        for kc in range(kc0.pop(), 8, 2):
            for j in range(16):
                words = [layout_lib.rb_load_word(t, kc, j) for t in lanes]
                assert _wavefronts([4 * w for w in words], 4) == 1, (warp, kc, j)
            for s in range(4):
                offs = [layout_lib.rb_store_offset(t, kc, s) for t in lanes]
                assert len(set(offs)) == 32 and all(o % 16 == 0 for o in offs)
                got = (_wavefronts(offs, 16), _quarter_wavefronts(offs))
                assert got == (4, 4), f"warp {warp} k chunk {kc} store {s}: {got} wavefronts"


@pytest.mark.parametrize("m,n", [(1, 1), (129, 257), (1000, 130), (128 * 9 + 5, 256 * 3 + 1),
                                 (4096, 4096), (8192, 8192)])
def test_c_schedule_matches_the_python_model(layout_lib, m, n):
    import ctypes

    tiles_m, tiles_n = wg.wgmma_tiles(m, n)
    out = (ctypes.c_int * 2)()
    for bid in range(tiles_m * tiles_n):
        layout_lib.rb_tile(bid, tiles_m, tiles_n, out)
        assert (out[0], out[1]) == wg.wgmma_tile(bid, tiles_m, tiles_n), bid


# ------------------------------------------- the descriptors against CuTe (the oracle)
def _cutlass_include() -> Path | None:
    try:
        import cutlass_library
    except ImportError:
        return None
    d = Path(cutlass_library.__file__).parent / "source" / "include"
    return d if (d / "cute" / "atom" / "mma_traits_sm90_gmma.hpp").is_file() else None


# The kernel's descriptor code, lifted out of its source: the statements of gemm_wgmma.cu
# that compute FP8, BK, the stage addresses sa / sb and the descriptors da / db (each exactly
# once in the kernel), compiled against the kernel's own headers into rb_kernel_descs, which
# the oracle calls. An edit of those statements, or of gmma_desc in hopper_ops.cuh, reaches
# the oracle as it reaches the kernel.
_DESC_CODE = (r"constexpr bool FP8 = [^;]*;", r"constexpr int BK = [^;]*;",
              r"const unsigned sa = [^;]*;", r"const unsigned sb = [^;]*;",
              r"const unsigned long long da = [^;]*;", r"const unsigned long long db = [^;]*;")


def kernel_desc_source(kernel: str) -> str:
    """C++ of rb_kernel_descs from the text of gemm_wgmma.cu."""
    stmts = []
    for pat in _DESC_CODE:
        found = re.findall(pat, kernel)
        assert len(found) == 1, f"gemm_wgmma.cu: {pat!r} found {len(found)} times, not once"
        stmts.append(found[0])
    body = "\n    ".join(stmts)
    return f"""// Generated by tests/kernels/test_wgmma.py from gemm_wgmma.cu: do not edit.
#include <vector_functions.h>
#include <vector_types.h>
#define __device__
#define __forceinline__ inline
#define __restrict__ __restrict
static inline unsigned __byte_perm(unsigned, unsigned, unsigned) {{ return 0; }}
#include "hopper_ops.cuh"
#include "wgmma_layout.cuh"
template <typename T>
static void descs(unsigned base, int s, int cw, int kk, unsigned long long* a,
                  unsigned long long* b) {{
    {body}
    *a = da;
    *b = db;
}}
extern "C" void rb_kernel_descs(int elem, unsigned base, int s, int cw, int kk,
                                unsigned long long* a, unsigned long long* b) {{
    if (elem == 1)
        descs<unsigned char>(base, s, cw, kk, a, b);
    else
        descs<unsigned short>(base, s, cw, kk, a, b);
}}
"""


Oracle = Callable[..., dict[str, tuple[int, int, str]]]


@pytest.fixture(scope="module")
def cute_oracle() -> Oracle:
    """tests/standins/cute_oracle.cpp built with g++ against CUTLASS's headers (nvidia-cutlass),
    linked with the kernel's descriptor code (``kernel_desc_source``; ``edits`` replace one
    text in gemm_wgmma.cu or hopper_ops.cuh first): per check, (elements checked, mismatches,
    the first mismatch)."""
    import shutil

    inc = _cutlass_include()
    if inc is None:
        pytest.skip("CUTLASS headers missing: pip install -e '.[cudatools]' (nvidia-cutlass)")
    gxx = shutil.which("g++")
    if gxx is None or not ct.cuda_include_dirs():
        pytest.skip("g++ or the CUDA headers are missing")
    cuda = [f"-I{d}" for d in ct.cuda_include_dirs()]
    cuda += [f"-I{d}/cccl" for d in ct.cuda_include_dirs() if (Path(d) / "cccl").is_dir()]
    root = ct._TMP / "cute_oracle"
    root.mkdir(exist_ok=True)
    obj = root / "cute_oracle.o"
    flags = ("-std=c++17", "-O1", "-w", "-c")

    def build() -> None:  # CuTe's templates: most of this file's time, kept by the store
        p = subprocess.run([gxx, *flags, f"-I{inc}", *cuda, f"-I{ct.EMU_DIR}",
                            f"-I{cu.CUDA_DIR}", str(STANDINS / "cute_oracle.cpp"), "-o",
                            str(obj)], capture_output=True, text=True, timeout=patience(600))
        assert p.returncode == 0, p.stderr[-4000:]

    ct.gxx_kept(STANDINS / "cute_oracle.cpp", flags, (ct.EMU_DIR, cu.CUDA_DIR), obj, build)
    built: dict[str, Path] = {}

    def exe_for(edits: dict[str, tuple[str, str]]) -> Path:
        key = repr(sorted(edits.items()))
        if key in built:
            return built[key]
        d = root / f"v{len(built)}"
        d.mkdir(exist_ok=True)
        texts = {name: (cu.CUDA_DIR / name).read_text()
                 for name in ("gemm_wgmma.cu", "hopper_ops.cuh", "wgmma_layout.cuh")}
        for name, (old, new) in edits.items():
            assert texts[name].count(old) == 1, f"{name}: the text to edit is not there once"
            texts[name] = texts[name].replace(old, new)
        for name in ("hopper_ops.cuh", "wgmma_layout.cuh"):
            (d / name).write_text(texts[name])
        (d / "kernel_descs.cpp").write_text(kernel_desc_source(texts["gemm_wgmma.cu"]))
        exe = d / "cute_oracle"
        q = subprocess.run([gxx, "-std=c++17", "-O1", "-w", f"-I{d}", *cuda,
                            str(d / "kernel_descs.cpp"), str(obj), "-o", str(exe)],
                           capture_output=True, text=True, timeout=patience(300))
        assert q.returncode == 0, q.stderr[-4000:]
        built[key] = exe
        return exe

    def run(plant: str, edits: dict[str, tuple[str, str]] | None = None
            ) -> dict[str, tuple[int, int, str]]:
        out = subprocess.run([str(exe_for(edits or {})), plant], capture_output=True,
                             text=True, timeout=patience(120), check=True).stdout
        rows = {}
        for line in out.splitlines():
            name, checked, bad, *first = line.split(" ", 3)
            rows[name] = (int(checked), int(bad), " ".join(first))
        return rows
    return run


def test_cute_layouts_agree_with_the_emulator_and_the_kernel(cute_oracle):
    """CuTe's GMMA layout atoms (K-major and MN-major, 128/64/32-byte swizzle, interleaved;
    16- and 8-bit) and make_gmma_desc, against the emulator's decode of the same descriptors
    for every element of every k step; and the descriptors the kernel builds (bit for bit),
    their decode for every (m, k) / (n, k) of a stage, and where TMA's boxes and the fp8
    transpose put each element: all agree."""
    rows = cute_oracle("none")
    atoms = [n for n in rows if n.startswith("atom_")]
    assert len(atoms) == 13 and {"atom_MN_SW64_f16", "atom_K_SW32_e4m3"} <= set(atoms)
    for dt in DTYPES:
        for what in ("kernel_desc_A", "kernel_decode_A", "tma_box_A", "kernel_desc_B",
                     "kernel_decode_B", "transpose_B" if dt == "fp8" else "tma_box_B"):
            assert f"{what}_{dt}" in rows
    for name, (checked, bad, first) in rows.items():
        assert checked > 0 and bad == 0, f"{name}: {bad} of {checked} disagree, {first}"
    assert rows["kernel_decode_B_fp16"][0] == 256 * 16 * 4  # every (n, k) of the 4 k steps


@pytest.mark.parametrize("plant", ["swap_lbo_sbo", "swizzle64", "swizzle32"])
def test_planted_descriptor_errors_disagree_with_cute(cute_oracle, plant):
    """LBO and SBO swapped, or a wrong swizzle mode, in the kernel's descriptors: CuTe and the
    decode disagree for A and B of every dtype (and the descriptors differ)."""
    rows = cute_oracle(plant)
    for dt in DTYPES:
        for op in "AB":
            assert rows[f"kernel_desc_{op}_{dt}"][1] > 0, (plant, op, dt)
            assert rows[f"kernel_decode_{op}_{dt}"][1] > 0, (plant, op, dt)


# Edits of the kernel's own descriptor code (gemm_wgmma.cu, hopper_ops.cuh): the oracle
# compiles that code, so each fails it where the kernel's A or B descriptors change.
KERNEL_DESC_EDITS = {
    "A: LBO and SBO swapped in gemm_wgmma.cu": (
        {"gemm_wgmma.cu": ("gmma_desc(sa + 32 * kk, 16, 1024)",
                           "gmma_desc(sa + 32 * kk, 1024, 16)")},
        "A", DTYPES),
    "B: LBO and SBO swapped in gemm_wgmma.cu": (
        {"gemm_wgmma.cu": ("gmma_desc(sb + 2048 * kk, BK * 128, 1024)",
                           "gmma_desc(sb + 2048 * kk, 1024, BK * 128)")},
        "B", ("fp16", "bf16")),
    "A: the k step's offset in gemm_wgmma.cu": (
        {"gemm_wgmma.cu": ("gmma_desc(sa + 32 * kk, 16, 1024)",
                           "gmma_desc(sa + 16 * kk, 16, 1024)")},
        "A", DTYPES),
    "the 64-byte swizzle in hopper_ops.cuh's gmma_desc": (
        {"hopper_ops.cuh": ("<< 32) | (1ull << 62);", "<< 32) | (2ull << 62);")},
        "AB", DTYPES),
}


def test_the_oracle_checks_the_kernels_own_descriptor_code(cute_oracle):
    """Unedited, the descriptors lifted from the kernel's source agree with CuTe (the test
    above); the lifted statements are the kernel's (each found exactly once)."""
    src = (cu.CUDA_DIR / "gemm_wgmma.cu").read_text()
    code = kernel_desc_source(src)
    assert "gmma_desc(sa + 32 * kk, 16, 1024)" in code and "WG_STAGE_BYTES" in code
    rows = cute_oracle("none", {})
    assert all(rows[f"kernel_desc_{op}_{dt}"][1] == 0 for op in "AB" for dt in DTYPES)


@pytest.mark.parametrize("edit", list(KERNEL_DESC_EDITS))
def test_an_edit_of_the_kernels_descriptor_code_fails_the_oracle(cute_oracle, edit):
    edits, ops, dtypes = KERNEL_DESC_EDITS[edit]
    rows = cute_oracle("none", edits)
    for dt in dtypes:
        for op in ops:
            assert rows[f"kernel_desc_{op}_{dt}"][1] > 0, (edit, op, dt)
            assert rows[f"kernel_decode_{op}_{dt}"][1] > 0, (edit, op, dt)


# ------------------------------------------------------------ the bounded (check) build
def test_bounded_wait_option_follows_the_environment(monkeypatch):
    for value, want in (("1", ("-DRB_BOUNDED_WAIT",)), ("0", ()), ("", ())):
        monkeypatch.setenv(cu.BOUNDED_WAIT_ENV, value)
        assert cu.bounded_wait_options() == want
    monkeypatch.delenv(cu.BOUNDED_WAIT_ENV)
    assert cu.bounded_wait_options() == ()


def test_check_build_traps_where_the_timed_build_waits(monkeypatch):
    """NVRTC on the backend's path: with ROOFBENCH_BOUNDED_WAIT=1 every kernel of the GEMM
    (and the probe) has the trap of the bounded wait, the producer's code still fits its
    setmaxnreg budget; the timed build has no trap."""
    pytest.importorskip("cuda.bindings.nvrtc", reason="cuda-bindings not installed")
    if ct.missing_tools("cuobjdump") or not ct.cuda_include_dirs():
        pytest.skip("pip CUDA toolchain / headers missing: pip install -e '.[cudatools]'")
    from roofbench.roofs.probes import cuda_driver as cd

    def sass_of(cubin: Path) -> dict[str, str]:
        text = ct.sass_listing(cubin)  # kept in the test store by the cubin's bytes
        return dict(re.findall(r"Function : (\S+)\n(.*?)(?=\n\s*Function : |\Z)", text, re.S))

    timed = sass_of(_nvrtc_cubin(False))
    check = sass_of(_nvrtc_cubin(True))
    monkeypatch.setenv(cu.BOUNDED_WAIT_ENV, "1")  # the probe built as the check build
    probe = cd.compile_cubin((ct.PROBE_DIR / "wgmma.cu").read_text(), "wgmma.cu", "sm_90a",
                             ("-std=c++17",))
    assert len(probe) > 0
    prod = C["WG_PRODUCER_REGS"]
    for d in DTYPES:
        k = f"gemm_wgmma_{d}"
        assert "BPT.TRAP" not in timed[k] and "BPT.TRAP" in check[k], k
        lines = check[k].splitlines()
        start = next(i for i, ln in enumerate(lines) if "USETMAXREG.DEALLOC" in ln)
        regs = [int(r) for ln in lines[start:] for r in re.findall(r"\bR(\d+)\b",
                                                                  ln.split(";")[0])]
        assert max(regs) < prod, (k, max(regs))


# ------------------------------------------------------------------------ host plumbing
def _case(variant: str, dtype: str, size: tuple[int, int, int]) -> Case:
    w = workloads()["gemm"]
    return Case(w, w.variants[variant], dtype, size)


@pytest.mark.parametrize("dtype", DTYPES)
def test_tensor_is_wgmma_on_hopper_and_mma_sync_elsewhere(dtype):
    (pl,) = plan_launches(_case("tensor", dtype, (1000, 512, 256)), H200, launchers=ALL_LAUNCHERS)
    assert pl.function == f"gemm_wgmma_{dtype}" and pl.block == (C["WG_THREADS"], 1, 1)
    assert pl.grid == (wg.wgmma_tiles(1000, 512)[0] * wg.wgmma_tiles(1000, 512)[1], 1, 1)
    assert pl.smem == wg.wgmma_smem(dtype)
    assert [m.buffer for m in pl.tensor_maps] == ["A", "B"]
    if dtype != "fp8":  # sm_80 has no FP8 mma
        (old,) = plan_launches(_case("tensor", dtype, (1000, 512, 256)), A100)
        assert old.function == f"gemm_tensor_{dtype}" and not old.tensor_maps


def test_tensor_mma_is_the_legacy_hopper_point():
    (pl,) = plan_launches(_case("tensor_mma", "fp16", (512, 512, 512)), H200)
    assert pl.function == "gemm_tensor_fp16"
    with pytest.raises(CaseUnsupported, match="Hopper-only"):
        plan_launches(_case("tensor_mma", "fp16", (512, 512, 512)), A100)


def test_backends_without_tensor_map_launches_refuse():
    with pytest.raises(CaseUnsupported, match="cuda backend"):
        plan_launches(_case("tensor", "fp16", (512, 512, 512)), H200)  # e.g. PyCUDA


@pytest.mark.parametrize("dtype,size,ok", [
    ("fp16", (1001, 8, 8), True), ("fp16", (64, 7, 64), False), ("fp16", (64, 64, 12), False),
    ("bf16", (3, 24, 40), True), ("fp8", (5, 16, 32), True), ("fp8", (5, 24, 32), False),
    ("fp8", (5, 32, 8), False)])
def test_refuses_sizes_tma_cannot_read(dtype, size, ok):
    case = _case("tensor", dtype, size)
    if ok:
        assert plan_launches(case, H200, launchers=ALL_LAUNCHERS)
    else:
        with pytest.raises(CaseUnsupported, match="multiples of"):
            plan_launches(case, H200, launchers=ALL_LAUNCHERS)


def test_wgmma_needs_exactly_sm90():
    k = gemm.CUDA["tensor"]["tensor"].pick((9, 0))
    assert isinstance(k, wg.TmaKernel)
    assert k.unsupported("fp16", (10, 0)) and k.unsupported("fp32", (9, 0))
    assert k.unsupported("fp16", (9, 0)) is None


def test_marked_not_validated_on_hardware():
    assert "gemm_wgmma" in cu.NOT_VALIDATED_ON_HARDWARE


# ------------------------------------------------------------------ on a GPU (Hopper only)
# Edges: odd M, a partial last N tile, a K tail shorter than one stage, the ring wrapping
# several times, and one size that fills the device. Validated against float64 like every case.
GPU_SIZES = {"fp16": [(1000, 512, 256), (129, 264, 72), (512, 512, 1024), (2048, 2048, 2048)],
             "bf16": [(1000, 512, 256), (129, 264, 72), (512, 512, 1024)],
             "fp8": [(1000, 512, 256), (129, 272, 144), (512, 512, 1024), (2048, 2048, 2048)]}


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,size", [(d, s) for d, ss in GPU_SIZES.items() for s in ss],
                         ids=lambda v: v if isinstance(v, str) else "x".join(map(str, v)))
def test_wgmma_gemm_validates_on_hopper(dtype, size):
    from roofbench.bench.backends.cupy import CupyBackend
    from roofbench.bench.suite.runner import run_case

    from roofbench.timing import TimerConfig

    be = CupyBackend()
    try:
        if be.props.cc != (9, 0):
            pytest.skip(f"the wgmma kernel needs compute capability 9.0, this is {be.props.cc}")
        case = _case("tensor", dtype, size)
        assert be.supports(case) is None
        cfg = TimerConfig(warmup_s=0.0, warmup_min_runs=1, min_samples=3, max_samples=5,
                          budget_s=0.05)
        rec = run_case(case, be, None, cfg, np.random.default_rng(5))
        assert rec.outcome.status == "ok" and rec.valid, (
            f"{case.key}: {rec.outcome.status}: {rec.outcome.error}"
        )
        assert rec.outcome.rel_error <= case.workload.tolerance[dtype]
        (la,) = [x.facts for x in rec.measurement.launches]
        assert la.function == f"gemm_wgmma_{dtype}" and la.local_bytes == 0
        assert la.registers <= 168 and "sm_90a" in la.compiler
    finally:
        be.close()
