// Attack: read a host file at compile time. If NVRTC could open it, the compiler's error
// messages would quote its first lines ("root:x:0:0:...") into the student's report.
#include "/etc/passwd"

extern "C" __global__ void vector_add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
