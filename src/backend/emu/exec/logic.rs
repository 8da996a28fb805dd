//! Logic and shift (the PTX ISA's "Logic and Shift Instructions": and, or, xor, not, cnot, lop3,
//! shf, shl, shr), on predicates and on integers of the type's width.

use super::Warp;
use super::lanes::{bin, rd, sext, tri, trunc, un};
use crate::backend::emu::decode::*;

/// Logic and shift instructions.
#[inline(always)]
pub(super) fn alu(w: &mut Warp, inst: &Inst, mask: u32) {
    let ty = inst.ty;
    let bits = ty.bits();
    match (inst.op, ty) {
        (Op::And, Ty::Pred) => bin(w, inst, mask, |a, b| ((a != 0) & (b != 0)) as u64),
        (Op::Or, Ty::Pred) => bin(w, inst, mask, |a, b| ((a != 0) | (b != 0)) as u64),
        (Op::Xor, Ty::Pred) => bin(w, inst, mask, |a, b| ((a != 0) ^ (b != 0)) as u64),
        (Op::Not, Ty::Pred) => un(w, inst, mask, |a| (a == 0) as u64),
        (Op::And, _) => bin(w, inst, mask, |a, b| trunc(a & b, bits)),
        (Op::Or, _) => bin(w, inst, mask, |a, b| trunc(a | b, bits)),
        (Op::Xor, _) => bin(w, inst, mask, |a, b| trunc(a ^ b, bits)),
        (Op::Not, _) => un(w, inst, mask, |a| trunc(!a, bits)),
        (Op::CNot, _) => un(w, inst, mask, |a| (trunc(a, bits) == 0) as u64),
        (Op::Shl, _) => bin(w, inst, mask, |a, b| {
            let s = trunc(b, 32);
            if s >= bits as u64 {
                0
            } else {
                trunc(a << s, bits)
            }
        }),
        (Op::Shr, _) => bin(w, inst, mask, |a, b| {
            let s = trunc(b, 32).min(bits as u64 - 1 + (!ty.signed()) as u64);
            if ty.signed() {
                trunc((sext(a, bits) >> s.min(63)) as u64, bits)
            } else if s >= bits as u64 {
                0
            } else {
                trunc(a, bits) >> s
            }
        }),
        (Op::Shf { left, clamp }, _) => tri(w, inst, mask, |a, b, c| {
            let n = if clamp { trunc(c, 32).min(32) } else { c & 31 };
            let v = (trunc(b, 32) << 32) | trunc(a, 32);
            if left {
                trunc((v << n) >> 32, 32)
            } else {
                trunc(v >> n, 32)
            }
        }),
        (Op::Lop3, _) => {
            let d = inst.d as usize * 32;
            lanes!(mask, l, {
                let a = rd(&w.regs, inst.a, l);
                let b = rd(&w.regs, inst.b, l);
                let c = rd(&w.regs, inst.c, l);
                let lut = rd(&w.regs, inst.e, l) as u8;
                let mut r = 0u64;
                for i in 0..bits {
                    let idx = (((a >> i) & 1) << 2) | (((b >> i) & 1) << 1) | ((c >> i) & 1);
                    r |= (((lut >> idx) & 1) as u64) << i;
                }
                w.regs[d + l] = r;
            });
        }
        _ => {}
    }
}
