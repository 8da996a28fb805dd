// Launches one kernel of a lab on its performance case, for Nsight Compute to time
// (ci/gpu-measure.sh ncu). Built with nvcc: -DSRC='"file.cu"' -DKERNEL=name -DLAB_<LAB>.
#include <cstdio>
#include <cstdlib>
#include <vector>
#include SRC

static float* device_random(size_t n, int lo, int hi) {
    std::vector<float> h(n);
    for (size_t i = 0; i < n; ++i) h[i] = (float)(lo + rand() % (hi - lo));
    float* d;
    cudaMalloc(&d, n * sizeof(float));
    cudaMemcpy(d, h.data(), n * sizeof(float), cudaMemcpyHostToDevice);
    return d;
}

int main() {
    const int launches = 25;
#if defined(LAB_REDUCTION)
    int n = 1 << 24;
    float* in = device_random(n, -8, 9);
    float* out;
    cudaMalloc(&out, sizeof(float));
    for (int r = 0; r < launches; ++r) {
        cudaMemset(out, 0, sizeof(float));
        KERNEL<<<(n + 255) / 256, 256>>>(in, out, n);
    }
#elif defined(LAB_MATMUL)
    int M = 4096, N = 4096, K = 4096;
    float* A = device_random((size_t)M * K, -2, 3);
    float* B = device_random((size_t)K * N, -2, 3);
    float* C;
    cudaMalloc(&C, (size_t)M * N * sizeof(float));
    for (int r = 0; r < launches; ++r)
        KERNEL<<<dim3((N + 15) / 16, (M + 15) / 16), dim3(16, 16)>>>(A, B, C, M, N, K);
#elif defined(LAB_TRANSPOSE)
    int rows = 8192, cols = 8192;
    float* in = device_random((size_t)rows * cols, -100, 100);
    float* out;
    cudaMalloc(&out, (size_t)rows * cols * sizeof(float));
    for (int r = 0; r < launches; ++r)
        KERNEL<<<dim3((cols + 31) / 32, (rows + 31) / 32), dim3(32, 32)>>>(in, out, rows, cols);
#endif
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) { fprintf(stderr, "%s\n", cudaGetErrorString(e)); return 1; }
    return 0;
}
