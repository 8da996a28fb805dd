// synccheck: __syncthreads() in divergent code (two different barriers).
extern "C" __global__ void diag_barrier(float* out) {
    __shared__ float s[64];
    s[threadIdx.x] = threadIdx.x;
    if (threadIdx.x < 48) {
        __syncthreads();
        out[threadIdx.x] = s[(threadIdx.x + 1) % 48];
    } else {
        __syncthreads();
        out[threadIdx.x] = -1.0f;
    }
}
