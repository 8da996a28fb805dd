# The reduction lab in Numba, the way the course teaches it: correct for every milestone.
from numba import cuda, float32

THREADS = 256


@cuda.jit
def reduce_naive(x, out, n):
    i = cuda.grid(1)
    if i < n:
        cuda.atomic.add(out, 0, x[i])


@cuda.jit
def reduce_shared(x, out, n):
    s = cuda.shared.array(THREADS, float32)
    tid = cuda.threadIdx.x
    i = cuda.blockIdx.x * cuda.blockDim.x + tid
    s[tid] = x[i] if i < n else 0.0
    cuda.syncthreads()
    step = cuda.blockDim.x // 2
    while step > 0:
        if tid < step:
            s[tid] += s[tid + step]
        cuda.syncthreads()
        step //= 2
    if tid == 0:
        cuda.atomic.add(out, 0, s[0])


@cuda.jit(device=True)
def warp_sum(v):
    off = 16
    while off > 0:
        v += cuda.shfl_down_sync(0xFFFFFFFF, v, off)
        off //= 2
    return v


@cuda.jit
def reduce_shuffle(x, out, n):
    part = cuda.shared.array(32, float32)
    i = cuda.grid(1)
    lane = cuda.threadIdx.x % 32
    warp = cuda.threadIdx.x // 32
    v = warp_sum(x[i] if i < n else float32(0.0))
    if lane == 0:
        part[warp] = v
    cuda.syncthreads()
    if warp == 0:
        v = warp_sum(part[lane] if lane < (cuda.blockDim.x + 31) // 32 else float32(0.0))
        if lane == 0:
            cuda.atomic.add(out, 0, v)
