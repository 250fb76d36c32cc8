import numpy as np
from kver import N, kernel

a = np.full(N, 0.5)
b = np.full(N, 0.25)
c = np.empty_like(a)

AB_CASES = {"add": dict(fn=kernel, args=(a, b, c), flops=N, reads=[a, b], writes=c)}
