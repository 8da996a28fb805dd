// SGEMM ladder, step 3: 32x32 tiles of A and B staged in shared memory; each staged value
// is used 32 times. Still one output per thread, so two shared loads per FMA.

#define T 32

extern "C" __global__ void matmul_tiled(const float* A, const float* B, float* C,
                                        int M, int N, int K)
{
    __shared__ float a_tile[T][T];
    __shared__ float b_tile[T][T];
    int x = threadIdx.x, y = threadIdx.y;
    int row = blockIdx.y * T + y;
    int col = blockIdx.x * T + x;
    float acc = 0.0f;
    for (int base = 0; base < K; base += T) {
        a_tile[y][x] = (row < M && base + x < K) ? A[row * K + base + x] : 0.0f;
        b_tile[y][x] = (base + y < K && col < N) ? B[(base + y) * N + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < T; ++k) {
            acc += a_tile[y][k] * b_tile[k][x];
        }
        __syncthreads();
    }
    if (row < M && col < N) {
        C[row * N + col] = acc;
    }
}
