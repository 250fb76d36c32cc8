"""The kernel under test: c = a + b over 2^21 doubles (16 MiB an array)."""
import numpy as np

N = 1 << 21


def kernel(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
    np.add(a, b, out=c)
