// Library math that expands into long instruction sequences (some with slow paths).
extern "C" __global__ void mathfn(const float* in, float* out, double* outd, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = in[i];
    float* o = out + 10 * i;
    o[0] = sinf(x);
    o[1] = cosf(x);
    o[2] = logf(fabsf(x) + 0.5f);
    o[3] = powf(fabsf(x), 1.7f);
    o[4] = sqrtf(fabsf(x));
    o[5] = rsqrtf(fabsf(x) + 1.0f);
    o[6] = __expf(x);
    o[7] = atan2f(x, 0.75f);
    o[8] = fmodf(x, 0.3f);
    o[9] = __sinf(x) + __logf(fabsf(x) + 1.0f);
    outd[2 * i] = exp((double)x);
    outd[2 * i + 1] = sin((double)x * 3.0);
}
