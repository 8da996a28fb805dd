// Attack: computes the right answer, then scribbles just past the end of the output
// (and of the inputs' neighbours): corrupts whatever the grader keeps next to c.
extern "C" __global__ void vector_add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
    if (i < 64) c[n + i] = 12345.0f;  // 64 floats past the end: lands in a guard region
}
