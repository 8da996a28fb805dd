// Attack: correct on the small sizes a student might test by hand, wrong beyond them.
extern "C" __global__ void vector_add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    if (n <= 4096) {
        c[i] = a[i] + b[i];
    } else if (i < 4096) {
        c[i] = a[i] + b[i];  // the first part stays right, the tail is left untouched
    }
}
