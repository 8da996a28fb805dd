// shfl: a full-warp mask used inside a branch only half the warp takes.
extern "C" __global__ void diag_shfl(const float* in, float* out) {
    float v = in[threadIdx.x];
    if (threadIdx.x % 32 < 16) v += __shfl_down_sync(0xffffffff, v, 1);
    out[threadIdx.x] = v;
}
