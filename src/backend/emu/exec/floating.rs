//! Floating-point arithmetic on f32 and f64, and half-precision arithmetic (f16, bf16 and their
//! pairs, computed in f64 and rounded once): the PTX ISA's "Floating-Point Instructions" and
//! "Half Precision Floating-Point Instructions".

use super::Warp;
use super::lanes::{as_f64, b32, bin, f32v, tri, un};
use crate::backend::emu::decode::*;
use crate::backend::emu::float::{self, Rnd};

/// Half-precision arithmetic (add, sub, mul, fma, min, max, neg, abs on f16, bf16, f16x2,
/// bf16x2); false for any other instruction.
#[inline(always)]
pub(super) fn half(w: &mut Warp, inst: &Inst, mask: u32) -> bool {
    let ty = inst.ty;
    let rnd = inst.rnd;
    let sat = inst.sat;
    let small = match ty {
        Ty::F16 | Ty::F16x2 => Some(float::F16),
        Ty::BF16 | Ty::BF16x2 => Some(float::BF16),
        _ => None,
    };
    let pair = matches!(ty, Ty::F16x2 | Ty::BF16x2);
    // Half formats: compute in f64 and round once.
    if let Some(fmt) = small
        && matches!(
            inst.op,
            Op::Add | Op::Sub | Op::Mul(_) | Op::Fma | Op::Min | Op::Max | Op::Neg | Op::Abs
        )
    {
        let op = inst.op;
        let f = move |x: f64, y: f64, z: f64| -> f64 {
            let r = match op {
                Op::Add => x + y,
                Op::Sub => x - y,
                Op::Mul(_) => x * y,
                Op::Fma => x.mul_add(y, z),
                Op::Min => float::min64(x, y),
                Op::Max => float::max64(x, y),
                Op::Neg => -x,
                _ => x.abs(),
            };
            if sat {
                if r.is_nan() { 0.0 } else { r.clamp(0.0, 1.0) }
            } else {
                r
            }
        };
        if pair {
            tri(w, inst, mask, |a, b, c| half2(a, b, c, fmt, f, rnd));
        } else {
            tri(w, inst, mask, |a, b, c| {
                let x = float::from_small(a as u16, fmt);
                let y = float::from_small(b as u16, fmt);
                let z = float::from_small(c as u16, fmt);
                float::to_small(f(x, y, z), fmt, rnd) as u64
            });
        }
        return true;
    }
    false
}

/// f32 and f64 arithmetic, the f32 approximations (sin, cos, ex2, lg2, tanh) and testp.
#[inline(always)]
pub(super) fn alu(w: &mut Warp, inst: &Inst, mask: u32) {
    let ty = inst.ty;
    let rnd = inst.rnd;
    let ftz = inst.ftz;
    let sat = inst.sat;
    let f32post = move |x: f32| -> u64 {
        let x = if ftz { float::ftz32(x) } else { x };
        b32(if sat { float::sat32(x) } else { x })
    };
    let fin = move |v: u64| -> f32 {
        let x = f32v(v);
        if ftz { float::ftz32(x) } else { x }
    };
    match (inst.op, ty) {
        (Op::Add, Ty::F32) => {
            if rnd == Rnd::N && !ftz && !sat {
                bin(w, inst, mask, |a, b| b32(f32v(a) + f32v(b)))
            } else {
                bin(w, inst, mask, |a, b| {
                    f32post(float::add32(fin(a), fin(b), rnd))
                })
            }
        }
        (Op::Sub, Ty::F32) => bin(w, inst, mask, |a, b| {
            f32post(float::add32(fin(a), -fin(b), rnd))
        }),
        (Op::Mul(_), Ty::F32) => {
            if rnd == Rnd::N && !ftz && !sat {
                bin(w, inst, mask, |a, b| b32(f32v(a) * f32v(b)))
            } else {
                bin(w, inst, mask, |a, b| {
                    f32post(float::mul32(fin(a), fin(b), rnd))
                })
            }
        }
        (Op::Fma, Ty::F32) => {
            if rnd == Rnd::N && !ftz && !sat && fma_fast(w, inst, mask) {
                return;
            }
            tri(w, inst, mask, |a, b, c| {
                f32post(float::fma32(fin(a), fin(b), fin(c), rnd))
            })
        }
        (Op::Div, Ty::F32) => bin(w, inst, mask, |a, b| {
            let (x, y) = (fin(a), fin(b));
            f32post(if inst.approx {
                x / y
            } else {
                float::div32(x, y, rnd)
            })
        }),
        (Op::Add, Ty::F64) => bin(w, inst, mask, |a, b| {
            float::add64(f64::from_bits(a), f64::from_bits(b), rnd).to_bits()
        }),
        (Op::Sub, Ty::F64) => bin(w, inst, mask, |a, b| {
            float::add64(f64::from_bits(a), -f64::from_bits(b), rnd).to_bits()
        }),
        (Op::Mul(_), Ty::F64) => bin(w, inst, mask, |a, b| {
            float::mul64(f64::from_bits(a), f64::from_bits(b), rnd).to_bits()
        }),
        (Op::Fma, Ty::F64) => tri(w, inst, mask, |a, b, c| {
            float::fma64(f64::from_bits(a), f64::from_bits(b), f64::from_bits(c), rnd).to_bits()
        }),
        (Op::Div, Ty::F64) => bin(w, inst, mask, |a, b| {
            float::div64(f64::from_bits(a), f64::from_bits(b), rnd).to_bits()
        }),
        (Op::Min, Ty::F32) => bin(w, inst, mask, |a, b| f32post(float::min32(fin(a), fin(b)))),
        (Op::Max, Ty::F32) => bin(w, inst, mask, |a, b| f32post(float::max32(fin(a), fin(b)))),
        (Op::Min, Ty::F64) => bin(w, inst, mask, |a, b| {
            float::min64(f64::from_bits(a), f64::from_bits(b)).to_bits()
        }),
        (Op::Max, Ty::F64) => bin(w, inst, mask, |a, b| {
            float::max64(f64::from_bits(a), f64::from_bits(b)).to_bits()
        }),
        (Op::Abs, Ty::F32) => un(w, inst, mask, |a| b32(fin(a).abs())),
        (Op::Neg, Ty::F32) => un(w, inst, mask, |a| b32(-fin(a))),
        (Op::Abs, Ty::F64) => un(w, inst, mask, |a| a & !(1 << 63)),
        (Op::Neg, Ty::F64) => un(w, inst, mask, |a| a ^ (1 << 63)),
        (Op::Copysign, Ty::F32) => bin(w, inst, mask, |a, b| (b & 0x7fff_ffff) | (a & 0x8000_0000)),
        (Op::Copysign, Ty::F64) => bin(w, inst, mask, |a, b| (b & !(1 << 63)) | (a & (1 << 63))),
        (Op::Rcp, Ty::F32) => un(w, inst, mask, |a| {
            f32post(if inst.approx {
                1.0 / fin(a)
            } else {
                float::div32(1.0, fin(a), rnd)
            })
        }),
        (Op::Rcp, Ty::F64) => un(w, inst, mask, |a| {
            float::div64(1.0, f64::from_bits(a), rnd).to_bits()
        }),
        (Op::Sqrt, Ty::F32) => un(w, inst, mask, |a| {
            f32post(float::sqrt32(
                fin(a),
                if inst.approx { Rnd::N } else { rnd },
            ))
        }),
        (Op::Sqrt, Ty::F64) => un(w, inst, mask, |a| {
            float::sqrt64(f64::from_bits(a), rnd).to_bits()
        }),
        (Op::Rsqrt, Ty::F32) => un(w, inst, mask, |a| f32post(1.0 / fin(a).sqrt())),
        (Op::Rsqrt, Ty::F64) => un(w, inst, mask, |a| {
            (1.0 / f64::from_bits(a).sqrt()).to_bits()
        }),
        (Op::Sin, _) => un(w, inst, mask, |a| f32post(fin(a).sin())),
        (Op::Cos, _) => un(w, inst, mask, |a| f32post(fin(a).cos())),
        (Op::Ex2, _) => un(w, inst, mask, |a| f32post(fin(a).exp2())),
        (Op::Lg2, _) => un(w, inst, mask, |a| f32post(fin(a).log2())),
        (Op::Tanh, _) => un(w, inst, mask, |a| f32post(fin(a).tanh())),
        (Op::Testp(k), _) => un(w, inst, mask, |a| {
            let x = as_f64(a, ty);
            let r = match k {
                0 => x.is_finite(),
                1 => x.is_infinite(),
                2 => !x.is_nan(),
                3 => x.is_nan(),
                4 => {
                    if ty == Ty::F32 {
                        f32v(a).is_normal()
                    } else {
                        x.is_normal()
                    }
                }
                _ => {
                    if ty == Ty::F32 {
                        f32v(a).is_subnormal()
                    } else {
                        x.is_subnormal()
                    }
                }
            };
            r as u64
        }),
        _ => {}
    }
}

/// fma.rn.f32 on registers with the CPU's fused multiply-add when it has one (without it,
/// `mul_add` is a libm call per lane).
fn fma_fast(w: &mut Warp, inst: &Inst, mask: u32) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        if let (Src::R(a), Src::R(b), Src::R(c)) = (inst.a, inst.b, inst.c)
            && std::is_x86_feature_detected!("fma")
        {
            let idx = [
                inst.d as usize * 32,
                a as usize * 32,
                b as usize * 32,
                c as usize * 32,
            ];
            // SAFETY: the CPU supports FMA (checked just above).
            unsafe { fma_lanes(&mut w.regs, idx, mask) };
            return true;
        }
    }
    let _ = (w, inst, mask);
    false
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "fma")]
fn fma_lanes(regs: &mut [u64], [d, a, b, c]: [usize; 4], mask: u32) {
    lanes!(mask, l, {
        regs[d + l] = b32(f32v(regs[a + l]).mul_add(f32v(regs[b + l]), f32v(regs[c + l])));
    });
}

/// Lanewise f16x2/bf16x2 arithmetic through f64 and one rounding.
fn half2(a: u64, b: u64, c: u64, fmt: float::Fmt, f: impl Fn(f64, f64, f64) -> f64, m: Rnd) -> u64 {
    let mut r = 0u64;
    for k in 0..2 {
        let s = 16 * k;
        let x = float::from_small((a >> s) as u16, fmt);
        let y = float::from_small((b >> s) as u16, fmt);
        let z = float::from_small((c >> s) as u16, fmt);
        r |= (float::to_small(f(x, y, z), fmt, m) as u64) << s;
    }
    r
}
