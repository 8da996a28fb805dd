// Reference kernel for the softmax lab: row-wise, numerically stable softmax.
//
//   out[r][c] = exp(in[r][c] - m_r) / sum_k exp(in[r][k] - m_r),   m_r = max_k in[r][k]
//
// Subtracting the row maximum changes nothing mathematically but keeps every exp() in
// (0, 1]: without it, logits around 100 overflow (expf(88.8) is already +inf in float) and
// the row becomes inf/inf = NaN.
//
// Default launch: block 256, grid `rows`: one block per row. Threads stride over the row
// (any length, including 1 and lengths that are not a power of two), then combine their
// partial max and partial sum with a block-wide reduction (warp shuffles, then one value
// per warp through shared memory).

#define MAX_WARPS 32
// NVRTC has no <math.h>, hence no INFINITY macro: build -inf from its bit pattern.
#define NEG_INF __int_as_float(0xff800000)

// Block-wide reduction; every thread of the block must call it, and every thread gets the
// result. `op` is 0 for max, 1 for sum.
__device__ float block_reduce(float v, int op)
{
    __shared__ float warp_vals[MAX_WARPS];
    unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    unsigned warps = (blockDim.x + 31) / 32;

    for (int off = 16; off > 0; off >>= 1) {
        float other = __shfl_down_sync(0xffffffffu, v, off);
        v = op == 0 ? fmaxf(v, other) : v + other;
    }
    if (lane == 0) warp_vals[warp] = v;
    __syncthreads();
    if (warp == 0) {
        float identity = op == 0 ? NEG_INF : 0.0f;
        v = lane < warps ? warp_vals[lane] : identity;
        for (int off = 16; off > 0; off >>= 1) {
            float other = __shfl_down_sync(0xffffffffu, v, off);
            v = op == 0 ? fmaxf(v, other) : v + other;
        }
        if (lane == 0) warp_vals[0] = v;
    }
    __syncthreads();
    float result = warp_vals[0];
    __syncthreads();  // warp_vals is reused by the next call
    return result;
}

extern "C" __global__ void softmax_rows(const float* in, float* out, int rows, int cols)
{
    int row = blockIdx.x;
    if (row >= rows) return;  // uniform across the block: safe before the barriers
    const float* x = in + (size_t)row * cols;
    float* y = out + (size_t)row * cols;

    // Pass 1: the row maximum.
    float m = NEG_INF;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, x[c]);
    m = block_reduce(m, 0);

    // Pass 2: the normaliser, with every exponent <= 0.
    float s = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) s += expf(x[c] - m);
    s = block_reduce(s, 1);

    // Pass 3: write. One division per row, then multiplies.
    float inv = 1.0f / s;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) y[c] = expf(x[c] - m) * inv;
}
