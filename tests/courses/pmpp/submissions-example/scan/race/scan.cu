// Kogge-Stone without the barrier between reading a neighbour and overwriting one's own
// element: a thread may add a value its neighbour already updated in this step (a
// shared-memory race, in scan_block and in the tile scan of scan_single_pass).

extern "C" __global__ void scan_naive(const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float s = 0.0f;
    for (int j = 0; j <= i; ++j) s += x[j];
    y[i] = s;
}

// Kogge-Stone in place: read, barrier, write, barrier.
extern "C" __global__ void scan_block(const float* x, float* y, int n)
{
    __shared__ float s[1024];
    int t = threadIdx.x;
    s[t] = (t < n) ? x[t] : 0.0f;
    __syncthreads();
    for (int off = 1; off < blockDim.x; off *= 2) {
        float left = (t >= off) ? s[t - off] : 0.0f;
        s[t] += left;
        __syncthreads();
    }
    if (t < n) y[t] = s[t];
}

#define THREADS 256
#define PER_THREAD 16
#define TILE (THREADS * PER_THREAD)

extern "C" __global__ void scan_single_pass(const float* x, float* y, float* tile_sum,
                                            float* tile_prefix, unsigned* tile_flag,
                                            unsigned* ticket, int n)
{
    __shared__ float s[TILE];
    __shared__ float totals[THREADS];
    __shared__ unsigned s_tile;
    __shared__ float s_carry;
    int t = threadIdx.x;

    // Tiles in the order blocks start, so a block only ever waits for running blocks.
    if (t == 0) s_tile = atomicAdd(ticket, 1u);
    __syncthreads();
    int tile = s_tile;
    int base = tile * TILE;

    for (int k = 0; k < PER_THREAD; ++k) {
        int i = base + k * THREADS + t;
        s[k * THREADS + t] = (i < n) ? x[i] : 0.0f;
    }
    __syncthreads();

    // Each thread sums its 16 consecutive elements, the block scans the 256 totals
    // (Kogge-Stone), then each thread scans its 16 elements on top of its predecessors'.
    float mine = 0.0f;
    for (int k = 0; k < PER_THREAD; ++k) mine += s[t * PER_THREAD + k];
    totals[t] = mine;
    __syncthreads();
    for (int off = 1; off < THREADS; off *= 2) {
        float left = (t >= off) ? totals[t - off] : 0.0f;
        totals[t] += left;
        __syncthreads();
    }

    // Decoupled look-back by thread 0: publish this tile's total at once (flag 1), then walk
    // back adding totals until a tile whose inclusive prefix is known (flag 2).
    if (t == 0) {
        float total = totals[THREADS - 1];
        float carry = 0.0f;
        if (tile > 0) {
            tile_sum[tile] = total;
            __threadfence();
            *(volatile unsigned*)&tile_flag[tile] = 1u;
            for (int j = tile - 1;; --j) {
                unsigned f;
                do {
                    f = *(volatile unsigned*)&tile_flag[j];
                } while (f == 0u);
                __threadfence();
                if (f == 2u) {
                    carry += *(volatile float*)&tile_prefix[j];
                    break;
                }
                carry += *(volatile float*)&tile_sum[j];
            }
        }
        tile_prefix[tile] = carry + total;
        __threadfence();
        *(volatile unsigned*)&tile_flag[tile] = 2u;
        s_carry = carry;
    }
    __syncthreads();

    float run = s_carry + ((t > 0) ? totals[t - 1] : 0.0f);
    for (int k = 0; k < PER_THREAD; ++k) {
        run += s[t * PER_THREAD + k];
        s[t * PER_THREAD + k] = run;
    }
    __syncthreads();
    for (int k = 0; k < PER_THREAD; ++k) {
        int i = base + k * THREADS + t;
        if (i < n) y[i] = s[k * THREADS + t];
    }
}
