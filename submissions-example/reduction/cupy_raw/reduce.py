# The reduction lab as one CuPy RawModule: three kernels in one CUDA C++ string, fetched with
# get_function as the course's CuPy guide shows.
import cupy as cp

SOURCE = r'''
extern "C" __global__ void reduce_naive(const float* in, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(out, in[i]);
}

extern "C" __global__ void reduce_shared(const float* in, float* out, int n) {
    __shared__ float s[256];
    unsigned tid = threadIdx.x;
    unsigned i = blockIdx.x * blockDim.x + tid;
    s[tid] = i < n ? in[i] : 0.0f;
    __syncthreads();
    for (unsigned step = blockDim.x / 2; step > 0; step >>= 1) {
        if (tid < step) s[tid] += s[tid + step];
        __syncthreads();
    }
    if (tid == 0) atomicAdd(out, s[0]);
}

__device__ float warp_sum(float v) {
    for (int off = 16; off > 0; off /= 2) v += __shfl_down_sync(0xffffffff, v, off);
    return v;
}

extern "C" __global__ void reduce_shuffle(const float* in, float* out, int n) {
    __shared__ float part[32];
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    float v = warp_sum(i < n ? in[i] : 0.0f);
    if (lane == 0) part[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = warp_sum(lane < (blockDim.x + 31) / 32 ? part[lane] : 0.0f);
        if (lane == 0) atomicAdd(out, v);
    }
}
'''

module = cp.RawModule(code=SOURCE)
reduce_naive = module.get_function("reduce_naive")
reduce_shared = module.get_function("reduce_shared")
reduce_shuffle = module.get_function("reduce_shuffle")
