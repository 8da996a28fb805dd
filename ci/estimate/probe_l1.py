#!/usr/bin/env python3
"""Microbenchmarks of the H100's L1/shared-memory pipe for the speed estimate's cost model
(docs/estimate.md): run under Nsight Compute by ci/estimate/probe-l1.sh on a GPU.

A: shared-memory wavefronts of one warp access, by width (4, 8, 16 bytes) and lane pattern,
   with `ld.volatile.shared` (ptxas keeps each access as written).
B: whether ptxas merges scalar shared loads the compiler unrolled (LDS -> LDS.64/.128), and
   what the merged loads cost.
C: global loads that hit L1, by how many lines one warp request touches.
Each kernel's PTX-level loads per thread are printed with it, so that the counters can be
read as "per PTX load". Needs CuPy."""
import sys
import cupy as cp

ITER = 4096
BLOCKS, THREADS = 132 * 4, 256

PATTERNS = {  # word offset of a lane, in units of the access width
    "consecutive": "lane",
    "broadcast": "0",
    "mod16": "(lane % 16)",
    "div16": "(lane / 16)",
    "mod8": "(lane % 8)",
    "div8": "(lane / 8)",
    "div4": "(lane / 4)",
    "stride2": "(lane * 2)",
    "stride32": "(lane * 32 % 4096)",
}
VEC = {4: ("f32", "float", 1), 8: ("v2.f32", "float2", 2), 16: ("v4.f32", "float4", 4)}


def kernel_a(width, pat):
    ptx, _, n = VEC[width]
    regs = ", ".join(f"%{i}" for i in range(n))
    outs = ", ".join(f'"=f"(r[{i}])' for i in range(n))
    name = f"a_w{width}_{pat}"
    src = f"""
extern "C" __global__ void {name}(float* out) {{
    __shared__ __align__(16) float s[4096];
    for (int i = threadIdx.x; i < 4096; i += blockDim.x) s[i] = i;
    __syncthreads();
    unsigned lane = threadIdx.x % 32;
    unsigned off = ({PATTERNS[pat]}) * {n} * 4;
    unsigned base = (unsigned)__cvta_generic_to_shared(s) + off;
    float acc = 0.f, r[4];
    for (int it = 0; it < {ITER}; ++it) {{
        asm volatile("ld.volatile.shared.{ptx} {{{regs}}}, [%{n}];" : {outs} : "r"(base));
        acc += r[0];
    }}
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}}"""
    return name, src, ITER


B_SRC = r"""
// B1: a 32x32 tile, row uniform per warp: As[row*32+k] for k = 0..31 (sgemm's shared tile).
extern "C" __global__ void b1_row_aligned(float* out) {
    __shared__ float As[32 * 33], Bs[32 * 32];
    for (int i = threadIdx.x; i < 32 * 33; i += blockDim.x) As[i] = i;
    for (int i = threadIdx.x; i < 32 * 32; i += blockDim.x) Bs[i] = i;
    __syncthreads();
    unsigned lane = threadIdx.x % 32, w = threadIdx.x / 32;
    float acc = 0.f;
    for (int t = 0; t < ITER / 32; ++t) {
        unsigned row = (w + t) & 31;
#pragma unroll
        for (int k = 0; k < 32; ++k) acc += As[row * 32 + k] * Bs[k * 32 + lane];
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}
// B2: the same with rows of 33 (padded): no 16-byte alignment to prove.
extern "C" __global__ void b2_row_padded(float* out) {
    __shared__ float As[32 * 33], Bs[32 * 32];
    for (int i = threadIdx.x; i < 32 * 33; i += blockDim.x) As[i] = i;
    for (int i = threadIdx.x; i < 32 * 32; i += blockDim.x) Bs[i] = i;
    __syncthreads();
    unsigned lane = threadIdx.x % 32, w = threadIdx.x / 32;
    float acc = 0.f;
    for (int t = 0; t < ITER / 32; ++t) {
        unsigned row = (w + t) & 31;
#pragma unroll
        for (int k = 0; k < 32; ++k) acc += As[row * 33 + k] * Bs[k * 32 + lane];
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}
// B3: 1-D block tile (TM = 8, BK = 8): As[(row*8 + r)*8 + k], k outer, r inner.
extern "C" __global__ void b3_blocktile(float* out) {
    __shared__ float As[64 * 8], Bs[8 * 64];
    for (int i = threadIdx.x; i < 512; i += blockDim.x) { As[i] = i; Bs[i] = i; }
    __syncthreads();
    unsigned col = threadIdx.x % 64, row = threadIdx.x / 64;
    float acc[8] = {0};
    for (int t = 0; t < ITER / 8; ++t) {
        unsigned rr = (row + t) & 7;
#pragma unroll
        for (int k = 0; k < 8; ++k) {
            float b = Bs[k * 64 + col];
#pragma unroll
            for (int r = 0; r < 8; ++r) acc[r] += As[(rr * 8 + r) * 8 + k] * b;
        }
    }
    float s = 0.f;
    for (int r = 0; r < 8; ++r) s += acc[r];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
// B4: per-lane rows (not a broadcast): As[lane*8 + k], k = 0..7.
extern "C" __global__ void b4_lane_rows(float* out) {
    __shared__ float As[32 * 8 * 2];
    for (int i = threadIdx.x; i < 512; i += blockDim.x) As[i] = i;
    __syncthreads();
    unsigned lane = threadIdx.x % 32;
    float acc = 0.f;
    for (int t = 0; t < ITER / 8; ++t) {
        unsigned l = (lane + t) & 31;
#pragma unroll
        for (int k = 0; k < 8; ++k) acc += As[l * 8 + k];
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}
// B5: a column (stride 32 words) over k, row uniform: nothing to merge.
extern "C" __global__ void b5_column(float* out) {
    __shared__ float As[32 * 32];
    for (int i = threadIdx.x; i < 1024; i += blockDim.x) As[i] = i;
    __syncthreads();
    unsigned w = threadIdx.x / 32;
    float acc = 0.f;
    for (int t = 0; t < ITER / 32; ++t) {
        unsigned c = (w + t) & 31;
#pragma unroll
        for (int k = 0; k < 32; ++k) acc += As[k * 32 + c];
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}
"""
B_LOADS = {  # PTX shared loads per thread, as written
    "b1_row_aligned": 2 * ITER, "b2_row_padded": 2 * ITER, "b3_blocktile": 9 * ITER,
    "b4_lane_rows": ITER, "b5_column": ITER,
}


def kernel_c(stride, cached):
    """Global loads of one 16 KB window per block (L1-resident once touched; `volatile` loads
    bypass L1 and come from L2), four independent chains so that latency is hidden."""
    name = f"c_stride{stride}_{'l1' if cached else 'l2'}"
    q = "" if cached else "volatile"
    src = f"""
extern "C" __global__ void {name}(const float* __restrict__ a, float* out) {{
    unsigned lane = threadIdx.x % 32;
    const {q} float* p = a + (blockIdx.x % 8) * 4096;
    float acc[4] = {{0.f, 0.f, 0.f, 0.f}};
#pragma unroll 4
    for (int it = 0; it < {ITER}; ++it)
        acc[it & 3] += p[(lane * {stride} + it) & 4095];
    out[blockIdx.x * blockDim.x + threadIdx.x] = (acc[0] + acc[1]) + (acc[2] + acc[3]);
}}"""
    return name, src


REPS = 0 if "--once" in sys.argv else 5


def timed(k, args, reps=REPS):
    k((BLOCKS,), (THREADS,), args)  # warm-up (and first touch)
    cp.cuda.Device().synchronize()
    s, e = cp.cuda.Event(), cp.cuda.Event()
    ts = []
    for _ in range(reps):
        s.record()
        k((BLOCKS,), (THREADS,), args)
        e.record()
        e.synchronize()
        ts.append(cp.cuda.get_elapsed_time(s, e))
    return sorted(ts)[len(ts) // 2] if ts else 0.0


def main():
    out = cp.zeros(BLOCKS * THREADS, dtype=cp.float32)
    a = cp.arange(4096 * 8, dtype=cp.float32)
    warps = BLOCKS * THREADS // 32
    print("kernel,ptx_loads_per_thread,ms,warp_loads")
    for w in (4, 8, 16):
        for p in PATTERNS:
            name, src, n = kernel_a(w, p)
            k = cp.RawKernel(src, name)
            ms = timed(k, (out,))
            print(f"{name},{n},{ms:.4f},{n * warps}")
    mod = cp.RawModule(code=f"#define ITER {ITER}\n" + B_SRC)
    for name, n in B_LOADS.items():
        ms = timed(mod.get_function(name), (out,))
        print(f"{name},{n},{ms:.4f},{n * warps}")
    for cached in (True, False):
        for stride in (1, 2, 8, 32, 33, 64):
            name, src = kernel_c(stride, cached)
            k = cp.RawKernel(src, name)
            ms = timed(k, (a, out))
            print(f"{name},{ITER},{ms:.4f},{ITER * warps}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
