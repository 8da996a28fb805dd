# The textbook Numba kernel: one thread per element, guarded.
from numba import cuda


@cuda.jit
def vector_add(a, b, c, n):
    i = cuda.grid(1)
    if i < n:
        c[i] = a[i] + b[i]
