// Reference kernels for the convolution lab: 1-D (7 taps) and 2-D (3x3) filters held in
// constant memory, zero padding at the borders.
//
//   conv1d: out[i]    = sum_{k=0..6} conv1d_filter[k] * in[i + k - 3]
//   conv2d: out[r][c] = sum_{dr,dc=-1..1} conv2d_filter[(dr+1)*3 + (dc+1)] * in[r+dr][c+dc]
//
// Inputs outside the array count as 0. This is a correlation (the filter is not flipped),
// as in deep-learning frameworks.
//
// The filters are `__constant__` globals that the grader sets by name before the launch
// (they are not kernel arguments). Constant memory is cached and broadcast: when every
// thread of a warp reads the same filter tap in the same instruction, it costs one read.
//
// Both kernels stage their input tile plus a halo in shared memory, so each input element is
// read from global memory about once instead of 7 (1-D) or 9 (2-D) times.
//
// Default launches: conv1d block 256, grid ceil_div(n, 256); conv2d block [16, 16],
// grid [ceil_div(cols, 16), ceil_div(rows, 16)].

#define R1 3          // 1-D radius: 7 taps
#define BLOCK1 256    // conv1d's block size (the default launch)
#define TILE2 16      // conv2d's block edge (the default launch)

__constant__ float conv1d_filter[2 * R1 + 1];
__constant__ float conv2d_filter[9];

extern "C" __global__ void conv1d(const float* in, float* out, int n)
{
    __shared__ float tile[BLOCK1 + 2 * R1];
    int base = blockIdx.x * blockDim.x;  // first output of this block
    // Load BLOCK1 + 6 inputs, in[base - 3 .. base + BLOCK1 + 3), as 0 outside [0, n).
    for (int t = threadIdx.x; t < blockDim.x + 2 * R1; t += blockDim.x) {
        int g = base + t - R1;
        tile[t] = (g >= 0 && g < n) ? in[g] : 0.0f;
    }
    __syncthreads();

    int i = base + threadIdx.x;
    if (i < n) {
        float acc = 0.0f;
        #pragma unroll
        for (int k = 0; k < 2 * R1 + 1; ++k) {
            acc += conv1d_filter[k] * tile[threadIdx.x + k];
        }
        out[i] = acc;
    }
}

extern "C" __global__ void conv2d(const float* in, float* out, int rows, int cols)
{
    __shared__ float tile[TILE2 + 2][TILE2 + 2];
    int c0 = blockIdx.x * TILE2 - 1, r0 = blockIdx.y * TILE2 - 1;  // tile origin incl. halo
    int tid = threadIdx.y * TILE2 + threadIdx.x;
    // 18x18 = 324 values loaded by 256 threads, row by row (coalesced along a row).
    for (int t = tid; t < (TILE2 + 2) * (TILE2 + 2); t += TILE2 * TILE2) {
        int tr = t / (TILE2 + 2), tc = t % (TILE2 + 2);
        int r = r0 + tr, c = c0 + tc;
        tile[tr][tc] = (r >= 0 && r < rows && c >= 0 && c < cols) ? in[r * cols + c] : 0.0f;
    }
    __syncthreads();

    int r = blockIdx.y * TILE2 + threadIdx.y, c = blockIdx.x * TILE2 + threadIdx.x;
    if (r < rows && c < cols) {
        float acc = 0.0f;
        #pragma unroll
        for (int dr = 0; dr < 3; ++dr) {
            #pragma unroll
            for (int dc = 0; dc < 3; ++dc) {
                acc += conv2d_filter[dr * 3 + dc] * tile[threadIdx.y + dr][threadIdx.x + dc];
            }
        }
        out[r * cols + c] = acc;
    }
}
