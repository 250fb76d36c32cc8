"""The inner suite the pytest plug-in's tests run in fresh pytest processes (pytester): its
test files and the roofs file it is given, in a pytest run of its own."""

from __future__ import annotations

from typing import Any

import pytest
from roof_sets import write_roofs

XDIST_IDENTITY = ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID")


def inner_suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                roofs: dict[str, Any], **files: str) -> pytest.Pytester:
    """``files`` (module name -> source) and ``roofs`` as roofs.json in the pytester folder."""
    # Under `make test`'s xdist workers the inner pytest would inherit the worker's identity
    # (pytest-benchmark then writes no JSON, as on a worker): it is a session of its own.
    for k in XDIST_IDENTITY:
        monkeypatch.delenv(k, raising=False)
    pytester.makepyfile(**files)
    write_roofs(pytester.path / "roofs.json", roofs)
    return pytester
