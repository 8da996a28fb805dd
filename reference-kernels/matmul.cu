// Reference kernels for the matmul lab: C[MxN] = A[MxK] * B[KxN], all row-major float.
//
// Default launch (both kernels): block [16, 16], grid [ceil_div(N, 16), ceil_div(M, 16)]:
// thread (x, y) of block (bx, by) owns C[by*16 + y][bx*16 + x].
//
//   matmul_naive  each thread reads a full row of A and a full column of B from global
//                 memory: 2K loads per 2K flops, so it is memory-bound even though every
//                 matrix fits in cache.
//   matmul_tiled  the block stages a 16x16 tile of A and of B in shared memory, then every
//                 thread reuses each staged value 16 times: 16x less global traffic. This is
//                 the lesson; reaching cuBLAS needs register tiling on top (each thread
//                 computing a small block of C, see submissions-example/matmul/register_tiled).

#define TILE 16

extern "C" __global__ void matmul_naive(const float* A, const float* B, float* C,
                                        int M, int N, int K)
{
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M && col < N) {
        float acc = 0.0f;
        for (int k = 0; k < K; ++k) {
            acc += A[row * K + k] * B[k * N + col];
        }
        C[row * N + col] = acc;
    }
}

extern "C" __global__ void matmul_tiled(const float* A, const float* B, float* C,
                                        int M, int N, int K)
{
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];

    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * TILE + ty;
    int col = blockIdx.x * TILE + tx;
    float acc = 0.0f;

    for (int k0 = 0; k0 < K; k0 += TILE) {
        // Each thread loads one element of each tile. Threads of a warp share `ty` and have
        // consecutive `tx`, so both loads are coalesced rows. Out-of-range elements (edges of
        // non-multiple-of-16 shapes) are loaded as 0 so they add nothing.
        As[ty][tx] = (row < M && k0 + tx < K) ? A[row * K + k0 + tx] : 0.0f;
        Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(k0 + ty) * N + col] : 0.0f;
        __syncthreads();  // the tiles are complete before anyone reads them

        // As[ty][k] is the same address across the warp (a broadcast); Bs[k][tx] walks
        // consecutive banks: no bank conflicts.
        for (int k = 0; k < TILE; ++k) {
            acc += As[ty][k] * Bs[k][tx];
        }
        __syncthreads();  // everyone is done with the tiles before they are overwritten
    }
    // The guard comes after the loop: threads outside C still helped load the tiles and
    // must reach every barrier.
    if (row < M && col < N) {
        C[row * N + col] = acc;
    }
}
