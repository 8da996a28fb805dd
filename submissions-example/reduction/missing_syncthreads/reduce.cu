// MISTAKE: no __syncthreads() anywhere in reduce_shared: a thread reads s_data[tid + s]
// before the thread that owns it (often in another warp) has written it.
extern "C" __global__ void reduce_naive(const float* in, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(out, in[i]);
}

extern "C" __global__ void reduce_shared(const float* in, float* out, int n)
{
    __shared__ float s_data[256];
    int tid = threadIdx.x;
    int i = blockIdx.x * blockDim.x + tid;
    s_data[tid] = (i < n) ? in[i] : 0.0f;

    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) s_data[tid] += s_data[tid + s];
    }
    if (tid == 0) atomicAdd(out, s_data[0]);
}

__device__ float warp_sum(float v)
{
    for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
    return v;
}

extern "C" __global__ void reduce_shuffle(const float* in, float* out, int n)
{
    __shared__ float warp_part[32];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    float v = warp_sum(i < n ? in[i] : 0.0f);
    if (lane == 0) warp_part[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = warp_sum(lane < (blockDim.x + 31) / 32 ? warp_part[lane] : 0.0f);
        if (lane == 0) atomicAdd(out, v);
    }
}
