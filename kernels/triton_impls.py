"""The Triton family's implementation of a launch: which Triton launcher runs it.

A workload module lists them in its variants' ``impls["triton"]``, built by :func:`triton`
(kernels/families.py says what a family provides). Each is a :class:`TritonImpl`: the kernel
module and launcher function that runs the launch. The kernels themselves
(kernels/triton_stream.py, triton_gemm.py, triton_attention.py) import triton, so they are
imported only when a kernel is prepared.
A launcher is ``launcher(dtype, *args) -> call``: ``args`` are the launch's own ``args``
(buffer names replaced by the family's arrays: torch tensors), ``call()`` launches once.
Under ``TRITON_INTERPRET=1`` the same launchers run on the CPU (tests/kernels/test_triton.py).
A variant's Triton space (:func:`triton_space`) hands a configuration to the launchers as
keywords (tiles as ``tl.constexpr``, ``num_warps``, ``num_stages``): the same kernel, another
compile of it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from . import families
from .spec import EVERY_DTYPE, Case, Config, Launch, Size, TuneParam, TuneRule, TuneSpace

_PKG = __name__.rsplit(".", 1)[0]


@dataclass(frozen=True)
class TritonImpl:
    """A launch run by ``<module>.<launcher>`` (see the module docstring)."""

    module: str  # e.g. "triton_stream" (in this folder)
    launcher: str
    dtypes: tuple[str, ...] = EVERY_DTYPE
    config: tuple[tuple[str, Any], ...] = ()  # a tuned configuration: launcher keywords

    def function(self) -> Callable[..., Callable[[], None]]:
        return getattr(importlib.import_module(f"{_PKG}.{self.module}"), self.launcher)

    def prepare(self, case: Case, launch: Launch, arrays: Mapping[str, Any]) -> Callable[[], None]:
        if case.dtype not in self.dtypes:
            raise ValueError(f"no Triton kernel {self.launcher} for {case.dtype}")
        args = [arrays[a] if isinstance(a, str) else a for a in launch.args]
        return self.function()(case.dtype, *args, **dict(self.config))

    def describe(self) -> str:
        tuned = ",".join(f"{k}={v}" for k, v in self.config)
        return f"triton {self.module}.{self.launcher}" + (f" [{tuned}]" if tuned else "")


def triton(module: str, dtypes: tuple[str, ...] | None = None,
           **launchers: str) -> dict[str, families.Impl]:
    """A variant's Triton implementations: launch kernel name -> the launcher of ``module``
    (in this folder) that runs it, e.g. ``triton("triton_stream", rows="gemv")``."""
    return {launch: TritonImpl(module, fn, dtypes=dtypes or EVERY_DTYPE)
            for launch, fn in launchers.items()}


# sm_90's shared memory per block (opt-in, cuda_impl.DeviceProps): the Triton spaces' rules
# hold a configuration's staged tiles to it; a smaller device refuses a larger one at compile
# (Triton's OutOfResources), which a tune records as that configuration's error.
SMEM_LIMIT = 227 * 1024

# tl.dot's least mma tile is 16 x 8 per warp: an output tile smaller than that per warp leaves
# warps without one (the GEMM's and flash attention's spaces).
MMA_TILE_RULE = TuneRule("BM * BN >= 128 * num_warps (a 16 x 8 mma tile per warp at least)",
                         lambda c, size, dtype: c["BM"] * c["BN"] >= 128 * c["num_warps"])


def smem_rule(staged: str, smem: Callable[[Config, Size, str], int]) -> TuneRule:
    """The rule that holds a configuration's staged tiles, ``smem(config, size, dtype)`` bytes
    (``staged`` says the sum in words), to SMEM_LIMIT."""
    return TuneRule(f"{staged} <= {SMEM_LIMIT} (sm_90's shared memory per block)",
                    lambda c, size, dtype: smem(c, size, dtype) <= SMEM_LIMIT)


def triton_space(table: Mapping[str, families.Impl], params: tuple[TuneParam, ...],
                 rules: tuple[TuneRule, ...] = (), note: str = "") -> TuneSpace:
    """A variant's Triton space: every launcher of ``table`` given the configuration as
    keywords. The default configuration builds ``table`` itself (the launch as it runs
    untuned). No plan: a Triton tile re-reads from L2, the counts are the same for all."""
    default = {p.name: p.default for p in params}

    def build(config: Config) -> dict[str, Any]:
        if dict(config) == default:
            return dict(table)
        cfg = tuple((k, config[k]) for k in default)
        return {k: replace(v, config=cfg) if isinstance(v, TritonImpl) else v
                for k, v in table.items()}

    return TuneSpace(family="triton", params=params, build=build, rules=rules, note=note)
