// Producer/consumer with a named barrier: warp 1 produces, warp 0 waits on barrier 1.
extern "C" __global__ void named_barrier(int* out, int consumers) {
    __shared__ int buf[32];
    int w = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (w == 1) {
        buf[lane] = lane * 3;
        asm volatile("bar.arrive 1, %0;" :: "r"(consumers));
    } else {
        asm volatile("bar.sync 1, %0;" :: "r"(consumers));
        out[lane] = buf[lane];
    }
}
