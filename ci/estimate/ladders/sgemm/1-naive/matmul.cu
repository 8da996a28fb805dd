// SGEMM ladder, step 1 (validation kernel for the speed estimate, docs/estimate.md): one
// thread per output of C, but threadIdx.x runs DOWN a column of C. The 32 lanes of a warp
// read 32 different rows of A (one sector each: uncoalesced) and the same element of B.
// Launch (cugrade.yaml): block 32x32, grid over (rows, columns) of C in that order.

extern "C" __global__ void matmul_tiled(const float* A, const float* B, float* C,
                                        int M, int N, int K)
{
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    int col = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < M && col < N) {
        float acc = 0.0f;
        for (int k = 0; k < K; ++k) {
            acc += A[row * K + k] * B[k * N + col];
        }
        C[row * N + col] = acc;
    }
}
