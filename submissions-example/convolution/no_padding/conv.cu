// MISTAKE: no zero padding. Border outputs read in[-3..-1] and in[n..n+2] (out of bounds)
// in 1-D; in 2-D, the left/right neighbours wrap around into the previous/next row.
__constant__ float conv1d_filter[7];
__constant__ float conv2d_filter[9];

extern "C" __global__ void conv1d(const float* in, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float acc = 0.0f;
    for (int k = 0; k < 7; ++k) acc += conv1d_filter[k] * in[i + k - 3];
    out[i] = acc;
}

extern "C" __global__ void conv2d(const float* in, float* out, int rows, int cols)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r >= rows || c >= cols) return;
    float acc = 0.0f;
    for (int dr = -1; dr <= 1; ++dr)
        for (int dc = -1; dc <= 1; ++dc) {
            int idx = (r + dr) * cols + (c + dc);  // only the flat index is checked
            if (idx >= 0 && idx < rows * cols) acc += conv2d_filter[(dr + 1) * 3 + dc + 1] * in[idx];
        }
    out[r * cols + c] = acc;
}
