// racecheck within a warp: the classic `volatile` warp-synchronous tail of a reduction races
// since Volta (a warp's lanes do not run in lockstep); with __syncwarp() between the steps, or
// with shuffles, it does not.
extern "C" __global__ void diag_warp_race(const float* in, float* out) {
    __shared__ float s[64];
    int t = threadIdx.x;
    s[t] = in[t];
    s[t + 32] = in[t + 32];
    __syncwarp();
    volatile float* v = s;
    v[t] += v[t + 32];
    v[t] += v[t + 16];
    v[t] += v[t + 8];
    if (t == 0) out[0] = v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
}

extern "C" __global__ void diag_warp_synced(const float* in, float* out) {
    __shared__ float s[64];
    int t = threadIdx.x;
    s[t] = in[t];
    s[t + 32] = in[t + 32];
    __syncwarp();
    float x = s[t] + s[t + 32];
    __syncwarp();
    s[t] = x;
    __syncwarp();
    for (int o = 16; o >= 8; o >>= 1) {
        x = s[t] + (t + o < 32 ? s[t + o] : 0.0f);
        __syncwarp();
        s[t] = x;
        __syncwarp();
    }
    float y = __shfl_down_sync(0xffffffffu, x, 4);
    if (t == 0) out[0] = s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7] + 0.0f * y;
}
