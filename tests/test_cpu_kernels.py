"""Every CPU kernel against its float64 reference, odd sizes included."""

from __future__ import annotations

import numpy as np
import pytest
from roofbench.bench.backend_cpu import CpuBackend
from roofbench.bench.runner import validate
from roofbench.kernels.registry import workloads
from roofbench.kernels.spec import Case

SIZES = {
    "vector_add": [(1,), (17,), (1001,)],
    "l2norm": [(1,), (17,), (1001,)],
    "rownorm": [(1, 1), (3, 17), (5, 1000)],
    # Crosses every CPU tile edge (64 rows, 128 k, 256 columns) and the 4-row register block.
    "gemm": [(1, 1, 1), (17, 5, 33), (70, 300, 140)],
}


def cpu_cases():
    for w in workloads().values():
        for v in w.variants.values():
            if "cpu" not in v.impls:
                continue
            for d in ("fp32", "fp64"):
                if d not in v.dtypes:
                    continue
                for s in SIZES[w.name]:
                    yield pytest.param(w.name, v.name, d, s, id=f"{w.name}-{v.name}-{d}-"
                                       + "x".join(map(str, s)))


@pytest.mark.parametrize("w,v,dtype,size", list(cpu_cases()))
def test_cpu_kernel_matches_float64_reference(w, v, dtype, size):
    wl = workloads()[w]
    case = Case(wl, wl.variants[v], dtype, size)
    inputs = wl.make_inputs(size, dtype, np.random.default_rng(7))
    ref = wl.reference(inputs, size)
    prep = CpuBackend().prepare(case, inputs)
    prep.poison()
    prep.run()
    ok, err, why = validate(case, prep.outputs(), ref)
    assert ok, why
    assert err <= wl.tolerance[dtype]
