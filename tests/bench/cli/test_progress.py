"""The progress helper (bench/cli/progress.py): a silent case still says it is running."""

from __future__ import annotations


def test_a_silent_case_gets_still_running_lines(capsys):
    import time

    from roofbench.bench.cli.progress import Heartbeat

    with Heartbeat(every_s=0.2) as beat:
        beat.start("gemm/naive/fp64/4096x4096x4096")
        time.sleep(1.3)
        beat.say("[1/1] gemm/naive/fp64/4096x4096x4096 ok")
        time.sleep(0.8)  # between cases (no case running): nothing more is said
    err = capsys.readouterr().err.splitlines()
    running = [x for x in err if "gemm/naive/fp64/4096x4096x4096 still running" in x]
    assert len(running) >= 2
    assert err[-1] == "[1/1] gemm/naive/fp64/4096x4096x4096 ok"
