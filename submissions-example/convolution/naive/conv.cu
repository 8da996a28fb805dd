// Correct and simple: every tap is a (cached) global read with its own bounds check.
__constant__ float conv1d_filter[7];
__constant__ float conv2d_filter[9];

extern "C" __global__ void conv1d(const float* in, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float acc = 0.0f;
    for (int k = 0; k < 7; ++k) {
        int j = i + k - 3;
        if (j >= 0 && j < n) acc += conv1d_filter[k] * in[j];
    }
    out[i] = acc;
}

extern "C" __global__ void conv2d(const float* in, float* out, int rows, int cols)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r >= rows || c >= cols) return;
    float acc = 0.0f;
    for (int dr = -1; dr <= 1; ++dr)
        for (int dc = -1; dc <= 1; ++dc) {
            int rr = r + dr, cc = c + dc;
            if (rr >= 0 && rr < rows && cc >= 0 && cc < cols)
                acc += conv2d_filter[(dr + 1) * 3 + dc + 1] * in[rr * cols + cc];
        }
    out[r * cols + c] = acc;
}
