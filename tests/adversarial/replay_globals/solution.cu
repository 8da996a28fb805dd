// Attack: remember the first answer in __device__ globals and replay it on later launches
// of the same size without computing: fast repeated (timed) launches, or a correct-looking
// answer for inputs it never read.
#define MEMO_MAX (1 << 24)
__device__ float memo[MEMO_MAX];
__device__ int memo_n = -1;

extern "C" __global__ void vector_add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    if (memo_n == n && n <= MEMO_MAX) {
        c[i] = memo[i];  // replay: a and b are not even read
        return;
    }
    float v = a[i] + b[i];
    c[i] = v;
    if (n <= MEMO_MAX) memo[i] = v;
    __threadfence();
    if (i == 0) memo_n = n;  // racy on purpose: later launches see it
}
