// Held-out reduction, step 1 (Harris's "reduce0"): interleaved addressing with a divergent
// modulo test, then one atomicAdd per block.
extern "C" __global__ void reduce_shared(const float* in, float* out, int n)
{
    __shared__ float s[256];
    unsigned t = threadIdx.x, i = blockIdx.x * blockDim.x + threadIdx.x;
    s[t] = i < n ? in[i] : 0.0f;
    __syncthreads();
    for (unsigned k = 1; k < blockDim.x; k *= 2) {
        if (t % (2 * k) == 0) s[t] += s[t + k];
        __syncthreads();
    }
    if (t == 0) atomicAdd(out, s[0]);
}
