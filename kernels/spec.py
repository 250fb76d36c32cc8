"""What a workload declares: buffers, launches, inputs, reference, tolerance.

A workload (vector_add, l2norm, ...) has variants; a variant is a pipeline of launches. Each
launch names the buffers it reads and writes, so the bytes it must move through DRAM are
derived from the buffer sizes (STREAM's way: every array read once and written once per
launch, a buffer read twice is listed twice). FLOPs are declared per launch. A multi-kernel
pipeline is one point: its FLOPs and bytes are the sums over its launches.

Implementations are tables keyed by backend name ("cpu", "cupy", "numba_cuda", ...), each
mapping a launch's ``kernel`` name to whatever that backend needs. This module knows nothing of
how a backend runs them.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from roofbench.records import OccupancyLevel

from .arrays import HOST, Arrays, itemsize

Size = tuple[int, ...]
# An array of the case's array module (numpy on the host, CuPy on a GPU).
Array = Any

MiB = 1 << 20
# Every storage type a case may name (the keys of arrays.DTYPES), fp32 first: the order a
# workload lists them in and a run measures them. A variant, and a Triton launcher, runs on
# all of them unless it names fewer.
EVERY_DTYPE: tuple[str, ...] = ("fp32", "fp64", "fp16", "bf16", "fp8")
# The float64 values of a row-separable reference are computed this many bytes at a time.
REFERENCE_BLOCK_BYTES = 64 * MiB


@dataclass(frozen=True)
class SizeContext:
    """What a default size is chosen from.

    The stated rule for memory-bound workloads: each main array is at least ``mult`` x the
    last-level cache (4x on a CPU, as STREAM asks; 8x the L2 on a GPU) and at least 64 MiB,
    capped by the memory budget shared among the case's arrays, so that a small machine scales
    down. ``count`` is the one function that applies it; the test checks the same property in
    whole bytes, so rule and test cannot round differently.
    """

    kind: str  # "cpu" or "gpu"
    llc_bytes: int
    budget_bytes: int
    dtype: str
    quick: bool = False
    variant: str = ""

    def target_bytes(self) -> int:
        """Bytes one main array should reach before the budget cap."""
        if self.quick:
            return max(self.llc_bytes * 2, 4 * MiB) if self.kind == "gpu" else 8 * MiB
        mult = 8 if self.kind == "gpu" else 4
        return max(mult * self.llc_bytes, 64 * MiB)

    def count(self, unit_bytes: int, footprint_per_unit: int) -> int:
        """Units (elements, rows) of a main array: the fewest whose ``unit_bytes`` each reach
        ``target_bytes`` (rounded up: "at least 4x" holds exactly), unless the largest variant's
        whole footprint (``footprint_per_unit`` bytes per unit, every buffer counted) would
        outgrow the budget; then the most units that fit it. Never below one unit."""
        if unit_bytes <= 0 or footprint_per_unit < unit_bytes:
            raise ValueError("unit_bytes must be positive and within footprint_per_unit")
        want = -(-self.target_bytes() // unit_bytes)
        cap = self.budget_bytes // footprint_per_unit
        return max(1, min(want, cap))

    def elements(self, n_arrays: int = 3) -> int:
        """Elements of each of ``n_arrays`` same-size arrays of ``dtype`` (the elementwise
        workloads' rule)."""
        item = itemsize(self.dtype)
        return self.count(item, n_arrays * item)

    def array_bytes(self, n_arrays: int = 3) -> int:
        return self.elements(n_arrays) * itemsize(self.dtype)


@dataclass(frozen=True)
class Buf:
    """A buffer of a case. ``dtype`` is a dtype name; ``role`` is input, output or temp."""

    shape: Size
    dtype: str
    role: str = "temp"

    @property
    def count(self) -> int:
        return math.prod(int(n) for n in self.shape)  # Python ints: never wraps

    @property
    def nbytes(self) -> int:
        return self.count * itemsize(self.dtype)


@dataclass(frozen=True)
class Launch:
    """One kernel launch of a pipeline.

    ``args`` is the argument list as the kernel takes it: a string names a buffer, a number is
    passed as a scalar. ``reads``/``writes`` name the buffers whose every element the launch must
    move (a buffer read twice appears twice). ``extra_bytes`` adds traffic through other levels
    (e.g. {"l2": ...}) where the accounting knows it.
    """

    kernel: str
    flops: int
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    args: tuple[str | int | float, ...] = ()
    extra_bytes: dict[str, int] = field(default_factory=dict)
    note: str = ""


Config = Mapping[str, Any]


@dataclass(frozen=True)
class TuneParam:
    """One tunable parameter of a kernel: its name, the values a tune tries (in that order)
    and ``default``, the value the variant runs without a tuned configuration."""

    name: str
    values: tuple[Any, ...]
    default: Any


@dataclass(frozen=True)
class TuneRule:
    """A constraint on a configuration at a case's size and dtype: ``ok(config, size, dtype)``
    true to keep it; ``text`` says it in words (a tune records it for what it excluded)."""

    text: str
    ok: Callable[[Config, Size, str], bool]


def covers_once(values: Any, value: int, extent: int) -> bool:
    """A block ``value`` (one of ``values``) is worth trying over an ``extent``: it is smaller,
    or it is the least of the values that cover the extent whole (every larger one runs as
    that one does: the same blocks, the same work)."""
    covering = [v for v in values if v >= extent]
    return value < extent or (bool(covering) and value == min(covering))


def covers_rule(param: str, values: Any, axis: int, extent: str, why: str = "") -> TuneRule:
    """The rule that keeps a block ``param`` (one of ``values``) over the size's ``axis``, named
    ``extent``, when covers_once holds; ``why`` (in brackets after the rule) says what the
    larger ones would run as."""
    text = f"{param} < {extent}, or the least that covers it" + (f" ({why})" if why else "")
    return TuneRule(text, lambda c, size, dtype: covers_once(values, c[param], size[axis]))


@dataclass(frozen=True, kw_only=True)
class TuneSpace:
    """The configurations one family of a variant's implementations (``cpu``, ``cuda``, ...)
    can be tuned over, declared beside the kernels.

    ``build(config)`` returns that family's launch table ({kernel: impl}) for a configuration;
    ``plan(size, dtype, config)`` its launches where the counts depend on the configuration (a
    configuration that moves more declares it), None where no parameter changes the work or
    the bytes (the variant's own plan holds for all). The default configuration (every
    parameter's ``default``) builds the variant's own table: the same kernels, the same counts,
    the same results."""

    family: str
    params: tuple[TuneParam, ...]
    build: Callable[[Config], dict[str, Any]]
    rules: tuple[TuneRule, ...] = ()
    plan: Callable[[Size, str, Config], list[Launch]] | None = None
    note: str = ""  # why these parameters, and why the counts are (or are not) the same

    def default(self) -> dict[str, Any]:
        return {p.name: p.default for p in self.params}

    def all_configs(self) -> list[dict[str, Any]]:
        """Every configuration before the rules, the first parameter varying slowest."""
        names = [p.name for p in self.params]
        return [dict(zip(names, vs, strict=True))
                for vs in itertools.product(*(p.values for p in self.params))]

    def why_excluded(self, config: Config, size: Size, dtype: str) -> str | None:
        """The first rule ``config`` breaks at this size and dtype (None: none)."""
        return next((r.text for r in self.rules if not r.ok(config, size, dtype)), None)

    def configs(self, size: Size, dtype: str) -> list[dict[str, Any]]:
        return [c for c in self.all_configs() if self.why_excluded(c, size, dtype) is None]

    def unknown(self, config: Config) -> str | None:
        """Why ``config`` is not one of this space's (a stored configuration from older code):
        a name it lacks or has beyond the parameters, or a value not declared. None: it is."""
        names = {p.name for p in self.params}
        if set(config) != names:
            return (f"its parameters {', '.join(sorted(config))} are not the space's "
                    f"({', '.join(sorted(names))})")
        for p in self.params:
            if config[p.name] not in p.values and config[p.name] != p.default:
                return f"{p.name}={config[p.name]!r} is not one of {list(p.values)!r}"
        return None

    def launches(self, variant: Variant, size: Size, dtype: str, config: Config
                 ) -> list[Launch]:
        return variant.plan(size, dtype) if self.plan is None else self.plan(size, dtype, config)


@dataclass(frozen=True, kw_only=True)
class Variant:
    name: str
    description: str
    dtypes: tuple[str, ...] = EVERY_DTYPE  # the storage types it runs; fewer where it says
    plan: Callable[[Size, str], list[Launch]]
    temps: Callable[[Size, str], dict[str, Buf]] = lambda size, dtype: {}
    impls: dict[str, Any] = field(default_factory=dict)  # backend -> {kernel: impl}
    cores: str = "simt"  # what runs it: "simt" (CUDA cores / SIMD lanes) or "tensor" (matrix)
    # When the cores depend on where it runs (a vendor library picks its own: cuBLAS HGEMM
    # runs on tensor cores, numpy's BLAS on SIMD lanes): (backend kind, dtype) -> cores.
    cores_on: Callable[[str, str], str] | None = None
    # What a backend cannot run and why, e.g. {"cpu": "tensor cores are GPU-only"}
    unsupported: dict[str, str] = field(default_factory=dict)
    arrow_from: str | None = None  # plot an arrow from that variant to this one (fusion)
    # Backend kind -> why this variant stays well below its roof there, when the cause is
    # known and measured (the text names where): the report prints it beside such a case.
    limits: dict[str, str] = field(default_factory=dict)
    # Storage dtypes whose arithmetic runs natively (packed half2/bfloat162); any other
    # fp16/bf16/fp8 storage is computed in fp32 and held against the fp32 roof.
    native_math: tuple[str, ...] = ("fp64", "fp32")
    # Its CPU launches run on Numba's threads, so an occupancy scan can set their count; False
    # for a library call with a thread pool of its own (numpy's BLAS).
    numba_threads: bool = True
    # A plain-language check a backend may apply before allocating, returning a reason to refuse.
    refuse: Callable[[Size, str, str], str | None] = lambda size, dtype, backend: None
    # Family -> the space its implementations can be tuned over (TuneSpace; docs/tune.md).
    tune: dict[str, TuneSpace] = field(default_factory=dict)
    # The configuration this variant runs (a tuned one, set by ``configured``), in words;
    # empty: the declared default.
    tuned: str = ""

    def backends(self) -> list[str]:
        return sorted(self.impls)

    def configured(self, family: str, config: Config, said: str = "") -> Variant:
        """This variant running ``config`` of its ``family`` space: that family's launch table
        built for it and, where the space declares it, the configuration's own counts.
        ``said``: how a record names it (default: the configuration)."""
        sp = self.tune[family]
        table = sp.build(config)
        cfg = dict(config)

        def plan(size: Size, dtype: str) -> list[Launch]:
            return sp.launches(self, size, dtype, cfg)

        words = said or ",".join(f"{k}={v}" for k, v in cfg.items())
        return replace(self, impls={**self.impls, family: table}, plan=plan, tuned=words)


@dataclass(frozen=True)
class SuiteSizes:
    """The small sizes the test suite checks a workload at, declared by the workload so that no
    table elsewhere names it: odd sizes that cross tails, partial tiles and every guard path.

    ``cpu``: its CPU kernels against the float64 reference in fp32 and fp64
    (tests/kernels/test_cpu_kernels.py); ``gpu``: every GPU family on a device
    (tests/bench/backends/test_gpu.py); ``sanitize``: variant -> (dtypes, size), the one small
    case of a hand-written CUDA kernel that compute-sanitizer runs (scripts/sanitize_kernels.py:
    the dtypes whose code paths differ); a variant it does not name runs its first dtype at the
    first GPU size."""

    cpu: tuple[Size, ...]
    gpu: tuple[Size, ...]
    sanitize: dict[str, tuple[tuple[str, ...], Size]] = field(default_factory=dict)


@dataclass(frozen=True)
class CpuCode:
    """What the machine code of one of a module's parallel CPU kernels must show on every
    target of the codegen matrix: a module lists them in ``CPU_CODE`` and
    tests/standins/codegen_kernels.py compiles each (never runs it; its header says why each
    check). ``args(t)``: example arguments for the numpy scalar type ``t``, whose types are the
    signature compiled. Every kernel: no gather; no non-temporal store unless ``streams`` (then
    at least one). Where its speed rests on it: packed arithmetic (``min_packed``), vector
    partial sums in more than one FMA chain (``min_chains``), adds on ymm/zmm
    (``min_wide_adds``), ``why`` saying so; ``no_scatter`` makes a scatter a fault too."""

    fn: str
    args: Callable[[Any], tuple]
    min_packed: int = 0
    min_chains: int = 0
    min_wide_adds: int = 0
    why: str = ""
    streams: bool = False
    no_scatter: bool = False


def ones(shape: int | Size, t: Any, k: int = 1) -> tuple[np.ndarray, ...]:
    """``k`` arrays of ones of ``shape`` and numpy scalar type ``t`` (CpuCode's examples)."""
    return tuple(np.ones(shape, t) for _ in range(k))


@dataclass(frozen=True)
class Workload:
    """What is measured. ``reference(x, size, xp)`` computes the outputs in float64 from ``x``,
    the inputs' values as float64 arrays of the array module ``xp`` (numpy on the host, CuPy on
    a GPU: the reference runs where the inputs are), which it may overwrite; it uses ``xp``
    only, never numpy directly, and returns float64 arrays of the same module."""

    name: str
    description: str
    size_names: tuple[str, ...]
    inputs: Callable[[Size, str], dict[str, Buf]]
    outputs: Callable[[Size, str], dict[str, Buf]]
    reference: Callable[[dict[str, Array], Size, Any], dict[str, Array]]
    tolerance: dict[str, float]
    variants: dict[str, Variant]
    # Default size on a device (see SizeContext for the rule).
    default_size: Callable[[SizeContext], Size]
    quick_size: Size
    # Several default sizes (a sweep, e.g. attention over sequence lengths); None: the one
    # default size. Read through default_sizes(), never directly.
    sweep: Callable[[SizeContext], list[Size]] | None = None
    flop_convention: str = ""
    # Magnitude range of random inputs (signs are random too).
    input_range: tuple[float, float] = (0.25, 1.0)
    # Place in listings and runs (lower first; ties by name) and the plot's marker
    # (matplotlib): a workload states both itself, so no list elsewhere names it.
    order: int = 100
    marker: str = "o"
    # Inputs the reference is separable along, row by row (their leading axis and every
    # output's is size[0]; the other inputs are used whole): expected() then computes it in
    # blocks of rows and never holds a float64 copy of a whole input (a 2 GB fp32 gemv matrix
    # is 4 GB in float64, beside the case and the run's bandwidth bracket).
    row_inputs: tuple[str, ...] = ()
    # The sizes the test suite checks it at (SuiteSizes); None: its quick size everywhere.
    # Read through suite_sizes().
    test_sizes: SuiteSizes | None = None

    def suite_sizes(self) -> SuiteSizes:
        return self.test_sizes or SuiteSizes(cpu=(self.quick_size,), gpu=(self.quick_size,))

    def dtypes(self) -> list[str]:
        seen: list[str] = []
        for v in self.variants.values():
            seen += [d for d in v.dtypes if d not in seen]
        return seen

    def default_sizes(self, ctx: SizeContext) -> list[Size]:
        """The sizes a default run measures on a device: the sweep, or the one default."""
        return self.sweep(ctx) if self.sweep is not None else [self.default_size(ctx)]

    def check_size(self, size: Size) -> None:
        if len(size) != len(self.size_names):
            raise ValueError(f"{self.name} takes a size of {len(self.size_names)} dimension(s) "
                             f"({'x'.join(self.size_names)}), got {'x'.join(map(str, size))}")
        if any(int(s) <= 0 for s in size):
            raise ValueError(f"{self.name}: every size dimension must be positive, "
                             f"got {'x'.join(map(str, size))}")

    def make_inputs(self, size: Size, dtype: str, rng: Any,
                    arrays: Arrays | None = None) -> dict[str, Array]:
        """Fresh random inputs (never zeros) in the storage of ``arrays`` (the host's numpy by
        default; on a device its own generator ``rng`` draws them there)."""
        arrays = arrays or HOST
        xp = arrays.xp
        lo, hi = self.input_range
        out = {}
        for name, buf in self.inputs(size, dtype).items():
            # Magnitudes in [lo, hi) with random signs: no zeros, and every dtype (fp8 included)
            # represents them without flushing to zero. Drawn in float32 unless stored in
            # float64: a GPU case's arrays hold ~10^8 values, and float64 draws cost seconds.
            work = xp.float64 if buf.dtype == "fp64" else xp.float32
            x = arrays.uniform(rng, buf.shape, work)
            x *= work(hi - lo)
            x += work(lo)
            if arrays.device:
                x = xp.where(arrays.uniform(rng, buf.shape, xp.float32) < 0.5, -x, x)
            else:  # the host's draws, unchanged
                np.negative(x, out=x,
                            where=rng.integers(0, 2, size=buf.shape, dtype=np.int8) == 1)
            out[name] = arrays.store(x, buf.dtype)
        return out

    def expected(self, inputs: dict[str, Array], size: Size, dtype: str,
                 arrays: Arrays | None = None) -> dict[str, Array]:
        """The float64 reference outputs of ``inputs`` (stored as ``arrays`` stores them),
        computed where they are."""
        arrays = arrays or HOST
        bufs = self.inputs(size, dtype)
        rows, step = int(size[0]), self.reference_block_rows(size, dtype)
        if step >= rows:
            x64 = {n: arrays.values(a, bufs[n].dtype) for n, a in inputs.items()}
            return self.reference(x64, size, arrays.xp)
        xp, out = arrays.xp, {}
        whole = {n: arrays.values(a, bufs[n].dtype) for n, a in inputs.items()
                 if n not in self.row_inputs}
        for i in range(0, rows, step):
            j = min(rows, i + step)
            x64 = {n: a.copy() for n, a in whole.items()}  # the reference may overwrite them
            x64.update({n: arrays.values(inputs[n][i:j], bufs[n].dtype)
                        for n in self.row_inputs})
            for n, part in self.reference(x64, (j - i, *size[1:]), xp).items():
                if n not in out:
                    out[n] = xp.empty((rows, *part.shape[1:]), dtype=xp.float64)
                out[n][i:j] = part
        return out

    def reference_block_rows(self, size: Size, dtype: str) -> int:
        """Rows of the row inputs whose float64 values take REFERENCE_BLOCK_BYTES (all rows
        for a workload without row inputs)."""
        if not self.row_inputs:
            return int(size[0])
        bufs = self.inputs(size, dtype)
        per_row = sum(8 * math.prod(bufs[n].shape[1:]) for n in self.row_inputs)
        return max(1, REFERENCE_BLOCK_BYTES // per_row)


@dataclass(frozen=True)
class Case:
    """One concrete thing to measure: workload x variant x dtype x size, and, in an occupancy
    scan, the level it runs at (how a backend applies it is the backend's; the FLOPs and bytes
    do not depend on it)."""

    workload: Workload
    variant: Variant
    dtype: str
    size: Size
    occupancy_level: OccupancyLevel | None = None

    @property
    def key(self) -> str:
        return (f"{self.workload.name}/{self.variant.name}/{self.dtype}/"
                f"{'x'.join(map(str, self.size))}"
                + (f"@{self.occupancy_level.tag}" if self.occupancy_level else ""))

    def buffers(self) -> dict[str, Buf]:
        b = dict(self.workload.inputs(self.size, self.dtype))
        b.update(self.workload.outputs(self.size, self.dtype))
        b.update(self.variant.temps(self.size, self.dtype))
        return b

    def launches(self) -> list[Launch]:
        return self.variant.plan(self.size, self.dtype)

    def launch_bytes(self, launch: Launch) -> dict[str, int]:
        bufs = self.buffers()
        dram = sum(bufs[n].nbytes for n in launch.reads + launch.writes)
        out = {"dram": dram}
        out.update(launch.extra_bytes)
        return out

    @property
    def flops(self) -> int:
        return sum(launch.flops for launch in self.launches())

    def bytes(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for launch in self.launches():
            for level, b in self.launch_bytes(launch).items():
                total[level] = total.get(level, 0) + b
        return total

    def intensity(self) -> dict[str, float]:
        f = self.flops
        return {level: f / b for level, b in self.bytes().items() if b > 0}

    def footprint(self) -> int:
        """Bytes of memory the case allocates (every buffer once)."""
        return sum(b.nbytes for b in self.buffers().values())

    def cores(self, kind: str = "gpu") -> str:
        """The cores ("simt" or "tensor") that run this case on a backend of ``kind``."""
        v = self.variant
        return v.cores_on(kind, self.dtype) if v.cores_on is not None else v.cores

    def precision_on(self, kind: str) -> str:
        """The compute roof this case is held against on a backend of ``kind``."""
        if self.cores(kind) == "tensor":
            return f"{self.dtype}_tc"
        return self.precision

    @property
    def precision(self) -> str:
        """The compute roof this case is held against (declared cores)."""
        if self.variant.cores == "tensor":
            return f"{self.dtype}_tc"
        # Low-precision storage computed in fp32 on CUDA cores is held against the fp32 roof;
        # only kernels doing packed half2/bfloat162 math meet the fp16/bf16 roof.
        return self.dtype if self.dtype in self.variant.native_math else "fp32"
