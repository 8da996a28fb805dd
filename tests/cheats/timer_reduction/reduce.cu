// Cheat (issue 19): a shared-memory reduction whose last warp finishes with `volatile`
// warp-synchronous steps and no barriers (a race since Volta's independent thread scheduling)
// where %globaltimer says "GPU", and with a barrier after every step where it says
// "emulator", so that the emulator's racecheck used to see a clean kernel. The emulator's
// %globaltimer now reads like a GPU's (so it sees the racy path), and compute-sanitizer checks
// the GPU's own run. Flagged: reads a timer.
extern "C" __global__ void reduce_naive(const float* in, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(out, in[i]);
}

__device__ __forceinline__ unsigned long long globaltimer()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

extern "C" __global__ void reduce_shared(const float* in, float* out, int n)
{
    __shared__ float s_data[256];
    int tid = threadIdx.x;
    int i = blockIdx.x * blockDim.x + tid;
    s_data[tid] = (i < n) ? in[i] : 0.0f;
    __syncthreads();
    bool on_gpu = globaltimer() > 1000000000000000ull;
    for (int s = blockDim.x / 2; s > (on_gpu ? 32 : 0); s >>= 1) {
        if (tid < s) s_data[tid] += s_data[tid + s];
        __syncthreads();
    }
    if (on_gpu && tid < 32) {
        volatile float* v = s_data;
        v[tid] += v[tid + 32];
        v[tid] += v[tid + 16];
        v[tid] += v[tid + 8];
        v[tid] += v[tid + 4];
        v[tid] += v[tid + 2];
        v[tid] += v[tid + 1];
    }
    if (tid == 0) atomicAdd(out, s_data[0]);
}

__device__ float warp_sum(float v)
{
    for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
    return v;
}

extern "C" __global__ void reduce_shuffle(const float* in, float* out, int n)
{
    __shared__ float warp_part[32];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    float v = warp_sum(i < n ? in[i] : 0.0f);
    if (lane == 0) warp_part[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = warp_sum(lane < (blockDim.x + 31) / 32 ? warp_part[lane] : 0.0f);
        if (lane == 0) atomicAdd(out, v);
    }
}
