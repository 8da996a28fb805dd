// hist_shared never zeroes its shared histogram: shared memory starts with whatever the last
// block on that SM left there, so the counts start from garbage.

extern "C" __global__ void hist_global(const unsigned char* data, unsigned int* hist, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(&hist[data[i]], 1u);
}

extern "C" __global__ void hist_shared(const unsigned char* data, unsigned int* hist, int n)
{
    __shared__ unsigned int local[256];

    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        atomicAdd(&local[data[i]], 1u);
    }
    __syncthreads();

    for (int b = threadIdx.x; b < 256; b += blockDim.x) {
        if (local[b] > 0) atomicAdd(&hist[b], local[b]);
    }
}
