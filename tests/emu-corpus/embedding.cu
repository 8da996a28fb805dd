extern "C" __global__ void embedding(const int* ids, const float* table, float* out, int n, int dim) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n * dim) { int t = i / dim, d = i % dim; out[i] = table[(long long)ids[t] * dim + d]; }
}
