// MISTAKE: copies table row i instead of table row ids[i]. Wrong values, and past the end
// of the table whenever num_ids > vocab.
extern "C" __global__ void embedding_lookup(const float* table, const int* ids, float* out,
                                            int num_ids, int dim, int vocab)
{
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= num_ids * dim) return;
    out[idx] = table[idx];
}
