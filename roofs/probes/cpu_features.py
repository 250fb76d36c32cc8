"""Which vector width numba should use on this CPU, decided without importing numba.

LLVM's tuning for Intel AVX-512 cores (skylake-avx512 .. emeraldrapids) sets
``prefer-256-bit``: auto-vectorised loops then use 256-bit ymm registers and reach half the
512-bit peak (the README has the measured figures). AMD Zen 4's tuning does not prefer
256-bit. Numba reads ``NUMBA_CPU_FEATURES`` once, when it is imported, so the setting must be
in the environment of a process before numba starts: :func:`widest_vector_env`
gives the variables for a child process (the FMA probe runs in one; ``cpu_reference`` restarts
itself with them). The benchmark kernels keep numba's default tuning: the register-blocked
GEMM is bound by L2 traffic, not FMA width, and ran alike at both widths, while 512-bit code can
lower the clock of older AVX-512 cores.

This module imports llvmlite only (never numba), so that calling it cannot start numba.
"""

from __future__ import annotations

import os


def host_cpu_features() -> str:
    """llvmlite's feature string of the host CPU ("+avx2,+avx512f,-amx-tile,..."), or ""."""
    try:
        import llvmlite.binding as ll

        return str(ll.get_host_cpu_features().flatten())
    except Exception:  # noqa: BLE001 - any failure: no features known, let the asm tell
        return ""


def parse_features(flat: str) -> dict[str, bool]:
    """'+avx2,-avx512f' -> {'avx2': True, 'avx512f': False}."""
    out: dict[str, bool] = {}
    for item in flat.split(","):
        item = item.strip()
        if len(item) > 1 and item[0] in "+-":
            out[item[1:]] = item[0] == "+"
    return out


def widest_vector_bits(features: dict[str, bool]) -> int:
    """Bits of the widest vector registers the CPU has: AVX-512 512, AVX/AVX2 256, else 128."""
    if features.get("avx512f"):
        return 512
    if features.get("avx2") or features.get("avx"):
        return 256
    return 128


def widest_vector_env(flat: str | None = None,
                      environ: dict[str, str] | None = None) -> dict[str, str]:
    """Environment that makes a fresh numba process emit the CPU's widest vectors.

    LLVM's tuning for Intel AVX-512 cores (skylake-avx512 .. emeraldrapids) sets
    ``prefer-256-bit``: auto-vectorised loops use ymm and an FMA probe reaches half the peak.
    Numba reads ``NUMBA_CPU_FEATURES`` once, at import, so the setting only works for a new
    process: the host's full feature string plus ``,-prefer-256-bit``. Empty when nothing is
    needed (no AVX-512: 256-bit is already the widest) or when the user chose
    ``NUMBA_CPU_FEATURES``/``NUMBA_CPU_NAME`` (theirs stands).
    """
    env = os.environ if environ is None else environ
    if env.get("NUMBA_CPU_FEATURES") or env.get("NUMBA_CPU_NAME"):
        return {}
    flat = host_cpu_features() if flat is None else flat
    if widest_vector_bits(parse_features(flat)) < 512:
        return {}
    return {"NUMBA_CPU_FEATURES": flat + ",-prefer-256-bit"}
