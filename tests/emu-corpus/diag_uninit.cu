// initcheck: reads shared memory that only half the threads wrote.
extern "C" __global__ void diag_uninit(float* out) {
    __shared__ float s[64];
    if (threadIdx.x < 32) s[threadIdx.x] = threadIdx.x;
    __syncthreads();
    out[threadIdx.x] = s[63 - threadIdx.x];
}
