// Time and placement special registers, read as a kernel that wants to know where it runs
// would read them: they must look like an H100's (src/backend/emu/specials.rs).
extern "C" __global__ void specials(unsigned long long* out, volatile float* sink, int spins) {
    __shared__ unsigned long long t0, c0;
    unsigned long long* o = out + 8 * blockIdx.x;
    unsigned int smid, nsmid, nwarpid;
    unsigned long long gridid;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
    asm volatile("mov.u32 %0, %%nsmid;" : "=r"(nsmid));
    asm volatile("mov.u32 %0, %%nwarpid;" : "=r"(nwarpid));
    asm volatile("mov.u64 %0, %%gridid;" : "=l"(gridid));
    if (threadIdx.x == 0) {
        unsigned long long t;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
        t0 = t;
        c0 = clock64();
        o[2] = smid;
        o[3] = nsmid;
        o[4] = nwarpid;
        o[5] = gridid;
    }
    __syncthreads();
    if (blockIdx.x == 0) {
        float x = threadIdx.x;
        for (int i = 0; i < spins; ++i) x = x * 0.999f + 1.0f;
        sink[threadIdx.x] = x;
    }
    __syncthreads();
    // The last warp reads after the barrier: never below what the first warp read before it.
    if (threadIdx.x == blockDim.x - 1) {
        unsigned long long t;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
        o[0] = t0;
        o[1] = c0;
        o[6] = t;
        o[7] = clock64();
    }
}
