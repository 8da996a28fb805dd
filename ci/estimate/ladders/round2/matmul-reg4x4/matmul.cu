// Held-out (round 2): 64x64 output tiles, 16x16 threads, each thread a 4x4 block of outputs
// strided by 16 (rows ty + 16i, columns tx + 16j), K staged 16 at a time.
#define TM 64
#define TK 16
extern "C" __global__ void matmul_tiled(const float* A, const float* B, float* C, int M, int N, int K)
{
    __shared__ float As[TM][TK + 1];
    __shared__ float Bs[TK][TM];
    int tx = threadIdx.x, ty = threadIdx.y, tid = ty * 16 + tx;
    int r0 = blockIdx.y * TM, c0 = blockIdx.x * TM;
    float acc[4][4] = {};
    for (int t = 0; t < K; t += TK) {
        for (int i = tid; i < TM * TK; i += 256) {
            int ar = i / TK, ak = i % TK;
            As[ar][ak] = (r0 + ar < M && t + ak < K) ? A[(size_t)(r0 + ar) * K + t + ak] : 0.0f;
            int bk = i / TM, bc = i % TM;
            Bs[bk][bc] = (t + bk < K && c0 + bc < N) ? B[(size_t)(t + bk) * N + c0 + bc] : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < TK; ++k) {
            float a[4], b[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) a[i] = As[ty + 16 * i][k];
#pragma unroll
            for (int j = 0; j < 4; ++j) b[j] = Bs[k][tx + 16 * j];
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) acc[i][j] += a[i] * b[j];
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            int r = r0 + ty + 16 * i, c = c0 + tx + 16 * j;
            if (r < M && c < N) C[(size_t)r * N + c] = acc[i][j];
        }
}
