// Transpose ladder, step 1 (validation kernel for the speed estimate): a 32x8 block moves a
// 32x32 tile straight from global to global memory, each thread 4 rows. Reads are
// coalesced; the writes of a warp go to 32 different rows of `out` (one sector each).

#define T 32
#define ROWS 8

extern "C" __global__ void transpose_coalesced(const float* in, float* out, int rows, int cols)
{
    int c = blockIdx.x * T + threadIdx.x;
    int r = blockIdx.y * T + threadIdx.y;
    for (int k = 0; k < T; k += ROWS) {
        if (r + k < rows && c < cols) out[c * rows + r + k] = in[(r + k) * cols + c];
    }
}
