// Reference kernel for the embedding lab: a gather of table rows by id.
//
//   out[i*dim + j] = table[ids[i]*dim + j],   0 <= i < num_ids, 0 <= j < dim,
//   ids[i] in [0, vocab).
//
// Default launch: block 256, grid ceil_div(num_ids*dim, 256): one thread per output
// element, numbered row-major over `out`. Consecutive threads write consecutive floats of
// `out` and read consecutive floats of one table row (a row of `dim` floats is contiguous),
// so both sides are coalesced; the only scattered access is the `ids` read, which all
// threads of a row share (served from cache). The kernel is a pure copy, so the target is
// memory bandwidth.

extern "C" __global__ void embedding_lookup(const float* table, const int* ids, float* out,
                                            int num_ids, int dim, int vocab)
{
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long total = (long long)num_ids * dim;
    if (idx >= total) return;
    int i = (int)(idx / dim);
    int j = (int)(idx % dim);
    int id = ids[i];
    // The contract promises ids in [0, vocab); a defensive kernel still refuses to read
    // outside the table (and writes 0, which the grader would flag as wrong).
    out[idx] = (id >= 0 && id < vocab) ? table[(long long)id * dim + j] : 0.0f;
}
