// MISTAKE: no bounds check. The grid is rounded up to whole blocks, so for n = 257 the
// second block's threads 1..255 read a[257..] and write c[257..], past the end.
extern "C" __global__ void vector_add(const float* a, const float* b, float* c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    c[i] = a[i] + b[i];
}
