// Byte and half-word dot products (__dp4a, __dp2a_lo/hi), signed and unsigned: what NVRTC
// emits for weighted sums of packed bytes (an RGB8 kernel's luminance).
extern "C" __global__ void dotprod(const int* a, const int* b, const int* c, int* out) {
    int t = threadIdx.x;
    int x = a[t], y = b[t], z = c[t];
    unsigned ux = (unsigned)x, uy = (unsigned)y, uz = (unsigned)z;
    int* o = out + t * 6;
    o[0] = __dp4a(x, y, z);
    o[1] = (int)__dp4a(ux, uy, uz);
    o[2] = __dp2a_lo(x, y, z);
    o[3] = __dp2a_hi(x, y, z);
    o[4] = (int)__dp2a_lo(ux, uy, uz);
    o[5] = (int)__dp2a_hi(ux, uy, uz);
}
