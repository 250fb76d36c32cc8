"""The README's CI gate on a real program: np.add of two 2^24-element fp32 arrays through
the `roofline` fixture; SLOW=k makes the program do the add k times (a real k-x slowdown of
the same counted work)."""
import os

import numpy as np

N = 1 << 24
SLOW = int(os.environ.get("SLOW", "1"))


def add(a, b, c):
    for _ in range(SLOW):
        np.add(a, b, out=c)
    return c


def test_add(roofline):
    rng = np.random.default_rng(0)
    a = rng.random(N, dtype=np.float32)
    b = rng.random(N, dtype=np.float32)
    c = np.empty_like(a)
    roofline(add, a, b, c, flops=a.size, reads=[a, b], writes=c)
