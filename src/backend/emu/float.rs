//! IEEE arithmetic with PTX rounding modes, flush-to-zero, saturation, and the half-precision
//! formats. Directed rounding is exact: results are computed with an error term and then
//! rounded once (no double rounding), which the `expf` code NVRTC emits relies on.

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Rnd {
    #[default]
    N,
    Z,
    M,
    P,
}

/// Round `s + err` (err exact, tiny relative to s) to f32 with `mode`.
pub fn round_f32(s: f64, err: f64, mode: Rnd) -> f32 {
    if s.is_nan() {
        return f32::NAN;
    }
    let mut r = s as f32;
    if r.is_infinite() && s.is_finite() {
        let pos = s > 0.0;
        return match (mode, pos) {
            (Rnd::N, _) => r,
            (Rnd::Z, _) | (Rnd::M, true) | (Rnd::P, false) => f32::MAX.copysign(r),
            _ => r,
        };
    }
    if s.is_infinite() {
        return r;
    }
    let diff = (s - r as f64) + err;
    match mode {
        Rnd::N => {
            if err != 0.0 && s != r as f64 {
                let toward = if s > r as f64 {
                    r.next_up()
                } else {
                    r.next_down()
                };
                let half = ((toward as f64) - (r as f64)).abs() / 2.0;
                if (s - r as f64).abs() == half && (err > 0.0) == (s > r as f64) {
                    r = toward;
                }
            }
        }
        Rnd::M => {
            if diff < 0.0 {
                r = r.next_down();
            }
        }
        Rnd::P => {
            if diff > 0.0 {
                r = r.next_up();
            }
        }
        Rnd::Z => {
            if r > 0.0 && diff < 0.0 {
                r = r.next_down();
            } else if r < 0.0 && diff > 0.0 {
                r = r.next_up();
            } else if r == 0.0 && diff != 0.0 {
                r = 0.0f32.copysign(s as f32);
            }
        }
    }
    // A result rounded away to exactly zero keeps the sign of the true value.
    if r == 0.0 && s != 0.0 {
        r = r.copysign(if s != 0.0 { s as f32 } else { 1.0 });
        if s < 0.0 {
            r = -0.0;
        }
    }
    r
}

/// Adjust an f64 round-to-nearest result `s` whose exact value is `s + err` for `mode`.
pub fn round_f64(s: f64, err: f64, mode: Rnd) -> f64 {
    if !s.is_finite() || err == 0.0 {
        if s.is_infinite() && mode != Rnd::N {
            // Overflow: directed modes clamp toward the finite side.
            let pos = s > 0.0;
            return match (mode, pos) {
                (Rnd::Z, _) | (Rnd::M, true) | (Rnd::P, false) => f64::MAX.copysign(s),
                _ => s,
            };
        }
        return s;
    }
    match mode {
        Rnd::N => s,
        Rnd::M if err < 0.0 => s.next_down(),
        Rnd::P if err > 0.0 => s.next_up(),
        Rnd::Z if s > 0.0 && err < 0.0 => s.next_down(),
        Rnd::Z if s < 0.0 && err > 0.0 => s.next_up(),
        _ => s,
    }
}

fn two_sum(a: f64, b: f64) -> (f64, f64) {
    let s = a + b;
    let bb = s - a;
    let err = (a - (s - bb)) + (b - bb);
    (s, if s.is_finite() { err } else { 0.0 })
}

pub fn ftz32(x: f32) -> f32 {
    if x.is_subnormal() {
        0.0f32.copysign(x)
    } else {
        x
    }
}
pub fn sat32(x: f32) -> f32 {
    if x.is_nan() { 0.0 } else { x.clamp(0.0, 1.0) }
}

pub fn add32(a: f32, b: f32, m: Rnd) -> f32 {
    if m == Rnd::N {
        return a + b;
    }
    let (s, e) = two_sum(a as f64, b as f64);
    let r = round_f32(s, e, m);
    if r == 0.0 && s == 0.0 && e == 0.0 {
        // Exact zero sum: -0 only under round-down (IEEE).
        let both_neg_zero = a == 0.0 && b == 0.0 && a.is_sign_negative() && b.is_sign_negative();
        return if both_neg_zero || m == Rnd::M {
            -0.0
        } else {
            0.0
        };
    }
    r
}
pub fn mul32(a: f32, b: f32, m: Rnd) -> f32 {
    if m == Rnd::N {
        return a * b;
    }
    round_f32(a as f64 * b as f64, 0.0, m)
}
pub fn fma32(a: f32, b: f32, c: f32, m: Rnd) -> f32 {
    if m == Rnd::N {
        return a.mul_add(b, c);
    }
    let p = a as f64 * b as f64;
    let (s, e) = two_sum(p, c as f64);
    if s == 0.0 && e == 0.0 {
        return if m == Rnd::M && (p != 0.0 || c != 0.0) {
            -0.0
        } else {
            a.mul_add(b, c)
        };
    }
    round_f32(s, e, m)
}
pub fn div32(a: f32, b: f32, m: Rnd) -> f32 {
    if m == Rnd::N {
        return a / b;
    }
    let q = a as f64 / b as f64;
    let r = (-q).mul_add(b as f64, a as f64);
    round_f32(q, r / b as f64, m)
}
pub fn sqrt32(a: f32, m: Rnd) -> f32 {
    if m == Rnd::N {
        return a.sqrt();
    }
    let q = (a as f64).sqrt();
    let r = (-q).mul_add(q, a as f64);
    round_f32(q, r / (2.0 * q), m)
}

pub fn add64(a: f64, b: f64, m: Rnd) -> f64 {
    let (s, e) = two_sum(a, b);
    round_f64(s, e, m)
}
pub fn mul64(a: f64, b: f64, m: Rnd) -> f64 {
    let p = a * b;
    round_f64(p, if p.is_finite() { a.mul_add(b, -p) } else { 0.0 }, m)
}
/// Directed-rounding f64 fma uses the sign of a residual estimate (documented gap: may be off
/// by one ulp in rare cancellation cases).
pub fn fma64(a: f64, b: f64, c: f64, m: Rnd) -> f64 {
    let r = a.mul_add(b, c);
    if m == Rnd::N || !r.is_finite() {
        return r;
    }
    let p = a * b;
    let pe = a.mul_add(b, -p);
    let (s, e1) = two_sum(p, c);
    let err = ((s - r) + e1) + pe;
    round_f64(r, err, m)
}
pub fn div64(a: f64, b: f64, m: Rnd) -> f64 {
    let q = a / b;
    if m == Rnd::N || !q.is_finite() {
        return q;
    }
    let r = (-q).mul_add(b, a);
    round_f64(q, if b > 0.0 { r } else { -r }, m)
}
pub fn sqrt64(a: f64, m: Rnd) -> f64 {
    let q = a.sqrt();
    if m == Rnd::N || !q.is_finite() {
        return q;
    }
    round_f64(q, (-q).mul_add(q, a), m)
}

/// PTX min/max: a NaN operand yields the other; -0 < +0. The f32 forms go through f64
/// exactly: the result is always one of the operands.
pub fn min32(a: f32, b: f32) -> f32 {
    min64(a as f64, b as f64) as f32
}
pub fn max32(a: f32, b: f32) -> f32 {
    max64(a as f64, b as f64) as f32
}
pub fn min64(a: f64, b: f64) -> f64 {
    if a.is_nan() {
        return b;
    }
    if b.is_nan() {
        return a;
    }
    if a == b {
        return if a.is_sign_negative() { a } else { b };
    }
    if a < b { a } else { b }
}
pub fn max64(a: f64, b: f64) -> f64 {
    if a.is_nan() {
        return b;
    }
    if b.is_nan() {
        return a;
    }
    if a == b {
        return if a.is_sign_positive() { a } else { b };
    }
    if a > b { a } else { b }
}

/// Round to an integral value (cvt.rni/rzi/rmi/rpi).
pub fn round_int(x: f64, m: Rnd) -> f64 {
    match m {
        Rnd::N => x.round_ties_even(),
        Rnd::Z => x.trunc(),
        Rnd::M => x.floor(),
        Rnd::P => x.ceil(),
    }
}

/// Small binary formats: (mantissa bits, minimum normal exponent, maximum exponent).
#[derive(Clone, Copy)]
pub struct Fmt {
    mant: i32,
    emin: i32,
    emax: i32,
}
pub const F16: Fmt = Fmt {
    mant: 10,
    emin: -14,
    emax: 15,
};
pub const BF16: Fmt = Fmt {
    mant: 7,
    emin: -126,
    emax: 127,
};

/// Round an f64 to a small format, returning its bits. One rounding from the f64 value.
pub fn to_small(x: f64, f: Fmt, m: Rnd) -> u16 {
    let ebits = if f.mant == 10 { 5 } else { 8 };
    let sign: u16 = if x.is_sign_negative() { 1 << 15 } else { 0 };
    let exp_all: u16 = ((1u16 << ebits) - 1) << f.mant;
    if x.is_nan() {
        return exp_all | (1 << (f.mant - 1)) | sign;
    }
    let a = x.abs();
    if a.is_infinite() {
        return sign | exp_all;
    }
    if a == 0.0 {
        return sign;
    }
    let e = ((a.to_bits() >> 52) as i32 - 1023).max(f.emin);
    let q = 2f64.powi(e - f.mant);
    let scaled = a / q;
    // Directed modes act on the signed value.
    let mm = match (m, sign != 0) {
        (Rnd::M, true) => Rnd::P,
        (Rnd::P, true) => Rnd::M,
        (mm, _) => mm,
    };
    let r = round_int(scaled, mm) * q;
    let maxv = (2.0 - 2f64.powi(-f.mant)) * 2f64.powi(f.emax);
    if r > maxv {
        return match mm {
            Rnd::N | Rnd::P => sign | exp_all,
            _ => sign | (exp_all - (1 << f.mant)) | ((1 << f.mant) - 1),
        };
    }
    if r == 0.0 {
        return sign;
    }
    let re = (r.to_bits() >> 52) as i32 - 1023;
    if re < f.emin {
        let mant = (r / 2f64.powi(f.emin - f.mant)) as u16;
        sign | mant
    } else {
        let mant = ((r / 2f64.powi(re) - 1.0) * 2f64.powi(f.mant)) as u16;
        let bias = (1 << (ebits - 1)) - 1;
        sign | (((re + bias) as u16) << f.mant) | mant
    }
}

pub fn from_small(b: u16, f: Fmt) -> f64 {
    let ebits = if f.mant == 10 { 5 } else { 8 };
    let sign = if b >> 15 != 0 { -1.0 } else { 1.0 };
    let e = ((b >> f.mant) & ((1 << ebits) - 1)) as i32;
    let mant = (b & ((1 << f.mant) - 1)) as f64;
    let bias = (1 << (ebits - 1)) - 1;
    if e == (1 << ebits) - 1 {
        return if mant == 0.0 {
            sign * f64::INFINITY
        } else {
            f64::NAN
        };
    }
    if e == 0 {
        return sign * mant * 2f64.powi(f.emin - f.mant);
    }
    sign * (1.0 + mant / 2f64.powi(f.mant)) * 2f64.powi(e - bias)
}

/// Integer to f32 with a rounding mode, exact for 64-bit inputs.
pub fn int_to_f32(v: i128, m: Rnd) -> f32 {
    let r = v as f32;
    if m == Rnd::N {
        return r;
    }
    let back = r as i128;
    let d = v - back;
    let mut r = r;
    match m {
        Rnd::M if d < 0 => r = r.next_down(),
        Rnd::P if d > 0 => r = r.next_up(),
        Rnd::Z if r > 0.0 && d < 0 => r = r.next_down(),
        Rnd::Z if r < 0.0 && d > 0 => r = r.next_up(),
        _ => {}
    }
    r
}
pub fn int_to_f64(v: i128, m: Rnd) -> f64 {
    let r = v as f64;
    if m == Rnd::N {
        return r;
    }
    let d = v - r as i128;
    match m {
        Rnd::M if d < 0 => r.next_down(),
        Rnd::P if d > 0 => r.next_up(),
        Rnd::Z if r > 0.0 && d < 0 => r.next_down(),
        Rnd::Z if r < 0.0 && d > 0 => r.next_up(),
        _ => r,
    }
}

/// Float to integer: round per `m`, saturate to [lo, hi], NaN -> 0 (PTX cvt semantics).
pub fn float_to_int(x: f64, m: Rnd, lo: i128, hi: i128) -> i128 {
    if x.is_nan() {
        return 0;
    }
    let r = round_int(x, m);
    if r <= lo as f64 {
        lo
    } else if r >= hi as f64 {
        hi
    } else {
        r as i128
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directed_fma_matches_the_expf_trick() {
        // NVRTC's expf: fma.rm.f32 t, sat(x*log2e/256+0.5), 252, 0x4B400001 then subtracts the
        // magic constant to get floor(); rounding down must be exact.
        let c = f32::from_bits(0x4B400001);
        let r = fma32(0.5, 252.0, c, Rnd::M);
        assert_eq!(r - f32::from_bits(0x4B40007F), 0.0);
        assert_eq!(
            fma32(1.0, 1.0, f32::from_bits(0x4B400001), Rnd::M).to_bits(),
            0x4B400002
        );
        // 1 + 2^-30 rounds down to 1 and up to next_up(1).
        let tiny = 2f32.powi(-30);
        assert_eq!(fma32(1.0, 1.0, tiny, Rnd::M), 1.0);
        assert_eq!(fma32(1.0, 1.0, tiny, Rnd::P), 1.0f32.next_up());
        assert_eq!(fma32(1.0, 1.0, -tiny, Rnd::Z), 1.0f32.next_down());
        assert_eq!(fma32(1.0, 1.0, -tiny, Rnd::N), 1.0);
    }

    #[test]
    fn add_rounding_modes() {
        let a = 1.0f32;
        let b = 2f32.powi(-25) * 3.0; // 1.5 ulp/2 above: between 1 and next_up(1)
        assert_eq!(add32(a, b, Rnd::Z), 1.0);
        assert_eq!(add32(a, b, Rnd::P), 1.0f32.next_up());
        assert_eq!(add32(-a, -b, Rnd::M), (-1.0f32).next_down());
        assert_eq!(add32(-a, -b, Rnd::Z), -1.0);
        assert_eq!(add32(f32::MAX, f32::MAX, Rnd::Z), f32::MAX);
        assert!(add32(f32::MAX, f32::MAX, Rnd::N).is_infinite());
        assert!(add32(1.0, -1.0, Rnd::M).is_sign_negative());
        assert!(add32(1.0, -1.0, Rnd::Z).is_sign_positive());
    }

    #[test]
    fn f64_directed() {
        let t = 2f64.powi(-60);
        assert_eq!(add64(1.0, t, Rnd::P), 1.0f64.next_up());
        assert_eq!(add64(1.0, t, Rnd::M), 1.0);
        assert_eq!(
            mul64(1.0 + f64::EPSILON, 1.0 + f64::EPSILON, Rnd::M),
            1.0 + 2.0 * f64::EPSILON
        );
        assert_eq!(
            div64(1.0, 3.0, Rnd::P),
            (1.0f64 / 3.0).next_up().min(div64(1.0, 3.0, Rnd::P))
        );
        assert!(div64(1.0, 3.0, Rnd::M) < div64(1.0, 3.0, Rnd::P));
    }

    #[test]
    fn cvt_saturates_and_rounds() {
        assert_eq!(
            float_to_int(3e10, Rnd::Z, i32::MIN as i128, i32::MAX as i128),
            i32::MAX as i128
        );
        assert_eq!(float_to_int(-1.5, Rnd::N, 0, u32::MAX as i128), 0);
        assert_eq!(
            float_to_int(f64::NAN, Rnd::N, i32::MIN as i128, i32::MAX as i128),
            0
        );
        assert_eq!(float_to_int(2.5, Rnd::N, -100, 100), 2);
        assert_eq!(float_to_int(-2.5, Rnd::M, -100, 100), -3);
        assert_eq!(float_to_int(-2.5, Rnd::Z, -100, 100), -2);
        assert_eq!(int_to_f32(16_777_217, Rnd::P), 16_777_218.0);
        assert_eq!(int_to_f32(16_777_217, Rnd::M), 16_777_216.0);
        assert_eq!(int_to_f32(-16_777_217, Rnd::Z), -16_777_216.0);
        assert_eq!(sat32(f32::NAN), 0.0);
        assert_eq!(sat32(1.5), 1.0);
        assert_eq!(ftz32(f32::from_bits(1)), 0.0);
    }

    #[test]
    fn half_formats_round_trip() {
        for (x, bits) in [
            (1.0, 0x3C00u16),
            (-2.0, 0xC000),
            (65504.0, 0x7BFF),
            (5.960464477539063e-8, 0x0001),
        ] {
            assert_eq!(to_small(x, F16, Rnd::N), bits, "{x}");
            assert_eq!(from_small(bits, F16), x);
        }
        assert_eq!(to_small(65520.0, F16, Rnd::N), 0x7C00);
        assert_eq!(to_small(65520.0, F16, Rnd::Z), 0x7BFF);
        assert_eq!(to_small(1.0 + 2f64.powi(-11), F16, Rnd::N), 0x3C00); // tie to even
        assert_eq!(to_small(1.0, BF16, Rnd::N), 0x3F80);
        assert_eq!(from_small(0x3F80, BF16), 1.0);
        assert!(from_small(0x7E00, F16).is_nan());
        assert_eq!(min32(-0.0, 0.0).to_bits(), (-0.0f32).to_bits());
        assert_eq!(max32(f32::NAN, 1.0), 1.0);
    }
}
