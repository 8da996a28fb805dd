// Reference kernels for the pmpp course's scan lab (rubrics/scan.yaml): the inclusive prefix
// sum y[i] = x[0] + x[1] + ... + x[i] of n floats, ported from GPU MODE's pmpp `prefixsum`
// problem (PMPP chapter 11).
//
//   scan_naive        one thread per element adds x[0..i] itself: O(n^2) work, correct.
//   scan_block        one block of 1024 threads, n <= 1024: Kogge-Stone in shared memory,
//                     double-buffered so that one __syncthreads() per step suffices.
//   scan_single_pass  any n, one launch: each block scans a tile of 4096 elements (16 per
//                     thread: PMPP's coarsened three-phase scan) and learns the sum of all
//                     earlier tiles from its predecessors through the scratch buffers
//                     (decoupled look-back, Merrill & Garland 2016).
//
// scan_single_pass's scratch buffers (dir: scratch: zeroed before every launch):
//   tile_sum[t]     tile t's own total (its "aggregate"), valid once tile_flag[t] >= 1
//   tile_prefix[t]  the sum of tiles 0..t (inclusive), valid once tile_flag[t] == 2
//   tile_flag[t]    0: nothing yet, 1: tile_sum[t] published, 2: tile_prefix[t] published
//   ticket[0]       the next tile number: a block takes its tile from this counter rather than
//                   from blockIdx.x, so every tile it waits for belongs to a block that has
//                   already started (blocks are not scheduled in blockIdx order, and a block
//                   spinning on a tile whose block has not started yet could wait forever).
// A value is written, then __threadfence(), then its flag (volatile); a reader reads the flag
// (volatile), then __threadfence(), then the value (volatile).

#define BLOCK 256
#define ITEMS 16
#define TILE (BLOCK * ITEMS)
// Shared-memory index with one padding word per 32: thread t's 16 consecutive elements
// (t * 16 + k) then lie in 32 different banks across a warp, as do the coalesced rows.
#define PAD(j) ((j) + ((j) >> 5))
#define WARPS (BLOCK / 32)
#define FULL 0xffffffffu

#define FLAG_AGGREGATE 1u
#define FLAG_PREFIX 2u

extern "C" __global__ void scan_naive(const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float s = 0.0f;
    for (int j = 0; j <= i; ++j) s += x[j];
    y[i] = s;
}

extern "C" __global__ void scan_block(const float* x, float* y, int n)
{
    __shared__ float buf[2][1024];
    int t = threadIdx.x;
    int cur = 0;
    buf[0][t] = (t < n) ? x[t] : 0.0f;
    __syncthreads();
    for (int off = 1; off < (int)blockDim.x; off <<= 1) {
        float v = buf[cur][t];
        if (t >= off) v += buf[cur][t - off];
        buf[1 - cur][t] = v;  // the other buffer: nobody reads it in this step
        cur = 1 - cur;
        __syncthreads();
    }
    if (t < n) y[t] = buf[cur][t];
}

__device__ __forceinline__ float warp_inclusive_scan(float v, unsigned lane)
{
    for (int off = 1; off < 32; off <<= 1) {
        float o = __shfl_up_sync(FULL, v, off);
        if (lane >= (unsigned)off) v += o;
    }
    return v;
}

__device__ __forceinline__ float warp_sum(float v)
{
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(FULL, v, off);
    return v;
}

extern "C" __global__ void scan_single_pass(const float* x, float* y, float* tile_sum,
                                            float* tile_prefix, unsigned* tile_flag,
                                            unsigned* ticket, int n)
{
    __shared__ float s_data[PAD(TILE)];
    __shared__ float s_warp[WARPS];
    __shared__ unsigned s_tile;
    __shared__ float s_carry;
    unsigned tid = threadIdx.x, lane = tid % 32, warp = tid / 32;

    if (tid == 0) s_tile = atomicAdd(ticket, 1u);
    __syncthreads();
    const unsigned tile = s_tile;
    const long long base = (long long)tile * TILE;

    // Coalesced loads of the tile into shared memory (0 past the end).
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        long long i = base + k * BLOCK + tid;
        s_data[PAD(k * BLOCK + tid)] = (i < n) ? x[i] : 0.0f;
    }
    __syncthreads();

    // Each thread scans its ITEMS consecutive elements sequentially ...
    float v[ITEMS];
    float run = 0.0f;
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        run += s_data[PAD(tid * ITEMS + k)];
        v[k] = run;
    }
    // ... then the threads' totals are scanned across the block: warps, then the warp totals.
    float incl = warp_inclusive_scan(run, lane);
    float excl = __shfl_up_sync(FULL, incl, 1);
    if (lane == 0) excl = 0.0f;
    if (lane == 31) s_warp[warp] = incl;
    __syncthreads();
    if (warp == 0) {
        float w = (lane < WARPS) ? s_warp[lane] : 0.0f;
        w = warp_inclusive_scan(w, lane);
        if (lane < WARPS) s_warp[lane] = w;
    }
    __syncthreads();
    if (warp > 0) excl += s_warp[warp - 1];
    const float aggregate = s_warp[WARPS - 1];

    // Decoupled look-back, by warp 0: publish the tile's total, then sum the predecessors'
    // totals 32 tiles at a time until one that knows its inclusive prefix.
    if (warp == 0) {
        float carry = 0.0f;
        if (lane == 0) {
            if (tile == 0) {
                tile_prefix[0] = aggregate;
                __threadfence();
                *(volatile unsigned*)&tile_flag[0] = FLAG_PREFIX;
            } else {
                tile_sum[tile] = aggregate;
                __threadfence();
                *(volatile unsigned*)&tile_flag[tile] = FLAG_AGGREGATE;
            }
        }
        if (tile > 0) {
            int look = (int)tile - 1;  // the tile lane 0 inspects; lane k inspects look - k
            for (;;) {
                int j = look - (int)lane;
                unsigned f = FLAG_PREFIX;  // before tile 0: a prefix of 0
                float val = 0.0f;
                if (j >= 0) {
                    do {
                        f = *(volatile unsigned*)&tile_flag[j];
                    } while (f == 0u);
                    __threadfence();
                    val = (f == FLAG_PREFIX) ? *(volatile float*)&tile_prefix[j]
                                             : *(volatile float*)&tile_sum[j];
                }
                unsigned done = __ballot_sync(FULL, f == FLAG_PREFIX);
                if (done) {
                    int stop = __ffs(done) - 1;  // the nearest tile with its prefix
                    carry += warp_sum((int)lane <= stop ? val : 0.0f);
                    break;
                }
                carry += warp_sum(val);
                look -= 32;
            }
            if (lane == 0) {
                tile_prefix[tile] = carry + aggregate;
                __threadfence();
                *(volatile unsigned*)&tile_flag[tile] = FLAG_PREFIX;
            }
        }
        if (lane == 0) s_carry = carry;
    }
    __syncthreads();

    // Every thread rewrites only its own elements, then the tile goes out coalesced.
    const float add = excl + s_carry;
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) s_data[PAD(tid * ITEMS + k)] = v[k] + add;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        long long i = base + k * BLOCK + tid;
        if (i < n) y[i] = s_data[PAD(k * BLOCK + tid)];
    }
}

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
