// Attack: casts away const and overwrites the inputs, e.g. to make a later comparison
// against "a + b" recomputed from the (now modified) inputs agree with a wrong c.
extern "C" __global__ void vector_add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    c[i] = 0.0f;
    ((float*)a)[i] = 0.0f;
    ((float*)b)[i] = 0.0f;
}
