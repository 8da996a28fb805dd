// trap: a device-side assertion failure ends the launch with a fault.
extern "C" __global__ void diag_trap(const int* in, int* out) {
    int v = in[threadIdx.x];
    if (v < 0) __trap();
    out[threadIdx.x] = v;
}
