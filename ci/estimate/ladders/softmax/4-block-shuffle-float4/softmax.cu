// Held-out softmax, step 4: one block of 256 threads per row, warp shuffles then one shared
// slot per warp for the block-wide max and sum, float4 loads and stores where the row allows.
__device__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
__device__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
extern "C" __global__ void softmax_rows(const float* in, float* out, int rows, int cols)
{
    __shared__ float part[32];
    __shared__ float bcast;
    int r = blockIdx.x, t = threadIdx.x, lane = t % 32, w = t / 32, nw = blockDim.x / 32;
    const float* x = in + (size_t)r * cols;
    float* y = out + (size_t)r * cols;
    bool vec = cols % 4 == 0;
    int n4 = vec ? cols / 4 : 0;
    const float4* x4 = reinterpret_cast<const float4*>(x);
    float m = __int_as_float(0xff800000);
    for (int i = t; i < n4; i += blockDim.x) {
        float4 v = x4[i];
        m = fmaxf(m, fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)));
    }
    for (int c = 4 * n4 + t; c < cols; c += blockDim.x) m = fmaxf(m, x[c]);
    m = warp_max(m);
    if (lane == 0) part[w] = m;
    __syncthreads();
    if (w == 0) {
        float v = lane < nw ? part[lane] : __int_as_float(0xff800000);
        v = warp_max(v);
        if (lane == 0) bcast = v;
    }
    __syncthreads();
    m = bcast;
    float s = 0.0f;
    for (int i = t; i < n4; i += blockDim.x) {
        float4 v = x4[i];
        s += __expf(v.x - m) + __expf(v.y - m) + __expf(v.z - m) + __expf(v.w - m);
    }
    for (int c = 4 * n4 + t; c < cols; c += blockDim.x) s += __expf(x[c] - m);
    s = warp_sum(s);
    __syncthreads();
    if (lane == 0) part[w] = s;
    __syncthreads();
    if (w == 0) {
        float v = lane < nw ? part[lane] : 0.0f;
        v = warp_sum(v);
        if (lane == 0) bcast = v;
    }
    __syncthreads();
    float inv = 1.0f / bcast;
    float4* y4 = reinterpret_cast<float4*>(y);
    for (int i = t; i < n4; i += blockDim.x) {
        float4 v = x4[i];
        y4[i] = make_float4(__expf(v.x - m) * inv, __expf(v.y - m) * inv, __expf(v.z - m) * inv,
                            __expf(v.w - m) * inv);
    }
    for (int c = 4 * n4 + t; c < cols; c += blockDim.x) y[c] = __expf(x[c] - m) * inv;
}
