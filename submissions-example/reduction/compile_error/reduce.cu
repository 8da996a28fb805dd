// MISTAKE: __shfl_down_sync without its mask argument, and a float* passed where a float
// is expected: NVRTC rejects the whole file, so no milestone can run.
extern "C" __global__ void reduce_naive(const float* in, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(out, in[i]);
}

extern "C" __global__ void reduce_shared(const float* in, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(out, in + i);
}

extern "C" __global__ void reduce_shuffle(const float* in, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < n ? in[i] : 0.0f;
    for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(v, off);
    if ((threadIdx.x & 31) == 0) atomicAdd(out, v);
}
