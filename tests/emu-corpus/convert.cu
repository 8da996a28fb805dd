// Conversions and explicitly rounded float arithmetic.
extern "C" __global__ void convert(const float* in, const double* din, int* oi, float* of, double* od) {
    int t = threadIdx.x;
    float x = in[t];
    double d = din[t];
    int* i = oi + t * 8;
    i[0] = __float2int_rn(x);
    i[1] = __float2int_rz(x);
    i[2] = __float2int_rd(x);
    i[3] = __float2int_ru(x);
    i[4] = (int)__float2uint_rn(x);
    i[5] = (int)(signed char)(int)x;
    i[6] = __double2int_rn(d);
    i[7] = (int)__float2ll_rz(x * 1e10f);
    float* f = of + t * 12;
    f[0] = __fadd_rz(x, 1e-8f);
    f[1] = __fmul_ru(x, 1.1f);
    f[2] = __fmaf_rd(x, 3.3f, 0.7f);
    f[3] = __fdiv_rn(x, 3.0f);
    f[4] = __frcp_rn(x);
    f[5] = __fsqrt_rd(fabsf(x));
    f[6] = rintf(x) + floorf(x) * 10.0f + ceilf(x) * 100.0f + truncf(x) * 1000.0f;
    f[7] = __saturatef(x);
    f[8] = __int2float_rz(t * 16777217);
    f[9] = __double2float_rd(d);
    f[10] = __uint2float_rd(0xffffffffu - t);
    f[11] = __ll2float_ru(0x7fffffffffffffffll - t);
    double* e = od + t * 3;
    e[0] = d * d + 1.0 / (d + 3.0);
    e[1] = __dadd_rd(d, 1e-30) - __dadd_ru(d, 1e-30);
    e[2] = (double)x + sqrt(fabs(d));
}
