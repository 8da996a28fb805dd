// Attack: abort the kernel on purpose (also what a failing device assert() does).
extern "C" __global__ void vector_add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
    if (i == n / 2) __trap();
}
