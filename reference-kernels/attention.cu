// Reference kernel for the attention lab: scaled dot-product attention with per-sequence
// lengths and optional causal masking.
//
// Q, K, V, O are [batch][max_len][d] row-major floats (batch may count batch x heads);
// seq_lens[b] in [1, max_len] is the valid length of sequence b; the rest is padding.
// For query row i < L = seq_lens[b]:
//
//   s_j   = (Q[b][i] . K[b][j]) / sqrt(d)       for visible keys j
//   O[b][i] = sum_j softmax(s)_j * V[b][j]
//
// where the visible keys are j < L, and additionally j <= i when causal != 0 (a query never
// sees the future; it always sees itself, so no row is empty). Rows i >= L are padding and
// are written as zeros.
//
// Default launch: block 128, grid [max_len, batch], dynamic shared memory
// (max_len + d) * 4 bytes: one block per query row, holding the query and the row's scores.
// The softmax subtracts the row max (scores of ~100 would overflow expf otherwise), and the
// masked keys are simply never visited rather than set to -inf.

#define MAX_WARPS 32
#define NEG_INF __int_as_float(0xff800000)

// Block-wide max (op 0) or sum (op 1); every thread must call it and gets the result.
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
        v = lane < warps ? warp_vals[lane] : (op == 0 ? NEG_INF : 0.0f);
        for (int off = 16; off > 0; off >>= 1) {
            float other = __shfl_down_sync(0xffffffffu, v, off);
            v = op == 0 ? fmaxf(v, other) : v + other;
        }
        if (lane == 0) warp_vals[0] = v;
    }
    __syncthreads();
    float result = warp_vals[0];
    __syncthreads();
    return result;
}

extern "C" __global__ void attention(const float* Q, const float* K, const float* V,
                                     const int* seq_lens, float* O,
                                     int batch, int max_len, int d, int causal)
{
    extern __shared__ float smem[];
    float* scores = smem;           // max_len floats
    float* q = smem + max_len;      // d floats

    int i = blockIdx.x, b = blockIdx.y;
    if (i >= max_len || b >= batch) return;  // uniform per block
    size_t row = (size_t)b * max_len;        // first row of this sequence
    float* o = O + (row + i) * d;
    int len = seq_lens[b];

    if (i >= len) {  // padding row (uniform per block, so returning is safe)
        for (int c = threadIdx.x; c < d; c += blockDim.x) o[c] = 0.0f;
        return;
    }
    int keys = causal ? i + 1 : len;
    float scale = rsqrtf((float)d);

    for (int c = threadIdx.x; c < d; c += blockDim.x) q[c] = Q[(row + i) * d + c];
    __syncthreads();

    // Scores, one key per thread at a time; track the running max.
    float m = NEG_INF;
    for (int j = threadIdx.x; j < keys; j += blockDim.x) {
        const float* k = K + (row + j) * d;
        float s = 0.0f;
        for (int c = 0; c < d; ++c) s += q[c] * k[c];
        s *= scale;
        scores[j] = s;
        m = fmaxf(m, s);
    }
    m = block_reduce(m, 0);

    // Unnormalised probabilities, every exponent <= 0.
    float sum = 0.0f;
    for (int j = threadIdx.x; j < keys; j += blockDim.x) {
        float p = expf(scores[j] - m);
        scores[j] = p;
        sum += p;
    }
    sum = block_reduce(sum, 1);  // its barriers also publish scores[] to every thread

    // Output: threads split the head dimension; V rows are read coalesced.
    float inv = 1.0f / sum;
    for (int c = threadIdx.x; c < d; c += blockDim.x) {
        float acc = 0.0f;
        for (int j = 0; j < keys; ++j) acc += scores[j] * V[(row + j) * d + c];
        o[c] = acc * inv;
    }
}
