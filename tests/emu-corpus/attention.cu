// One thread per query row: scores = q.k / sqrt(d), softmax, weighted sum of v.
extern "C" __global__ void attention(const float* q, const float* k, const float* v, float* out, int n, int d) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float scale = 1.0f / sqrtf((float)d);
    float m = __int_as_float(0xff800000);
    for (int j = 0; j < n; ++j) { float s = 0; for (int t = 0; t < d; ++t) s += q[i*d+t] * k[j*d+t]; m = fmaxf(m, s * scale); }
    float denom = 0;
    for (int t = 0; t < d; ++t) out[i*d+t] = 0;
    for (int j = 0; j < n; ++j) {
        float s = 0; for (int t = 0; t < d; ++t) s += q[i*d+t] * k[j*d+t];
        float p = expf(s * scale - m); denom += p;
        for (int t = 0; t < d; ++t) out[i*d+t] += p * v[j*d+t];
    }
    for (int t = 0; t < d; ++t) out[i*d+t] /= denom;
}
