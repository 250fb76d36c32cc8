"""A plug-in workload (``ROOFBENCH_PLUGINS=numpy_add_workload``): c = a + b by numpy, so that
`roofbench run` and `roofbench.measure` can time the very same call
(scripts/bench_measure_vs_run.py)."""

from __future__ import annotations

import numpy as np
from roofbench.kernels.spec import Buf, Launch, Variant, Workload


def add(a, b, c, n):
    np.add(a, b, out=c)


def _plan(size, dtype):
    (n,) = size
    return [Launch("add", flops=n, reads=("a", "b"), writes=("c",), args=("a", "b", "c", n))]


WORKLOAD = Workload(
    name="numpy_add",
    description="c = a + b by numpy.add (one thread)",
    size_names=("n",),
    inputs=lambda size, dtype: {"a": Buf(size, dtype, "input"), "b": Buf(size, dtype, "input")},
    outputs=lambda size, dtype: {"c": Buf(size, dtype, "output")},
    reference=lambda x, size, xp: {"c": x["a"] + x["b"]},
    tolerance={"fp64": 1e-12, "fp32": 1e-4},
    variants={"numpy": Variant(name="numpy", description="numpy.add(a, b, out=c)",
                               dtypes=("fp32", "fp64"), plan=_plan, impls={"cpu": {"add": add}})},
    default_size=lambda ctx: (ctx.elements(3),),
    quick_size=(1 << 20,),
    flop_convention="numpy_add: 1 FLOP (the add) per element",
)
