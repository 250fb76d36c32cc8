"""Fixtures of the tuner's tests over the simulated machine of tune_simulated.py (loaded
once under that module name: the CLI tests' scripts import it too)."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest


def _simulated():
    if "tune_simulated" not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            "tune_simulated", Path(__file__).with_name("tune_simulated.py"))
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        sys.modules["tune_simulated"] = mod
        spec.loader.exec_module(mod)
    return sys.modules["tune_simulated"]


ts = _simulated()


@pytest.fixture
def sim() -> Callable[..., object]:
    def make(seed: int = 0, paired: bool = True, jitter: float = 0.005):
        m = ts.Machine(seed, jitter)
        a = np.arange(ts.N, dtype=np.float32)
        return ts.Sim(m, ts.SimClock(m, paired), a, np.zeros_like(a))

    return make


@pytest.fixture
def consts() -> SimpleNamespace:
    return SimpleNamespace(DEVICE=ts.DEVICE, ROOF_BW=ts.ROOF_BW, NBYTES=ts.NBYTES, N=ts.N,
                           TIMER=ts.TIMER, roofs=ts.roofs)
