// Held-out (round 2): 16x16 padded tile, one element per thread, blocks of 16x16.
#define T 16
extern "C" __global__ void transpose_coalesced(const float* in, float* out, int rows, int cols)
{
    __shared__ float tile[T][T + 1];
    int c = blockIdx.x * T + threadIdx.x, r = blockIdx.y * T + threadIdx.y;
    if (r < rows && c < cols) tile[threadIdx.y][threadIdx.x] = in[(size_t)r * cols + c];
    __syncthreads();
    int oc = blockIdx.y * T + threadIdx.x, orow = blockIdx.x * T + threadIdx.y;
    if (orow < cols && oc < rows) out[(size_t)orow * rows + oc] = tile[threadIdx.x][threadIdx.y];
}
