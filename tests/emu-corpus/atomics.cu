// One kernel touching every atomic family on global and shared memory.
extern "C" __global__ void atomics(int* gi, unsigned* gu, float* gf, double* gd, unsigned long long* gl, int* out) {
    __shared__ int si[5];
    __shared__ float sf;
    int t = threadIdx.x + blockIdx.x * blockDim.x;
    if (threadIdx.x < 5) si[threadIdx.x] = 0;
    if (threadIdx.x == 0) sf = 0.0f;
    __syncthreads();
    atomicAdd(&gi[0], t);
    atomicSub(&gi[1], 1);
    atomicMin(&gi[2], t - 100);
    atomicMax(&gi[3], t);
    atomicInc(&gu[0], 16u);
    atomicDec(&gu[1], 1000u);
    atomicAnd(&gu[2], ~(1u << (t % 32)));
    atomicOr(&gu[3], 1u << (t % 32));
    atomicXor(&gu[4], (unsigned)t);
    atomicAdd(&gf[0], 0.5f);
    atomicAdd(&gd[0], 0.25);
    atomicAdd(&gl[0], 1ull << 33);
    atomicExch(&gu[5], 7u);
    int old = atomicCAS(&gi[4], t, t + 1);  // chains 0 -> n in some order only if ordered; count successes
    if (old == t) atomicAdd(&gi[5], 1);
    atomicAdd(&si[threadIdx.x % 4], 1);
    atomicAdd(&sf, 1.0f);
    atomicMax(&si[4], (int)threadIdx.x);
    __syncthreads();
    if (threadIdx.x == 0) {
        atomicAdd(&out[0], si[0] + si[1] + si[2]);
        atomicAdd(&out[1], si[4]);
        atomicAdd(&out[2], (int)sf);
    }
}
