// Held-out reduction, step 2 (Harris's "reduce2"): sequential addressing, no divergence
// within a warp until the last levels, no bank conflicts.
extern "C" __global__ void reduce_shared(const float* in, float* out, int n)
{
    __shared__ float s[256];
    unsigned t = threadIdx.x, i = blockIdx.x * blockDim.x + threadIdx.x;
    s[t] = i < n ? in[i] : 0.0f;
    __syncthreads();
    for (unsigned k = blockDim.x / 2; k > 0; k >>= 1) {
        if (t < k) s[t] += s[t + k];
        __syncthreads();
    }
    if (t == 0) atomicAdd(out, s[0]);
}
