"""A program of scripts/model_zoo.py at MODEL_ZOO_SCALE=tiny (random weights, nothing
downloaded), for the profile tests."""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest
from testpaths import ROOT


def zoo(monkeypatch: pytest.MonkeyPatch, entry: str) -> Any:
    """What ``entry`` of the zoo returns: (fn_or_module, args[, kwargs])."""
    monkeypatch.setenv("MODEL_ZOO_SCALE", "tiny")  # read when the zoo is imported: set first
    spec = importlib.util.spec_from_file_location("model_zoo_tiny",
                                                  ROOT / "scripts" / "model_zoo.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return getattr(mod, entry)()
