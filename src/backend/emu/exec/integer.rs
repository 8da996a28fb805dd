//! Integer arithmetic (the PTX ISA's "Integer Arithmetic Instructions": add, sub, mul, mad,
//! mul24, mad24, sad, div, rem, abs, neg, min, max, popc, clz, bfind, brev, bfe, bfi, dp4a,
//! dp2a) and extended-precision arithmetic ("Extended-Precision Integer Arithmetic": add.cc,
//! addc, sub.cc, subc, mad.cc, madc): computed wide, kept to the type's width.

use super::Warp;
use super::lanes::{bin, rd, sext, tri, trunc, un};
use crate::backend::emu::decode::*;

/// add, sub, mul, mul24, mad, mad24 (and their .sat, .hi, .wide forms).
#[inline(always)]
pub(super) fn add_mul(w: &mut Warp, inst: &Inst, mask: u32) {
    let ty = inst.ty;
    let bits = ty.bits();
    let sat = inst.sat;
    match (inst.op, ty) {
        // Integer arithmetic: compute wide, keep the type's width.
        (Op::Add, _) => {
            if sat && ty == Ty::S32 {
                bin(w, inst, mask, |a, b| {
                    trunc(
                        (sext(a, 32) + sext(b, 32)).clamp(i32::MIN as i64, i32::MAX as i64) as u64,
                        32,
                    )
                })
            } else {
                bin(w, inst, mask, |a, b| trunc(a.wrapping_add(b), bits))
            }
        }
        (Op::Sub, _) => {
            if sat && ty == Ty::S32 {
                bin(w, inst, mask, |a, b| {
                    trunc(
                        (sext(a, 32) - sext(b, 32)).clamp(i32::MIN as i64, i32::MAX as i64) as u64,
                        32,
                    )
                })
            } else {
                bin(w, inst, mask, |a, b| trunc(a.wrapping_sub(b), bits))
            }
        }
        (Op::Mul(mode) | Op::Mul24(mode), _) => {
            let sg = ty.signed();
            let is24 = matches!(inst.op, Op::Mul24(_));
            bin(w, inst, mask, |a, b| {
                let (a, b) = if is24 {
                    (sext(a, 24) as u64, sext(b, 24) as u64)
                } else {
                    (a, b)
                };
                let p: i128 = if sg {
                    sext(a, bits) as i128 * sext(b, bits) as i128
                } else {
                    trunc(a, bits) as i128 * trunc(b, bits) as i128
                };
                match mode {
                    MulMode::Lo => trunc(p as u64, bits),
                    MulMode::Hi => trunc((p >> if is24 { 16 } else { bits }) as u64, bits),
                    MulMode::Wide => trunc(p as u64, (bits * 2).min(64)),
                }
            })
        }
        (Op::Mad(mode) | Op::Mad24(mode), _) => {
            let sg = ty.signed();
            tri(w, inst, mask, |a, b, c| {
                let p: i128 = if sg {
                    sext(a, bits) as i128 * sext(b, bits) as i128
                } else {
                    trunc(a, bits) as i128 * trunc(b, bits) as i128
                };
                match mode {
                    MulMode::Lo => trunc((p as u64).wrapping_add(c), bits),
                    MulMode::Hi => {
                        let h = (p >> bits) as u64;
                        if sat && ty == Ty::S32 {
                            trunc(
                                (sext(h, 32) + sext(c, 32)).clamp(i32::MIN as i64, i32::MAX as i64)
                                    as u64,
                                32,
                            )
                        } else {
                            trunc(h.wrapping_add(c), bits)
                        }
                    }
                    MulMode::Wide => trunc((p as u64).wrapping_add(c), (bits * 2).min(64)),
                }
            })
        }
        _ => {}
    }
}

/// dp4a, dp2a and sad: sums of products and of absolute differences.
#[inline(always)]
pub(super) fn dot(w: &mut Warp, inst: &Inst, mask: u32) {
    let ty = inst.ty;
    let bits = ty.bits();
    match (inst.op, ty) {
        (Op::Dp4a { a_signed, b_signed }, _) => tri(w, inst, mask, |a, b, c| {
            let part = |v: u64, k: u32, signed: bool| -> i64 {
                let x = (v >> (8 * k)) & 0xff;
                if signed {
                    x as u8 as i8 as i64
                } else {
                    x as i64
                }
            };
            let s = (0..4).fold(c as u32 as i32 as i64, |s, k| {
                s.wrapping_add(part(a, k, a_signed).wrapping_mul(part(b, k, b_signed)))
            });
            s as u64 & 0xffff_ffff
        }),
        (
            Op::Dp2a {
                hi,
                a_signed,
                b_signed,
            },
            _,
        ) => tri(w, inst, mask, |a, b, c| {
            let half = |k: u32| -> i64 {
                let x = (a >> (16 * k)) & 0xffff;
                if a_signed {
                    x as u16 as i16 as i64
                } else {
                    x as i64
                }
            };
            let byte = |k: u32| -> i64 {
                let x = (b >> (8 * (k + if hi { 2 } else { 0 }))) & 0xff;
                if b_signed {
                    x as u8 as i8 as i64
                } else {
                    x as i64
                }
            };
            let s = (0..2).fold(c as u32 as i32 as i64, |s, k| {
                s.wrapping_add(half(k).wrapping_mul(byte(k)))
            });
            s as u64 & 0xffff_ffff
        }),
        (Op::Sad, _) => tri(w, inst, mask, |a, b, c| {
            let d = if ty.signed() {
                sext(a, bits).abs_diff(sext(b, bits))
            } else {
                trunc(a, bits).abs_diff(trunc(b, bits))
            };
            trunc(d.wrapping_add(c), bits)
        }),
        _ => {}
    }
}

/// div, rem, abs, neg, min, max.
#[inline(always)]
pub(super) fn div_min_max(w: &mut Warp, inst: &Inst, mask: u32) {
    let ty = inst.ty;
    let bits = ty.bits();
    match (inst.op, ty) {
        (Op::Div, _) => bin(w, inst, mask, |a, b| {
            if ty.signed() {
                let (x, y) = (sext(a, bits), sext(b, bits));
                if y == 0 {
                    trunc(u64::MAX, bits)
                } else {
                    trunc(x.wrapping_div(y) as u64, bits)
                }
            } else {
                let (x, y) = (trunc(a, bits), trunc(b, bits));
                x.checked_div(y).unwrap_or(trunc(u64::MAX, bits))
            }
        }),
        (Op::Rem, _) => bin(w, inst, mask, |a, b| {
            if ty.signed() {
                let (x, y) = (sext(a, bits), sext(b, bits));
                if y == 0 {
                    trunc(x as u64, bits)
                } else {
                    trunc(x.wrapping_rem(y) as u64, bits)
                }
            } else {
                let (x, y) = (trunc(a, bits), trunc(b, bits));
                if y == 0 { x } else { x % y }
            }
        }),
        (Op::Abs, _) => un(w, inst, mask, |a| {
            trunc(sext(a, bits).wrapping_abs() as u64, bits)
        }),
        (Op::Neg, _) => un(w, inst, mask, |a| {
            trunc((a as i64).wrapping_neg() as u64, bits)
        }),
        (Op::Min, _) => bin(w, inst, mask, |a, b| {
            if ty.signed() {
                trunc(sext(a, bits).min(sext(b, bits)) as u64, bits)
            } else {
                trunc(a, bits).min(trunc(b, bits))
            }
        }),
        (Op::Max, _) => bin(w, inst, mask, |a, b| {
            if ty.signed() {
                trunc(sext(a, bits).max(sext(b, bits)) as u64, bits)
            } else {
                trunc(a, bits).max(trunc(b, bits))
            }
        }),
        _ => {}
    }
}

/// popc, clz, brev, bfe, bfi, bfind.
#[inline(always)]
pub(super) fn bits(w: &mut Warp, inst: &Inst, mask: u32) {
    let ty = inst.ty;
    let bits = ty.bits();
    match (inst.op, ty) {
        (Op::Popc, _) => un(w, inst, mask, |a| trunc(a, bits).count_ones() as u64),
        (Op::Clz, _) => un(w, inst, mask, |a| {
            (trunc(a, bits).leading_zeros() - (64 - bits)) as u64
        }),
        (Op::Brev, _) => un(w, inst, mask, |a| {
            trunc(a, bits).reverse_bits() >> (64 - bits)
        }),
        (Op::Bfe, _) => tri(w, inst, mask, |a, b, c| {
            let pos = trunc(b, 8);
            let len = trunc(c, 8);
            let msb = bits as u64 - 1;
            let sbit = if ty.signed() {
                if len == 0 {
                    false
                } else {
                    (a >> (pos + len - 1).min(msb)) & 1 != 0
                }
            } else {
                false
            };
            let mut d = 0u64;
            for i in 0..bits as u64 {
                let bit = if i < len && pos + i <= msb {
                    (a >> (pos + i)) & 1 != 0
                } else {
                    sbit
                };
                d |= (bit as u64) << i;
            }
            d
        }),
        (Op::Bfi, _) => {
            let d = inst.d as usize * 32;
            lanes!(mask, l, {
                let a = rd(&w.regs, inst.a, l);
                let b = rd(&w.regs, inst.b, l);
                let pos = trunc(rd(&w.regs, inst.c, l), 8);
                let len = trunc(rd(&w.regs, inst.e, l), 8);
                let mut r = b;
                for i in 0..len {
                    if pos + i >= bits as u64 {
                        break;
                    }
                    r = (r & !(1 << (pos + i))) | (((a >> i) & 1) << (pos + i));
                }
                w.regs[d + l] = trunc(r, bits);
            });
        }
        (Op::Bfind { shiftamt }, _) => un(w, inst, mask, |a| {
            let v = trunc(a, bits);
            let v = if ty.signed() && sext(v, bits) < 0 {
                trunc(!v, bits)
            } else {
                v
            };
            if v == 0 {
                0xffff_ffff
            } else {
                let pos = 63 - v.leading_zeros() as u64;
                if shiftamt { bits as u64 - 1 - pos } else { pos }
            }
        }),
        _ => {}
    }
}

/// Extended precision: add.cc, addc, sub.cc, subc, mad.cc, madc, through the carry flag
/// (the last special register).
#[inline(always)]
pub(super) fn carry(w: &mut Warp, inst: &Inst, mask: u32) {
    let bits = inst.ty.bits();
    if let Op::Carry {
        sub,
        mul,
        cin,
        cout,
    } = inst.op
    {
        let cc = (SPECIALS.len() - 1) * 32;
        let d = inst.d as usize * 32;
        lanes!(mask, l, {
            let a = trunc(rd(&w.regs, inst.a, l), bits) as u128;
            let b = trunc(rd(&w.regs, inst.b, l), bits) as u128;
            let cf = if cin { w.regs[cc + l] as u128 & 1 } else { 0 };
            let full: u128 = match mul {
                Some(mode) => {
                    let p = a * b;
                    let part = if mode == MulMode::Hi {
                        p >> bits
                    } else {
                        p & ((1u128 << bits) - 1)
                    };
                    part + trunc(rd(&w.regs, inst.c, l), bits) as u128 + cf
                }
                None if sub => a.wrapping_sub(b).wrapping_sub(cf),
                None => a + b + cf,
            };
            w.regs[d + l] = trunc(full as u64, bits);
            if cout {
                // For subtraction the flag is the borrow.
                let out = if sub && mul.is_none() {
                    a < b + cf
                } else {
                    full >> bits != 0
                };
                w.regs[cc + l] = out as u64;
            }
        });
    }
}
