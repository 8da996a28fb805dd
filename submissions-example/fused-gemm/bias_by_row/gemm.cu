// MISTAKE: the bias is indexed by the output row instead of the column (and read past its
// end whenever M > N).
extern "C" __global__ void gemm_bias_relu(const float* A, const float* B, const float* bias,
                                          float* C, int M, int N, int K)
{
    int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
    C[row * N + col] = fmaxf(acc + bias[row], 0.0f);
}
