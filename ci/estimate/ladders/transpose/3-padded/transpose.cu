// Transpose ladder, step 3: step 2 with one column of padding in the tile, so a column of
// the tile spans all 32 banks: no bank conflicts.

#define T 32
#define ROWS 8

extern "C" __global__ void transpose_coalesced(const float* in, float* out, int rows, int cols)
{
    __shared__ float tile[T][T + 1];
    int c = blockIdx.x * T + threadIdx.x;
    int r = blockIdx.y * T + threadIdx.y;
    for (int k = 0; k < T; k += ROWS) {
        if (r + k < rows && c < cols) tile[threadIdx.y + k][threadIdx.x] = in[(r + k) * cols + c];
    }
    __syncthreads();
    int oc = blockIdx.y * T + threadIdx.x;   // a column of `out` is a row of `in`
    int orow = blockIdx.x * T + threadIdx.y;
    for (int k = 0; k < T; k += ROWS) {
        if (orow + k < cols && oc < rows) out[(orow + k) * rows + oc] = tile[threadIdx.x][threadIdx.y + k];
    }
}
