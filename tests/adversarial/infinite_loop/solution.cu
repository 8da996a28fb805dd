// Attack: never return, to stall the grader (and the shared GPU).
// `volatile` keeps the compiler from proving the loop infinite and removing it.
extern "C" __global__ void vector_add(const float* a, const float* b, float* c, int n) {
    volatile int spin = 1;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    while (spin) {
        if (i < n) c[i] = a[i] + b[i];
    }
}
