// Integer bit manipulation and arithmetic edge cases.
extern "C" __global__ void intops(const int* a, const int* b, int* out, long long* out64) {
    int t = threadIdx.x;
    int x = a[t], y = b[t];
    unsigned ux = (unsigned)x, uy = (unsigned)y;
    int* o = out + t * 16;
    o[0] = __popc(ux);
    o[1] = __clz(x);
    o[2] = (int)__brev(ux);
    o[3] = (int)__byte_perm(ux, uy, 0x5140);
    o[4] = (int)__funnelshift_l(ux, uy, y & 63);
    o[5] = (int)__funnelshift_r(ux, uy, y);
    o[6] = (int)__umulhi(ux, uy);
    o[7] = __mulhi(x, y);
    o[8] = y != 0 ? x / y : 0;
    o[9] = y != 0 ? x % y : 0;
    o[10] = uy != 0 ? (int)(ux / uy) : 0;
    o[11] = (x >> (y & 31)) ^ (int)(ux >> (uy & 31));
    o[12] = (int)((ux >> 5) & 0x3ff);
    o[13] = min(x, y) + max(x, y) * 3 + abs(x);
    o[14] = (int)__sad(x, y, 7u);
    o[15] = __ffs(x) + __clzll((long long)x);
    out64[t] = (long long)x * (long long)y + ((long long)x << 20) / ((long long)(y | 1));
}
