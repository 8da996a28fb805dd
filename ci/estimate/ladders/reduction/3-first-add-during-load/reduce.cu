// Held-out reduction, step 3 (Harris's "reduce3/4"): each thread adds two elements while
// loading (half the blocks), and the last warp unrolled with __syncwarp() between steps (the
// Volta-safe form of Harris's volatile warp-synchronous unroll).
__device__ void warp_reduce(volatile float* s, unsigned t)
{
    for (unsigned k = 32; k > 0; k >>= 1) {
        float v = s[t] + s[t + k];
        __syncwarp();
        s[t] = v;
        __syncwarp();
    }
}
extern "C" __global__ void reduce_shared(const float* in, float* out, int n)
{
    __shared__ float s[256];
    unsigned t = threadIdx.x, i = blockIdx.x * (blockDim.x * 2) + threadIdx.x;
    float v = i < n ? in[i] : 0.0f;
    if (i + blockDim.x < n) v += in[i + blockDim.x];
    s[t] = v;
    __syncthreads();
    for (unsigned k = blockDim.x / 2; k > 32; k >>= 1) {
        if (t < k) s[t] += s[t + k];
        __syncthreads();
    }
    if (t < 32) warp_reduce(s, t);
    if (t == 0) atomicAdd(out, s[0]);
}
