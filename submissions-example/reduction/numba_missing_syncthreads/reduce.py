# MISTAKE: no cuda.syncthreads() between the tree steps of reduce_shared: a thread reads
# s[tid + step] before the thread that owns it (often in another warp) has written it.
from numba import cuda, float32


@cuda.jit
def reduce_naive(x, out, n):
    i = cuda.grid(1)
    if i < n:
        cuda.atomic.add(out, 0, x[i])


@cuda.jit
def reduce_shared(x, out, n):
    s = cuda.shared.array(256, float32)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    s[tid] = x[i] if i < n else 0.0
    step = cuda.blockDim.x // 2
    while step > 0:
        if tid < step:
            s[tid] += s[tid + step]
        step //= 2
    if tid == 0:
        cuda.atomic.add(out, 0, s[0])
