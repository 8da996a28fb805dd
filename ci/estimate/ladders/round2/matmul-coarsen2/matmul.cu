// Held-out (round 2): 32x32 shared tiles with thread coarsening, each thread of a 32x16 block
// computing two outputs 16 rows apart ("Programming Massively Parallel Processors" style).
#define T 32
extern "C" __global__ void matmul_tiled(const float* A, const float* B, float* C, int M, int N, int K)
{
    __shared__ float As[T][T], Bs[T][T];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row0 = blockIdx.y * T + ty, row1 = row0 + 16, col = blockIdx.x * T + tx;
    float acc0 = 0.0f, acc1 = 0.0f;
    for (int t = 0; t < K; t += T) {
        As[ty][tx] = (row0 < M && t + tx < K) ? A[(size_t)row0 * K + t + tx] : 0.0f;
        As[ty + 16][tx] = (row1 < M && t + tx < K) ? A[(size_t)row1 * K + t + tx] : 0.0f;
        Bs[ty][tx] = (t + ty < K && col < N) ? B[(size_t)(t + ty) * N + col] : 0.0f;
        Bs[ty + 16][tx] = (t + ty + 16 < K && col < N) ? B[(size_t)(t + ty + 16) * N + col] : 0.0f;
        __syncthreads();
#pragma unroll 8
        for (int k = 0; k < T; ++k) {
            float b = Bs[k][tx];
            acc0 += As[ty][k] * b;
            acc1 += As[ty + 16][k] * b;
        }
        __syncthreads();
    }
    if (col < N) {
        if (row0 < M) C[(size_t)row0 * N + col] = acc0;
        if (row1 < M) C[(size_t)row1 * N + col] = acc1;
    }
}
