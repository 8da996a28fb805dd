// UNFINISHED: reduce_shuffle was never written; the other two are correct.
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
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) s_data[tid] += s_data[tid + s];
        __syncthreads();
    }
    if (tid == 0) atomicAdd(out, s_data[0]);
}
