"""Launch overhead: host time per launch of an empty kernel from CuPy, PyCUDA and Numba
(pytest-benchmark). Run explicitly: `pytest tests/bench/backends/bench_launch_overhead.py` (not
collected by
default: it measures, it does not test). Each launcher is skipped with its reason when it or a
device is missing.

Two numbers per launcher: enqueue only (asynchronous: what a Python loop of launches pays per
launch, synchronised once at the end of each round) and launch + synchronize (a round trip).
"""

from __future__ import annotations

import pytest
from roofbench.bench.backends.base import unavailable_reason

pytest.importorskip("pytest_benchmark", reason="pytest-benchmark is not installed")

EMPTY = 'extern "C" __global__ void empty_kernel() {}\n'
ROUNDS = dict(rounds=200, iterations=50, warmup_rounds=5)


def _need(backend: str) -> None:
    why = unavailable_reason(backend)
    if why:
        pytest.skip(f"{backend}: {why}")


@pytest.fixture(scope="module")
def cupy_kernel():
    _need("cuda")
    import cupy

    k = cupy.RawKernel(EMPTY, "empty_kernel")
    k((1,), (32,), ())
    cupy.cuda.Device().synchronize()
    return cupy, k


@pytest.fixture(scope="module")
def pycuda_kernel():
    _need("pycuda")
    import pycuda.driver as drv
    from roofbench.bench.backends.pycuda import PycudaBackend

    be = PycudaBackend()  # pushes the primary context
    from pycuda.compiler import SourceModule

    k = SourceModule(EMPTY, no_extern_c=True, arch=be.props.arch).get_function("empty_kernel")
    yield drv, k
    be.close()


@pytest.fixture(scope="module")
def numba_kernel():
    _need("numba")
    from numba import cuda

    @cuda.jit
    def empty_kernel():
        pass

    empty_kernel[1, 32]()
    cuda.synchronize()
    return cuda, empty_kernel


def test_cupy_enqueue(benchmark, cupy_kernel):
    cupy, k = cupy_kernel
    benchmark.pedantic(lambda: k((1,), (32,), ()),
                       teardown=lambda: cupy.cuda.Device().synchronize(), **ROUNDS)


def test_cupy_launch_sync(benchmark, cupy_kernel):
    cupy, k = cupy_kernel

    def one() -> None:
        k((1,), (32,), ())
        cupy.cuda.Device().synchronize()

    benchmark(one)


def test_pycuda_enqueue(benchmark, pycuda_kernel):
    drv, k = pycuda_kernel
    benchmark.pedantic(lambda: k(block=(32, 1, 1), grid=(1, 1)),
                       teardown=drv.Context.synchronize, **ROUNDS)


def test_pycuda_launch_sync(benchmark, pycuda_kernel):
    drv, k = pycuda_kernel

    def one() -> None:
        k(block=(32, 1, 1), grid=(1, 1))
        drv.Context.synchronize()

    benchmark(one)


def test_numba_enqueue(benchmark, numba_kernel):
    cuda, k = numba_kernel
    launch = k[1, 32]
    benchmark.pedantic(lambda: launch(), teardown=cuda.synchronize, **ROUNDS)


def test_numba_launch_sync(benchmark, numba_kernel):
    cuda, k = numba_kernel
    launch = k[1, 32]

    def one() -> None:
        launch()
        cuda.synchronize()

    benchmark(one)
