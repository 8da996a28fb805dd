// MISTAKE: the causal mask excludes the diagonal (j < i instead of j <= i). Query 0 then
// sees no key at all: 0/0 = NaN; every other row is missing its own key.
extern "C" __global__ void attention(const float* Q, const float* K, const float* V,
                                     const int* seq_lens, float* O,
                                     int batch, int max_len, int d, int causal)
{
    int i = blockIdx.x, b = blockIdx.y;
    if (threadIdx.x != 0 || i >= max_len || b >= batch) return;
    size_t row = (size_t)b * max_len;
    float* o = O + (row + i) * d;
    int len = seq_lens[b];
    if (i >= len) { for (int c = 0; c < d; ++c) o[c] = 0.0f; return; }
    int keys = causal ? i : len;
    const float* q = Q + (row + i) * d;
    float scale = rsqrtf((float)d);
    // Online softmax: a running max m, a running sum l and an accumulator rescaled when m
    // grows, so one pass over the keys suffices and nothing overflows.
    float m = -3.0e38f, l = 0.0f;
    for (int c = 0; c < d; ++c) o[c] = 0.0f;
    for (int j = 0; j < keys; ++j) {
        const float* k = K + (row + j) * d;
        float s = 0.0f;
        for (int c = 0; c < d; ++c) s += q[c] * k[c];
        s *= scale;
        float m_new = fmaxf(m, s);
        float correction = expf(m - m_new), p = expf(s - m_new);
        l = l * correction + p;
        for (int c = 0; c < d; ++c) o[c] = o[c] * correction + p * V[(row + j) * d + c];
        m = m_new;
    }
    for (int c = 0; c < d; ++c) o[c] /= l;
}
