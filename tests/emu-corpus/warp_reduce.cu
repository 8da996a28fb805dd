// sm_80+ warp reductions (redux.sync).
extern "C" __global__ void warp_reduce(const int* in, int* out) {
    int v = in[threadIdx.x];
    unsigned u = (unsigned)v;
    int* o = out + threadIdx.x * 4;
    o[0] = __reduce_add_sync(0xffffffff, v);
    o[1] = __reduce_min_sync(0xffffffff, v);
    o[2] = (int)__reduce_max_sync(0xffffffff, u);
    o[3] = (int)__reduce_xor_sync(0xffffffff, u);
}
