// Held-out (round 2): 64x64 padded tile moved by 32x8 threads (16 elements each).
#define T 64
extern "C" __global__ void transpose_coalesced(const float* in, float* out, int rows, int cols)
{
    __shared__ float tile[T][T + 1];
    int bx = blockIdx.x * T, by = blockIdx.y * T;
    for (int y = threadIdx.y; y < T; y += 8)
        for (int x = threadIdx.x; x < T; x += 32) {
            int r = by + y, c = bx + x;
            if (r < rows && c < cols) tile[y][x] = in[(size_t)r * cols + c];
        }
    __syncthreads();
    for (int y = threadIdx.y; y < T; y += 8)
        for (int x = threadIdx.x; x < T; x += 32) {
            int orow = bx + y, oc = by + x;
            if (orow < cols && oc < rows) out[(size_t)orow * rows + oc] = tile[x][y];
        }
}
