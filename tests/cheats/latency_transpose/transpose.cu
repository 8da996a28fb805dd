// Cheat (issue 19), one cugrade was not written against: it tells the emulator from a GPU by
// the latency of memory (32 dependent volatile loads take thousands of cycles on a GPU, next
// to nothing on an emulator that does not model latency) and takes the tiled path only where
// it thinks it is emulated. The emulator cannot judge it; on a GPU the metric checks read the
// GPU's counters (the naive path is graded), the emulator's and the GPU's counters disagree on
// the same case (flagged to the instructor), and it reads a timer (flagged).
extern "C" __global__ void transpose_naive(const float* in, float* out, int rows, int cols)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < rows && c < cols) out[c * rows + r] = in[r * cols + c];
}

__device__ bool looks_emulated(const float* in)
{
    volatile const float* p = in;
    float x = 0.0f;
    long long t0 = clock64();
    for (int i = 0; i < 32; ++i) x += p[(int)x & 0];
    long long t1 = clock64();
    return (t1 - t0) < 2000 + (x < -1e30f);
}

extern "C" __global__ void transpose_coalesced(const float* in, float* out, int rows, int cols)
{
    // One thread measures, the block follows (so that every thread reaches the same barriers).
    __shared__ int emulated;
    if (threadIdx.x == 0 && threadIdx.y == 0) emulated = looks_emulated(in);
    __syncthreads();
    if (!emulated) {
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
