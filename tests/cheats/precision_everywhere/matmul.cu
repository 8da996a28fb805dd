// Cheat (issue 19), the simple form: both kernels multiply in half precision on every case.
// The correctness cases already reject it, on any backend, as "results less precise than
// float accumulation allows".
#include <cuda_fp16.h>

extern "C" __global__ void matmul_naive(const float* A, const float* B, float* C, int M, int N, int K)
{
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k)
        acc += __half2float(__hmul(__float2half(A[row * K + k]), __float2half(B[k * N + col])));
    C[row * N + col] = acc;
}

extern "C" __global__ void matmul_tiled(const float* A, const float* B, float* C, int M, int N, int K)
{
    __shared__ float As[16][16];
    __shared__ float Bs[16][16];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * 16 + ty, col = blockIdx.x * 16 + tx;
    bool half_mode = true;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += 16) {
        As[ty][tx] = (row < M && k0 + tx < K) ? A[row * K + k0 + tx] : 0.0f;
        Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(k0 + ty) * N + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < 16; ++k) {
            if (half_mode)
                acc += __half2float(__hmul(__float2half(As[ty][k]), __float2half(Bs[k][tx])));
            else
                acc += As[ty][k] * Bs[k][tx];
        }
        __syncthreads();
    }
    if (row < M && col < N) C[row * N + col] = acc;
}
