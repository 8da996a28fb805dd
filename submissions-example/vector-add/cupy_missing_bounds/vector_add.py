# The most common first mistake, in a CuPy RawKernel: no bounds check, so the last block
# writes past the end of c. The finding names the Python line (vector_add.py:9).
import cupy as cp

vector_add = cp.RawKernel(r'''
extern "C" __global__
void vector_add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    c[i] = a[i] + b[i];
}
''', 'vector_add')
