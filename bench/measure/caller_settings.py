"""The process's settings a profile, a measurement, `roofbench model` or the pytest fixture
could change, read when it starts and put back when it ends, returns, raises or is
interrupted (KeyboardInterrupt): torch's intra-op and inter-op threads (a Numba probe sampled
beside a sample sets OpenMP's count, which is torch's), Numba's threads, the default dtype,
grad mode, the RNG states (torch, CUDA, numpy, Python), cuDNN / TF32 / matmul-precision /
deterministic flags and the environment variables (``Settings``, ``kept``, ``keeping``).

Below the profile and the pytest plug-in, beside the API that uses it: nothing here imports
torch, numpy or Numba; each is read only where the caller had imported it.
"""

from __future__ import annotations

import contextlib
import os
import random
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


def _torch_flags(torch: Any) -> list[tuple[Any, str]]:
    """The (object, attribute) pairs of torch's global math flags."""
    be = torch.backends
    return [(be.cudnn, "enabled"), (be.cudnn, "benchmark"), (be.cudnn, "deterministic"),
            (be.cudnn, "allow_tf32"), (be.cuda.matmul, "allow_tf32"),
            (be.cuda.matmul, "allow_fp16_reduced_precision_reduction"),
            (be.cuda.matmul, "allow_bf16_reduced_precision_reduction"),
            (be.mkldnn, "enabled")]


@dataclass(frozen=True)
class Settings:
    """The process-wide settings a profile or a measurement could change, as read at its
    start (torch's, numpy's and Numba's only where the caller had imported them: nothing is
    imported to read them)."""

    environ: dict[str, str]
    python_rng: Any
    numpy_rng: Any = None
    numba_threads: int | None = None
    torch: dict[str, Any] | None = None

    @classmethod
    def read(cls) -> Settings:
        np = sys.modules.get("numpy")
        torch = _torch_settings()  # before Numba's: its first thread launch moves OpenMP's
        return cls(dict(os.environ), random.getstate(),
                   np.random.get_state() if np is not None and hasattr(np, "random") else None,
                   _numba_threads(), torch)

    def restore(self) -> None:
        """Put every setting back (each one that differs; one that cannot be set again is
        skipped: torch's inter-op threads are fixed once parallel work started)."""
        for k in [k for k in os.environ if k not in self.environ]:
            del os.environ[k]
        for k, v in self.environ.items():
            if os.environ.get(k) != v:
                os.environ[k] = v
        random.setstate(self.python_rng)
        np = sys.modules.get("numpy")
        if self.numpy_rng is not None and np is not None:
            np.random.set_state(self.numpy_rng)
        numba = sys.modules.get("numba")
        if self.numba_threads is not None and numba is not None:
            with contextlib.suppress(Exception):
                if numba.get_num_threads() != self.numba_threads:
                    numba.set_num_threads(self.numba_threads)
        if self.torch is not None:
            _restore_torch(self.torch)


def _numba_threads() -> int | None:
    """Numba's thread count, where its threads are running: asking earlier would launch
    them (and its OpenMP layer then sets OpenMP's count, torch's, to its own)."""
    par = sys.modules.get("numba.np.ufunc.parallel")
    if par is None or not getattr(par, "_is_initialized", False):
        return None
    with contextlib.suppress(Exception):  # a stubbed or half-imported Numba
        return int(sys.modules["numba"].get_num_threads())
    return None


def _torch_settings() -> dict[str, Any] | None:
    torch = sys.modules.get("torch")
    if torch is None or not hasattr(torch, "get_num_threads"):
        return None
    s: dict[str, Any] = {
        "threads": torch.get_num_threads(), "interop": torch.get_num_interop_threads(),
        "dtype": torch.get_default_dtype(), "grad": torch.is_grad_enabled(),
        "rng": torch.get_rng_state(), "matmul_precision": torch.get_float32_matmul_precision(),
        "deterministic": torch.are_deterministic_algorithms_enabled(),
        "deterministic_warn": torch.is_deterministic_algorithms_warn_only_enabled(),
        "flags": [(o, a, getattr(o, a)) for o, a in _torch_flags(torch) if hasattr(o, a)],
        "cuda_rng": None}
    if torch.cuda.is_initialized():  # never initialises CUDA to read it
        s["cuda_rng"] = torch.cuda.get_rng_state_all()
    return s


def _restore_torch(s: dict[str, Any]) -> None:
    import torch

    if torch.get_num_threads() != s["threads"]:
        torch.set_num_threads(s["threads"])
    if torch.get_num_interop_threads() != s["interop"]:
        with contextlib.suppress(RuntimeError):  # settable only before parallel work
            torch.set_num_interop_threads(s["interop"])
    torch.set_default_dtype(s["dtype"])
    torch.set_grad_enabled(s["grad"])
    torch.set_rng_state(s["rng"])
    if s["cuda_rng"] is not None:
        torch.cuda.set_rng_state_all(s["cuda_rng"])
    torch.set_float32_matmul_precision(s["matmul_precision"])
    if (torch.are_deterministic_algorithms_enabled() != s["deterministic"]
            or torch.is_deterministic_algorithms_warn_only_enabled()
            != s["deterministic_warn"]):
        torch.use_deterministic_algorithms(s["deterministic"],
                                           warn_only=s["deterministic_warn"])
    for o, a, v in s["flags"]:
        if getattr(o, a) != v:
            setattr(o, a, v)


@contextlib.contextmanager
def kept() -> Iterator[Settings]:
    """The caller's settings read now and put back when the block ends, however it ends
    (an error, a KeyboardInterrupt)."""
    before = Settings.read()
    try:
        yield before
    finally:
        before.restore()


def keeping(fn: F) -> F:
    """``fn`` run under ``kept()`` (an entry point: `roofbench model`'s command)."""
    import functools

    @functools.wraps(fn)
    def run(*a: Any, **k: Any) -> Any:
        with kept():
            return fn(*a, **k)

    return run  # type: ignore[return-value]
