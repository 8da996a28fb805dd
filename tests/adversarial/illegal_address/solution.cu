// Attack: write through a wild pointer far outside any allocation.
extern "C" __global__ void vector_add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
    if (i == 0) {
        float* wild = (float*)0x10;  // the null page
        *wild = 1.0f;
        float* far = c + (1ll << 40);  // a terabyte past c
        *far = 2.0f;
    }
}
