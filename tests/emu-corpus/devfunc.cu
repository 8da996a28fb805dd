// A non-inlined device function with a local array, and device printf.
__device__ __noinline__ float poly(const float* c, int k, float x, int* calls) {
    float local[8];
    for (int j = 0; j < 8; ++j) local[j] = j < k ? c[j] : 0.0f;
    float acc = 0.0f;
    for (int j = 7; j >= 0; --j) acc = acc * x + local[(j * 5 + x > 0.0f) ? j : j];
    atomicAdd(calls, 1);
    return acc;
}
__device__ int counter;
extern "C" __global__ void devfunc(const float* c, const float* xs, float* out, int n, int k) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    out[i] = poly(c, k, xs[i], &counter);
    if (i == 3) printf("thread %d x=%.3f k=%d %s\n", i, xs[i], k, "ok");
}
