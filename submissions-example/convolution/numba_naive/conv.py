# Convolution in Numba. The filter, a __constant__ symbol in CUDA C++, is the first array
# argument here (contract order); conv2d uses 2-D arrays.
from numba import cuda, float32


@cuda.jit
def conv1d(filt, x, out, n):
    i = cuda.grid(1)
    if i >= n:
        return
    acc = float32(0.0)
    for k in range(7):
        j = i + k - 3
        if j >= 0 and j < n:
            acc += filt[k] * x[j]
    out[i] = acc


@cuda.jit
def conv2d(filt, x, out, rows, cols):
    c, r = cuda.grid(2)
    if r >= rows or c >= cols:
        return
    acc = float32(0.0)
    for dr in range(-1, 2):
        for dc in range(-1, 2):
            rr = r + dr
            cc = c + dc
            if rr >= 0 and rr < rows and cc >= 0 and cc < cols:
                acc += filt[(dr + 1) * 3 + dc + 1] * x[rr, cc]
    out[r, c] = acc
