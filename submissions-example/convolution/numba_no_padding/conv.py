# MISTAKE: no zero padding: out-of-bounds reads at both ends in 1-D, row wrap-around in 2-D.
from numba import cuda, float32


@cuda.jit
def conv1d(filt, x, out, n):
    i = cuda.grid(1)
    if i >= n:
        return
    acc = float32(0.0)
    for k in range(7):
        acc += filt[k] * x[i + k - 3]
    out[i] = acc


@cuda.jit
def conv2d(filt, x, out, rows, cols):
    c, r = cuda.grid(2)
    if r >= rows or c >= cols:
        return
    acc = float32(0.0)
    for dr in range(-1, 2):
        for dc in range(-1, 2):
            acc += filt[(dr + 1) * 3 + dc + 1] * x[(r + dr) * cols + c + dc]
    out[r * cols + c] = acc
