// bfloat16: conversions and arithmetic through cuda_bf16.h.
#include <cuda_bf16.h>

extern "C" __global__ void bf16_scale(const float* x, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    __nv_bfloat16 b = __float2bfloat16(x[i]);
    __nv_bfloat16 two = __float2bfloat16(2.0f);
    __nv_bfloat16 r = __hadd(__hmul(b, two), __float2bfloat16(1.0f));
    out[i] = __bfloat162float(r);
}
