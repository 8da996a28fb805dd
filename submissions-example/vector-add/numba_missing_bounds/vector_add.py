# MISTAKE: no `if i < n`: the last block writes past the end of c (Numba does not check
# array bounds on the GPU).
from numba import cuda


@cuda.jit
def vector_add(a, b, c, n):
    i = cuda.grid(1)
    c[i] = a[i] + b[i]
