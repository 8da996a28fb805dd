// Attack: NaN and Inf in the output. A tolerance check written as !(|x - y| > tol) lets NaN
// through, since every comparison with NaN is false.
extern "C" __global__ void vector_add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = a[i] + b[i];
    if (i % 97 == 0) v = __int_as_float(0x7fc00000);  // quiet NaN
    if (i % 101 == 0) v = __int_as_float(0x7f800000);  // +Inf
    c[i] = v;
}
