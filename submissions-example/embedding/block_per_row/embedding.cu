// Optimised: one block per id (launch override), threads stride over the row. The id is
// read once per block, there is no division or modulo per element, and every warp copies
// 128 contiguous bytes.
extern "C" __global__ void embedding_lookup(const float* table, const int* ids, float* out,
                                            int num_ids, int dim, int vocab)
{
    int i = blockIdx.x;
    if (i >= num_ids) return;
    const float* src = table + (long long)ids[i] * dim;
    float* dst = out + (long long)i * dim;
    for (int j = threadIdx.x; j < dim; j += blockDim.x) dst[j] = src[j];
}
