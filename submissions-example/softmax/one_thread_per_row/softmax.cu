// Correct and stable, but serial: thread 0 of each block does the whole row.
extern "C" __global__ void softmax_rows(const float* in, float* out, int rows, int cols)
{
    int row = blockIdx.x;
    if (row >= rows || threadIdx.x != 0) return;
    const float* x = in + (size_t)row * cols;
    float* y = out + (size_t)row * cols;
    float m = x[0];
    for (int c = 1; c < cols; ++c) m = fmaxf(m, x[c]);
    float s = 0.0f;
    for (int c = 0; c < cols; ++c) s += expf(x[c] - m);
    for (int c = 0; c < cols; ++c) y[c] = expf(x[c] - m) / s;
}
