//! Control flow and barriers: bra, call, ret and exit (the PTX ISA's "Control Flow
//! Instructions"), bar/barrier and bar.red ("Parallel Synchronization and Communication"), trap
//! ("Miscellaneous") and `__assertfail`. These move the lanes' program counters and hold lanes
//! at barriers, so the scheduler (`run_warp`) hands them the warp's whole group.

use super::lanes::{le, rd};
use super::{BlockRunner, Stop};
use crate::backend::emu::decode::*;

/// Backward branches a group may take in a row, with other groups of its warp waiting,
/// before it yields to them.
const SPIN_LIMIT: u32 = 4096;

/// Whether every instruction from `from` up to (not including) `to` falls through to the next:
/// no branch, return, exit or other barrier can hold a lane or take it elsewhere before it
/// reaches `to`.
fn straight_to(prog: &Program, from: u32, to: u32) -> bool {
    (from..to).all(|pc| {
        prog.insts.get(pc as usize).is_some_and(|i| {
            !matches!(
                i.op,
                Op::Bra | Op::Ret | Op::Exit | Op::Trap | Op::Bar { .. } | Op::BarRed(_)
            )
        })
    })
}

impl BlockRunner<'_, '_> {
    /// Control-flow instructions, which run with the whole group (`mask`: the lanes whose
    /// guard holds) and schedule the warp's next group themselves.
    #[inline]
    pub(super) fn control(
        &mut self,
        wi: usize,
        inst: &Inst,
        pc: u32,
        mask: u32,
    ) -> Result<(), Stop> {
        match inst.op {
            Op::Bra => self.bra(wi, inst, pc, mask),
            Op::Call => self.call(wi, inst, pc, mask),
            Op::Ret | Op::Exit => self.ret(wi, inst, pc, mask),
            Op::Bar { arrive } => self.bar(wi, inst, pc, mask, arrive),
            Op::BarRed(_) => self.bar_red(wi, inst, pc, mask),
            Op::Trap => self.trap(wi, pc, mask),
            Op::AssertFail => self.assert_fail(wi, inst, pc, mask),
            _ => unreachable!(),
        }
    }

    #[inline]
    fn bra(&mut self, wi: usize, inst: &Inst, pc: u32, mask: u32) -> Result<(), Stop> {
        let prog = self.ctx.prog;
        let w = &mut self.warps[wi];
        self.out.metrics.branches += 1;
        // Lanes that jump back above the barrier their warp waits at skipped it, and
        // go round a loop, unless the code from where they land runs straight into
        // that barrier: then they only join it late from a divergent block that the
        // compiler placed after the barrier (past the kernel's `ret`), as any `if`'s
        // lanes do.
        if w.bar_watch & mask != 0
            && inst.aux < w.bar_watch_pc
            && !straight_to(prog, inst.aux, w.bar_watch_pc)
        {
            let (skipped, bar_pc, id) = (w.bar_watch & mask, w.bar_watch_pc, w.id);
            w.bar_watch &= !mask;
            let lane = skipped.trailing_zeros() as usize;
            self.diag("synccheck", 2, bar_pc, id, lane, || {
                format!(
                    "__syncthreads() in divergent code: {} thread(s) of one warp skipped this barrier and went round the loop while the rest of the warp waited at it; \
                     a barrier inside `if` is reached by only part of the block (undefined behaviour: a hang or a wrong result on a GPU). Move the __syncthreads() out of the `if`, so every thread reaches it",
                    skipped.count_ones()
                )
            });
        }
        let w = &mut self.warps[wi];
        if mask == w.cur {
            w.cur_pc = inst.aux;
            if inst.aux <= pc {
                w.backjumps = w.backjumps.wrapping_add(1);
                if w.backjumps >= SPIN_LIMIT && w.yield_group() {
                    return Ok(());
                }
            }
        } else if mask == 0 {
            w.cur_pc += 1;
        } else {
            self.out.metrics.divergent_branches += 1;
            *self.out.hot.entry((3, pc)).or_default() += 1;
            let cur = w.cur;
            lanes!(cur, l, {
                w.lane_pc[l] = if mask >> l & 1 != 0 { inst.aux } else { pc + 1 };
            });
            w.pick();
            return Ok(());
        }
        if w.cur_pc >= w.wait_min {
            w.reschedule();
        }
        Ok(())
    }

    #[inline]
    fn call(&mut self, wi: usize, inst: &Inst, pc: u32, mask: u32) -> Result<(), Stop> {
        let prog = self.ctx.prog;
        let site = &prog.calls[inst.aux as usize];
        let fp = prog.fparam_bytes as usize;
        let w = &mut self.warps[wi];
        if w.stack.is_empty() {
            w.stack = vec![Vec::new(); 32];
        }
        let cur = w.cur;
        lanes!(cur, l, {
            if mask >> l & 1 != 0 {
                if w.stack[l].len() > 64 {
                    return Err(Stop::Fault("call stack overflow".into()));
                }
                w.stack[l].push((pc + 1, inst.aux));
                let lp = &mut w.fparam[l * fp..(l + 1) * fp];
                for &(from, to, n) in &site.args {
                    lp.copy_within(from as usize..(from + n) as usize, to as usize);
                }
                w.lane_pc[l] = site.target_pc;
            } else {
                w.lane_pc[l] = pc + 1;
            }
        });
        w.pick();
        Ok(())
    }

    #[inline]
    fn ret(&mut self, wi: usize, inst: &Inst, pc: u32, mask: u32) -> Result<(), Stop> {
        let prog = self.ctx.prog;
        let fp = prog.fparam_bytes as usize;
        let w = &mut self.warps[wi];
        let cur = w.cur;
        lanes!(cur, l, {
            if mask >> l & 1 == 0 {
                w.lane_pc[l] = pc + 1;
                continue;
            }
            let frame = if inst.op == Op::Ret {
                w.stack.get_mut(l).and_then(|s| s.pop())
            } else {
                None
            };
            match frame {
                Some((ret_pc, site)) => {
                    let lp = &mut w.fparam[l * fp..(l + 1) * fp];
                    for &(from, to, n) in &prog.calls[site as usize].rets {
                        lp.copy_within(from as usize..(from + n) as usize, to as usize);
                    }
                    w.lane_pc[l] = ret_pc;
                }
                None => w.exited |= 1 << l,
            }
        });
        w.pick();
        Ok(())
    }

    #[inline]
    fn bar(
        &mut self,
        wi: usize,
        inst: &Inst,
        pc: u32,
        mask: u32,
        arrive: bool,
    ) -> Result<(), Stop> {
        let w = &mut self.warps[wi];
        let cur = w.cur;
        let first = mask.trailing_zeros() as usize % 32;
        let id = (rd(&w.regs, inst.a, first) & 15) as usize;
        let counted = inst.aux == 1;
        let count = if counted {
            rd(&w.regs, inst.b, first) as u32
        } else {
            0
        };
        if arrive {
            w.cur_pc += 1;
            if w.cur_pc >= w.wait_min {
                w.reschedule();
            }
        } else {
            if !counted && mask != 0 {
                // Min-pc scheduling runs the arriving group first, so the warp's other
                // live lanes are ahead of it (or skip it by predicate): watch them.
                let away = w.valid & !w.exited & !w.blocked & !mask;
                if w.bar_watch == 0 || w.bar_watch_pc != pc {
                    w.bar_watch = away;
                    w.bar_watch_pc = pc;
                } else {
                    w.bar_watch &= !mask;
                }
            }
            lanes!(cur, l, {
                w.lane_pc[l] = if mask >> l & 1 != 0 { pc } else { pc + 1 };
                if mask >> l & 1 != 0 {
                    w.bar_id[l] = id as u8;
                }
            });
            w.blocked |= mask;
            w.pick();
        }
        // Counted barriers complete as soon as enough threads arrived; block-wide
        // ones when nobody can run any more (`release_barrier`).
        if counted && mask != 0 {
            self.expected[id] = count;
            self.arrivals[id] += mask.count_ones();
            if self.arrivals[id] >= count {
                self.arrivals[id] = 0;
                self.release_counted(id as u8);
            }
        }
        Ok(())
    }

    #[inline]
    fn bar_red(&mut self, wi: usize, inst: &Inst, pc: u32, mask: u32) -> Result<(), Stop> {
        let w = &mut self.warps[wi];
        let cur = w.cur;
        lanes!(cur, l, {
            let p = (rd(&w.regs, inst.c, l) != 0) != inst.c_neg;
            w.bar_pred = (w.bar_pred & !(1 << l)) | ((p as u32) << l);
            w.lane_pc[l] = if mask >> l & 1 != 0 { pc } else { pc + 1 };
        });
        w.blocked |= mask;
        w.pick();
        Ok(())
    }

    fn trap(&mut self, wi: usize, pc: u32, mask: u32) -> Result<(), Stop> {
        if mask != 0 {
            let l = mask.trailing_zeros() as usize;
            let id = self.warps[wi].id;
            self.diag("trap", 0, pc, id, l, || "the kernel executed trap".into());
            return Err(Stop::Fault(format!(
                "trap executed by thread {:?} of block {:?}",
                self.thread_of(id, l),
                self.ctaid
            )));
        }
        let w = &mut self.warps[wi];
        w.cur_pc += 1;
        if w.cur_pc >= w.wait_min {
            w.reschedule();
        }
        Ok(())
    }

    fn assert_fail(&mut self, wi: usize, inst: &Inst, pc: u32, mask: u32) -> Result<(), Stop> {
        let prog = self.ctx.prog;
        if mask != 0 {
            let l = mask.trailing_zeros() as usize;
            let id = self.warps[wi].id;
            let fp = prog.fparam_bytes as usize;
            let w = &self.warps[wi];
            let slot = |o: i64| -> u64 {
                let s = l * fp + o as usize;
                w.fparam.get(s..s + 8).map(le).unwrap_or(0)
            };
            let (mp, fpp) = (slot(inst.off), slot(inst.d as i64));
            let s = l * fp + inst.aux as usize;
            let line = w.fparam.get(s..s + 4).map(le).unwrap_or(0) as u32;
            let msg = self.read_cstr(mp);
            let file = self.read_cstr(fpp);
            let thread = self.thread_of(id, l);
            let text = format!(
                "{file}:{line}: assertion `{msg}` failed in thread {thread:?} of block {:?}",
                self.ctaid
            );
            let t2 = text.clone();
            self.diag("trap", 1, pc, id, l, || t2);
            return Err(Stop::Fault(text));
        }
        let w = &mut self.warps[wi];
        w.cur_pc += 1;
        if w.cur_pc >= w.wait_min {
            w.reschedule();
        }
        Ok(())
    }

    /// Release the lanes waiting at counted barrier `id`.
    fn release_counted(&mut self, id: u8) {
        let prog = self.ctx.prog;
        let mut released = Vec::new();
        for (wi, w) in self.warps.iter_mut().enumerate() {
            let mut rel = 0u32;
            lanes!(w.blocked, l, {
                let is_bar = matches!(prog.insts[w.lane_pc[l] as usize].op, Op::Bar { .. });
                if is_bar && w.bar_id[l] == id {
                    rel |= 1 << l;
                }
            });
            w.bar_watch = 0;
            if rel != 0 {
                released.push(wi);
                w.sync_pc();
                lanes!(rel, l, {
                    w.lane_pc[l] += 1;
                });
                w.blocked &= !rel;
                w.pick();
            }
        }
        if let Some(c) = self.cost.as_mut() {
            c.barrier(&released, false);
        }
        self.epoch += 1;
    }

    /// Everyone who can still run is waiting at a barrier: release them (see
    /// docs/emulator.md, synccheck) and start a new race-detection epoch.
    pub(super) fn release_barrier(&mut self) {
        let prog = self.ctx.prog;
        let mut pcs: Vec<u32> = Vec::new();
        let mut first: Option<(u32, usize)> = None;
        let mut popc = 0u32;
        let mut all = true;
        let mut any = false;
        for w in &self.warps {
            lanes!(w.blocked, l, {
                let pc = w.lane_pc[l];
                if !pcs.contains(&pc) {
                    pcs.push(pc);
                }
                first.get_or_insert((w.id, l));
                let p = w.bar_pred >> l & 1 != 0;
                popc += p as u32;
                all &= p;
                any |= p;
            });
        }
        if let Some(id) = self.arrivals.iter().position(|&a| a != 0) {
            let (w, l) = first.unwrap_or((0, 0));
            let pc = pcs.first().copied().unwrap_or(0);
            let (got, want) = (self.arrivals[id], self.expected[id]);
            self.diag("synccheck", 1, pc, w, l, || {
                format!("named barrier {id} expects {want} threads but only {got} arrived before the block could not continue (it would hang on a GPU)")
            });
        }
        if pcs.len() > 1 {
            pcs.sort();
            let lines: Vec<String> = pcs
                .iter()
                .map(|pc| match prog.locs[*pc as usize] {
                    (_, 0) => format!("PTX `{}`", prog.texts[*pc as usize]),
                    (f, l) => format!(
                        "{}:{l}",
                        prog.files.get(&f).map(|s| s.as_str()).unwrap_or("?")
                    ),
                })
                .collect();
            let (w, l) = first.unwrap_or((0, 0));
            let pc = pcs[0];
            self.diag("synccheck", 0, pc, w, l, || {
                format!(
                    "threads of one block wait at different barriers ({}): __syncthreads() in divergent code; every thread must reach the same barrier",
                    lines.join(", ")
                )
            });
        }
        if let Some(c) = self.cost.as_mut() {
            let waiting: Vec<usize> = (0..self.warps.len())
                .filter(|&w| self.warps[w].blocked != 0)
                .collect();
            c.barrier(&waiting, true);
        }
        for w in &mut self.warps {
            let blocked = w.blocked;
            lanes!(blocked, l, {
                let pc = w.lane_pc[l] as usize;
                let inst = &prog.insts[pc];
                if let Op::BarRed(bop) = inst.op {
                    let v = match bop {
                        BoolOp::None => popc as u64,
                        BoolOp::And => all as u64,
                        _ => any as u64,
                    };
                    w.regs[inst.d as usize * 32 + l] = v;
                }
                w.lane_pc[l] += 1;
            });
            w.blocked = 0;
            w.bar_watch = 0;
            w.pick();
        }
        self.arrivals = [0; 16];
        self.epoch += 1;
    }
}
