//! Warp-level collectives: shfl.sync (the PTX ISA's "Data Movement and Conversion
//! Instructions"), vote.sync, redux.sync and activemask ("Parallel Synchronization and
//! Communication"). Lanes exchange values across the warp, and the shfl checks flag member
//! masks that name lanes which did not arrive together.

use super::atomics::atom_apply;
use super::lanes::{rd, trunc};
use super::{BlockRunner, Stop};
use crate::backend::emu::decode::*;

impl BlockRunner<'_, '_> {
    #[inline]
    pub(super) fn shfl(
        &mut self,
        wi: usize,
        inst: &Inst,
        pc: u32,
        mask: u32,
        mode: ShflMode,
    ) -> Result<(), Stop> {
        let w = &mut self.warps[wi];
        let mut src = [0u64; 32];
        for (l, s) in src.iter_mut().enumerate() {
            *s = rd(&w.regs, inst.a, l);
        }
        let first = mask.trailing_zeros() as usize;
        let member = rd(&w.regs, inst.e, first) as u32;
        let d = inst.d as usize * 32;
        let mut bad_src = false;
        lanes!(mask, l, {
            // Only b[4:0] selects a lane (PTX ISA, shfl.sync).
            let b = rd(&w.regs, inst.b, l) as u32 & 0x1f;
            let c = rd(&w.regs, inst.c, l) as u32;
            let (j, ok) = shfl_source(mode, l as u32, b, c);
            let j = if ok { (j as usize) & 31 } else { l };
            if ok && mask >> j & 1 == 0 {
                bad_src = true;
            }
            w.regs[d + l] = trunc(src[j], 32);
            if inst.d2 != NOREG {
                w.regs[inst.d2 as usize * 32 + l] = ok as u64;
            }
        });
        let arrived = mask;
        let missing = member & w.valid & !w.exited & !arrived;
        let not_member = arrived & !member;
        let id = w.id;
        if missing != 0 || not_member != 0 {
            self.diag("shfl", 0, pc, id, first, || {
                if missing != 0 {
                    format!(
                        "shfl.sync member mask {member:#010x} names lanes {missing:#010x} that did not execute this shuffle with the others (arrived: {arrived:#010x}); use __activemask() or make all named lanes reach it"
                    )
                } else {
                    format!("lanes {not_member:#010x} executed shfl.sync but are not in its member mask {member:#010x}")
                }
            });
        } else if bad_src {
            self.diag("shfl", 2, pc, id, first, || {
                "shfl.sync read a value from a lane that is not participating (result undefined)"
                    .into()
            });
        }
        Ok(())
    }

    #[inline]
    pub(super) fn vote(&mut self, wi: usize, inst: &Inst, pc: u32, mask: u32, mode: VoteMode) {
        let w = &mut self.warps[wi];
        let member = rd(&w.regs, inst.e, mask.trailing_zeros() as usize) as u32;
        let mut ballot = 0u32;
        lanes!(mask, l, {
            if (rd(&w.regs, inst.a, l) != 0) != inst.c_neg {
                ballot |= 1 << l;
            }
        });
        let part = mask & member;
        let v = match mode {
            VoteMode::Ballot => (ballot & member) as u64,
            VoteMode::All => (ballot & part == part) as u64,
            VoteMode::Any => (ballot & part != 0) as u64,
            VoteMode::Uni => (ballot & part == part || ballot & part == 0) as u64,
        };
        let d = inst.d as usize * 32;
        lanes!(mask, l, {
            w.regs[d + l] = v;
        });
        let missing = member & w.valid & !w.exited & !w.cur;
        if missing != 0 {
            let id = w.id;
            self.diag("shfl", 1, pc, id, mask.trailing_zeros() as usize, || {
                format!("vote.sync member mask {member:#010x} names lanes {missing:#010x} that did not arrive at this instruction together")
            });
        }
    }

    #[inline]
    pub(super) fn redux(&mut self, wi: usize, inst: &Inst, pc: u32, mask: u32, op: AtomOp) {
        let ty = inst.ty;
        let w = &mut self.warps[wi];
        let first = mask.trailing_zeros() as usize;
        let member = rd(&w.regs, inst.e, first) as u32;
        let mut acc: Option<u64> = None;
        lanes!(mask & member, l, {
            let v = trunc(rd(&w.regs, inst.a, l), 32);
            acc = Some(match acc {
                None => v,
                Some(a) => atom_apply(op, ty, a, v, 0),
            });
        });
        let v = acc.unwrap_or(0);
        let d = inst.d as usize * 32;
        lanes!(mask, l, {
            w.regs[d + l] = v;
        });
        let missing = member & w.valid & !w.exited & !mask;
        if missing != 0 {
            let id = w.id;
            self.diag("shfl", 3, pc, id, first, || {
                format!("redux.sync member mask {member:#010x} names lanes {missing:#010x} that did not arrive at this instruction together")
            });
        }
    }

    #[inline]
    pub(super) fn activemask(&mut self, wi: usize, inst: &Inst, mask: u32) {
        let w = &mut self.warps[wi];
        let v = w.cur as u64;
        let d = inst.d as usize * 32;
        lanes!(mask, l, {
            w.regs[d + l] = v;
        });
    }
}

/// The lane a shuffle reads from, and whether it is in range (PTX ISA `shfl.sync`: `c`
/// packs the clamp in bits 0-4 and the segment mask in bits 8-12).
pub fn shfl_source(mode: ShflMode, lane: u32, b: u32, c: u32) -> (i32, bool) {
    let seg = (c >> 8) & 0x1f;
    let clamp = c & 0x1f;
    let max_lane = (lane & seg) | (clamp & !seg);
    let min_lane = lane & seg;
    match mode {
        ShflMode::Up => {
            let j = lane as i32 - b as i32;
            (j, j >= max_lane as i32)
        }
        ShflMode::Down => {
            let j = lane as i32 + b as i32;
            (j, j <= max_lane as i32)
        }
        ShflMode::Bfly => {
            let j = (lane ^ b) as i32;
            (j, j <= max_lane as i32)
        }
        ShflMode::Idx => {
            let j = (min_lane | (b & !seg)) as i32;
            (j, j <= max_lane as i32)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shfl_clamps_and_segments() {
        // __shfl_down_sync(m, v, 5, 16): c = ((32 - 16) << 8) | 31.
        let c16 = (16 << 8) | 31;
        assert_eq!(shfl_source(ShflMode::Down, 3, 5, c16), (8, true));
        assert!(
            !shfl_source(ShflMode::Down, 12, 5, c16).1,
            "would cross the 16-lane segment"
        );
        assert_eq!(shfl_source(ShflMode::Down, 30, 1, 31), (31, true));
        assert!(!shfl_source(ShflMode::Down, 31, 1, 31).1);
        // __shfl_up_sync(m, v, 2, 8): c = (24 << 8) | 0.
        let c8 = 24 << 8;
        assert!(
            !shfl_source(ShflMode::Up, 9, 2, c8).1,
            "lane 1 of its segment"
        );
        assert_eq!(shfl_source(ShflMode::Up, 10, 2, c8), (8, true));
        // __shfl_sync(m, v, src, 4): index within the 4-lane segment.
        let c4 = (28 << 8) | 31;
        assert_eq!(shfl_source(ShflMode::Idx, 6, 1, c4), (5, true));
        assert_eq!(shfl_source(ShflMode::Idx, 31, 0, c4), (28, true));
        assert_eq!(shfl_source(ShflMode::Bfly, 5, 16, 31), (21, true));
        // A clamp below the lane: bfly beyond it stays put.
        assert!(!shfl_source(ShflMode::Bfly, 5, 8, 7).1);
    }
}
