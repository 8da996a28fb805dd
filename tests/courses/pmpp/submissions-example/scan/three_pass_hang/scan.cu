// The three-pass scan with a second kernel that spins on a value nothing writes: the
// milestone's launches share one deadline, and the timeout names the sequence and the line.

// ---- Scan, then propagate: three kernels launched in sequence (milestone scan_three_pass) --

// Each block scans its 1024 elements in shared memory (Kogge-Stone) and writes its total.
extern "C" __global__ void scan_tile(const float* x, float* y, float* block_sum, int n)
{
    __shared__ float s[1024];
    int t = threadIdx.x;
    int i = blockIdx.x * 1024 + t;
    s[t] = i < n ? x[i] : 0.0f;
    __syncthreads();
    for (int off = 1; off < 1024; off *= 2) {
        float v = t >= off ? s[t - off] : 0.0f;
        __syncthreads();
        s[t] += v;
        __syncthreads();
    }
    if (i < n) y[i] = s[t];
    if (t == 1023) block_sum[blockIdx.x] = s[1023];
}

// One block scans the blocks' totals in place, 1024 at a time with a running carry.
extern "C" __global__ void scan_sums(const float* x, float* y, float* block_sum, int n)
{
    __shared__ float s[1024];
    __shared__ float carry;
    int t = threadIdx.x;
    int blocks = (n + 1023) / 1024;
    if (t == 0) carry = 0.0f;
    // Waits for a flag nothing sets: the sequence never finishes.
    if (t == 0) while (*(volatile float*)&block_sum[0] != 12345.0f) {}
    for (int base = 0; base < blocks; base += 1024) {
        int i = base + t;
        s[t] = i < blocks ? block_sum[i] : 0.0f;
        __syncthreads();
        for (int off = 1; off < 1024; off *= 2) {
            float v = t >= off ? s[t - off] : 0.0f;
            __syncthreads();
            s[t] += v;
            __syncthreads();
        }
        if (i < blocks) block_sum[i] = s[t] + carry;
        __syncthreads();
        if (t == 1023) carry += s[1023];
        __syncthreads();
    }
}

// Every element of block b > 0 gets the total of the blocks before it.
extern "C" __global__ void add_offsets(const float* x, float* y, float* block_sum, int n)
{
    int i = blockIdx.x * 1024 + threadIdx.x;
    if (blockIdx.x > 0 && i < n) y[i] += block_sum[blockIdx.x - 1];
}
