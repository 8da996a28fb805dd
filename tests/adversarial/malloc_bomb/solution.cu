// Attack: exhaust device memory with in-kernel malloc, touching every block so that it is
// really committed, and never free it. The answer itself is right.
extern "C" __global__ void vector_add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    for (int k = 0; k < (1 << 20); ++k) {
        char* p = (char*)malloc(1 << 20);
        if (p == nullptr) break;
        p[0] = 1;
        p[(1 << 20) - 1] = 1;
    }
    if (i < n) c[i] = a[i] + b[i];
}
