"""``roofbench.measure(kernel[grid], ..., counts="kernel")`` as a user calls it (issue 57,
#2 and #3): the kernel's keywords (``BLOCK=1024``) reach the count as they reach the launch,
and what cannot be counted (a complex tensor, a keyword missing) is one MeasureError line,
never Triton's traceback. Triton runs interpreted here (TRITON_INTERPRET=1 for this module
only, as tests/kernels/test_triton.py does)."""

from __future__ import annotations

import importlib

import pytest
from roofbench.bench.measure.door import MeasureError
from triton_interpret import import_interpreted_triton

triton = import_interpreted_triton()
torch = pytest.importorskip("torch", reason="torch is not installed")


@pytest.fixture
def compiled_add(monkeypatch):
    """The suite's vector add as a compiled (``@triton.jit``) kernel, built from the
    interpreter's copy of its Python; counted under the interpreter, never timed there."""
    from roofbench.kernels.triton_counts import index_fix
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    if not isinstance(triton.language.standard.sum, InterpretedFunction):
        pytest.skip("triton was imported before TRITON_INTERPRET=1 was set in this process")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    mod = importlib.import_module("roofbench.kernels.triton_stream")
    if not isinstance(mod.add_kernel, InterpretedFunction):
        mod = importlib.reload(mod)
    # Triton imports gluon when it first meets a tensor argument, and gluon insists on the
    # mode Triton was imported in (here the interpreter's): imported now, while it is set
    importlib.import_module("triton.experimental.gluon")
    monkeypatch.delenv("TRITON_INTERPRET")  # measure() refuses to time an interpreter
    with index_fix():
        yield JITFunction(mod.add_kernel.fn)


def test_the_kernels_keywords_reach_the_count(compiled_add, roofs_file):
    import roofbench

    n = 2051
    a, b, c = (torch.rand(n) for _ in range(3))
    session = roofbench.Session(roofs=roofs_file)
    with pytest.raises(RuntimeError):  # counted; then Triton finds no GPU to launch on
        session.measure(compiled_add[(3,)], a, b, c, n, triton.language.float32,
                        BLOCK=1024, counts="kernel")
    rec = session.cases[-1]
    assert (rec.declaration.flops, rec.declaration.bytes["dram"]) == (n, 3 * 4 * n)


def test_a_keyword_the_kernel_lacks_is_one_line(compiled_add, roofs_file):
    import roofbench

    a, b, c = (torch.rand(5) for _ in range(3))
    with pytest.raises(MeasureError, match="could not be counted.*BLOCK") as e:
        roofbench.measure(compiled_add[(1,)], a, b, c, 5, triton.language.float32,
                          counts="kernel", roofs=roofs_file)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("counts", [{"counts": "kernel"},
                                    {"flops": 5, "reads": 80, "writes": 40, "dtype": "fp32"}],
                         ids=["counted", "declared"])
def test_complex_tensors_are_one_line_naming_the_argument(compiled_add, roofs_file, counts):
    import roofbench

    a, b, c = (torch.rand(5, dtype=torch.complex64) for _ in range(3))
    with pytest.raises(MeasureError, match="argument 0 is a complex64 array") as e:
        roofbench.measure(compiled_add[(1,)], a, b, c, 5, triton.language.float32,
                          BLOCK=1024, **counts, roofs=roofs_file)
    assert "\n" not in str(e.value)
