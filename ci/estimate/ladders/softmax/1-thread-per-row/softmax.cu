// Held-out softmax, step 1: one thread per row, three passes over the row (max, sum, write),
// the first kernel of the usual "optimising softmax" write-ups. Adjacent threads read rows
// cols * 4 bytes apart: every load is its own sector.
extern "C" __global__ void softmax_rows(const float* in, float* out, int rows, int cols)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float* x = in + (size_t)r * cols;
    float* y = out + (size_t)r * cols;
    float m = __int_as_float(0xff800000);
    for (int c = 0; c < cols; ++c) m = fmaxf(m, x[c]);
    float s = 0.0f;
    for (int c = 0; c < cols; ++c) s += expf(x[c] - m);
    for (int c = 0; c < cols; ++c) y[c] = expf(x[c] - m) / s;
}
