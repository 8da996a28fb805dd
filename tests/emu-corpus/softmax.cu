extern "C" __global__ void softmax_rows(const float* in, float* out, int rows, int cols) {
    extern __shared__ float buf[];
    int row = blockIdx.x, tid = threadIdx.x;
    if (row >= rows) return;
    const float* x = in + row * cols;
    float m = __int_as_float(0xff800000);
    for (int j = tid; j < cols; j += blockDim.x) m = fmaxf(m, x[j]);
    buf[tid] = m; __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) { if (tid < s) buf[tid] = fmaxf(buf[tid], buf[tid + s]); __syncthreads(); }
    m = buf[0]; __syncthreads();
    float sum = 0.0f;
    for (int j = tid; j < cols; j += blockDim.x) sum += expf(x[j] - m);
    buf[tid] = sum; __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) { if (tid < s) buf[tid] += buf[tid + s]; __syncthreads(); }
    sum = buf[0];
    for (int j = tid; j < cols; j += blockDim.x) out[row * cols + j] = expf(x[j] - m) / sum;
}
