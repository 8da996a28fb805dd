// MISTAKE: the kernel is named in camelCase, so the required entry `vector_add` does not
// exist in the module (and without extern "C" the name would be mangled as well).
extern "C" __global__ void vectorAdd(const float* a, const float* b, float* c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
