// Non-atomic increments: hist[b]++ is a load, an add and a store, and threads that count the
// same bin at the same time overwrite each other's counts.

extern "C" __global__ void hist_global(const unsigned char* data, unsigned int* hist, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) hist[data[i]]++;
}

extern "C" __global__ void hist_shared(const unsigned char* data, unsigned int* hist, int n)
{
    __shared__ unsigned int local[256];
    for (int b = threadIdx.x; b < 256; b += blockDim.x) local[b] = 0;
    __syncthreads();

    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        local[data[i]]++;
    }
    __syncthreads();

    for (int b = threadIdx.x; b < 256; b += blockDim.x) {
        if (local[b] > 0) atomicAdd(&hist[b], local[b]);
    }
}
