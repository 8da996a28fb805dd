# The vector-add lab as a CuPy RawKernel: CUDA C++ in a string, launched from Python.
import cupy as cp

vector_add = cp.RawKernel(r'''
extern "C" __global__
void vector_add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        c[i] = a[i] + b[i];
    }
}
''', 'vector_add')


if __name__ == "__main__":
    n = 1 << 20
    a = cp.random.rand(n, dtype=cp.float32)
    b = cp.random.rand(n, dtype=cp.float32)
    c = cp.empty_like(a)
    vector_add(((n + 255) // 256,), (256,), (a, b, c, cp.int32(n)))
    assert cp.allclose(c, a + b)
