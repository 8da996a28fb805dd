// memcheck: a float read through a pointer that is not 4-byte aligned.
extern "C" __global__ void diag_misaligned(const char* in, float* out) {
    out[threadIdx.x] = *(const float*)(in + 1 + 4 * threadIdx.x);
}
