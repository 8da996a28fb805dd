// Transpose ladder, step 2: the tile goes through shared memory, so both the global reads
// and the global writes are coalesced. The tile has no padding: reading a column of it
// makes all 32 lanes hit one bank (32-way conflicts).

#define T 32
#define ROWS 8

extern "C" __global__ void transpose_coalesced(const float* in, float* out, int rows, int cols)
{
    __shared__ float tile[T][T];
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
