// Held-out (round 2): no shared memory, reads strided and writes coalesced (the other naive
// transpose: each warp writes a row of `out`, reading a column of `in`).
extern "C" __global__ void transpose_coalesced(const float* in, float* out, int rows, int cols)
{
    int oc = blockIdx.x * blockDim.x + threadIdx.x;   // column of out = row of in
    int orow = blockIdx.y * blockDim.y + threadIdx.y; // row of out = column of in
    if (orow < cols && oc < rows) out[(size_t)orow * rows + oc] = in[(size_t)oc * cols + orow];
}
