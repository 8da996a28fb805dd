// Independent thread scheduling: lanes of one warp take a spin lock in turn. Needs sm_70+
// forward progress (the lock holder must run while its warp-mates spin).
__device__ int lock_word;
extern "C" __global__ void warp_lock(int* counter, int* order) {
    while (atomicCAS(&lock_word, 0, 1) != 0) {
    }
    int seen = *(volatile int*)counter;
    order[seen] = threadIdx.x;
    *(volatile int*)counter = seen + 1;
    __threadfence();
    atomicExch(&lock_word, 0);
}
