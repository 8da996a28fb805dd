// The histogram lab done right: global atomics first, then a privatised shared-memory
// histogram with a grid-stride loop (the coarse launch has a thread per 16 bytes).

extern "C" __global__ void hist_global(const unsigned char* data, unsigned int* hist, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(&hist[data[i]], 1u);
}

extern "C" __global__ void hist_shared(const unsigned char* data, unsigned int* hist, int n)
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
