// cugrade's own device kernels for the timing protocol (docs/measurement.md): fresh inputs for
// every timed launch (Philox4x32-10, seeded per launch and buffer), and the checks of every
// timed launch's outputs against the reference's (tolerance as in src/check.rs) and of the
// guard bytes around them. Compiled with NVRTC once per grading run; no headers needed.

typedef unsigned int u32;
typedef unsigned long long u64;

__device__ __forceinline__ uint4 philox(uint4 c, uint2 k) {
    const u32 M0 = 0xD2511F53u, M1 = 0xCD9E8D57u, W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;
#pragma unroll
    for (int r = 0; r < 10; ++r) {
        u32 hi0 = __umulhi(M0, c.x), lo0 = M0 * c.x;
        u32 hi1 = __umulhi(M1, c.z), lo1 = M1 * c.z;
        c = make_uint4(hi1 ^ c.y ^ k.x, lo1, hi0 ^ c.w ^ k.y, lo0);
        k.x += W0;
        k.y += W1;
    }
    return c;
}

// 53 random bits as a double in [0, 1).
__device__ __forceinline__ double unit(u32 a, u32 b) {
    return (double)((((u64)a << 32) | b) >> 11) * (1.0 / 9007199254740992.0);
}

// Element types, as src/measure/session/mod.rs numbers them.
enum { F32 = 0, F64 = 1, I32 = 2, U32 = 3, I64 = 4, U64 = 5, U8 = 6, I8 = 7, U16 = 8, I16 = 9,
       F16 = 10, BF16 = 11 };

__device__ __forceinline__ int elem_bytes(int elem) {
    switch (elem) {
    case F64: case I64: case U64: return 8;
    case U8: case I8: return 1;
    case U16: case I16: case F16: case BF16: return 2;
    default: return 4;
    }
}

// Half and bfloat16 by hand (no headers): round to nearest even, NaN kept a NaN.
__device__ __forceinline__ unsigned short f32_to_f16(float f) {
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}
__device__ __forceinline__ float f16_to_f32(unsigned short h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}
__device__ __forceinline__ unsigned short f32_to_bf16(float f) {
    u32 b = __float_as_uint(f);
    if ((b & 0x7FFFFFFFu) > 0x7F800000u) return (unsigned short)((b >> 16) | 0x40u);
    b += 0x7FFFu + ((b >> 16) & 1u);
    return (unsigned short)(b >> 16);
}
__device__ __forceinline__ float bf16_to_f32(unsigned short h) {
    return __uint_as_float((u32)h << 16);
}

__device__ __forceinline__ void store(void* out, u64 i, int elem, double x) {
    switch (elem) {
    case F32: ((float*)out)[i] = (float)x; break;
    case F64: ((double*)out)[i] = x; break;
    case I32: ((int*)out)[i] = (int)x; break;
    case U32: ((unsigned*)out)[i] = (unsigned)x; break;
    case I64: ((long long*)out)[i] = (long long)x; break;
    case U8: ((unsigned char*)out)[i] = (unsigned char)(int)x; break;
    case I8: ((signed char*)out)[i] = (signed char)(int)x; break;
    case U16: ((unsigned short*)out)[i] = (unsigned short)(int)x; break;
    case I16: ((short*)out)[i] = (short)(int)x; break;
    case F16: ((unsigned short*)out)[i] = f32_to_f16((float)x); break;
    case BF16: ((unsigned short*)out)[i] = f32_to_bf16((float)x); break;
    default: ((u64*)out)[i] = (u64)x; break;
    }
}

__device__ __forceinline__ double load(const void* p, u64 i, int elem) {
    switch (elem) {
    case F32: return (double)((const float*)p)[i];
    case F64: return ((const double*)p)[i];
    case I32: return (double)((const int*)p)[i];
    case U32: return (double)((const unsigned*)p)[i];
    case I64: return (double)((const long long*)p)[i];
    case U8: return (double)((const unsigned char*)p)[i];
    case I8: return (double)((const signed char*)p)[i];
    case U16: return (double)((const unsigned short*)p)[i];
    case I16: return (double)((const short*)p)[i];
    case F16: return (double)f16_to_f32(((const unsigned short*)p)[i]);
    case BF16: return (double)bf16_to_f32(((const unsigned short*)p)[i]);
    default: return (double)((const u64*)p)[i];
    }
}

// kind: 0 uniform [a, b), 1 normal (mean a, std b), 2 integer in [a, b), 3 constant a,
// 4 `values` cycled. Then a `special_fraction` of elements become one of `specials`.
extern "C" __global__ void cugrade_generate(void* out, u64 n, int elem, u64 seed, int kind,
                                            double a, double b, const double* values,
                                            int nvalues, double special_fraction,
                                            const double* specials, int nspecials) {
    uint2 key = make_uint2((u32)seed, (u32)(seed >> 32));
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n;
         i += (u64)gridDim.x * blockDim.x) {
        uint4 r = philox(make_uint4((u32)i, (u32)(i >> 32), 0u, 0u), key);
        double u = unit(r.x, r.y), v = unit(r.z, r.w);
        double x;
        switch (kind) {
        case 0: x = a + (b - a) * u; if (x >= b) x = a; break;
        case 1: x = a + b * sqrt(-2.0 * log(1.0 - u)) * cospi(2.0 * v); break;
        case 2: x = a + floor(u * (b - a)); if (x >= b) x = b - 1.0; break;
        case 3: x = a; break;
        default: x = nvalues > 0 ? values[i % (u64)nvalues] : 0.0; break;
        }
        if (nspecials > 0) {
            uint4 s = philox(make_uint4((u32)i, (u32)(i >> 32), 1u, 0u), key);
            if (unit(s.x, s.y) < special_fraction) x = specials[s.z % (u32)nspecials];
        }
        store(out, i, elem, x);
    }
}

__device__ __forceinline__ long long ordered32(float x) {
    int i = __float_as_int(x);
    return (long long)(i < 0 ? (int)0x80000000 - i : i);
}

__device__ __forceinline__ long long ordered16(unsigned short h) {
    short i = (short)h;
    return (long long)(i < 0 ? -32768 - (int)i : (int)i);
}

__device__ __forceinline__ double ulps(double e, double g, int elem) {
    if (elem == F16 || elem == BF16) {
        unsigned short he = elem == F16 ? f32_to_f16((float)e) : f32_to_bf16((float)e);
        unsigned short hg = elem == F16 ? f32_to_f16((float)g) : f32_to_bf16((float)g);
        long long d = ordered16(he) - ordered16(hg);
        return (double)(d < 0 ? -d : d);
    }
    if (elem == F32) {
        long long d = ordered32((float)e) - ordered32((float)g);
        return (double)(d < 0 ? -d : d);
    }
    long long ie = __double_as_longlong(e), ig = __double_as_longlong(g);
    // Ordered as in src/check.rs; the difference may exceed 2^63, so compare in doubles.
    double oe = ie < 0 ? -9223372036854775808.0 - (double)ie : (double)ie;
    double og = ig < 0 ? -9223372036854775808.0 - (double)ig : (double)ig;
    return fabs(oe - og);
}

// One element against the rule of src/check/mod.rs (`within`): the same arithmetic in the same
// order, without contraction into FMAs, so that host and device agree at the boundary.
__device__ __forceinline__ bool within(double e, double g, double m, int elem, double abs_tol,
                                       double rel_tol, double sum_abs, long long ulp, int exact) {
    if (isnan(e) || isnan(g)) return isnan(e) && isnan(g);
    if (e == g) return true;
    if (exact || isinf(e) || isinf(g)) return false;
    double mm = isfinite(m) ? fabs(m) : 0.0;
    double allowed = __dadd_rn(__dadd_rn(abs_tol, __dmul_rn(rel_tol, fabs(e))),
                               __dmul_rn(sum_abs, mm));
    if (fabs(__dsub_rn(g, e)) <= allowed) return true;
    return ulp >= 0 && ulps(e, g, elem) <= (double)ulp;
}

__device__ __forceinline__ bool same_bits(const void* a, const void* b, u64 i, int elem) {
    switch (elem_bytes(elem)) {
    case 8: return ((const u64*)a)[i] == ((const u64*)b)[i];
    case 2: return ((const unsigned short*)a)[i] == ((const unsigned short*)b)[i];
    case 1: return ((const unsigned char*)a)[i] == ((const unsigned char*)b)[i];
    default: return ((const u32*)a)[i] == ((const u32*)b)[i];
    }
}

// The size of element i's partial sums, as src/check/mod.rs `sum_scale` computes it: S (its
// sum of absolute terms), or |expected| + 4 sqrt(R2) (R2: its sum of squared terms) if smaller.
__device__ __forceinline__ double sum_scale(double e, const void* sabs, const void* sq, u64 i,
                                            int elem) {
    if (!sabs) return 0.0;
    double s = load(sabs, i, elem);
    if (!sq) return s;
    double q = load(sq, i, elem), ae = fabs(e);
    if (isfinite(q) && q > 1e-36 && isfinite(ae))
        return fmin(s, __dadd_rn(ae, __dmul_rn(4.0, sqrt(q))));
    return s;
}

// Per element i: `sabs` and `sq` (may be null) hold its sums of absolute and squared terms
// (the reference's outputs on the inputs' absolute values and squares); `initial` (may be
// null) what the output held before the launch. result[0] += mismatches; result[1] = min(first
// mismatching index); result[3] += mismatches outside the coarse band too (wrong, not merely
// imprecise); result[4] += mismatches whose bits are still the initial contents (unwritten).
extern "C" __global__ void cugrade_compare(const void* got, const void* expected, const void* sabs,
                                           const void* sq, const void* initial, u64 n, int elem,
                                           double abs_tol, double rel_tol, double sum_abs,
                                           long long ulp, int exact, double coarse_abs,
                                           double coarse_rel, double coarse_sum_abs,
                                           u64* result) {
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n;
         i += (u64)gridDim.x * blockDim.x) {
        double g = load(got, i, elem), e = load(expected, i, elem);
        double m = sum_scale(e, sabs, sq, i, elem);
        // 64-bit integers beyond 2^53 share a double: an exact comparison reads their bits.
        bool bits = exact && (elem == I64 || elem == U64);
        bool fine = bits ? same_bits(got, expected, i, elem)
                         : within(e, g, m, elem, abs_tol, rel_tol, sum_abs, ulp, exact);
        if (!fine) {
            atomicAdd(&result[0], 1ull);
            atomicMin(&result[1], i);
            if (bits ||
                !within(e, g, m, elem, coarse_abs, coarse_rel, coarse_sum_abs, ulp, exact))
                atomicAdd(&result[3], 1ull);
            if (initial && same_bits(got, initial, i, elem)) atomicAdd(&result[4], 1ull);
        }
    }
}

// dst[i] = |src[i]| (square = 0) or src[i]^2 (square = 1) for a float buffer: the inputs of
// the reference's runs that compute each output's sums of absolute and squared terms.
extern "C" __global__ void cugrade_terms(const void* src, void* dst, u64 n, int elem, int square) {
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n;
         i += (u64)gridDim.x * blockDim.x) {
        if (elem == F32) {
            float x = ((const float*)src)[i];
            ((float*)dst)[i] = square ? __fmul_rn(x, x) : fabsf(x);
        } else if (elem == F64) {
            double x = ((const double*)src)[i];
            ((double*)dst)[i] = square ? __dmul_rn(x, x) : fabs(x);
        } else if (elem == F16 || elem == BF16) {
            unsigned short h = ((const unsigned short*)src)[i];
            float x = elem == F16 ? f16_to_f32(h) : bf16_to_f32(h);
            float y = square ? __fmul_rn(x, x) : fabsf(x);
            ((unsigned short*)dst)[i] = elem == F16 ? f32_to_f16(y) : f32_to_bf16(y);
        }
    }
}

// result[0] += bytes in [p, p + n) that are not the guard byte.
extern "C" __global__ void cugrade_guard(const unsigned char* p, u64 n, unsigned char fill,
                                         u64* result) {
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n;
         i += (u64)gridDim.x * blockDim.x)
        if (p[i] != fill) atomicAdd(&result[0], 1ull);
}
