// Correct but slow: each thread copies a whole row, so a warp's 32 lanes read 32 different
// rows at once (uncoalesced), and most of the default grid has nothing to do.
extern "C" __global__ void embedding_lookup(const float* table, const int* ids, float* out,
                                            int num_ids, int dim, int vocab)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= num_ids) return;
    const float* src = table + (long long)ids[i] * dim;
    float* dst = out + (long long)i * dim;
    for (int j = 0; j < dim; ++j) dst[j] = src[j];
}
