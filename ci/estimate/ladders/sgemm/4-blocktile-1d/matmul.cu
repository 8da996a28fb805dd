// SGEMM ladder, step 4: 1-D register blocking. A block of 512 threads owns a 64x64 tile of
// C and walks K in slabs of 8; each thread keeps 8 outputs of one column in registers, so
// one shared load of B feeds 8 FMAs. Launch: block 512 (1-D), grid over 64x64 tiles.

#define TILE_M 64
#define TILE_N 64
#define SLAB 8
#define PER_THREAD 8

extern "C" __global__ void __launch_bounds__(512)
matmul_tiled(const float* A, const float* B, float* C, int M, int N, int K)
{
    __shared__ float a_s[TILE_M][SLAB];
    __shared__ float b_s[SLAB][TILE_N];
    int t = threadIdx.x;
    int m0 = blockIdx.y * TILE_M, n0 = blockIdx.x * TILE_N;
    int my_col = t % TILE_N;              // column of C this thread owns
    int my_rows = (t / TILE_N) * PER_THREAD;  // first of its 8 rows
    int a_r = t / SLAB, a_c = t % SLAB;   // the element of the A slab this thread stages
    int b_r = t / TILE_N, b_c = t % TILE_N;
    float out[PER_THREAD];
    for (int i = 0; i < PER_THREAD; ++i) out[i] = 0.0f;

    for (int base = 0; base < K; base += SLAB) {
        a_s[a_r][a_c] = (m0 + a_r < M && base + a_c < K) ? A[(m0 + a_r) * K + base + a_c] : 0.0f;
        b_s[b_r][b_c] = (base + b_r < K && n0 + b_c < N) ? B[(base + b_r) * N + n0 + b_c] : 0.0f;
        __syncthreads();
        for (int k = 0; k < SLAB; ++k) {
            float b = b_s[k][my_col];
            for (int i = 0; i < PER_THREAD; ++i) {
                out[i] += a_s[my_rows + i][k] * b;
            }
        }
        __syncthreads();
    }
    for (int i = 0; i < PER_THREAD; ++i) {
        int r = m0 + my_rows + i, c = n0 + my_col;
        if (r < M && c < N) C[r * N + c] = out[i];
    }
}
