// Static and dynamic shared memory in one kernel: the dynamic array starts after the static
// variables, at the extern declaration's alignment. Overlapping them would race and corrupt.
extern "C" __global__ void mixed_shared(const float* in, float* out, unsigned* where, int n)
{
    __shared__ float tile[65];                       // 260 bytes: the next 256-byte boundary is 512
    extern __shared__ __align__(256) float dyn[];    // n floats
    int t = threadIdx.x;
    if (t < 65) tile[t] = 1000.0f + t;
    for (int i = t; i < n; i += blockDim.x) dyn[i] = in[i];
    __syncthreads();
    for (int i = t; i < n; i += blockDim.x) out[i] = dyn[i] + tile[i % 65];
    if (t == 0) {
        where[0] = (unsigned)__cvta_generic_to_shared(tile);
        where[1] = (unsigned)__cvta_generic_to_shared(dyn);
    }
}
