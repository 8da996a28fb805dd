// Reference kernels for the pmpp course's histogram lab (rubrics/histogram.yaml): count the
// bytes data[0..n) into 256 bins, ported from GPU MODE's pmpp `histogram` problem (PMPP
// chapter 9). hist[] starts at 0 (the rubric's `init: 0`).
//
//   hist_global  every byte is one atomicAdd on a global bin. Grid-stride, so that it is
//                right under any launch: its own contract gives it a thread per byte, and
//                it is also hist_shared's speed baseline (`against: {reference: ...}`), which
//                runs with that same contract's launch.
//   hist_shared  privatisation and coarsening: each block counts into a shared-memory copy
//                of the histogram (shared atomics are cheap, and contention stays inside
//                the block), then adds its 256 counts to the global bins: 256 global atomics
//                per block instead of one per byte. Its contract's launch has a thread per
//                16 bytes; this kernel reads 16 bytes at a time (one uint4) where it can.

#define BINS 256

extern "C" __global__ void hist_global(const unsigned char* data, unsigned* hist, int n)
{
    int stride = gridDim.x * blockDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        atomicAdd(&hist[data[i]], 1u);
    }
}

extern "C" __global__ void hist_shared(const unsigned char* data, unsigned* hist, int n)
{
    __shared__ unsigned s_hist[BINS];
    for (int b = threadIdx.x; b < BINS; b += blockDim.x) s_hist[b] = 0u;
    __syncthreads();

    int tid = blockIdx.x * blockDim.x + threadIdx.x;
    int stride = gridDim.x * blockDim.x;
    // Whole 16-byte chunks (the buffer is 256-byte aligned), then the last n % 16 bytes.
    int chunks = n / 16;
    const uint4* vec = (const uint4*)data;
    for (int c = tid; c < chunks; c += stride) {
        uint4 v = vec[c];
        unsigned words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            atomicAdd(&s_hist[words[k] & 0xffu], 1u);
            atomicAdd(&s_hist[(words[k] >> 8) & 0xffu], 1u);
            atomicAdd(&s_hist[(words[k] >> 16) & 0xffu], 1u);
            atomicAdd(&s_hist[words[k] >> 24], 1u);
        }
    }
    for (int i = chunks * 16 + tid; i < n; i += stride) atomicAdd(&s_hist[data[i]], 1u);
    __syncthreads();

    for (int b = threadIdx.x; b < BINS; b += blockDim.x) {
        unsigned c = s_hist[b];
        if (c != 0u) atomicAdd(&hist[b], c);
    }
}
