import numpy as np
from kver import N, kernel

a = np.full(N, 0.5)
b = np.full(N, 0.25)
c = np.empty_like(a)


def test_add(roofline):
    roofline(kernel, a, b, c, flops=N, reads=[a, b], writes=c)
