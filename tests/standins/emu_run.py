"""Launching the CUDA C kernels under the host emulation (tests/standins/cuda_emu) as a GPU
backend would: buffers prepared, poisoned and registered for the emulation's bounds checks,
the planned launches run, the outputs read back; ``sysv_launch`` is the one call of the
emulation's launcher the tests make. Shared by the emulation tests of tests/kernels/ and
tests/roofs/test_gpu_probes_nogpu.py."""

from __future__ import annotations

import ctypes
import importlib
import importlib.util
import shutil
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import cuda_tools as ct
import numpy as np
from roofbench.bench.backends import gpu_common as gc
from roofbench.kernels.cuda_impl import DeviceProps
from roofbench.kernels.spec import Buf, Case
from testpaths import FAKE_CUPY


def _emu_launch() -> Any:
    """The launch the CuPy and PyCUDA stand-ins share, loaded from its file: FAKE_CUPY is
    never put on sys.path here, or the collecting worker would import the fake ``cupy`` and
    take it for a GPU (every `gpu` test then runs against it)."""
    if "emu_launch" not in sys.modules:
        spec = importlib.util.spec_from_file_location("emu_launch", FAKE_CUPY / "emu_launch.py")
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        sys.modules["emu_launch"] = mod
        spec.loader.exec_module(mod)
    return sys.modules["emu_launch"]


def fake_bindings(name: str = "rb_fake_cuda_bindings") -> tuple[Any, Any]:
    """The stand-in ``cuda.bindings`` (driver, nvrtc) of FAKE_CUPY loaded under a private
    package ``name``: the real cuda.bindings stays importable, and roofbench's launch code
    takes the stand-in where a test hands it (cuda_driver.driver_module)."""
    where = FAKE_CUPY / "cuda" / "bindings"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            name, where / "__init__.py", submodule_search_locations=[str(where)])
        assert spec is not None and spec.loader is not None
        pkg = importlib.util.module_from_spec(spec)
        sys.modules[name] = pkg
        spec.loader.exec_module(pkg)
    return (importlib.import_module(f"{name}.driver"), importlib.import_module(f"{name}.nvrtc"))


ArgumentMismatch = _emu_launch().ArgumentMismatch
check_scalars = _emu_launch().check_scalars

# A tiny device: grid-stride grids of at most 2 blocks of 256 threads.
DEV = DeviceProps(cc=(9, 0), sm_count=1, max_threads_per_sm=512, name="host emulation")


# Global buffers sit in the middle of GUARD bytes of their own on each side (checks.h's
# RB_GUARD), 256-byte aligned as cudaMalloc's: an access up to GUARD bytes out of bounds lands
# in no other buffer, and the emulation reports it naming the kernel and the buffer.
GUARD = 64 * 1024


def guarded(shape: Any, dtype: Any) -> np.ndarray:
    """An uninitialized array with GUARD bytes of 0xA5 before and after it."""
    dt = np.dtype(dtype)
    nbytes = int(np.prod(shape)) * dt.itemsize
    raw = np.full(nbytes + 2 * GUARD + 256, 0xA5, np.uint8)
    start = GUARD + (-(raw.ctypes.data + GUARD)) % 256
    return raw[start:start + nbytes].view(dt).reshape(shape)


class EmulatedLibs(dict):
    """The emulated check builds of some sources, each built and loaded on first use: a
    narrow selection (a mutant's tests) builds only the sources it launches."""

    def __init__(self, sources: Iterable[str]) -> None:
        super().__init__()
        self.sources = tuple(sources)

    def __missing__(self, src: str) -> ctypes.CDLL:
        if src not in self.sources:
            raise KeyError(f"{src} is not one of this module's emulated sources {self.sources}")
        lib = ctypes.CDLL(str(ct.build_emulated(src)))
        lib.rb_launch.restype = ctypes.c_int
        self[src] = lib
        return lib


def emulation_libs(sources: Iterable[str]) -> dict[str, ctypes.CDLL]:
    """The emulated builds of ``sources`` (kernels/cuda, roofs/probes/cuda), by source, each
    built when first launched."""
    return EmulatedLibs(sources)


def poisoned(buf: Buf) -> np.ndarray:
    """An output or temporary buffer as a backend hands it to a kernel: guarded, and every
    element POISON (NaN where the dtype has one), so an element never written fails."""
    a = guarded(buf.shape, gc.STORAGE[buf.dtype])
    a[...] = gc.POISON[buf.dtype]
    return a


def outputs(case: Case, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The case's outputs read back from their storage, for validation."""
    return {n: gc.from_storage(arrays[n], b) for n, b in case.buffers().items()
            if b.role == "output"}


def register(lib: ctypes.CDLL, arrays: dict[str, np.ndarray]) -> None:
    """The buffers of the next launch of ``lib``, by name, for its bounds checks."""
    for name, a in arrays.items():
        assert lib.rb_emu_buffer(ctypes.c_ulonglong(a.ctypes.data), ctypes.c_ulonglong(a.nbytes),
                                 a.itemsize, name.encode()) > 0


def last_error(lib: ctypes.CDLL) -> str:
    lib.rb_last_error.restype = ctypes.c_char_p
    return lib.rb_last_error().decode(errors="replace")


def run_emulated(libs, case: Case, rng: np.random.Generator,
                 change: Callable[[gc.PlannedLaunch], gc.PlannedLaunch] = lambda pl: pl,
                 inputs: dict[str, np.ndarray] | None = None):
    """prepare -> poison -> run -> outputs, as a GPU backend does, on host memory (buffers
    with guard zones, registered for the bounds checks). ``change`` may alter a planned launch
    (another grid, another function) before it runs; ``inputs`` replaces the workload's random
    ones (adversarial values)."""
    if inputs is None:
        inputs = case.workload.make_inputs(case.size, case.dtype, rng)
    bufs = case.buffers()
    arrays = {}
    for name, buf in bufs.items():
        if buf.role == "input":
            arrays[name] = guarded(buf.shape, gc.STORAGE[buf.dtype])
            arrays[name][...] = gc.to_storage(inputs[name], buf)
        else:
            arrays[name] = poisoned(buf)
    for pl in gc.plan_launches(case, DEV):
        _launch(libs, change(pl), arrays)
    return inputs, outputs(case, arrays)


class LaunchError(Exception):
    """An emulated launch failed; the message is the emulation's."""


def sysv_launch(lib: ctypes.CDLL, function: str, grid: tuple[int, ...],
                block: tuple[int, ...], args: list[Any]) -> None:
    """``function`` of ``lib`` through the emulation's SysV launcher: arrays as pointers,
    integers and floats in the 6 integer and 2 float slots it takes; a ``np.float64`` scalar
    is a ``double`` parameter (rb_launch_f64). Raises LaunchError with the emulation's one
    line. The arguments' widths and kinds are checked against the kernel's parameters first
    (check_scalars)."""
    try:
        check_scalars(lib, function, args)
    except ArgumentMismatch as e:
        raise LaunchError(str(e)) from None
    ints, floats = [], []
    for a in args:
        if isinstance(a, np.ndarray):
            ints.append(a.ctypes.data)
        elif isinstance(a, int | np.integer):  # (np.float64 is a float: below)
            ints.append(int(a))
        else:
            floats.append(float(a))
    assert len(ints) <= 6 and len(floats) <= 2, f"{function}: more scalars than slots"
    f64 = any(isinstance(a, np.float64) for a in args)
    ia = (ctypes.c_longlong * 6)(*ints, *[0] * (6 - len(ints)))
    fa = ((ctypes.c_double if f64 else ctypes.c_float) * 2)(*floats, *[0.0] * (2 - len(floats)))
    g, b = (*grid, 1, 1)[:3], (*block, 1, 1)[:3]
    fn = ctypes.cast(getattr(lib, function), ctypes.c_void_p)
    if (lib.rb_launch_f64 if f64 else lib.rb_launch)(fn, *g, *b, ia, fa) != 0:
        raise LaunchError(f"{function}: {last_error(lib)}")


def _launch(libs, pl: gc.PlannedLaunch, arrays: dict[str, np.ndarray]) -> None:
    lib = libs[pl.impl.source]
    register(lib, {a: arrays[a] for a in pl.args if isinstance(a, str)})
    sysv_launch(lib, pl.function, pl.grid, pl.block,
                [arrays[a] if isinstance(a, str) else a for a in pl.args])


def build_mutant(out: Path, source: str, edits: dict[str, tuple[str, str]]) -> Path:
    """``source`` (kernels/cuda or roofs/probes/cuda) with one edit in each file named in
    ``edits`` (the source or a header it includes; each old text must occur exactly once),
    built as the emulated library ``out/<stem>.so`` (the edited copies in ``out`` come first
    on the include path)."""
    out.mkdir(parents=True, exist_ok=True)
    src = ct._source_path(source)
    for name, (old, new) in edits.items():
        text = (src.parent / name).read_text()
        assert text.count(old) == 1, f"{name}: the text to edit is not there exactly once"
        (out / name).write_text(text.replace(old, new))
    if source not in edits:
        shutil.copy(src, out / source)
    so = out / f"{src.stem}.so"
    ct._emu_compile(out / source, so, "-O1", includes=(out,))
    return so


def launch_params(lib: ctypes.CDLL, kernel: str, grid: int, block: int, smem: int,
                  values: list[bytes]) -> str:
    """A driver-style launch (rb_launch_params, as cuLaunchKernel) of ``kernel`` of an
    emulated driver build: "" when it succeeded, else the emulation's message."""
    bufs = [ctypes.create_string_buffer(v, len(v)) for v in values]
    params = (ctypes.c_void_p * max(1, len(bufs)))(*[ctypes.addressof(b) for b in bufs])
    thunk = ctypes.cast(getattr(lib, f"rb_params__{kernel}"), ctypes.c_void_p)
    rc = lib.rb_launch_params(thunk, grid, 1, 1, block, 1, 1, ctypes.c_uint(smem), params)
    return "" if rc == 0 else last_error(lib)
