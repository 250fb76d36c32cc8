"""A CPU probe run in a child process of its own (the FMA probe, the cache sweep): started
with the environment it is given, killed with this process, its answer the JSON of its last
stdout line."""

from __future__ import annotations

import json
import subprocess
from typing import Any

from roofbench.boundary import die_with_parent


def child_answer(cmd: list[str], what: str, env: dict[str, str], timeout: float) -> Any:
    """The JSON of the last line ``cmd`` prints; RuntimeError with one line naming ``what``
    when it cannot start, runs past ``timeout`` seconds, fails or prints nothing."""
    try:
        # The child dies with this process, even by SIGKILL: never a probe left running.
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env,
                           preexec_fn=die_with_parent)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise RuntimeError(f"{what} did not finish: {e}") from None
    lines = r.stdout.strip().splitlines()
    if r.returncode != 0 or not lines:
        why = (r.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"{what} failed (exit {r.returncode}): {why}")
    return json.loads(lines[-1])
