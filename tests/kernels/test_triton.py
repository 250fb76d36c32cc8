"""The Triton family (kernels/families.py, triton_impls.py, triton_*.py): every kernel validated
under Triton's interpreter (TRITON_INTERPRET=1, numpy on the CPU) at odd sizes in every
dimension against the workload's float64 reference and tolerance; its counts read from the
kernel (kernels/triton_counts.py) equal to the workload's declaration; the sm_90 code Triton
generates on this CPU (no GPU needed) checked for wgmma and 16-byte loads; the backend refuses
to time under the interpreter."""

from __future__ import annotations

import importlib
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from roofbench.kernels.registry import workloads
from roofbench.kernels.spec import Case
from triton_bounds import bounds_checked
from triton_interpret import import_interpreted_triton, triton_interpret

# the interpreter's Triton, TRITON_INTERPRET=1 set for the import only (triton_interpret.py)
triton = import_interpreted_triton("triton is not installed (pip install triton)")
torch = pytest.importorskip("torch", reason="torch is not installed (the Triton kernels' arrays)")

MODULES = ("triton_stream", "triton_gemm", "triton_attention")
# Odd in every dimension; vector_add/l2norm span several programs (BLOCK = 1024), rownorm rows
# two chunks, gemm/gemv/attention several tiles with a partial one.
SIZES = {"vector_add": (2051,), "l2norm": (2051,), "rownorm": (3, 1031), "gemv": (37, 301),
         "gemm": (67, 45, 41), "attention": (3, 1, 37, 5), "attention_causal": (3, 1, 37, 5)}


@pytest.fixture(scope="module", autouse=True)
def _interpreter_for_this_module_only():
    """TRITON_INTERPRET=1 while this file's tests run (kernels decorated and launched as the
    interpreter's), and as it was after them: the next file of the same worker measures."""
    with triton_interpret():
        yield


@pytest.fixture(autouse=True)
def _bounds_checked():
    """Every interpreted launch's loads and stores checked against its tensor arguments
    before they are made (triton_bounds): a dropped mask fails naming the kernel, where the
    interpreter's raw pointers corrupted the test process's heap (issue 58)."""
    with bounds_checked():
        yield


@pytest.fixture(scope="module")
def interp():
    """The Triton kernel modules as the interpreter runs them (decorated under
    TRITON_INTERPRET=1; reloaded should this process have imported them without it), with
    Triton 3.6's scalar-index defect under numpy >= 2.4 mended (triton_counts.index_fix)."""
    from roofbench.kernels.triton_counts import index_fix
    from triton.runtime.interpreter import InterpretedFunction

    if not isinstance(triton.language.standard.sum, InterpretedFunction):
        pytest.skip("triton was imported before TRITON_INTERPRET=1 was set in this process")
    mods = {}
    for m in MODULES:
        mod = importlib.import_module(f"roofbench.kernels.{m}")
        if not any(isinstance(v, InterpretedFunction) for v in vars(mod).values()):
            mod = importlib.reload(mod)
        mods[m] = mod
    with index_fix():
        yield mods


def _triton_cases():
    for w in workloads().values():
        for v in w.variants.values():
            if "triton" not in v.impls:
                continue
            for d in v.dtypes:
                if all(d in impl.dtypes for impl in v.impls["triton"].values()):
                    yield pytest.param(w.name, v.name, d, id=f"{w.name}-{v.name}-{d}")


def _run(w: str, v: str, dtype: str, size: tuple[int, ...]):
    from roofbench.bench.backends.triton import TritonPrepared

    wl = workloads()[w]
    case = Case(wl, wl.variants[v], dtype, size)
    inputs = wl.make_inputs(size, dtype, np.random.default_rng(7))
    prep = TritonPrepared(case, inputs, "cpu")
    return case, inputs, prep


def test_every_workload_named_in_the_issue_has_a_triton_variant():
    have = {(w.name, v.name) for w in workloads().values() for v in w.variants.values()
            if "triton" in v.impls}
    assert have == {("vector_add", "scalar"), ("l2norm", "naive"), ("l2norm", "fused"),
                    ("rownorm", "fused"), ("gemv", "rows"), ("gemm", "tensor"),
                    ("attention", "flash"), ("attention_causal", "flash")}


@pytest.mark.parametrize("w,v,dtype", list(_triton_cases()))
def test_triton_kernel_matches_float64_reference(interp, w, v, dtype):
    from roofbench.bench.suite.runner import validate

    if (w, dtype) == ("vector_add", "fp8"):
        pytest.skip("the interpreter rounds fp32 -> e4m3 ties away from even "
                    "(test_interpreter_rounds_e4m3_ties_away_from_even)")
    size = SIZES[w]
    case, inputs, prep = _run(w, v, dtype, size)
    ref = case.workload.expected(inputs, size, dtype)
    prep.poison()
    prep.run()
    ok, err, why = validate(case, prep.outputs(), ref)
    assert ok, why
    assert err <= case.workload.tolerance[dtype]


@pytest.mark.parametrize("dtype", ["fp32", "bf16", "fp8"])
def test_poison_marks_every_element_unwritten(interp, dtype):
    from roofbench.bench.suite.runner import validate

    case, inputs, prep = _run("l2norm", "fused", dtype, (7,))
    prep.poison()  # and no run
    ok, _, why = validate(case, prep.outputs(), case.workload.expected(inputs, (7,), dtype))
    assert not ok and "7 element(s) of 'out' not written" in str(why)


def test_interpreter_rounds_e4m3_ties_away_from_even(interp):
    """Why vector_add/fp8 is not validated under the interpreter: a + b of two e4m3 values is
    often a tie of e4m3, which this interpreter rounds away from even (a GPU, like ml_dtypes,
    rounds to nearest even), and a tie that rounds up into the next power of two loses the
    carry (1.9375 becomes 1, not 2): the error passes the fp8 tolerance. Asserted, so that a
    Triton that fixes it shows here."""
    import ml_dtypes

    case, inputs, prep = _run("vector_add", "scalar", "fp8", (2051,))
    prep.run()
    got = prep.outputs()["c"].astype(np.float64)
    exact = inputs["a"].astype(np.float32) + inputs["b"].astype(np.float32)
    rtne = exact.astype(ml_dtypes.float8_e4m3fn).astype(np.float64)
    d = got != rtne
    lo, hi = np.minimum(np.abs(got), np.abs(rtne))[d], np.maximum(np.abs(got), np.abs(rtne))[d]
    tie = np.abs(exact[d]) == (lo + hi) / 2
    carry = np.abs(exact[d]) == 1.9375
    assert d.any() and np.all(tie | carry)
    assert np.all(np.abs(got[d][tie]) == hi[tie])  # away from even
    assert np.all(np.abs(got[d][carry]) == 1.0)  # the lost carry


# ------------------------------------------------------------------ counts from the kernel
# How each suite kernel's counts meet its declaration. "total": every byte its loads and
# stores move is declared; "unique": the kernel re-reads data (gemm's A and B tiles, gemv's x,
# attention's K and V, rownorm fused's row) that the workload counts once, as the cache serves
# the re-read, so its bytes at distinct addresses are compared.
RULES = {("vector_add", "scalar"): "total", ("l2norm", "naive"): "total",
         ("l2norm", "fused"): "total", ("rownorm", "fused"): "unique",
         ("gemv", "rows"): "unique", ("gemm", "tensor"): "unique",
         ("attention", "flash"): "unique", ("attention_causal", "flash"): "unique"}
# d a power of two (no padded head lanes: see flash_extra)
COUNT_SIZES = {**SIZES, "attention": (3, 1, 37, 16), "attention_causal": (3, 1, 69, 16)}


def flash_extra(case: Case) -> int:
    """FLOPs the flash kernel does beyond the declaration, by a stated rule. Both: the online
    softmax's rescale, which the convention leaves out, per valid query row and K/V block it
    visits: m_old - m_new, l * alpha and d multiplies of the accumulator. Causal: the kernel
    computes whole tiles up to its diagonal tile (4d + 4 a score), the masked scores of that
    tile included, where the declaration counts the N(N+1)/2 on or below the diagonal."""
    from roofbench.kernels import triton_attention as ta

    b, h, n, d = case.size
    extra = 0
    causal = case.workload.name == "attention_causal"
    for r in range(n):  # a query row of every (batch, head)
        keys = min(n, (r // ta.BM + 1) * ta.BM) if causal else n  # the kernel's loop bound
        blocks = math.ceil(keys / ta.BN)
        extra += (4 * d + 4) * (keys - (r + 1 if causal else n)) + (d + 2) * blocks
    return b * h * extra


def measured(c, rule: str) -> int:
    return c.bytes if rule == "total" else c.read_unique + c.written_unique


def mismatches(case: Case, c, rule: str, extra_flops: int = 0) -> list[str]:
    out = []
    if c.flops != case.flops + extra_flops:
        out.append(f"flops {c.flops} != declared {case.flops} + {extra_flops}")
    if measured(c, rule) != case.bytes()["dram"]:
        out.append(f"{rule} bytes {measured(c, rule)} != declared {case.bytes()['dram']}")
    return out


@pytest.mark.parametrize("w,v", list(RULES), ids=[f"{w}-{v}" for w, v in RULES])
def test_counts_read_from_the_kernel_equal_the_declaration(interp, w, v):
    from roofbench.kernels.triton_counts import counting

    dtype = "fp16" if w == "gemm" else "fp32"
    case, _, prep = _run(w, v, dtype, COUNT_SIZES[w])
    with counting() as c:
        prep.run()
    extra = flash_extra(case) if w.startswith("attention") else 0
    assert mismatches(case, c, RULES[w, v], extra) == []


def test_a_planted_miscount_fails(interp):
    """A kernel that reads b twice and adds it twice is caught by its counts: its declaration
    (vector_add's) is one read of b and one add an element."""
    from roofbench.kernels.triton_counts import counting

    tl = triton.language

    @triton.jit
    def add_b_twice(a, b, c, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        x = tl.load(a + offs, mask=m) + tl.load(b + offs, mask=m)
        tl.store(c + offs, x + tl.load(b + offs, mask=m), mask=m)

    case, _, prep = _run("vector_add", "scalar", "fp32", (2051,))
    a, b, out = (prep.arrays[k] for k in "abc")
    with counting() as c:
        add_b_twice[(3,)](a, b, out, 2051, BLOCK=1024)
    assert mismatches(case, c, "total") == [
        "flops 4102 != declared 2051 + 0", "total bytes 32816 != declared 24612"]


def test_masked_lanes_are_not_counted_and_the_builder_is_restored(interp):
    from roofbench.kernels.triton_counts import counting
    from triton.runtime import interpreter as ti

    case, _, prep = _run("l2norm", "fused", "fp32", (5,))  # 5 of a 1024-lane block
    reduce = ti.ReduceOps.apply_impl
    with counting() as c:
        assert "create_fadd" in vars(ti.interpreter_builder)
        prep.run()
    assert (c.ops, c.read, c.written) == ({"mul": 10, "add": 5}, 40, 20)
    assert not [k for k in vars(ti.interpreter_builder) if k.startswith("create_")]
    assert ti.ReduceOps.apply_impl is reduce


def test_measure_takes_counts_from_the_kernel(interp, roofs_file, monkeypatch):
    """roofbench.measure(kernel[grid], ..., counts="kernel") on a compiled kernel: the FLOPs
    and bytes recorded are read from the kernel under the interpreter. Without a GPU here the
    compiled call itself then fails: the session records the case (an error) with the counts."""
    from triton.runtime.jit import JITFunction

    import roofbench

    compiled = JITFunction(interp["triton_stream"].add_kernel.fn)
    n = 2051
    a, b, c = (torch.rand(n) for _ in range(3))
    session = roofbench.Session(roofs=roofs_file)
    # the compiled kernel is timed, not the interpreter (whose variable measure() refuses)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with pytest.raises(RuntimeError):  # Triton finds no GPU driver to launch on
        session.measure(compiled[(3,)], a, b, c, n, triton.language.float32, 1024,
                        counts="kernel")
    rec = session.cases[-1]
    assert (rec.declaration.flops, rec.declaration.bytes["dram"], rec.outcome.status) == (
        n,
        3 * 4 * n,
        "error",
    )


def test_measure_never_times_an_interpreted_kernel(interp, roofs_file):
    import roofbench

    n = 5
    a, b, c = (torch.rand(n) for _ in range(3))
    with pytest.raises(ValueError, match="never timed"):
        roofbench.measure(interp["triton_stream"].add_kernel[(1,)], a, b, c, n,
                          triton.language.float32, 1024, counts="kernel", roofs=roofs_file)


def test_the_backend_refuses_what_the_family_has_no_kernel_for():
    from roofbench.bench.backends.triton import TritonBackend

    be = object.__new__(TritonBackend)  # no GPU here: only what supports() reads
    ws = workloads()
    be.cc = (8, 0)
    assert "fp64" in be.supports(Case(ws["attention"], ws["attention"].variants["flash"],
                                      "fp64", (1, 1, 64, 64)))
    assert "sm_89" in be.supports(Case(ws["gemm"], ws["gemm"].variants["tensor"], "fp8",
                                       (64, 64, 64)))
    assert "no triton implementation" in be.supports(
        Case(ws["gemm"], ws["gemm"].variants["tiled"], "fp32", (64, 64, 64)))
    be.cc = (9, 0)
    assert be.supports(Case(ws["gemm"], ws["gemm"].variants["tensor"], "fp8",
                            (64, 64, 64))) is None


def test_the_backend_times_with_cuda_events_and_flushes_outside_the_window(monkeypatch):
    """TritonBackend.time: torch's CUDA events bracket the work alone (a fake GPU clock that
    the work advances by 2 ms and the cold L2 flush by 1 s)."""
    from types import SimpleNamespace

    from roofbench.bench.backends import cuda_timer
    from roofbench.bench.backends.triton import TritonBackend

    from roofbench.timing import TimerConfig

    clock = SimpleNamespace(now=0.0)

    class Event:
        def __init__(self, enable_timing: bool) -> None:
            assert enable_timing
            self.t = 0.0

        def record(self) -> None:
            self.t = clock.now

        def synchronize(self) -> None:
            pass

        def elapsed_time(self, end: Event) -> float:
            return (end.t - self.t) * 1e3  # ms, as torch gives it

    def work() -> None:
        clock.now += 0.002

    def flush() -> None:
        clock.now += 1.0

    monkeypatch.setattr(cuda_timer, "_nvml_snapshot", lambda index: None)
    be = object.__new__(TritonBackend)  # no GPU here: only what time() reads
    be.torch = SimpleNamespace(cuda=SimpleNamespace(Event=Event))
    be._flush = SimpleNamespace(zero_=flush)
    cfg = TimerConfig(warmup_s=0.0, warmup_min_runs=1, min_samples=5, max_samples=5,
                      budget_s=10.0, cold=True)
    t = be.time(work, cfg)
    assert clock.now > t.n * 1.0  # every sample was flushed (cold) ...
    assert t.samples == pytest.approx([0.002] * 5)  # ... outside the window
    assert t.config["timer"] == "cuda_events"


def test_the_backend_refuses_to_time_under_the_interpreter(interp):
    from roofbench.bench.backends.base import unavailable_reason

    why = unavailable_reason("triton")
    assert why is not None and "TRITON_INTERPRET=1" in why


# -------------------------------------------------------------- sm_90 code, compiled here
@pytest.fixture(scope="module")
def compiled() -> dict:
    """tests/kernels/triton_compiled.py's findings: the sm_90 PTX of each kernel, compiled on
    this CPU, and counts read from compiled kernels, in a process without TRITON_INTERPRET."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    p = subprocess.run([sys.executable, str(Path(__file__).with_name("triton_compiled.py"))],
                       capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def sm90_ptx(compiled) -> dict[str, dict[str, int]]:
    return compiled["ptx"]


def test_counts_of_a_compiled_kernel_calling_tl_sum(compiled):
    """count_call in a user's process (kernels compiled, Triton's tl.sum a compiled helper):
    rownorm's and gemv's counts read from the kernel equal the declared FLOPs and the bytes of
    each array once."""
    for name, (flops, declared, unique, once) in compiled["counts"].items():
        assert (flops, unique) == (declared, once), name


@pytest.mark.parametrize("dtype,kind", [("fp16", ".f16.f16"), ("bf16", ".bf16.bf16"),
                                        ("fp8", ".e4m3.e4m3"), ("fp32", ".tf32.tf32")])
def test_gemm_tl_dot_is_wgmma_on_sm90(sm90_ptx, dtype, kind):
    code = sm90_ptx[f"gemm-{dtype}"]
    assert code["wgmma.mma_async"] > 0
    assert code[kind] == code["wgmma.mma_async"]


def test_flash_attention_products_are_wgmma_on_sm90(sm90_ptx):
    assert sm90_ptx["flash-fp16"]["wgmma.mma_async"] > 0


@pytest.mark.parametrize("name", ["add_kernel", "l2_fused_kernel", "square_kernel",
                                  "sqrt_kernel"])
def test_streaming_kernels_move_16_bytes_a_load_on_sm90(sm90_ptx, name):
    code = sm90_ptx[name]
    assert code["ld.global.v4.b32"] > 0 and code["st.global.v4.b32"] > 0
    assert code["ld.global.v2.b32"] == code["ld.global.b32"] == 0


def test_every_triton_implementation_covers_its_variants_launches():
    """One way to register: a variant lists its Triton launchers beside its other families'
    implementations; each launch of its plan has one, and each names a launcher that exists."""
    folder = Path(str(importlib.import_module("roofbench.kernels").__file__)).parent
    for w in workloads().values():
        for v in w.variants.values():
            table = v.impls.get("triton")
            if table is None:
                continue
            dtype = next(d for d in v.dtypes if d in next(iter(table.values())).dtypes)
            launches = {launch.kernel for launch in v.plan(w.quick_size, dtype)}
            assert set(table) == launches, (w.name, v.name)
            for impl in table.values():
                text = (folder / f"{impl.module}.py").read_text()
                assert f"def {impl.launcher}(" in text, (w.name, v.name, impl.launcher)


@pytest.mark.parametrize("before", [None, "0"])
def test_the_interpreter_setting_is_put_back(monkeypatch, before):
    """triton_interpret: TRITON_INTERPRET=1 inside, then as it was (unset, or its value),
    also when the block raises (a skip at import is one)."""
    if before is None:
        monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    else:
        monkeypatch.setenv("TRITON_INTERPRET", before)
    with pytest.raises(RuntimeError), triton_interpret():
        assert os.environ["TRITON_INTERPRET"] == "1"
        raise RuntimeError
    assert os.environ.get("TRITON_INTERPRET") == before
