//! The arithmetic precision a lab asks for, and what a computation in another precision looks
//! like (for the tests of the tolerance model and the docs' numbers).
//!
//! Tolerance expressions read the precision's unit roundoff as `u` (`eps` stays float's): a
//! rubric writes its error model once, e.g. `sum: "2.5 * sqrt(K) * (u + eps)"` for a
//! K-term dot product (the student's rounding in the lab's precision plus the float
//! reference's own), and a lab that declares `precision: fp16` gets the bound fp16 allows.
//! Each tolerance is also evaluated a second time with a much coarser `u` (see
//! [`Precision::coarse_roundoff`]): an output wrong beyond the lab's bound but within that
//! coarse one is "less precise than float accumulation allows" (a kernel that multiplied in
//! `__half` or on TF32 tensor cores), not a logic error, and the report says so.

use serde::{Deserialize, Serialize};

/// A floating-point format a kernel computes in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, Hash)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    Fp64,
    #[default]
    Fp32,
    /// Tensor cores' TF32: float's exponent, 10 explicit mantissa bits.
    Tf32,
    /// IEEE half: 5 exponent bits, 10 mantissa bits.
    Fp16,
    /// bfloat16: float's exponent, 7 mantissa bits.
    Bf16,
}

impl Precision {
    /// Explicit mantissa bits.
    pub fn mantissa_bits(self) -> u32 {
        match self {
            Precision::Fp64 => 52,
            Precision::Fp32 => 23,
            Precision::Tf32 | Precision::Fp16 => 10,
            Precision::Bf16 => 7,
        }
    }

    /// Unit roundoff `u`: the largest relative error of one rounding to nearest.
    pub fn unit_roundoff(self) -> f64 {
        2f64.powi(-(self.mantissa_bits() as i32 + 1))
    }

    /// The `u` a tolerance is evaluated with a second time to tell "imprecise" from "wrong":
    /// bfloat16's (or 8 times the lab's own `u`, if that is coarser still).
    pub fn coarse_roundoff(self) -> f64 {
        Precision::Bf16
            .unit_roundoff()
            .max(8.0 * self.unit_roundoff())
    }

    /// The rubric's name (`fp32`).
    pub fn key(self) -> &'static str {
        match self {
            Precision::Fp64 => "fp64",
            Precision::Fp32 => "fp32",
            Precision::Tf32 => "tf32",
            Precision::Fp16 => "fp16",
            Precision::Bf16 => "bf16",
        }
    }

    /// The word reports use: "less precise than float accumulation allows".
    pub fn word(self) -> &'static str {
        match self {
            Precision::Fp64 => "double",
            Precision::Fp32 => "float",
            Precision::Tf32 => "TF32",
            Precision::Fp16 => "half (fp16)",
            Precision::Bf16 => "bfloat16",
        }
    }

    /// `x` rounded to this precision (round to nearest, ties to even), as the hardware's
    /// conversion does: fp16 overflows to ±inf past 65504 and has subnormals below 2^-14;
    /// TF32 and bf16 keep float's exponent range. NaN stays NaN.
    pub fn round(self, x: f32) -> f32 {
        match self {
            Precision::Fp64 | Precision::Fp32 => x,
            Precision::Tf32 | Precision::Bf16 => round_bits(x, 23 - self.mantissa_bits()),
            Precision::Fp16 => {
                if !x.is_finite() {
                    return x;
                }
                let a = x.abs();
                if a >= 65520.0 {
                    // Past the largest half (65504) by half an ulp or more: infinity.
                    return f32::INFINITY.copysign(x);
                }
                if a < 2f32.powi(-14) {
                    // Subnormal halves: a fixed step of 2^-24.
                    let step = 2f32.powi(-24);
                    let q = (a / step).round_ties_even() * step;
                    return q.copysign(x);
                }
                round_bits(x, 13)
            }
        }
    }
}

/// Round `x` to nearest-even with its `drop` lowest mantissa bits cleared.
fn round_bits(x: f32, drop: u32) -> f32 {
    if !x.is_finite() || drop == 0 {
        return x;
    }
    let b = x.to_bits();
    let half = 1u32 << (drop - 1);
    let mask = (1u32 << drop) - 1;
    let low = b & mask;
    let mut r = b & !mask;
    if low > half || (low == half && (r >> drop) & 1 == 1) {
        // A carry into the exponent is the right answer (it rounds up to the next binade, or
        // to infinity).
        r = r.wrapping_add(1 << drop);
    }
    f32::from_bits(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_roundoffs() {
        assert_eq!(
            Precision::Fp32.unit_roundoff(),
            f64::from(f32::EPSILON) / 2.0
        );
        assert_eq!(Precision::Fp64.unit_roundoff(), f64::EPSILON / 2.0);
        assert_eq!(Precision::Fp16.unit_roundoff(), 2f64.powi(-11));
        assert_eq!(Precision::Tf32.unit_roundoff(), 2f64.powi(-11));
        assert_eq!(Precision::Bf16.unit_roundoff(), 2f64.powi(-8));
        assert_eq!(Precision::Fp32.coarse_roundoff(), 2f64.powi(-8));
        assert_eq!(Precision::Bf16.coarse_roundoff(), 2f64.powi(-5));
        let p: Precision = serde_yaml::from_str("tf32").unwrap();
        assert_eq!((p, p.key()), (Precision::Tf32, "tf32"));
        assert!(serde_yaml::from_str::<Precision>("fp8").is_err());
    }

    #[test]
    fn rounding_matches_the_formats() {
        let h = Precision::Fp16;
        // 1 + 2^-11 is a tie between 1 and 1 + 2^-10: to even, 1.
        assert_eq!(h.round(1.0 + 2f32.powi(-11)), 1.0);
        assert_eq!(
            h.round(1.0 + 3.0 * 2f32.powi(-11)),
            1.0 + 2.0 * 2f32.powi(-10)
        );
        assert_eq!(h.round(65504.0), 65504.0);
        assert_eq!(h.round(70000.0), f32::INFINITY);
        assert_eq!(h.round(-1e-8), -0.0);
        assert_eq!(h.round(3.0 * 2f32.powi(-25)), 2f32.powi(-23));
        assert!(h.round(f32::NAN).is_nan());
        // 0.1 in half is 0.0999755859375.
        assert_eq!(h.round(0.1), 0.099_975_586);
        // bf16 keeps 8 significant bits; TF32 11.
        assert_eq!(Precision::Bf16.round(1.0 + 2f32.powi(-8)), 1.0);
        assert_eq!(Precision::Bf16.round(257.0), 256.0);
        assert_eq!(Precision::Tf32.round(2049.0), 2048.0);
        assert_eq!(Precision::Tf32.round(2050.0), 2050.0);
        assert_eq!(Precision::Tf32.round(f32::MAX), f32::INFINITY);
        assert_eq!(Precision::Fp32.round(0.1), 0.1);
        // The relative error of a rounding stays within u.
        for i in 1..2000 {
            let x = i as f32 * 0.737_3;
            for p in [Precision::Fp16, Precision::Tf32, Precision::Bf16] {
                let e = ((p.round(x) - x) / x).abs() as f64;
                assert!(e <= p.unit_roundoff(), "{p:?} {x} {e}");
            }
        }
    }
}
