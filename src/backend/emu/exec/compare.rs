//! Comparison and selection (the PTX ISA's "Comparison and Selection Instructions": set, setp,
//! selp, slct), with PTX's ordered and unordered float comparisons.

use super::Warp;
use super::lanes::{as_f64, b32, f32v, rd, sext, tri, trunc};
use crate::backend::emu::decode::*;
use crate::backend::emu::float;

/// Comparison and selection instructions.
#[inline(always)]
pub(super) fn alu(w: &mut Warp, inst: &Inst, mask: u32) {
    let ty = inst.ty;
    let bits = ty.bits();
    let ftz = inst.ftz;
    let fin = move |v: u64| -> f32 {
        let x = f32v(v);
        if ftz { float::ftz32(x) } else { x }
    };
    match (inst.op, ty) {
        (Op::Setp(c, bop), _) => {
            let cty = inst.ty2;
            lanes!(mask, l, {
                let a = rd(&w.regs, inst.a, l);
                let b = rd(&w.regs, inst.b, l);
                let mut t = compare(c, cty, ftz, a, b);
                let mut f = !t;
                if bop != BoolOp::None {
                    let p = (rd(&w.regs, inst.c, l) != 0) != inst.c_neg;
                    (t, f) = match bop {
                        BoolOp::And => (t & p, f & p),
                        BoolOp::Or => (t | p, f | p),
                        _ => (t ^ p, f ^ p),
                    };
                }
                w.regs[inst.d as usize * 32 + l] = t as u64;
                if inst.d2 != NOREG {
                    w.regs[inst.d2 as usize * 32 + l] = f as u64;
                }
            });
        }
        (Op::Set(c, bop), _) => {
            let cty = inst.ty2;
            lanes!(mask, l, {
                let a = rd(&w.regs, inst.a, l);
                let b = rd(&w.regs, inst.b, l);
                let mut t = compare(c, cty, ftz, a, b);
                if bop != BoolOp::None {
                    let p = (rd(&w.regs, inst.c, l) != 0) != inst.c_neg;
                    t = match bop {
                        BoolOp::And => t & p,
                        BoolOp::Or => t | p,
                        _ => t ^ p,
                    };
                }
                w.regs[inst.d as usize * 32 + l] = match ty {
                    Ty::F32 => b32(if t { 1.0 } else { 0.0 }),
                    _ => {
                        if t {
                            trunc(u64::MAX, bits)
                        } else {
                            0
                        }
                    }
                };
            });
        }
        (Op::Selp, _) => {
            let d = inst.d as usize * 32;
            lanes!(mask, l, {
                let p = (rd(&w.regs, inst.c, l) != 0) != inst.c_neg;
                w.regs[d + l] = if p {
                    rd(&w.regs, inst.a, l)
                } else {
                    rd(&w.regs, inst.b, l)
                };
            });
        }
        (Op::Slct, _) => {
            let cty = inst.ty2;
            tri(w, inst, mask, |a, b, c| {
                let ge = if cty == Ty::F32 {
                    fin(c) >= 0.0
                } else {
                    sext(c, 32) >= 0
                };
                if ge { a } else { b }
            })
        }
        _ => {}
    }
}

fn cmp_f(c: Cmp, a: f64, b: f64) -> bool {
    let un = a.is_nan() || b.is_nan();
    match c {
        Cmp::Eq => a == b,
        Cmp::Ne => a != b && !un,
        Cmp::Lt => a < b,
        Cmp::Le => a <= b,
        Cmp::Gt => a > b,
        Cmp::Ge => a >= b,
        Cmp::Equ => un || a == b,
        Cmp::Neu => a != b,
        Cmp::Ltu => un || a < b,
        Cmp::Leu => un || a <= b,
        Cmp::Gtu => un || a > b,
        Cmp::Geu => un || a >= b,
        Cmp::Num => !un,
        Cmp::Nan => un,
    }
}
fn cmp_i<T: Ord>(c: Cmp, a: T, b: T) -> bool {
    match c {
        Cmp::Eq | Cmp::Equ => a == b,
        Cmp::Ne | Cmp::Neu => a != b,
        Cmp::Lt | Cmp::Ltu => a < b,
        Cmp::Le | Cmp::Leu => a <= b,
        Cmp::Gt | Cmp::Gtu => a > b,
        Cmp::Ge | Cmp::Geu => a >= b,
        Cmp::Num => true,
        Cmp::Nan => false,
    }
}

#[inline]
fn compare(c: Cmp, ty: Ty, ftz: bool, a: u64, b: u64) -> bool {
    let bits = ty.bits();
    match ty {
        Ty::F32 => {
            let (mut x, mut y) = (f32v(a), f32v(b));
            if ftz {
                x = float::ftz32(x);
                y = float::ftz32(y);
            }
            cmp_f(c, x as f64, y as f64)
        }
        Ty::F64 | Ty::F16 | Ty::BF16 => cmp_f(c, as_f64(a, ty), as_f64(b, ty)),
        t if t.signed() => cmp_i(c, sext(a, bits), sext(b, bits)),
        _ => cmp_i(c, trunc(a, bits), trunc(b, bits)),
    }
}
