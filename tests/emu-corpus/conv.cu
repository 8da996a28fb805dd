__constant__ float filt[9 * 9];
extern "C" __global__ void conv1d(const float* in, float* out, int n, int k) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float acc = 0.0f; int r = k / 2;
    for (int j = 0; j < k; ++j) { int p = i + j - r; if (p >= 0 && p < n) acc += in[p] * filt[j]; }
    out[i] = acc;
}
extern "C" __global__ void conv2d(const float* in, float* out, int h, int w, int k) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    float acc = 0.0f; int r = k / 2;
    for (int dy = 0; dy < k; ++dy) for (int dx = 0; dx < k; ++dx) {
        int yy = y + dy - r, xx = x + dx - r;
        if (yy >= 0 && yy < h && xx >= 0 && xx < w) acc += in[yy * w + xx] * filt[dy * k + dx];
    }
    out[y * w + x] = acc;
}
