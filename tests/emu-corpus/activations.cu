extern "C" __global__ void activations(const float* in, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = in[i];
    out[6 * i + 0] = expf(x);
    out[6 * i + 1] = tanhf(x);
    out[6 * i + 2] = erff(x);
    out[6 * i + 3] = log1pf(fabsf(x));
    out[6 * i + 4] = 1.0f / (1.0f + expf(-x));
    out[6 * i + 5] = 0.5f * x * (1.0f + erff(x * 0.70710678f));
}
