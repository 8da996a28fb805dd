// Optimised over the reference's one-thread-per-key scores: each warp computes a key's dot
// product with its lanes striding over d (coalesced reads of K, a shuffle reduction), and
// the output loop runs over d with consecutive threads on consecutive columns of V.
#define WARPS 4  // blockDim.x = 128, the default launch

__device__ float warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ float warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

extern "C" __global__ void attention(const float* Q, const float* K, const float* V,
                                     const int* seq_lens, float* O,
                                     int batch, int max_len, int d, int causal)
{
    extern __shared__ float smem[];
    float* scores = smem;
    float* q = smem + max_len;
    __shared__ float red[WARPS];

    int i = blockIdx.x, b = blockIdx.y;
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    size_t row = (size_t)b * max_len;
    float* o = O + (row + i) * d;
    int len = seq_lens[b];
    if (i >= len) {
        for (int c = threadIdx.x; c < d; c += blockDim.x) o[c] = 0.0f;
        return;
    }
    int keys = causal ? i + 1 : len;
    float scale = rsqrtf((float)d);
    for (int c = threadIdx.x; c < d; c += blockDim.x) q[c] = Q[(row + i) * d + c];
    __syncthreads();

    float m = -3.0e38f;
    for (int j = warp; j < keys; j += WARPS) {
        const float* k = K + (row + j) * d;
        float s = 0.0f;
        for (int c = lane; c < d; c += 32) s += q[c] * k[c];
        s = warp_sum(s) * scale;
        if (lane == 0) scores[j] = s;
        m = fmaxf(m, s);
    }
    m = warp_max(m);
    if (lane == 0) red[warp] = m;
    __syncthreads();
    m = fmaxf(fmaxf(red[0], red[1]), fmaxf(red[2], red[3]));
    __syncthreads();

    float sum = 0.0f;
    for (int j = threadIdx.x; j < keys; j += blockDim.x) {
        float p = __expf(scores[j] - m);
        scores[j] = p;
        sum += p;
    }
    sum = warp_sum(sum);
    if (lane == 0) red[warp] = sum;
    __syncthreads();
    float inv = 1.0f / (red[0] + red[1] + red[2] + red[3]);

    for (int c = threadIdx.x; c < d; c += blockDim.x) {
        float acc = 0.0f;
        for (int j = 0; j < keys; ++j) acc += scores[j] * V[(row + j) * d + c];
        o[c] = acc * inv;
    }
}
