// Reference kernels for the reduction lab: three ways to sum in[0..n) into out[0].
//
// Contract (all three): `out[0]` starts at 0 and must end as the sum; atomics are allowed.
// Default launch: block 256, grid ceil_div(n, 256): one thread per element.
//
// The milestones are the classic optimisation ladder:
//   reduce_naive   every thread atomically adds its element: correct, but n atomics on one
//                  address serialise in the L2 cache.
//   reduce_shared  each block sums its 256 elements in shared memory (a tree of halving
//                  steps separated by __syncthreads), then issues ONE atomic per block.
//   reduce_shuffle the same, but within a warp the tree runs in registers through
//                  __shfl_down_sync (no shared memory, no block barrier per step); shared
//                  memory only carries one partial per warp.

#define BLOCK 256
#define WARPS (BLOCK / 32)

extern "C" __global__ void reduce_naive(const float* in, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        atomicAdd(out, in[i]);
    }
}

extern "C" __global__ void reduce_shared(const float* in, float* out, int n)
{
    // Sized for the default launch; blockDim.x must be a power of two <= BLOCK.
    __shared__ float partial[BLOCK];
    unsigned tid = threadIdx.x;
    unsigned i = blockIdx.x * blockDim.x + tid;

    // Threads past the end contribute 0 instead of reading out of bounds.
    partial[tid] = (i < (unsigned)n) ? in[i] : 0.0f;
    __syncthreads();  // every element is in shared memory before anyone reads a neighbour

    // Sequential addressing: active threads are contiguous (no divergence inside a warp
    // until the last 5 steps) and access consecutive banks (no bank conflicts).
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) {
            partial[tid] += partial[tid + s];
        }
        // Outside the `if`: every thread of the block must reach the same barrier.
        __syncthreads();
    }
    if (tid == 0) {
        atomicAdd(out, partial[0]);
    }
}

// Sum over the 32 lanes of a warp; lane 0 ends with the total.
__device__ __forceinline__ float warp_sum(float v)
{
    for (int offset = 16; offset > 0; offset >>= 1) {
        v += __shfl_down_sync(0xffffffffu, v, offset);
    }
    return v;
}

extern "C" __global__ void reduce_shuffle(const float* in, float* out, int n)
{
    __shared__ float warp_partial[WARPS];
    unsigned tid = threadIdx.x;
    unsigned lane = tid % 32, warp = tid / 32;
    unsigned i = blockIdx.x * blockDim.x + tid;

    // Every lane takes part in the shuffles (the mask is the full warp), so out-of-range
    // lanes contribute 0 rather than skipping the call.
    float v = (i < (unsigned)n) ? in[i] : 0.0f;
    v = warp_sum(v);
    if (lane == 0) {
        warp_partial[warp] = v;
    }
    __syncthreads();

    // The first warp sums the per-warp partials (fewer than 32 of them).
    if (warp == 0) {
        unsigned warps = (blockDim.x + 31) / 32;
        v = (lane < warps) ? warp_partial[lane] : 0.0f;
        v = warp_sum(v);
        if (lane == 0) {
            atomicAdd(out, v);
        }
    }
}
