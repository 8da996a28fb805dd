// All-reduce lab submission.

#define MAX_FLAGS 4096

// The whole block has written its part of step `s`; make it visible to the peer GPU, then say
// so. __syncthreads() orders the block's writes before thread 0's fence (fences are cumulative),
// __threadfence_system() orders them before the flag for every device, and the volatile store
// is not kept in a register.
__device__ __forceinline__ void publish(unsigned int* flag, unsigned int s)
{
    __syncthreads();
    if (threadIdx.x == 0) {
        *(volatile unsigned int*)flag = s;  // BUG: no fence between the data and the flag
    }
}

// Wait until the predecessor's flag says it has finished step `s`; the fence after the spin
// orders the reads that follow after the flag's read (acquire).
__device__ __forceinline__ void await_step(const unsigned int* flag, unsigned int s)
{
    if (threadIdx.x == 0) {
        while (*(volatile const unsigned int*)flag < s) {
        }
        __threadfence_system();
    }
    __syncthreads();
}

extern "C" __global__ void allreduce_naive(const float* const* in, float* const* out,
                                           unsigned int* const* flags, int n, int rank,
                                           int nranks)
{
    float* o = out[rank];
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n;
         i += (long)gridDim.x * blockDim.x) {
        float s = 0.0f;
        for (int r = 0; r < nranks; ++r) {
            s += in[r][i];  // rank 0 first on every rank: every rank gets the same bits
        }
        o[i] = s;
    }
}

// Chunk c of n elements split N ways: [c * cs, min((c + 1) * cs, n)).
__device__ __forceinline__ long chunk_lo(int c, long cs, long n) { return min(c * cs, n); }
__device__ __forceinline__ long chunk_hi(int c, long cs, long n) { return min((c + 1) * cs, n); }

// Step s of the ring on rank `rank` (0 <= s < 2(N-1)): which chunk it works on. Reduce-scatter
// (s < N-1): chunk rank-s-1, the predecessor's partial sum of it plus this rank's input. After
// it, rank r holds the finished chunk r+1. All-gather (t = s-(N-1)): chunk rank-t, copied from
// the predecessor, which finished it one step earlier.
__device__ __forceinline__ int ring_chunk(int rank, int s, int N)
{
    int k = s < N - 1 ? rank - s - 1 : rank - (s - (N - 1));
    return ((k % N) + N) % N;
}

extern "C" __global__ void allreduce_ring(const float* const* in, float* const* out,
                                          unsigned int* const* flags, int n, int rank,
                                          int nranks)
{
    const int N = nranks;
    const int p = (rank + N - 1) % N;
    const long cs = (n + N - 1) / N;
    float* mine = out[rank];
    const float* my_in = in[rank];
    const float* p_in = in[p];
    const float* p_out = out[p];
    unsigned int* my_flag = flags[rank] + blockIdx.x;
    const unsigned int* p_flag = flags[p] + blockIdx.x;
    const long stride = (long)gridDim.x * blockDim.x;
    if (N == 1) {
        for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += stride) {
            mine[i] = my_in[i];
        }
        return;
    }
    for (int s = 0; s < 2 * (N - 1); ++s) {
        if (s > 0) {
            await_step(p_flag, s);  // the predecessor finished step s-1
        }
        const int c = ring_chunk(rank, s, N);
        const long hi = chunk_hi(c, cs, n);
        for (long i = chunk_lo(c, cs, n) + blockIdx.x * (long)blockDim.x + threadIdx.x; i < hi;
             i += stride) {
            if (s < N - 1) {
                mine[i] = (s == 0 ? p_in[i] : p_out[i]) + my_in[i];
            } else {
                mine[i] = p_out[i];
            }
        }
        publish(my_flag, s + 1);
    }
}

// One element or one float4 of the ring's step: `v` of the four lanes at a time where the chunk's
// range allows, the ragged ends one float at a time.
extern "C" __global__ void allreduce_fast(const float* const* in, float* const* out,
                                          unsigned int* const* flags, int n, int rank,
                                          int nranks)
{
    const int N = nranks;
    const int p = (rank + N - 1) % N;
    // Chunks a multiple of 4 floats long, so every chunk starts 16-byte aligned (cudaMalloc'd
    // buffers are 256-byte aligned).
    const long cs = ((n + N - 1) / N + 3) / 4 * 4;
    float* mine = out[rank];
    const float* my_in = in[rank];
    const float* p_in = in[p];
    const float* p_out = out[p];
    unsigned int* my_flag = flags[rank] + blockIdx.x;
    const unsigned int* p_flag = flags[p] + blockIdx.x;
    const long tid = blockIdx.x * (long)blockDim.x + threadIdx.x;
    const long stride = (long)gridDim.x * blockDim.x;
    const int steps = N == 1 ? 1 : 2 * (N - 1);
    for (int s = 0; s < steps; ++s) {
        if (s > 0) {
            await_step(p_flag, s);
        }
        const int c = N == 1 ? 0 : ring_chunk(rank, s, N);
        const long lo = chunk_lo(c, cs, n);
        const long hi = chunk_hi(c, cs, n);
        const bool reduce = N > 1 && s < N - 1;
        const float* src = N == 1 ? my_in : (s == 0 ? p_in : p_out);
        const long vecs = (hi - lo) / 4;
        for (long v = tid; v < vecs; v += stride) {
            const long i = lo + 4 * v;
            float4 a = *(const float4*)(src + i);
            if (reduce) {
                const float4 b = *(const float4*)(my_in + i);
                a.x += b.x;
                a.y += b.y;
                a.z += b.z;
                a.w += b.w;
            }
            *(float4*)(mine + i) = a;
        }
        for (long i = lo + 4 * vecs + tid; i < hi; i += stride) {
            mine[i] = reduce ? src[i] + my_in[i] : src[i];
        }
        if (N > 1) {
            publish(my_flag, s + 1);
        }
    }
}
