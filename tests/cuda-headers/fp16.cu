// Half precision: conversions, __hadd/__hmul/__hfma, half2 arithmetic and comparisons.
#include <cuda_fp16.h>

extern "C" __global__ void fp16_axpy(const float* x, const float* y, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    __half a = __float2half(0.5f);
    __half hx = __float2half(x[i]);
    __half hy = __float2half(y[i]);
    __half r = __hfma(a, hx, hy);
    __half2 p = __halves2half2(hx, hy);
    __half2 q = __hmul2(p, __float2half2_rn(2.0f));
    __half m = __hgt(__low2half(q), __high2half(q)) ? __low2half(q) : __high2half(q);
    out[i] = __half2float(__hadd(r, m));
}
