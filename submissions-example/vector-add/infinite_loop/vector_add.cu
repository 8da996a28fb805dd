// MISTAKE: a grid-stride loop that forgot to advance `i`: every thread in range spins
// forever. The grader must kill it at the launch timeout and say so.
extern "C" __global__ void vector_add(const float* a, const float* b, float* c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    while (i < n) {
        c[i] = a[i] + b[i];
    }
}
