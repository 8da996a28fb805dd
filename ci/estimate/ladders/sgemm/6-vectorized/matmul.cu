// SGEMM ladder, step 6: step 5 with 16-byte accesses. Global loads and stores move float4s
// where the shape allows (rows a multiple of 4 floats and the tile inside the matrix); the A
// slab is stored transposed so that a thread's 8 values of A are contiguous, and both
// register fragments come out of shared memory as two float4 loads each. Launch: block 256.

#define TILE 128
#define SLAB 8
#define R 8

__device__ __forceinline__ float at(const float* p, int r, int c, int rows, int cols, int ld)
{
    return (r < rows && c < cols) ? p[r * ld + c] : 0.0f;
}

extern "C" __global__ void __launch_bounds__(256)
matmul_tiled(const float* A, const float* B, float* C, int M, int N, int K)
{
    __shared__ __align__(16) float a_s[SLAB][TILE];   // a_s[k][m]: A transposed
    __shared__ __align__(16) float b_s[SLAB][TILE];
    int t = threadIdx.x;
    int m0 = blockIdx.y * TILE, n0 = blockIdx.x * TILE;
    int ty = t / (TILE / R), tx = t % (TILE / R);
    bool rows_ok = (K % 4 == 0) && (N % 4 == 0);
    bool inside = rows_ok && m0 + TILE <= M && n0 + TILE <= N;
    int ar = t / 2, ac = (t % 2) * 4;       // one float4 of the 128x8 A slab per thread
    int br = t / 32, bc = (t % 32) * 4;     // one float4 of the 8x128 B slab per thread
    float out[R][R];
    for (int i = 0; i < R; ++i)
        for (int j = 0; j < R; ++j) out[i][j] = 0.0f;

    for (int base = 0; base < K; base += SLAB) {
        float4 va, vb;
        if (inside && base + SLAB <= K) {
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
        __syncthreads();
        for (int k = 0; k < SLAB; ++k) {
            float a[R], b[R];
            float4 a0 = *reinterpret_cast<const float4*>(&a_s[k][ty * R]);
            float4 a1 = *reinterpret_cast<const float4*>(&a_s[k][ty * R + 4]);
            float4 b0 = *reinterpret_cast<const float4*>(&b_s[k][tx * R]);
            float4 b1 = *reinterpret_cast<const float4*>(&b_s[k][tx * R + 4]);
            a[0] = a0.x; a[1] = a0.y; a[2] = a0.z; a[3] = a0.w;
            a[4] = a1.x; a[5] = a1.y; a[6] = a1.z; a[7] = a1.w;
            b[0] = b0.x; b[1] = b0.y; b[2] = b0.z; b[3] = b0.w;
            b[4] = b1.x; b[5] = b1.y; b[6] = b1.z; b[7] = b1.w;
            for (int i = 0; i < R; ++i)
                for (int j = 0; j < R; ++j) out[i][j] += a[i] * b[j];
        }
        __syncthreads();
    }
    for (int i = 0; i < R; ++i) {
        int r = m0 + ty * R + i;
        int c = n0 + tx * R;
        if (inside) {
            *reinterpret_cast<float4*>(&C[r * N + c]) = make_float4(out[i][0], out[i][1], out[i][2], out[i][3]);
            *reinterpret_cast<float4*>(&C[r * N + c + 4]) = make_float4(out[i][4], out[i][5], out[i][6], out[i][7]);
        } else {
            for (int j = 0; j < R; ++j)
                if (r < M && c + j < N) C[r * N + c + j] = out[i][j];
        }
    }
}
