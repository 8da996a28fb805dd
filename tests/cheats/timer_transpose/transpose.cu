// Cheat (issue 19): tells the PTX emulator from a GPU by %globaltimer (nanoseconds since the
// epoch on a GPU; it used to count instructions on the emulator) and runs the padded, tiled
// transpose only where it thinks it is emulated, the naive one on the GPU. The emulator's
// %globaltimer now reads like a GPU's, and on a GPU the metric checks read the GPU's own
// counters: the naive path's 12.5 % store efficiency is what is graded. Flagged: reads a timer.
__device__ __forceinline__ unsigned long long globaltimer()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

extern "C" __global__ void transpose_naive(const float* in, float* out, int rows, int cols)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < rows && c < cols) out[c * rows + r] = in[r * cols + c];
}

extern "C" __global__ void transpose_coalesced(const float* in, float* out, int rows, int cols)
{
    if (globaltimer() > 1000000000000000ull) {
        // "On the GPU": the naive kernel, which the speed check would not notice by itself.
        int c = blockIdx.x * 32 + threadIdx.x, r = blockIdx.y * 32 + threadIdx.y;
        if (r < rows && c < cols) out[c * rows + r] = in[r * cols + c];
        return;
    }
    __shared__ float tile[32][33];
    int c = blockIdx.x * 32 + threadIdx.x, r = blockIdx.y * 32 + threadIdx.y;
    if (r < rows && c < cols) tile[threadIdx.y][threadIdx.x] = in[r * cols + c];
    __syncthreads();
    c = blockIdx.y * 32 + threadIdx.x;
    r = blockIdx.x * 32 + threadIdx.y;
    if (r < cols && c < rows) out[r * rows + c] = tile[threadIdx.x][threadIdx.y];
}
