"""The backends: one registry line each.

A backend is one module in this folder defining a ``Backend`` subclass (see base.py) plus one
line below, ``name -> "module:Class"``. The reference is a string so that importing roofbench
never imports CuPy or PyCUDA: a backend's module is imported only when it is asked for
(base.backend_class). Backends from outside the tree join through ``$ROOFBENCH_PLUGINS``
(roofbench/plugins.py: a module defining ``BACKEND``).
"""

REGISTRY: dict[str, str] = {
    "cpu": "roofbench.bench.backends.cpu:CpuBackend",
    "cuda": "roofbench.bench.backends.cupy:CupyBackend",
    "pycuda": "roofbench.bench.backends.pycuda:PycudaBackend",
    "numba": "roofbench.bench.backends.numba_cuda:NumbaCudaBackend",
    "sim": "roofbench.bench.backends.numba_cuda:SimBackend",
    "triton": "roofbench.bench.backends.triton:TritonBackend",
}
# Preference order for --backend auto.
AUTO_ORDER = ("cuda", "cpu")
