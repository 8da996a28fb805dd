//! Shared memory's shadow state, one entry per 4-byte word: which bytes were written
//! (initcheck), and who wrote and read it in the current barrier epoch and at which warp-level
//! sync (racecheck, docs/emulator.md).

use super::BlockRunner;

/// One word's shadow: the bytes written (`init`), the last writer and reader (thread + 1,
/// [`MANY`] for readers of several warps, 0 for an atomic writer) and their epochs.
#[derive(Clone, Copy, Default)]
pub(super) struct Shadow {
    pub(super) init: u8,
    pub(super) w_epoch: u32,
    pub(super) writer: u32,
    pub(super) r_epoch: u32,
    pub(super) reader: u32,
    /// The writer's and the reader's warp's `sync_epoch` at the access: lanes of one warp
    /// that touch the same word with no warp-level sync in between race since Volta.
    pub(super) w_sync: u32,
    pub(super) r_sync: u32,
}
pub(super) const MANY: u32 = u32::MAX;

impl BlockRunner<'_, '_> {
    /// racecheck and initcheck for one shared access.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub(super) fn check_shared(
        &mut self,
        o: usize,
        size: u32,
        read: bool,
        atomic: bool,
        tid: u32,
        pc: u32,
        wid: u32,
        l: usize,
    ) {
        let epoch = self.epoch;
        let sync = self.warps.get(wid as usize).map_or(0, |w| w.sync_epoch);
        if size == 4 && read && !atomic {
            // A read of a written word that only this warp touched in this epoch (its own
            // write, or another lane's before a warp-level sync): nothing to report and only
            // the reader to record.
            let sh = &mut self.shadow[o / 4];
            let writer_ok = sh.w_epoch != epoch
                || sh.writer == 0
                || own_warp(sh.writer, sh.w_sync, wid, tid, sync);
            if sh.init == 0xf && writer_ok {
                if sh.r_epoch != epoch {
                    sh.r_epoch = epoch;
                    sh.r_sync = sync;
                    sh.reader = tid + 1;
                } else if sh.reader != MANY && (sh.reader - 1) / 32 != wid {
                    sh.reader = MANY;
                }
                return;
            }
        }
        let first = o / 4;
        let last = (o + size as usize - 1) / 4;
        for wdx in first..=last {
            let lo = if wdx == first { o % 4 } else { 0 };
            let hi = if wdx == last {
                (o + size as usize - 1) % 4
            } else {
                3
            };
            let bytes: u8 = (((1u16 << (hi + 1)) - 1) as u8) & !((1u8 << lo) - 1);
            let sh = self.shadow[wdx];
            let mut hazard: Option<(&'static str, u32)> = None;
            let mut uninit = false;
            let mut nsh = sh;
            if read {
                if sh.init & bytes != bytes {
                    uninit = true;
                }
                if !atomic
                    && sh.w_epoch == epoch
                    && sh.writer != 0
                    && !own_warp(sh.writer, sh.w_sync, wid, tid, sync)
                {
                    hazard = Some(("read-after-write", sh.writer - 1));
                }
                if sh.r_epoch != epoch {
                    nsh.r_epoch = epoch;
                    nsh.r_sync = sync;
                    nsh.reader = tid + 1;
                } else if sh.reader != MANY && (sh.reader - 1) / 32 != wid {
                    nsh.reader = MANY;
                }
            }
            if !read || atomic {
                if !atomic {
                    if sh.w_epoch == epoch
                        && sh.writer != 0
                        && !own_warp(sh.writer, sh.w_sync, wid, tid, sync)
                    {
                        hazard = Some(("write-after-write", sh.writer - 1));
                    } else if sh.r_epoch == epoch
                        && (sh.reader == MANY || !own_warp(sh.reader, sh.r_sync, wid, tid, sync))
                    {
                        hazard = Some((
                            "write-after-read",
                            if sh.reader == MANY {
                                u32::MAX
                            } else {
                                sh.reader - 1
                            },
                        ));
                    }
                }
                nsh.init |= bytes;
                nsh.w_epoch = epoch;
                nsh.w_sync = sync;
                nsh.writer = if atomic { 0 } else { tid + 1 };
            }
            self.shadow[wdx] = nsh;
            if uninit {
                self.diag("initcheck", 0, pc, wid, l, || {
                    format!("read of uninitialized shared memory at shared offset {:#x} (no thread of this block wrote it before)", wdx * 4)
                });
            }
            if let Some((what, other)) = hazard {
                let same_warp = other != u32::MAX && other / 32 == wid;
                let who = if other == u32::MAX {
                    "threads of other warps".to_string()
                } else {
                    let b = self.ctx.dims.block;
                    format!(
                        "thread ({}, {}, {})",
                        other % b[0],
                        (other / b[0]) % b[1],
                        other / (b[0] * b[1])
                    )
                };
                self.diag("racecheck", same_warp as u8, pc, wid, l, || {
                    if same_warp {
                        format!(
                            "shared-memory {what} hazard at shared offset {:#x}: {who}, a lane of the same warp, accessed it with no __syncwarp() in between (the lanes of a warp do not run in lockstep since Volta, `volatile` or not); add __syncwarp() (or __syncthreads(), if the whole block reaches it) between the accesses",
                            wdx * 4
                        )
                    } else {
                        format!(
                            "shared-memory {what} hazard at shared offset {:#x}: {who} accessed it since the last barrier; add __syncthreads() between the accesses",
                            wdx * 4
                        )
                    }
                });
            }
        }
    }
}

/// Is an access by thread `tid` of warp `wid` (whose warp has synced `sync` times) ordered
/// after the earlier one by thread `who1 - 1` at that warp's sync count `then`? Yes for the same
/// thread, or another lane of the same warp with a warp-level sync since; accesses by other
/// warps are ordered only by a barrier (the block's epoch), which the caller checks.
#[inline]
pub(super) fn own_warp(who1: u32, then: u32, wid: u32, tid: u32, sync: u32) -> bool {
    let who = who1 - 1;
    who / 32 == wid && (who == tid || then != sync)
}
