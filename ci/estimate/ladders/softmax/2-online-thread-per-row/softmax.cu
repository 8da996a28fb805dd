// Held-out softmax, step 2: one thread per row with the online softmax (running max and a
// rescaled running sum in one pass), then the write pass.
extern "C" __global__ void softmax_rows(const float* in, float* out, int rows, int cols)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float* x = in + (size_t)r * cols;
    float* y = out + (size_t)r * cols;
    float m = __int_as_float(0xff800000), s = 0.0f;
    for (int c = 0; c < cols; ++c) {
        float v = x[c];
        if (v > m) {
            s = s * expf(m - v) + 1.0f;
            m = v;
        } else {
            s += expf(v - m);
        }
    }
    float inv = 1.0f / s;
    for (int c = 0; c < cols; ++c) y[c] = expf(x[c] - m) * inv;
}
