// SGEMM ladder, step 7: warp tiling. 128 threads (4 warps in a 2x2 arrangement) own a
// 128x128 tile of C and walk K in slabs of 16. Each warp owns a 64x64 quarter, computed as
// 2x2 sub-tiles of 32x32; in each sub-tile a lane owns 8 rows x 4 columns, so a lane holds
// 16x8 = 128 outputs and per step of k reads 16 values of A and 8 of B (float4s) from
// shared memory for 128 FMAs. Launch: block 128, grid over 128x128 tiles.

#define TILE 128
#define SLAB 16
#define WARP_TILE 64
#define SUB 32
#define LM 8   // rows per lane in a sub-tile
#define LN 4   // columns per lane in a sub-tile

__device__ __forceinline__ float at(const float* p, int r, int c, int rows, int cols, int ld)
{
    return (r < rows && c < cols) ? p[r * ld + c] : 0.0f;
}

extern "C" __global__ void __launch_bounds__(128)
matmul_tiled(const float* A, const float* B, float* C, int M, int N, int K)
{
    __shared__ __align__(16) float a_s[SLAB][TILE];   // transposed: a_s[k][m]
    __shared__ __align__(16) float b_s[SLAB][TILE];
    int t = threadIdx.x;
    int warp = t / 32, lane = t % 32;
    int wm = (warp / 2) * WARP_TILE, wn = (warp % 2) * WARP_TILE;
    int lr = (lane / 8) * LM, lc = (lane % 8) * LN;
    int m0 = blockIdx.y * TILE, n0 = blockIdx.x * TILE;
    bool inside = (K % 4 == 0) && (N % 4 == 0) && m0 + TILE <= M && n0 + TILE <= N;

    float out[2 * LM][2 * LN];
    for (int i = 0; i < 2 * LM; ++i)
        for (int j = 0; j < 2 * LN; ++j) out[i][j] = 0.0f;

    for (int base = 0; base < K; base += SLAB) {
        bool full = inside && base + SLAB <= K;
        // A slab: 128 rows x 16 = 512 float4s; B slab: 16 rows x 128 = 512 float4s; 4 each.
        for (int s = 0; s < 4; ++s) {
            int e = t + 128 * s;
            int ar = e / 4, ac = (e % 4) * 4;
            int br = e / 32, bc = (e % 32) * 4;
            float4 va, vb;
            if (full) {
                va = *reinterpret_cast<const float4*>(&A[(m0 + ar) * K + base + ac]);
                vb = *reinterpret_cast<const float4*>(&B[(base + br) * N + n0 + bc]);
            } else {
                va = make_float4(at(A, m0 + ar, base + ac, M, K, K), at(A, m0 + ar, base + ac + 1, M, K, K),
                                 at(A, m0 + ar, base + ac + 2, M, K, K), at(A, m0 + ar, base + ac + 3, M, K, K));
                vb = make_float4(at(B, base + br, n0 + bc, K, N, N), at(B, base + br, n0 + bc + 1, K, N, N),
                                 at(B, base + br, n0 + bc + 2, K, N, N), at(B, base + br, n0 + bc + 3, K, N, N));
            }
            a_s[ac + 0][ar] = va.x;
            a_s[ac + 1][ar] = va.y;
            a_s[ac + 2][ar] = va.z;
            a_s[ac + 3][ar] = va.w;
            *reinterpret_cast<float4*>(&b_s[br][bc]) = vb;
        }
        __syncthreads();
        for (int k = 0; k < SLAB; ++k) {
            float a[2 * LM], b[2 * LN];
            for (int mi = 0; mi < 2; ++mi) {
                const float* src = &a_s[k][wm + mi * SUB + lr];
                float4 x = *reinterpret_cast<const float4*>(src);
                float4 y = *reinterpret_cast<const float4*>(src + 4);
                a[mi * LM + 0] = x.x; a[mi * LM + 1] = x.y; a[mi * LM + 2] = x.z; a[mi * LM + 3] = x.w;
                a[mi * LM + 4] = y.x; a[mi * LM + 5] = y.y; a[mi * LM + 6] = y.z; a[mi * LM + 7] = y.w;
            }
            for (int ni = 0; ni < 2; ++ni) {
                float4 x = *reinterpret_cast<const float4*>(&b_s[k][wn + ni * SUB + lc]);
                b[ni * LN + 0] = x.x; b[ni * LN + 1] = x.y; b[ni * LN + 2] = x.z; b[ni * LN + 3] = x.w;
            }
            for (int i = 0; i < 2 * LM; ++i)
                for (int j = 0; j < 2 * LN; ++j) out[i][j] += a[i] * b[j];
        }
        __syncthreads();
    }
    for (int mi = 0; mi < 2; ++mi)
        for (int i = 0; i < LM; ++i) {
            int r = m0 + wm + mi * SUB + lr + i;
            for (int ni = 0; ni < 2; ++ni) {
                int c = n0 + wn + ni * SUB + lc;
                const float* o = &out[mi * LM + i][ni * LN];
                if (inside) {
                    *reinterpret_cast<float4*>(&C[r * N + c]) = make_float4(o[0], o[1], o[2], o[3]);
                } else {
                    for (int j = 0; j < LN; ++j)
                        if (r < M && c + j < N) C[r * N + c + j] = o[j];
                }
            }
        }
}
