// SGEMM ladder, step 2: the same one-thread-per-output kernel with threadIdx.x along a ROW
// of C. A warp now reads one element of A (a broadcast) and 32 consecutive elements of B
// (four sectors): coalesced. Launch: block 32x32.

extern "C" __global__ void matmul_tiled(const float* A, const float* B, float* C,
                                        int M, int N, int K)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < M && col < N) {
        float acc = 0.0f;
        for (int k = 0; k < K; ++k) {
            acc += A[row * K + k] * B[k * N + col];
        }
        C[row * N + col] = acc;
    }
}
