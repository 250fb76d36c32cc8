"""The kernel under test, with a planted slowdown: half the work again (1.5x)."""
import numpy as np

N = 1 << 21


def kernel(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
    np.add(a, b, out=c)
    h = N // 2
    np.add(a[:h], b[:h], out=c[:h])
