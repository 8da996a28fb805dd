//! Atomic operations (atom, red: the PTX ISA's "Parallel Synchronization and Communication
//! Instructions"; redux.sync's reductions too): the new value from the old one and the
//! operands. `memory.rs` does the access around it.

use super::lanes::{b32, f32v, sext, trunc};
use crate::backend::emu::decode::{AtomOp, Ty};
use crate::backend::emu::float::{self, Rnd};

/// The value an atomic `op` of type `ty` leaves where `old` was (`c`: cas's new value).
#[inline]
pub(super) fn atom_apply(op: AtomOp, ty: Ty, old: u64, b: u64, c: u64) -> u64 {
    let bits = ty.bits();
    let r = match (op, ty) {
        (AtomOp::Add, Ty::F32) => b32(f32v(old) + f32v(b)),
        (AtomOp::Add, Ty::F64) => (f64::from_bits(old) + f64::from_bits(b)).to_bits(),
        (AtomOp::Add, Ty::F16) => {
            let s =
                float::from_small(old as u16, float::F16) + float::from_small(b as u16, float::F16);
            float::to_small(s, float::F16, Rnd::N) as u64
        }
        (AtomOp::Add, _) => old.wrapping_add(b),
        (AtomOp::Min, Ty::F32) => b32(float::min32(f32v(old), f32v(b))),
        (AtomOp::Max, Ty::F32) => b32(float::max32(f32v(old), f32v(b))),
        (AtomOp::Min, Ty::F64) => float::min64(f64::from_bits(old), f64::from_bits(b)).to_bits(),
        (AtomOp::Max, Ty::F64) => float::max64(f64::from_bits(old), f64::from_bits(b)).to_bits(),
        (AtomOp::Min, t) if t.signed() => sext(old, bits).min(sext(b, bits)) as u64,
        (AtomOp::Max, t) if t.signed() => sext(old, bits).max(sext(b, bits)) as u64,
        (AtomOp::Min, _) => trunc(old, bits).min(trunc(b, bits)),
        (AtomOp::Max, _) => trunc(old, bits).max(trunc(b, bits)),
        (AtomOp::Inc, _) => {
            if trunc(old, bits) >= trunc(b, bits) {
                0
            } else {
                old.wrapping_add(1)
            }
        }
        (AtomOp::Dec, _) => {
            if trunc(old, bits) == 0 || trunc(old, bits) > trunc(b, bits) {
                b
            } else {
                old - 1
            }
        }
        (AtomOp::Exch, _) => b,
        (AtomOp::Cas, _) => {
            if trunc(old, bits) == trunc(b, bits) {
                c
            } else {
                old
            }
        }
        (AtomOp::And, _) => old & b,
        (AtomOp::Or, _) => old | b,
        (AtomOp::Xor, _) => old ^ b,
    };
    trunc(r, bits)
}
