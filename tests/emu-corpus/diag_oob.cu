// memcheck: reads one element past the end of `in`, and writes past a shared array.
extern "C" __global__ void diag_oob(const float* in, float* out, int n) {
    __shared__ float s[32];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= n) out[i < n ? i : 0] = in[i] * 2.0f;   // i == n reads out of bounds
    s[threadIdx.x] = 1.0f;                           // blockDim 64: threads 32.. overflow s
    __syncthreads();
    if (threadIdx.x == 0) out[1] = s[5];
}
