"""The ``roofline_ab`` fixture: base and new measured alternately in one test
(bench/gate/ab_session.py), registered by the plugin (bench/pytest/plugin.py).

``res = roofline_ab(base_fn, new_fn, *args, flops=..., reads=..., writes=...)`` takes every
keyword of ``roofbench.measure`` (plus ``args_b=`` / ``output_b=`` when the new function
takes other arguments) and returns the ``AbResult``: each side's record (``res.a``,
``res.b``) and the paired verdict (``res.verdict.verdict``: same, slower, faster,
uncertain; ``threshold=`` sets what is ``same``, default 5%). A side that fails validation
fails the test. With ``--roofline-out DIR`` the pairs are saved as the A/B run ``DIR/ab``
(``DIR/ab/a``, ``DIR/ab/b``) that ``roofbench compare DIR/ab`` judges, when the session ends.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from roofbench.bench.pytest.state import STATE


@pytest.fixture(scope="session", name="_roofline_ab_runs")
def ab_runs(request: pytest.FixtureRequest) -> Iterator[dict[str, Any]]:
    """The session's A/B sessions by threshold, saved when the pytest session ends."""
    held: dict[str, Any] = {}
    yield held
    for ab in held.values():
        ab.close()


@pytest.fixture
def roofline_ab(request: pytest.FixtureRequest,
                _roofline_ab_runs: dict[str, Any]) -> Callable[..., Any]:
    """``roofline_ab(base_fn, new_fn, *args, flops=..., **measure_options)``."""
    state = request.config.stash[STATE]
    node = request.node
    callspec = getattr(node, "callspec", None)
    default = getattr(node, "originalname", node.name) + (f"/{callspec.id}" if callspec else "")

    def measure(base: Callable[..., Any], new: Callable[..., Any], *args: Any,
                threshold: float = 0.05, **kw: Any) -> Any:
        from roofbench.bench.gate.ab_session import AbSession

        kw.setdefault("name", default)
        if "ab" not in _roofline_ab_runs:
            out = Path(state.out) / "ab" if state.out else None
            _roofline_ab_runs["ab"] = AbSession(out, roofs=state.roofs, quick=state.quick)
        ab = _roofline_ab_runs["ab"]
        ab.threshold = threshold
        res = ab.measure(base, new, *args, **kw)
        for side, rec in (("base", res.a), ("new", res.b)):
            if rec.outcome.status == "invalid":
                pytest.fail(f"{rec.key} ({side}): {rec.outcome.error}", pytrace=False)
        return res

    return measure
