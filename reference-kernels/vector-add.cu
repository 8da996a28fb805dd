// Reference kernel for the vector-add lab.
//
// Contract: c[i] = a[i] + b[i] for i in [0, n). Default launch: block 256,
// grid ceil_div(n, 256), so there is exactly one thread per element, rounded up to a whole
// number of blocks. The lesson: compute a global index, and guard it, because the last block
// has threads past the end of the arrays whenever n is not a multiple of 256.
//
// Consecutive threads touch consecutive floats, so each warp's 32 loads of `a` are one
// 128-byte coalesced request; that is all it takes to run at memory bandwidth.

extern "C" __global__ void vector_add(const float* a, const float* b, float* c, int n)
{
    // 64-bit index arithmetic would only matter past 2^31 elements; the contract's n is int.
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {  // the bounds check: without it the tail block reads and writes past the end
        c[i] = a[i] + b[i];
    }
}
