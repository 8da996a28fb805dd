// deadline: a loop that never ends must be stopped by the launch deadline.
extern "C" __global__ void diag_loop(volatile int* flag, int* out) {
    int n = 0;
    while (flag[0] == 0) ++n;
    out[0] = n;
}
