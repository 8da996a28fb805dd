// Correct but slow: hist_shared is global atomics again (with the grid-stride loop the coarse
// launch needs), so every byte still costs an atomic on one of 256 global counters.

extern "C" __global__ void hist_global(const unsigned char* data, unsigned int* hist, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(&hist[data[i]], 1u);
}

extern "C" __global__ void hist_shared(const unsigned char* data, unsigned int* hist, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        atomicAdd(&hist[data[i]], 1u);
    }
}
