// Reference kernels for the transpose lab: out[c*rows + r] = in[r*cols + c].
//
// Default launch (both): block [32, 32], grid [ceil_div(cols, 32), ceil_div(rows, 32)];
// thread (x, y) of block (bx, by) starts at input element (row by*32 + y, col bx*32 + x).
//
//   transpose_naive      reads rows (coalesced) and writes columns: the 32 lanes of a warp
//                        store 32 floats that are `rows` floats apart, one 32-byte sector
//                        each, so only 4 of every 32 bytes written are useful.
//   transpose_coalesced  stages a 32x32 tile in shared memory, then writes the transposed
//                        tile row by row: both global reads and writes are coalesced. The
//                        tile has 33 columns so that reading a tile column hits 32 different
//                        banks (with 32 columns every element of a column is in one bank).

#define TILE 32

extern "C" __global__ void transpose_naive(const float* in, float* out, int rows, int cols)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < rows && c < cols) {
        out[c * rows + r] = in[r * cols + c];
    }
}

extern "C" __global__ void transpose_coalesced(const float* in, float* out, int rows, int cols)
{
    __shared__ float tile[TILE][TILE + 1];  // +1: no bank conflicts on the column reads

    // Read: consecutive threadIdx.x -> consecutive input columns.
    int c = blockIdx.x * TILE + threadIdx.x;
    int r = blockIdx.y * TILE + threadIdx.y;
    if (r < rows && c < cols) {
        tile[threadIdx.y][threadIdx.x] = in[r * cols + c];
    }
    __syncthreads();  // outside the `if`: every thread of the block reaches it

    // Write: swap the block coordinates, so consecutive threadIdx.x -> consecutive output
    // columns (= input rows of this tile), reading the tile down a column.
    int out_c = blockIdx.y * TILE + threadIdx.x;  // an input row index
    int out_r = blockIdx.x * TILE + threadIdx.y;  // an input column index
    if (out_r < cols && out_c < rows) {
        out[out_r * rows + out_c] = tile[threadIdx.x][threadIdx.y];
    }
}
