# A shared-memory race in a CuPy RawKernel: the tree steps are not separated by barriers.
# racecheck names the Python line that reads another thread's slot (reduce.py:25).
import cupy as cp

reduce_naive = cp.RawKernel(r'''
extern "C" __global__ void reduce_naive(const float* in, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(out, in[i]);
}
''', "reduce_naive")

# MISTAKE: no __syncthreads() between the tree's steps.
reduce_shared = cp.RawKernel(
    r'''
extern "C" __global__ void reduce_shared(const float* in, float* out, int n) {
    __shared__ float s[256];
    unsigned tid = threadIdx.x;
    unsigned i = blockIdx.x * blockDim.x + tid;
    s[tid] = i < n ? in[i] : 0.0f;
    for (unsigned step = blockDim.x / 2; step > 0; step >>= 1) {
        if (tid < step) s[tid] += s[tid + step];
    }
    if (tid == 0) atomicAdd(out, s[0]);
}
''',
    "reduce_shared",
)
