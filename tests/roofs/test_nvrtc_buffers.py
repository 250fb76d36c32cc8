"""NVRTC's log and cubin land in buffers of their own (roofs/probes/cuda_driver.py).

``b" " * 1`` is CPython's one shared one-byte object: NVRTC writing a one-byte log (its NUL)
into it turned every ``b" "`` of the process into ``b"\\0"``. Runs wherever the pip NVRTC
imports (no GPU needed); each case in a child process, so that a corruption cannot leak."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from patience import patience

pytest.importorskip("cuda.bindings.nvrtc")

CHILD = textwrap.dedent("""
    from roofbench.roofs.probes.cuda_driver import _compile_cubin
    ok = _compile_cubin('extern "C" __global__ void k(float* x) { x[0] = 1.0f; }', "k.cu",
                        "sm_90", ())
    assert isinstance(ok, bytes) and ok[:4] == b"\\x7fELF", ok[:4]
    try:
        _compile_cubin('extern "C" __global__ void k(float* x) { x[0] = ; }', "bad.cu",
                       "sm_90", ())
    except RuntimeError as e:
        assert "NVRTC failed for bad.cu (sm_90)" in str(e) and "expected" in str(e), e
        assert "\\x00" not in str(e)
    else:
        raise AssertionError("a syntax error compiled")
    # A failure with an empty log (one byte: its NUL), the case that hit the shared object:
    # the compile is made to fail before NVRTC writes any log.
    from cuda.bindings import nvrtc
    nvrtc.nvrtcCompileProgram = lambda *a: (nvrtc.nvrtcResult.NVRTC_ERROR_COMPILATION,)
    try:
        _compile_cubin('extern "C" __global__ void k2(float* x) {}', "empty.cu", "sm_90", ())
    except RuntimeError as e:
        assert str(e) == "NVRTC failed for empty.cu (sm_90):\\n", repr(str(e))
    assert b" " == bytes([32]) and b"a b".split(b" ") == [b"a", b"b"], repr(b" ")
    print("intact")
""")


def test_log_and_cubin_buffers_leave_shared_bytes_alone():
    p = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True,
                       timeout=patience(120))
    assert p.returncode == 0 and p.stdout.strip() == "intact", p.stderr[-2000:]
