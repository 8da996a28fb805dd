# MISTAKE: `total` is never defined: Numba's typing fails, and the grader says where.
from numba import cuda


@cuda.jit
def reduce_naive(x, out, n):
    i = cuda.grid(1)
    if i < n:
        cuda.atomic.add(out, 0, x[i] + total)
