// racecheck: a tree reduction that forgot __syncthreads() between steps.
extern "C" __global__ void diag_race(const float* in, float* out) {
    __shared__ float s[128];
    int t = threadIdx.x;
    s[t] = in[t];
    __syncthreads();
    for (int stride = 64; stride > 0; stride >>= 1) {
        if (t < stride) s[t] += s[t + stride];
    }
    if (t == 0) out[0] = s[0];
}
