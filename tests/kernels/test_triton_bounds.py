"""Triton's interpreter bounds-checked (tests/standins/triton_bounds.py): a kernel with its
mask dropped fails with a message naming it and the access, and the test process lives."""

from __future__ import annotations

import os

import pytest
from triton_bounds import bounds_checked

# As test_triton.py: the interpreter's decoration needs TRITON_INTERPRET at import and at
# @triton.jit; set for this module's import only.
_WAS = os.environ.get("TRITON_INTERPRET")
os.environ["TRITON_INTERPRET"] = "1"
try:
    triton = pytest.importorskip("triton", reason="triton is not installed")
    tl = pytest.importorskip("triton.language")
    torch = pytest.importorskip("torch", reason="torch is not installed")

    @triton.jit
    def _copy(x, y, n, BLOCK: tl.constexpr, MASKED: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        if MASKED:
            tl.store(y + offs, tl.load(x + offs, mask=offs < n), mask=offs < n)
        else:  # the mask dropped: the last program reads and writes past n
            tl.store(y + offs, tl.load(x + offs))
finally:
    if _WAS is None:
        os.environ.pop("TRITON_INTERPRET", None)
    else:
        os.environ["TRITON_INTERPRET"] = _WAS


@pytest.fixture(autouse=True)
def _interpreted(monkeypatch):
    """TRITON_INTERPRET=1 while a launch runs (Triton reads it then too), as it was after."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")


@pytest.mark.parametrize("masked", [True, False])
def test_dropped_mask_fails_naming_the_kernel_and_the_access(masked):
    x = torch.arange(1000, dtype=torch.float32)
    y = torch.zeros(1000, dtype=torch.float32)
    with bounds_checked():
        if masked:
            _copy[(4,)](x, y, 1000, BLOCK=256, MASKED=True)
            assert torch.equal(x, y)
        else:
            with pytest.raises(Exception, match=r"_copy: load of 24 element\(s\) of 4 bytes "
                                                r"outside every tensor argument \(first 4 bytes "
                                                r"past the end of 'x'"):
                _copy[(4,)](x, y, 1000, BLOCK=256, MASKED=False)
            assert torch.count_nonzero(y[768:]) == 0  # the last program stored nothing
