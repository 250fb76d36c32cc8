"""The BLAS GEMM ceiling of a CPU: numpy.matmul (OpenBLAS/MKL threads) on square matrices of
random data, FP64 and FP32, spot-checked against float64 before it is timed. A library
ceiling, drawn as a roof of the same precision beside the FMA probe's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from roofbench.roof_records import Roof

from .cpu_stream import TimeFn
from .numba_env import timing_evidence


def gemm_flops(n: int) -> int:
    return 2 * n ** 3


def blas_gemm_roof(precision: str, n: int, time_fn: TimeFn) -> Roof:
    """numpy.matmul on square n x n matrices of random data: a library ceiling."""
    dt = np.float64 if precision == "fp64" else np.float32
    rng = np.random.default_rng()
    a = rng.standard_normal((n, n)).astype(dt)
    b = rng.standard_normal((n, n)).astype(dt)
    c = np.full((n, n), np.nan, dtype=dt)
    np.matmul(a, b, out=c)
    rows = rng.choice(n, size=min(n, 8), replace=False)  # spot-check against float64
    ref = a[rows].astype(np.float64) @ b.astype(np.float64)
    err = np.linalg.norm(c[rows] - ref) / np.linalg.norm(ref)
    if not err < (1e-12 if precision == "fp64" else 1e-5):
        raise RuntimeError(f"BLAS {precision} GEMM relative error {err:.2e}")

    def gemm() -> None:  # the timer takes a callable that returns nothing
        np.matmul(a, b, out=c)

    timing = time_fn(gemm)
    flops = gemm_flops(n)
    blas = "dgemm" if precision == "fp64" else "sgemm"
    ev = {"probe": "blas-gemm", "implementation": f"numpy {np.__version__} matmul ({blas})",
          "blas": _blas_name(), "blas_runtime": openblas_runtime(), "dtype": precision,
          "n": n, "flops_per_run": flops,
          "counting": "2 n^3", "relative_error": float(err), "value_from": "best time",
          "median_flop_per_s": flops / timing.median, "timing": timing_evidence(timing)}
    return Roof(name=f"{precision} BLAS {blas}", kind="compute", precision=precision,
                value=flops / min(timing.samples), source="measured", evidence=ev,
                median=flops / timing.median)


def _blas_name() -> str:
    try:
        cfg = np.show_config(mode="dicts")
        return str(cfg["Build Dependencies"]["blas"]["name"])
    except Exception:  # noqa: BLE001 - informational only
        return "unknown"


def openblas_runtime() -> dict[str, Any]:
    """OpenBLAS's chosen kernel set ("SkylakeX", "Zen"...) and threads, when numpy bundles it.

    Best effort: the library numpy loaded is opened again by path (same handle) and asked.
    """
    import ctypes
    import glob

    libs_dir = Path(np.__file__).resolve().parent.parent / "numpy.libs"
    for path in sorted(glob.glob(str(libs_dir / "lib*openblas*.so*"))):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        out: dict[str, Any] = {}
        for prefix in ("scipy_openblas_", "openblas_"):
            for suffix in ("64_", ""):
                for key in ("config", "corename"):
                    fn = getattr(lib, f"{prefix}get_{key}{suffix}", None)
                    if fn is not None and key not in out:
                        fn.restype = ctypes.c_char_p
                        out[key] = fn().decode(errors="replace")
                nt = getattr(lib, f"{prefix}get_num_threads{suffix}", None)
                if nt is not None and "threads" not in out:
                    nt.restype = ctypes.c_int
                    out["threads"] = int(nt())
        if out:
            return out
    return {}
