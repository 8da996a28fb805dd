// Held-out softmax, step 5: one warp per row (8 rows per block of 256), shuffles only, no
// shared memory and no barriers; the row is read three times.
extern "C" __global__ void softmax_rows(const float* in, float* out, int rows, int cols)
{
    int lane = threadIdx.x % 32;
    int r = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (r >= rows) return;
    const float* x = in + (size_t)r * cols;
    float* y = out + (size_t)r * cols;
    float m = __int_as_float(0xff800000);
    for (int c = lane; c < cols; c += 32) m = fmaxf(m, x[c]);
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    float s = 0.0f;
    for (int c = lane; c < cols; c += 32) s += expf(x[c] - m);
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    float inv = 1.0f / s;
    for (int c = lane; c < cols; c += 32) y[c] = expf(x[c] - m) * inv;
}
