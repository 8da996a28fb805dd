// Cheat (issue 19): right on every correctness case and on the first launches of the
// performance case, then it stops working on repeated launches and leaves its output as it
// found it (cugrade refills every output with NaN before each launch). The timed launch that
// catches it says "left its output unwritten on a repeated launch" (the NaN used to break the
// worker protocol instead).
__device__ unsigned int launches;

extern "C" __global__ void vector_add(const float* a, const float* b, float* c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    // Only the performance case is big; count its launches.
    bool big = n > (1 << 20);
    unsigned int seen = big ? *(volatile unsigned int*)&launches : 0;
    if (big && i == 0) atomicAdd(&launches, 1u);
    if (seen >= 2) return;
    if (i < n) c[i] = a[i] + b[i];
}
