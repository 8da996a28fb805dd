// synccheck: __syncthreads() inside `if (tid < s)`: the other threads skip the barrier and
// exit while these wait. A guard clause before the first barrier is the accepted idiom.
extern "C" __global__ void barrier_in_branch(const float* in, float* out)
{
    __shared__ float s_data[64];
    int tid = threadIdx.x;
    s_data[tid] = in[tid];
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) {
            s_data[tid] += s_data[tid + s];
            __syncthreads();
        }
    }
    if (tid == 0) out[0] = s_data[0];
}

extern "C" __global__ void guard_clause(const float* in, float* out, int n)
{
    __shared__ float tile[64];
    int tid = threadIdx.x;
    if (tid >= n) return;
    tile[tid] = in[tid];
    __syncthreads();
    out[tid] = tile[(tid + 1) % n];
}
