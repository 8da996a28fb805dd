// Held-out softmax, step 3: one block of 1024 threads per row, block-wide max and sum by a
// tree in shared memory (halving strides, a barrier per level).
extern "C" __global__ void softmax_rows(const float* in, float* out, int rows, int cols)
{
    __shared__ float red[1024];
    int r = blockIdx.x, t = threadIdx.x;
    const float* x = in + (size_t)r * cols;
    float* y = out + (size_t)r * cols;
    float m = __int_as_float(0xff800000);
    for (int c = t; c < cols; c += blockDim.x) m = fmaxf(m, x[c]);
    red[t] = m;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s) red[t] = fmaxf(red[t], red[t + s]);
        __syncthreads();
    }
    m = red[0];
    __syncthreads();
    float sum = 0.0f;
    for (int c = t; c < cols; c += blockDim.x) sum += expf(x[c] - m);
    red[t] = sum;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s) red[t] += red[t + s];
        __syncthreads();
    }
    float inv = 1.0f / red[0];
    for (int c = t; c < cols; c += blockDim.x) y[c] = expf(x[c] - m) * inv;
}
