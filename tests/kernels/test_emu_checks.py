"""What the host emulation of CUDA checks beyond the results (tests/standins/cuda_emu/checks.h,
docs/hopper-emulation.md): the bugs a GPU punishes and a host run would let through, each
planted in a copy of a real kernel's source (one edit), built as the emulated check build and
caught by the emulation's own check, with a message naming the kernel (never by an abort or
a segfault: the launch returns the message and the process goes on). The unmodified kernels
pass the same cases (here and in tests/kernels/test_cuda_emu.py).

* Out of bounds: one element past the end in vector_add and in the element-wise map's tail,
  the tiled GEMM's A-tile edge guard off by one: the load lands in the buffer's guard zone,
  the message names the buffer and the element.
* A warp reduction with mask 0x0000ffff: the lanes the mask does not name fail.
* No __syncthreads after the register-blocked GEMM's transposed store into shared memory: a
  race between a store and another thread's load, whatever the OS schedule.
* Unit kernels: shared memory poisoned per block and per launch, two blocks in flight, plain
  shared-memory races and their absence, shuffles across a mask (poison).
The Hopper-specific ones (fence.proxy.async after the fp8 transpose, fence.mbarrier_init,
the transpose's barrier) are planted in the wgmma GEMM in test_cuda_emu.py, the descriptor
call against CuTe in test_wgmma.py.
"""

from __future__ import annotations

import ctypes
import re
from pathlib import Path

import cuda_tools as ct
import numpy as np
import pytest
from emu_run import (
    LaunchError,
    build_mutant,
    guarded,
    launch_params,
    register,
    run_emulated,
    sysv_launch,
)
from roofbench.bench.suite.runner import validate
from roofbench.kernels.registry import workloads
from roofbench.kernels.spec import Case

pytestmark = ct.needs_emulation()

# name: (source, {file: (old, new)}, (workload, variant, dtype, size), patterns (re.search) of
# the error)
PLANTED = {
    "vadd_one_past_the_end": (
        "vector_add.cu",
        {"vector_add.cu": ("threadIdx.x; i < n; i += stride)",
                           "threadIdx.x; i <= n; i += stride)")},
        ("vector_add", "scalar", "fp32", (1003,)),
        (r"out-of-bounds load of 4 bytes at [ab] \+ 4012 \(element 1003 of a buffer of 1003 "
         "elements",)),
    "map_tail_one_past_the_end": (
        "l2norm.cu",
        {"common.cuh": ("for (i64 i = npack * V + tid; i < n; i += stride)\n        out[i]",
                        "for (i64 i = npack * V + tid; i <= n; i += stride)\n        out[i]")},
        ("l2norm", "fused", "fp32", (2051,)),
        (r"out-of-bounds load of 4 bytes at [ab] \+ 8204 \(element 2051 of a buffer of 2051 "
         "elements",)),
    "tiled_a_edge_guard_off_by_one": (
        "gemm.cu",
        {"gemm.cu": ("(ar < M && ak < K)", "(ar <= M && ak < K)")},
        ("gemm", "tiled", "fp32", (67, 45, 33)),
        (r"out-of-bounds load of 4 bytes at A \+ \d+ \(element 22\d\d of a buffer of 2211 "
         "elements",)),
    "warp_sum_mask_0x0000ffff": (
        "rownorm.cu",
        {"common.cuh": ("v += __shfl_xor_sync(0xffffffffu, v, o);",
                        "v += __shfl_xor_sync(0x0000ffffu, v, o);")},
        ("rownorm", "fused", "fp32", (3, 1024)),
        ("calls __shfl_xor_sync with mask 0x0000ffff, which does not name it",)),
    "regblock_no_barrier_after_the_transposed_store": (
        "gemm.cu",
        {"gemm.cu": ("    stash(0);\n    __syncthreads();\n    int buf = 0;\n    for (int k0 = 0; "
                     "k0 < K; k0 += RB_BK)",
                     "    stash(0);\n    int buf = 0;\n    for (int k0 = 0; k0 < K; k0 += RB_BK)")},
        ("gemm", "regblock", "fp32", (67, 45, 33)),
        ("shared-memory race: ",)),
}


def _case(spec: tuple) -> Case:
    name, variant, dtype, size = spec
    w = workloads()[name]
    return Case(w, w.variants[variant], dtype, size)


def _run(source: str, so: Path, case: Case) -> tuple[bool, str]:
    lib = ctypes.CDLL(str(so))
    lib.rb_launch.restype = ctypes.c_int
    inputs, outs = run_emulated({source: lib}, case, np.random.default_rng(2024))
    ok, err, why = validate(case, outs, case.workload.expected(inputs, case.size, case.dtype))
    return ok, why


@pytest.mark.parametrize("plant", list(PLANTED))
def test_planted_bug_is_caught_by_the_check(plant):
    source, edits, spec, expected = PLANTED[plant]
    case = _case(spec)
    original = ct.build_emulated(source)
    ok, why = _run(source, original, case)
    assert ok, f"the unmodified {source} fails the case: {why}"
    so = build_mutant(ct._TMP / "planted" / plant, source, edits)
    with pytest.raises(LaunchError) as e:
        _run(source, so, case)
    msg = str(e.value)
    function = msg.split(":")[0]
    assert msg.startswith(f"{function}: {function}: "), msg  # the kernel named by the check
    for want in expected:
        assert re.search(want, msg), msg
    assert "(block " in msg and ", thread " in msg, msg


# ------------------------------------------------------------------- unit kernels
@pytest.fixture(scope="module")
def unit() -> ctypes.CDLL:
    lib = ctypes.CDLL(str(ct.build_driver_emulated("hopper_unit")))
    lib.rb_launch_params.restype = ctypes.c_int
    # the default emulated clock (another test of the process may have sped it up): the
    # two-block wait below is bounded by 2e9 cycles, 10 s
    lib.rb_emu_set_clock(ctypes.c_double(0.2))
    return lib


def _ptr(a: np.ndarray) -> bytes:
    return np.uint64(a.ctypes.data).tobytes()


def test_shared_memory_is_poisoned_per_block_and_launch(unit):
    """Every block reads its __shared__ array before writing it: 0xFF bytes in each block of
    each launch, never what an earlier block or launch left there."""
    for _ in range(2):
        out = np.zeros(5 * 64, np.uint32)
        assert launch_params(unit, "unit_poison", 5, 64, 0, [_ptr(out)]) == ""
        assert (out == 0xFFFFFFFF).all(), out


def test_two_blocks_are_in_flight(unit):
    """Each of two blocks waits for a flag only the other raises: both come back with it,
    which blocks run one after the other could not do."""
    flags, out = np.zeros(2, np.int32), np.zeros(2, np.int32)
    assert launch_params(unit, "unit_two_blocks", 2, 32, 0, [_ptr(flags), _ptr(out)]) == ""
    assert out.tolist() == [1, 1]


@pytest.mark.parametrize("mode,race", [(0, False), (1, True), (2, True), (3, False)])
def test_plain_shared_memory_races(unit, mode, race):
    """A store and another thread's access of the same shared bytes with no barrier between
    is a race (modes 1: store then load, 2: loads by all then a store), each reported every
    time; with the __syncthreads (0, 3) nothing is."""
    for _ in range(3):  # the same verdict whatever the schedule of this run
        out = np.zeros(128, np.int32)
        msg = launch_params(unit, "unit_race", 1, 128, 0, [np.int32(mode).tobytes(), _ptr(out)])
        if race:
            assert "unit_race: shared-memory race: " in msg, msg
        else:
            assert msg == "", msg
    if not race:
        assert out.tolist() == ([(t + 1) % 128 for t in range(128)] if mode == 0 else [7] * 128)


# block_sum's (block_max, beside it, has the same line after its own shuffles)
BLOCK_SUM_BARRIER = ("    v = warp_sum(v);\n"
                     "    __syncthreads();  // part[] may still be read by a previous call\n")


def _block_sum_twice(lib: ctypes.CDLL) -> tuple[str, np.ndarray]:
    out = np.zeros(3 * 128, np.float32)
    return launch_params(lib, "unit_block_sum_twice", 2, 128, 0, [_ptr(out)]), out


def test_shared_memory_helper_called_twice_is_ordered(unit):
    """block_sum twice in one kernel (4 warps): both sums right in every thread, no race."""
    for _ in range(2):
        msg, out = _block_sum_twice(unit)
        assert msg == "", msg
        assert out.reshape(128, 3).tolist() == [[sum(range(128)), 128.0, 128.0]] * 128


def test_planted_block_sum_without_its_leading_barrier_races():
    """Issue 40: block_sum without the barrier that protects part[] from the previous call
    passes every kernel that calls it once; called twice, the second call's store into part[]
    after the first call's loads by other threads is a race, every run."""
    common = (ct.CUDA_DIR / "common.cuh").read_text()
    assert common.count(BLOCK_SUM_BARRIER) == 1
    out_dir = ct._TMP / "planted" / "block_sum_twice"
    out_dir.mkdir(parents=True, exist_ok=True)
    # The unit source's own folder is searched first for "common.cuh": the edited copy.
    (out_dir / "common.cuh").write_text(common.replace(BLOCK_SUM_BARRIER,
                                                         "    v = warp_sum(v);\n"))
    ds = ct.driver_sources()["hopper_unit"]
    so = ct.build_driver_source(ds, out_dir, text=ds.path.read_text())
    lib = ctypes.CDLL(str(so))
    lib.rb_launch_params.restype = ctypes.c_int
    for _ in range(2):
        msg, _ = _block_sum_twice(lib)
        assert "unit_block_sum_twice: shared-memory race: " in msg, msg


@pytest.mark.parametrize("o", [1, 16])
def test_shuffle_from_a_lane_outside_the_mask_is_poison(unit, o):
    """Two half warps shuffle with their own masks: within a half the values arrive; from a
    lane of the other half (outside the caller's mask) the result is poison."""
    out, iout = np.zeros(64, np.float32), np.zeros(64, np.uint32)
    assert launch_params(unit, "unit_shfl", 1, 64, 0,
                         [np.int32(o).tobytes(), _ptr(out), _ptr(iout)]) == ""
    if o == 1:
        assert out.tolist() == [float(t ^ 1) for t in range(64)]
        assert iout.tolist() == [t ^ 1 for t in range(64)]
    else:
        assert np.isnan(out).all() and (iout == 0xA5A5A5A5).all()


# ------------------------------------------------------------- far out of bounds
# An index far past its buffer (a stride multiplied in once too often): past every guard zone,
# so no check sees it before it is made. Where it lands in no mapping the CPU faults, as the
# GPU would; the fault fails the launch naming the kernel, the access and the nearest buffer
# (checks.h rb_fault), in the check build and in the counting build, and the process goes on
# (issue 58 item 6: such an access was a segfault of the test process).
_VADD_SCALAR = "threadIdx.x; i < n; i += stride)\n        c[i] = from_acc<T>(to_acc("
FAR_EDIT = {"vector_add.cu": (_VADD_SCALAR + "a[i])", _VADD_SCALAR + "a[i + n * 65536])")}
FAR_N = 1003  # a[i + n * 65536]: 262 MB past a, inside the unmapped reservation below
PROT_NONE, PROT_RW, MAP_PRIVATE_ANON_NORESERVE = 0, 3, 0x02 | 0x20 | 0x4000
RESERVED = 1 << 30


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    return libc


def _segv_handler() -> bytes:
    """The process's SIGSEGV disposition (struct sigaction's handler word and flags)."""
    old = ctypes.create_string_buffer(256)
    assert _libc().sigaction(11, None, old) == 0
    return old.raw[:8] + old.raw[136:140]


def _far_launches(lib: ctypes.CDLL, watch) -> list[str]:
    """The planted vadd_scalar_fp32 twice: ``a`` at the start of a 1 GiB reservation whose
    rest is unmapped (the far load lands there: an exact address), then n = 2^30 (the load's
    address is not canonical: the CPU reports none); then the unplanted vadd_vec4_fp32 with
    ``c`` in the unmapped part (a store). Returns the three failures' messages; then vec4 runs
    with a mapped ``c`` and is right (the process, the library and the signal handlers as
    they were)."""
    libc = _libc()
    base = libc.mmap(None, RESERVED, PROT_NONE, MAP_PRIVATE_ANON_NORESERVE, -1, 0)
    assert base not in (None, ctypes.c_void_p(-1).value)
    msgs = []
    try:
        assert libc.mprotect(base, 1 << 20, PROT_RW) == 0
        a = np.ctypeslib.as_array((ctypes.c_float * FAR_N).from_address(base + 65536))
        a[...] = 1.0
        b, c = guarded(FAR_N, np.float32), guarded(FAR_N, np.float32)
        b[...], c[...] = 2.0, np.nan
        unmapped = np.ctypeslib.as_array((ctypes.c_float * FAR_N).from_address(
            base + (1 << 20) + 65536))  # never touched from here: a segfault of this process
        for kernel, n, out in (("vadd_scalar_fp32", FAR_N, c), ("vadd_scalar_fp32", 1 << 30, c),
                               ("vadd_vec4_fp32", FAR_N, unmapped)):
            with pytest.raises(LaunchError) as e:
                watch(lib, {"a": a, "b": b, "c": out},
                      lambda k=kernel, n=n, out=out: sysv_launch(lib, k, (2,), (64,),
                                                                 [a, b, out, np.int64(n)]))
            msgs.append(str(e.value))
        before = _segv_handler()
        c[...] = np.nan
        watch(lib, {"a": a, "b": b, "c": c},
              lambda: sysv_launch(lib, "vadd_vec4_fp32", (2,), (64,), [a, b, c, np.int64(FAR_N)]))
        assert (c == 3.0).all()
        assert _segv_handler() == before
    finally:
        libc.munmap(base, RESERVED)
    return msgs


def _register_and_run(lib: ctypes.CDLL, arrays: dict[str, np.ndarray], launch) -> None:
    register(lib, arrays)
    launch()


def _count_and_run(lib: ctypes.CDLL, arrays: dict[str, np.ndarray], launch) -> None:
    counter = ct.ByteCounter(lib)
    counter.watch(arrays)
    counter.count(launch)


def _far_expected(msgs: list[str]) -> None:
    exact, noncanonical, store = msgs
    gpu = r" \(an illegal memory access on the GPU; the emulation stops the launch there\)"
    assert re.fullmatch(
        r"vadd_scalar_fp32: vadd_scalar_fp32: illegal address: a load at 0x[0-9a-f]+: a \+ "
        r"\d+ \(element 65\d{6} of a buffer of 1003 elements, \d+ bytes past its end\), in "
        r"no mapping: outside every buffer and its 64 KiB guard zone" + gpu
        + r" \(block [01], thread \d+\)", exact), exact
    assert noncanonical.startswith("vadd_scalar_fp32: vadd_scalar_fp32: illegal address: an "
                                   "access at a non-canonical address"), noncanonical
    assert re.fullmatch(
        r"vadd_vec4_fp32: vadd_vec4_fp32: illegal address: a store at 0x[0-9a-f]+: c \+ \d+ "
        r"\(element \d+ of a buffer of 1003 elements\), which is not mapped \(a buffer freed "
        r"or never allocated\)" + gpu + r" \(block [01], thread \d+\)", store), store


def test_far_out_of_bounds_load_fails_the_check_build(tmp_path):
    so = build_mutant(tmp_path, "vector_add.cu", FAR_EDIT)
    _far_expected(_far_launches(_loaded(so), _register_and_run))


def test_far_out_of_bounds_load_fails_the_counting_build(tmp_path):
    src = (ct.CUDA_DIR / "vector_add.cu").read_text()
    old, new = FAR_EDIT["vector_add.cu"]
    so = ct.build_counting("vector_add.cu", tmp_path, src.replace(old, new))
    _far_expected(_far_launches(_loaded(so), _count_and_run))


def _loaded(so: Path) -> ctypes.CDLL:
    lib = ctypes.CDLL(str(so))
    lib.rb_launch.restype = ctypes.c_int
    return lib
