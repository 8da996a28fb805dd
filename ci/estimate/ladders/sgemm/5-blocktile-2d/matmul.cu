// SGEMM ladder, step 5: 2-D register blocking. 256 threads own a 128x128 tile of C, each an
// 8x8 block of outputs; per step of k a thread reads 8 values of A and 8 of B from shared
// memory and does 64 FMAs. Launch: block 256 (1-D), grid over 128x128 tiles.

#define TILE 128
#define SLAB 8
#define R 8

extern "C" __global__ void __launch_bounds__(256)
matmul_tiled(const float* A, const float* B, float* C, int M, int N, int K)
{
    __shared__ float a_s[TILE][SLAB];
    __shared__ float b_s[SLAB][TILE];
    int t = threadIdx.x;
    int m0 = blockIdx.y * TILE, n0 = blockIdx.x * TILE;
    int ty = t / (TILE / R), tx = t % (TILE / R);   // 16x16 threads
    float out[R][R];
    for (int i = 0; i < R; ++i)
        for (int j = 0; j < R; ++j) out[i][j] = 0.0f;

    for (int base = 0; base < K; base += SLAB) {
        // 1024 elements of each slab, 4 per thread.
        for (int s = 0; s < 4; ++s) {
            int e = t + 256 * s;
            int ar = e / SLAB, ac = e % SLAB;
            a_s[ar][ac] = (m0 + ar < M && base + ac < K) ? A[(m0 + ar) * K + base + ac] : 0.0f;
            int br = e / TILE, bc = e % TILE;
            b_s[br][bc] = (base + br < K && n0 + bc < N) ? B[(base + br) * N + n0 + bc] : 0.0f;
        }
        __syncthreads();
        for (int k = 0; k < SLAB; ++k) {
            float a[R], b[R];
            for (int i = 0; i < R; ++i) a[i] = a_s[ty * R + i][k];
            for (int j = 0; j < R; ++j) b[j] = b_s[k][tx * R + j];
            for (int i = 0; i < R; ++i)
                for (int j = 0; j < R; ++j) out[i][j] += a[i] * b[j];
        }
        __syncthreads();
    }
    for (int i = 0; i < R; ++i) {
        int r = m0 + ty * R + i;
        for (int j = 0; j < R; ++j) {
            int c = n0 + tx * R + j;
            if (r < M && c < N) C[r * N + c] = out[i][j];
        }
    }
}
