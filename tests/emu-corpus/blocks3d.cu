// 3-D blocks, dynamic shared memory and barrier reductions (__syncthreads_count/and/or).
extern "C" __global__ void blocks3d(const int* in, int* out) {
    extern __shared__ int buf[];
    int t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    int nt = blockDim.x * blockDim.y * blockDim.z;
    int b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    int v = in[b * nt + t];
    buf[nt - 1 - t] = v;
    int cnt = __syncthreads_count(v > 0);
    int all = __syncthreads_and(v > -50);
    int any = __syncthreads_or(v > 90);
    out[b * nt + t] = buf[t] * 1000 + cnt * 4 + all * 2 + any;
}
