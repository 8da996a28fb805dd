//! Data movement and conversion (the PTX ISA's "Data Movement and Conversion Instructions"):
//! mov (registers, vector packing and unpacking, the clock and timer special registers), prmt,
//! cvt (cvt.pack's f16x2/bf16x2 too) and cvta. Loads and stores are in `memory.rs`, shfl in
//! `warp.rs`.

use super::lanes::{as_f64, b32, bin, f32v, rd, sext, tri, trunc, un};
use super::{BlockRunner, Warp};
use crate::backend::emu::decode::*;
use crate::backend::emu::float::{self, Rnd};
use crate::backend::emu::parse::Space;

/// mov, pack, unpack, prmt, cvt and cvta.
#[inline(always)]
pub(super) fn alu(w: &mut Warp, inst: &Inst, mask: u32) {
    let ty = inst.ty;
    let bits = ty.bits();
    let rnd = inst.rnd;
    let ftz = inst.ftz;
    let sat = inst.sat;
    match (inst.op, ty) {
        (Op::Mov, _) => un(w, inst, mask, |a| {
            if ty == Ty::Pred {
                (a != 0) as u64
            } else {
                trunc(a, bits)
            }
        }),
        (Op::Pack, _) => {
            let n = inst.vec as u32;
            let eb = bits / n;
            let d = inst.d as usize * 32;
            lanes!(mask, l, {
                let mut v = 0u64;
                for k in 0..n as usize {
                    v |= trunc(w.regs[inst.vregs[k] as usize * 32 + l], eb) << (eb * k as u32);
                }
                w.regs[d + l] = v;
            });
        }
        (Op::Unpack, _) => {
            let n = inst.vec as u32;
            let eb = bits / n;
            lanes!(mask, l, {
                let v = rd(&w.regs, inst.a, l);
                for k in 0..n as usize {
                    if inst.vregs[k] != NOREG {
                        w.regs[inst.vregs[k] as usize * 32 + l] = trunc(v >> (eb * k as u32), eb);
                    }
                }
            });
        }
        (Op::Prmt, _) => tri(w, inst, mask, |a, b, c| {
            let bytes = (trunc(b, 32) << 32) | trunc(a, 32);
            let mut r = 0u64;
            for k in 0..4 {
                let sel = (c >> (4 * k)) & 0xf;
                let byte = (bytes >> ((sel & 7) * 8)) & 0xff;
                let byte = if sel & 8 != 0 {
                    if byte & 0x80 != 0 { 0xff } else { 0 }
                } else {
                    byte
                };
                r |= byte << (8 * k);
            }
            r
        }),
        (Op::Cvt, Ty::F16x2 | Ty::BF16x2) => {
            let fmt = if ty == Ty::F16x2 {
                float::F16
            } else {
                float::BF16
            };
            bin(w, inst, mask, |a, b| {
                let hi = float::to_small(f32v(a) as f64, fmt, rnd) as u64;
                let lo = float::to_small(f32v(b) as f64, fmt, rnd) as u64;
                (hi << 16) | lo
            })
        }
        (Op::Cvt, _) => {
            let sty = inst.ty2;
            let rnd_int = inst.rnd_int;
            un(w, inst, mask, |a| cvt(a, ty, sty, rnd, rnd_int, ftz, sat))
        }
        (Op::Cvta { to }, _) => {
            let win = match inst.space {
                Space::Shared => SHARED_WIN,
                Space::Local => LOCAL_WIN,
                Space::Const => CONST_WIN,
                _ => 0,
            };
            un(w, inst, mask, |a| {
                trunc(
                    if to {
                        a.wrapping_sub(win)
                    } else {
                        a.wrapping_add(win)
                    },
                    bits,
                )
            })
        }
        _ => {}
    }
}

impl BlockRunner<'_, '_> {
    /// `mov` from `%clock`, `%clock64` and `%globaltimer`: the emulator's clocks
    /// (`specials.rs`), which advance with the instructions run.
    #[inline]
    pub(super) fn read_special(&mut self, wi: usize, inst: &Inst, mask: u32, s: Special) {
        use crate::backend::emu::specials;
        let nwarps = self.warps.len() as u64;
        let sm = specials::smid(crate::backend::emu::specials_linear(
            self.ctaid,
            self.ctx.dims.grid,
        ));
        let clock = specials::clock64(&self.ctx.clocks, sm, self.steps, nwarps);
        let timer = specials::globaltimer(&self.ctx.clocks, self.steps, nwarps);
        let w = &mut self.warps[wi];
        let v = match s {
            Special::Clock => trunc(clock, 32),
            Special::ClockHi => clock >> 32,
            Special::Clock64 => clock,
            Special::GlobalTimer => timer,
            Special::GlobalTimerLo => trunc(timer, 32),
            Special::GlobalTimerHi => timer >> 32,
        };
        let d = inst.d as usize * 32;
        lanes!(mask, l, {
            w.regs[d + l] = v;
        });
    }
}

/// One value of type `st` converted to `dt` (cvt): rounding `rnd` (to an integral value where
/// `rnd_int`), flush-to-zero and saturation as the instruction asks.
#[inline]
pub(super) fn cvt(a: u64, dt: Ty, st: Ty, rnd: Rnd, rnd_int: bool, ftz: bool, sat: bool) -> u64 {
    let sbits = st.bits();
    let dbits = dt.bits();
    let int_range = |t: Ty| -> (i128, i128) {
        let b = t.bits();
        if t.signed() {
            (-(1i128 << (b - 1)), (1i128 << (b - 1)) - 1)
        } else {
            (0, (1i128 << b) - 1)
        }
    };
    let sat_f = |x: f64| {
        if sat {
            if x.is_nan() { 0.0 } else { x.clamp(0.0, 1.0) }
        } else {
            x
        }
    };
    if !st.float() && !dt.float() {
        let v: i128 = if st.signed() {
            sext(a, sbits) as i128
        } else {
            trunc(a, sbits) as i128
        };
        if sat {
            let (lo, hi) = int_range(dt);
            return trunc(v.clamp(lo, hi) as u64, dbits);
        }
        // Widening sign-extends from the source; narrowing truncates.
        return trunc(v as u64, dbits);
    }
    if !st.float() {
        let v: i128 = if st.signed() {
            sext(a, sbits) as i128
        } else {
            trunc(a, sbits) as i128
        };
        return match dt {
            Ty::F32 => {
                let r = float::int_to_f32(v, rnd);
                b32(if sat { sat_f(r as f64) as f32 } else { r })
            }
            Ty::F64 => sat_f(float::int_to_f64(v, rnd)).to_bits(),
            Ty::F16 => float::to_small(sat_f(v as f64), float::F16, rnd) as u64,
            _ => float::to_small(sat_f(v as f64), float::BF16, rnd) as u64,
        };
    }
    let mut x = as_f64(a, st);
    if ftz && st == Ty::F32 {
        x = float::ftz32(x as f32) as f64;
    }
    if !dt.float() {
        let (lo, hi) = int_range(dt);
        let m = if rnd_int { rnd } else { Rnd::Z };
        return trunc(float::float_to_int(x, m, lo, hi) as u64, dbits);
    }
    if rnd_int {
        x = float::round_int(x, rnd);
    }
    let x = sat_f(x);
    match dt {
        Ty::F32 => {
            let r = if st == Ty::F64 && !rnd_int {
                float::round_f32(x, 0.0, rnd)
            } else {
                x as f32
            };
            b32(if ftz { float::ftz32(r) } else { r })
        }
        Ty::F64 => x.to_bits(),
        Ty::F16 => float::to_small(x, float::F16, rnd) as u64,
        _ => float::to_small(x, float::BF16, rnd) as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cvt_edges() {
        // f32 -> s32 saturates; NaN -> 0.
        assert_eq!(
            cvt(b32(3e9), Ty::S32, Ty::F32, Rnd::Z, true, false, false),
            i32::MAX as u32 as u64
        );
        assert_eq!(
            cvt(b32(f32::NAN), Ty::S32, Ty::F32, Rnd::N, true, false, false),
            0
        );
        assert_eq!(
            cvt(b32(-1.0), Ty::U8, Ty::F32, Rnd::N, true, false, false),
            0
        );
        // s32 -> s64 sign-extends, u32 -> u64 zero-extends.
        assert_eq!(
            cvt(0xffff_ffff, Ty::S64, Ty::S32, Rnd::N, false, false, false),
            u64::MAX
        );
        assert_eq!(
            cvt(0xffff_ffff, Ty::U64, Ty::U32, Rnd::N, false, false, false),
            0xffff_ffff
        );
        // cvt.sat.s8.s32 clamps.
        assert_eq!(cvt(1000, Ty::S8, Ty::S32, Rnd::N, false, false, true), 127);
        assert_eq!(
            cvt(b32(1.5), Ty::F32, Ty::F32, Rnd::N, false, false, true),
            b32(1.0)
        );
        assert_eq!(
            cvt(b32(2.5), Ty::F32, Ty::F32, Rnd::N, true, false, false),
            b32(2.0)
        );
        assert_eq!(
            cvt(b32(1.0), Ty::F16, Ty::F32, Rnd::N, false, false, false),
            0x3C00
        );
        let third = (1.0f64 / 3.0).to_bits();
        assert!(
            f32v(cvt(third, Ty::F32, Ty::F64, Rnd::M, false, false, false))
                < f32v(cvt(third, Ty::F32, Ty::F64, Rnd::P, false, false, false))
        );
    }
}
