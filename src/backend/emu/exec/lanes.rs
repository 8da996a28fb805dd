//! Per-lane plumbing every instruction family shares: the loop over a mask's lanes, operand
//! reads, bit widths, little-endian bytes, and the unary/binary/ternary lane maps.

use super::Warp;
use crate::backend::emu::decode::{Inst, Src, Ty};
use crate::backend::emu::float;

/// Run `$body` once per set bit of `$mask`, with `$l` the lane.
macro_rules! lanes {
    ($mask:expr, $l:ident, $body:block) => {{
        let mut __m: u32 = $mask;
        while __m != 0 {
            let $l = __m.trailing_zeros() as usize;
            __m &= __m - 1;
            $body
        }
    }};
}

#[inline(always)]
pub(super) fn rd(regs: &[u64], s: Src, l: usize) -> u64 {
    match s {
        Src::R(r) => regs[r as usize * 32 + l],
        Src::I(v) => v,
    }
}

#[inline(always)]
pub(super) fn trunc(v: u64, bits: u32) -> u64 {
    if bits >= 64 {
        v
    } else {
        v & ((1u64 << bits) - 1)
    }
}
#[inline(always)]
pub(super) fn sext(v: u64, bits: u32) -> i64 {
    if bits >= 64 {
        v as i64
    } else {
        ((v << (64 - bits)) as i64) >> (64 - bits)
    }
}
#[inline(always)]
pub(super) fn f32v(v: u64) -> f32 {
    f32::from_bits(v as u32)
}
#[inline(always)]
pub(super) fn b32(f: f32) -> u64 {
    f.to_bits() as u64
}

/// Read a value of type `ty` as f64 (floats) for conversions.
#[inline]
pub(super) fn as_f64(v: u64, ty: Ty) -> f64 {
    match ty {
        Ty::F32 => f32v(v) as f64,
        Ty::F64 => f64::from_bits(v),
        Ty::F16 => float::from_small(v as u16, float::F16),
        Ty::BF16 => float::from_small(v as u16, float::BF16),
        _ => 0.0,
    }
}

#[inline(always)]
pub(super) fn le(b: &[u8]) -> u64 {
    match b.len() {
        1 => b[0] as u64,
        2 => u16::from_le_bytes([b[0], b[1]]) as u64,
        4 => u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as u64,
        8 => u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
        n => {
            let mut x = [0u8; 8];
            x[..n.min(8)].copy_from_slice(&b[..n.min(8)]);
            u64::from_le_bytes(x)
        }
    }
}

#[inline(always)]
pub(super) fn put(dst: &mut [u8], v: u64) {
    match dst.len() {
        1 => dst[0] = v as u8,
        2 => dst.copy_from_slice(&(v as u16).to_le_bytes()),
        4 => dst.copy_from_slice(&(v as u32).to_le_bytes()),
        8 => dst.copy_from_slice(&v.to_le_bytes()),
        n => dst.copy_from_slice(&v.to_le_bytes()[..n]),
    }
}

#[inline(always)]
pub(super) fn un(w: &mut Warp, inst: &Inst, mask: u32, f: impl Fn(u64) -> u64) {
    let d = inst.d as usize * 32;
    lanes!(mask, l, {
        let a = rd(&w.regs, inst.a, l);
        w.regs[d + l] = f(a);
    });
}
#[inline(always)]
pub(super) fn bin(w: &mut Warp, inst: &Inst, mask: u32, f: impl Fn(u64, u64) -> u64) {
    let d = inst.d as usize * 32;
    if let (Src::R(a), Src::R(b)) = (inst.a, inst.b) {
        let (a, b) = (a as usize * 32, b as usize * 32);
        if mask == u32::MAX {
            for l in 0..32 {
                w.regs[d + l] = f(w.regs[a + l], w.regs[b + l]);
            }
            return;
        }
        lanes!(mask, l, {
            w.regs[d + l] = f(w.regs[a + l], w.regs[b + l]);
        });
        return;
    }
    lanes!(mask, l, {
        let a = rd(&w.regs, inst.a, l);
        let b = rd(&w.regs, inst.b, l);
        w.regs[d + l] = f(a, b);
    });
}
#[inline(always)]
pub(super) fn tri(w: &mut Warp, inst: &Inst, mask: u32, f: impl Fn(u64, u64, u64) -> u64) {
    let d = inst.d as usize * 32;
    if let (Src::R(a), Src::R(b), Src::R(c)) = (inst.a, inst.b, inst.c) {
        let (a, b, c) = (a as usize * 32, b as usize * 32, c as usize * 32);
        lanes!(mask, l, {
            w.regs[d + l] = f(w.regs[a + l], w.regs[b + l], w.regs[c + l]);
        });
        return;
    }
    lanes!(mask, l, {
        let a = rd(&w.regs, inst.a, l);
        let b = rd(&w.regs, inst.b, l);
        let c = rd(&w.regs, inst.c, l);
        w.regs[d + l] = f(a, b, c);
    });
}
