//! Loads and stores (ld, ld.param, st: the PTX ISA's "Data Movement and Conversion
//! Instructions") in every state space, generic addresses included, with atomics' accesses:
//! bounds and alignment checks (memcheck), the memory metrics (sectors, bank conflicts) and the
//! cost counters, then the access itself. Atomics' operations are in `atomics.rs`, shared
//! memory's race and init checks in `racecheck.rs`.

use super::atomics::atom_apply;
use super::lanes::{le, put, rd, sext, trunc};
use super::racecheck::{MANY, own_warp};
use super::{BlockRunner, Stop};
use crate::backend::emu::decode::*;
use crate::backend::emu::parse::Space;

impl BlockRunner<'_, '_> {
    /// Loads, stores and atomics: address checks, diagnostics and metrics, then the access.
    #[inline]
    pub(super) fn memory(
        &mut self,
        wi: usize,
        inst: &Inst,
        pc: u32,
        mask: u32,
    ) -> Result<(), Stop> {
        let ty = inst.ty;
        let esize = ty.bytes();
        let vec = inst.vec as u32;
        let total = esize * vec;
        let is_atom = matches!(inst.op, Op::Atom(_));
        let is_load = inst.op == Op::Ld;
        let generic = inst.aux == 1;

        // Function parameter slots are per lane and need no checks.
        if inst.space == Space::Param {
            self.param_access(wi, inst, mask);
            return Ok(());
        }

        if inst.space == Space::Shared
            && !generic
            && vec == 1
            && !is_atom
            && self.shared_fast(wi, inst, pc, mask, esize, is_load)
        {
            return Ok(());
        }
        let mut addrs = [0u64; 32];
        let mut spaces = [Space::Global; 32];
        {
            let w = &self.warps[wi];
            lanes!(mask, l, {
                let a = rd(&w.regs, inst.a, l).wrapping_add(inst.off as u64);
                if generic {
                    let (s, o) = resolve_generic(a);
                    spaces[l] = s;
                    addrs[l] = o;
                } else {
                    spaces[l] = inst.space;
                    addrs[l] = a;
                }
            });
        }
        self.count_access(wi, inst, pc, mask, &addrs, &spaces);

        if vec == 1
            && !is_atom
            && !generic
            && self.fast_access(wi, inst, pc, mask, &addrs, esize, is_load)
        {
            return Ok(());
        }
        let wid = self.warps[wi].id;
        lanes!(mask, l, {
            let addr = addrs[l];
            let space = spaces[l];
            if !addr.is_multiple_of(total.min(16) as u64)
                && (!is_atom || !addr.is_multiple_of(esize as u64))
            {
                let sp = space_name(space);
                self.diag("memcheck", 1, pc, wid, l, || {
                    format!(
                        "misaligned {sp} {} of {total} bytes at address {addr:#x} (must be a multiple of {total})",
                        if is_load { "read" } else { "write" }
                    )
                });
                self.zero_dest(wi, inst, l);
                continue;
            }
            for k in 0..vec {
                let a = addr.wrapping_add((k * esize) as u64);
                let r = inst.vregs[k as usize];
                let w = &self.warps[wi];
                let val = if is_load || is_atom {
                    0
                } else if k == 0 {
                    rd(&w.regs, inst.b, l)
                } else {
                    w.regs[r as usize * 32 + l]
                };
                let res = self.access(wi, l, inst, pc, space, a, esize, val)?;
                if let Some(v) = res {
                    let dreg = if is_atom { inst.d } else { r };
                    if dreg != NOREG {
                        let v = if ty.signed() && esize < 8 {
                            trunc(sext(v, esize * 8) as u64, 64)
                        } else {
                            v
                        };
                        self.warps[wi].regs[dreg as usize * 32 + l] = v;
                    }
                }
            }
        });
        Ok(())
    }

    /// Function parameter slots (`ld.param`/`st.param` of a device function's parameters and
    /// return values): per lane, with no checks.
    #[inline]
    fn param_access(&mut self, wi: usize, inst: &Inst, mask: u32) {
        let ty = inst.ty;
        let esize = ty.bytes();
        let vec = inst.vec as u32;
        let is_load = inst.op == Op::Ld;
        let fp = self.ctx.prog.fparam_bytes as usize;
        let w = &mut self.warps[wi];
        lanes!(mask, l, {
            let base = (l * fp).wrapping_add(inst.off as usize);
            for k in 0..vec as usize {
                let o = base.wrapping_add(k * esize as usize);
                let Some(slot) = o
                    .checked_add(esize as usize)
                    .and_then(|e| w.fparam.get_mut(o..e))
                else {
                    continue;
                };
                if is_load {
                    let v = le(slot);
                    let r = inst.vregs[k];
                    if r != NOREG {
                        w.regs[r as usize * 32 + l] = if ty.signed() {
                            trunc(sext(v, esize * 8) as u64, 64)
                        } else {
                            v
                        };
                    }
                } else {
                    let v = if k == 0 {
                        rd(&w.regs, inst.b, l)
                    } else {
                        w.regs[inst.vregs[k] as usize * 32 + l]
                    };
                    slot.copy_from_slice(&v.to_le_bytes()[..esize as usize]);
                }
            }
        });
    }

    /// The memory metrics (requests, sectors, bytes, bank conflicts, and their cost per line)
    /// and the cost counters of one warp's access, by the space each lane's address is in.
    #[inline]
    fn count_access(
        &mut self,
        wi: usize,
        inst: &Inst,
        pc: u32,
        mask: u32,
        addrs: &[u64; 32],
        spaces: &[Space; 32],
    ) {
        let esize = inst.ty.bytes();
        let vec = inst.vec as u32;
        let total = esize * vec;
        let is_atom = matches!(inst.op, Op::Atom(_));
        let is_load = inst.op == Op::Ld;
        // Metrics per space touched by this warp instruction.
        let mut gmask = 0u32;
        let mut smask = 0u32;
        lanes!(mask, l, {
            match spaces[l] {
                Space::Global => gmask |= 1 << l,
                Space::Shared => smask |= 1 << l,
                _ => {}
            }
        });
        if gmask != 0 {
            let uniq = count_sectors(addrs, gmask, total);
            let m = &mut self.out.metrics;
            let req = gmask.count_ones() as u64 * total as u64;
            if is_load || is_atom {
                m.global_load_requests += 1;
                m.global_load_sectors += uniq;
                m.global_load_bytes_requested += req;
            } else {
                m.global_store_requests += 1;
                m.global_store_sectors += uniq;
                m.global_store_bytes_requested += req;
            }
            let unused = (uniq * 32).saturating_sub(req);
            if unused > 0 {
                let kind = if is_load || is_atom { 1 } else { 2 };
                *self.out.hot.entry((kind, pc)).or_default() += unused;
            }
        }
        if smask != 0 {
            self.out.metrics.shared_requests += 1;
            let conflicts = bank_conflicts(addrs, smask, total);
            self.out.metrics.shared_bank_conflicts += conflicts;
            if conflicts > 0 {
                *self.out.hot.entry((0, pc)).or_default() += conflicts;
            }
        }
        if let Some(c) = self.cost.as_mut() {
            let mut lmask = 0u32;
            lanes!(mask, l, {
                if spaces[l] == Space::Local {
                    lmask |= 1 << l;
                }
            });
            if gmask != 0 {
                c.global(wi, inst, addrs, gmask, total);
            }
            if smask != 0 {
                c.shared(wi, pc, inst, addrs, smask, total);
            }
            if lmask != 0 {
                c.local(wi, inst, lmask, total);
            }
        }
    }

    /// Scalar shared loads/stores (the inner loops of tiled kernels) in one pass: addresses,
    /// bounds, bank conflicts, race/init shadow and the access. False: take the checked path.
    #[inline]
    fn shared_fast(
        &mut self,
        wi: usize,
        inst: &Inst,
        pc: u32,
        mask: u32,
        size: u32,
        is_load: bool,
    ) -> bool {
        let mut addrs = [0u64; 32];
        let lim = self.shared_size as u64;
        let sz = size as u64;
        let mut good = true;
        let mut bank_word = [u64::MAX; 32];
        let mut clash = false;
        {
            let w = &self.warps[wi];
            lanes!(mask, l, {
                let a = rd(&w.regs, inst.a, l).wrapping_add(inst.off as u64);
                addrs[l] = a;
                good &= a.is_multiple_of(sz) && a.saturating_add(sz) <= lim;
                let wd = a >> 2;
                let b = (wd & 31) as usize;
                if bank_word[b] == u64::MAX {
                    bank_word[b] = wd;
                } else if bank_word[b] != wd {
                    clash = true;
                }
            });
        }
        if !good {
            return false;
        }
        if let Some(c) = self.cost.as_mut() {
            c.shared(wi, pc, inst, &addrs, mask, size);
        }
        let m = &mut self.out.metrics;
        m.shared_requests += 1;
        if clash || size > 4 {
            let conflicts = bank_conflicts(&addrs, mask, size);
            m.shared_bank_conflicts += conflicts;
            if conflicts > 0 {
                *self.out.hot.entry((0, pc)).or_default() += conflicts;
            }
        }
        let wid = self.warps[wi].id;
        let sync = self.warps[wi].sync_epoch;
        let signed = inst.ty.signed() && size < 8;
        let epoch = self.epoch;
        if is_load && size == 4 && !signed {
            // Loads of 4-byte words (the tiled-kernel inner loop): lanes reading the word the
            // previous lane read need no second shadow check.
            let d = inst.vregs[0] as usize * 32;
            let mut prev = usize::MAX;
            lanes!(mask, l, {
                let o = addrs[l] as usize;
                if o != prev {
                    let sh = &self.shadow[o / 4];
                    let tid = wid * 32 + l as u32;
                    let quiet = sh.init == 0xf
                        && (sh.w_epoch != epoch
                            || sh.writer == 0
                            || own_warp(sh.writer, sh.w_sync, wid, tid, sync))
                        && sh.r_epoch == epoch
                        && sh.reader != MANY
                        && (sh.reader - 1) / 32 == wid;
                    if !quiet {
                        self.check_shared(o, 4, true, false, wid * 32 + l as u32, pc, wid, l);
                    }
                    prev = o;
                }
                let b = &self.shared[o..o + 4];
                self.warps[wi].regs[d + l] = u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as u64;
            });
            return true;
        }
        lanes!(mask, l, {
            let o = addrs[l] as usize;
            let tid = wid * 32 + l as u32;
            // Inline the common racecheck/initcheck outcome: an initialized word read by its
            // own warp's threads only; anything else goes through the full check.
            let sh = &mut self.shadow[o / 4];
            let quiet = is_load
                && size == 4
                && sh.init == 0xf
                && (sh.w_epoch != epoch
                    || sh.writer == 0
                    || own_warp(sh.writer, sh.w_sync, wid, tid, sync))
                && sh.r_epoch == epoch
                && sh.reader != MANY
                && (sh.reader - 1) / 32 == wid;
            if !quiet {
                self.check_shared(o, size, is_load, false, tid, pc, wid, l);
            }
            let bytes = &mut self.shared[o..o + size as usize];
            if is_load {
                let v = le(bytes);
                self.warps[wi].regs[inst.vregs[0] as usize * 32 + l] = if signed {
                    trunc(sext(v, size * 8) as u64, 64)
                } else {
                    v
                };
            } else {
                put(bytes, rd(&self.warps[wi].regs, inst.b, l));
            }
        });
        true
    }

    /// Scalar shared/global loads and stores whose lanes are all in bounds and aligned: the
    /// common case, without per-lane dispatch. Returns false to take the checked path.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    fn fast_access(
        &mut self,
        wi: usize,
        inst: &Inst,
        pc: u32,
        mask: u32,
        addrs: &[u64; 32],
        size: u32,
        is_load: bool,
    ) -> bool {
        let sz = size as u64;
        let ok = |a: u64| a.is_multiple_of(sz);
        match inst.space {
            Space::Shared => {
                let lim = self.shared_size as u64;
                let mut good = true;
                lanes!(mask, l, {
                    good &= ok(addrs[l]) && addrs[l].saturating_add(sz) <= lim;
                });
                if !good {
                    return false;
                }
                let wid = self.warps[wi].id;
                lanes!(mask, l, {
                    let o = addrs[l] as usize;
                    self.check_shared(o, size, is_load, false, wid * 32 + l as u32, pc, wid, l);
                    let bytes = &mut self.shared[o..o + size as usize];
                    if is_load {
                        let v = le(bytes);
                        let v = if inst.ty.signed() && size < 8 {
                            trunc(sext(v, size * 8) as u64, 64)
                        } else {
                            v
                        };
                        self.warps[wi].regs[inst.vregs[0] as usize * 32 + l] = v;
                    } else {
                        put(bytes, rd(&self.warps[wi].regs, inst.b, l));
                    }
                });
                true
            }
            Space::Global => {
                let gm = self.ctx.gmem;
                let first = mask.trailing_zeros() as usize;
                let mut h = self.ghint;
                let Some((r, _)) = gm.locate(addrs[first], sz, &mut h) else {
                    return false;
                };
                let reg = &gm.regions[r];
                let mut good = true;
                lanes!(mask, l, {
                    let a = addrs[l];
                    good &= ok(a) && a >= reg.base && (a - reg.base).saturating_add(sz) <= reg.len;
                });
                if !good {
                    return false;
                }
                self.ghint = h;
                if self.xrace.is_some() {
                    lanes!(mask, l, {
                        self.cross_rank(wi, l, inst, pc, reg, addrs[l] - reg.base, size);
                    });
                }
                let w = &mut self.warps[wi];
                if is_load {
                    let d = inst.vregs[0] as usize * 32;
                    let signed = inst.ty.signed() && size < 8;
                    lanes!(mask, l, {
                        let v = reg.read(addrs[l] - reg.base, size);
                        w.regs[d + l] = if signed {
                            trunc(sext(v, size * 8) as u64, 64)
                        } else {
                            v
                        };
                    });
                } else {
                    lanes!(mask, l, {
                        reg.write(addrs[l] - reg.base, size, rd(&w.regs, inst.b, l));
                    });
                }
                true
            }
            _ => false,
        }
    }

    fn zero_dest(&mut self, wi: usize, inst: &Inst, l: usize) {
        let w = &mut self.warps[wi];
        if inst.op == Op::Ld {
            for r in inst.vregs.iter().take(inst.vec as usize) {
                if *r != NOREG {
                    w.regs[*r as usize * 32 + l] = 0;
                }
            }
        } else if inst.d != NOREG && matches!(inst.op, Op::Atom(_)) {
            w.regs[inst.d as usize * 32 + l] = 0;
        }
    }

    /// One element access by one lane. Returns the loaded (or old, for atomics) value.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn access(
        &mut self,
        wi: usize,
        l: usize,
        inst: &Inst,
        pc: u32,
        space: Space,
        addr: u64,
        size: u32,
        val: u64,
    ) -> Result<Option<u64>, Stop> {
        let is_load = inst.op == Op::Ld;
        let wid = self.warps[wi].id;
        let kind = if is_load { "read" } else { "write" };
        match space {
            Space::Global => {
                let gm = self.ctx.gmem;
                let mut h = self.ghint;
                match gm.locate(addr, size as u64, &mut h) {
                    Some((r, o)) => {
                        self.ghint = h;
                        let reg = &gm.regions[r];
                        if self.xrace.is_some() {
                            self.cross_rank(wi, l, inst, pc, reg, o, size);
                        }
                        if is_load {
                            Ok(Some(reg.read(o, size)))
                        } else if let Op::Atom(op) = inst.op {
                            let old = reg.read(o, size);
                            let c = rd(&self.warps[wi].regs, inst.c, l);
                            let b = rd(&self.warps[wi].regs, inst.b, l);
                            reg.write(o, size, atom_apply(op, inst.ty, old, b, c));
                            Ok(Some(old))
                        } else {
                            reg.write(o, size, val);
                            Ok(None)
                        }
                    }
                    None => {
                        self.diag("memcheck", 0, pc, wid, l, || {
                            let where_ = gm.describe(addr, size as u64);
                            format!("out-of-bounds global {kind} of {size} bytes at address {addr:#x}, which {where_}")
                        });
                        // A read past an allocation sees what the GPU run's guard zones
                        // hold (0xFF bytes: NaN, -1), so correctness verdicts agree.
                        let guard = u64::MAX >> (64 - 8 * size.min(8));
                        Ok(Some(guard).filter(|_| is_load || matches!(inst.op, Op::Atom(_))))
                    }
                }
            }
            Space::Shared => {
                let end = addr.saturating_add(size as u64);
                if end > self.shared_size as u64 {
                    let ss = self.shared_size;
                    self.diag("memcheck", 2, pc, wid, l, || {
                        format!(
                            "out-of-bounds shared {kind} of {size} bytes at shared offset {addr:#x}; the block has {ss} bytes of shared memory"
                        )
                    });
                    return Ok(Some(0).filter(|_| is_load || matches!(inst.op, Op::Atom(_))));
                }
                let o = addr as usize;
                let tid = wid * 32 + l as u32;
                let is_atom = matches!(inst.op, Op::Atom(_));
                self.check_shared(o, size, is_load || is_atom, is_atom, tid, pc, wid, l);
                let cur = le(&self.shared[o..o + size as usize]);
                if is_load {
                    Ok(Some(cur))
                } else if let Op::Atom(op) = inst.op {
                    let c = rd(&self.warps[wi].regs, inst.c, l);
                    let b = rd(&self.warps[wi].regs, inst.b, l);
                    let nv = atom_apply(op, inst.ty, cur, b, c);
                    put(&mut self.shared[o..o + size as usize], nv);
                    Ok(Some(cur))
                } else {
                    put(&mut self.shared[o..o + size as usize], val);
                    Ok(None)
                }
            }
            Space::Local => {
                let lb = self.ctx.kernel.local_bytes as u64;
                if addr.saturating_add(size as u64) > lb {
                    self.diag("memcheck", 3, pc, wid, l, || {
                        format!("out-of-bounds local {kind} of {size} bytes at local offset {addr:#x}; the thread has {lb} bytes of local memory")
                    });
                    return Ok(Some(0).filter(|_| is_load));
                }
                let base = l * lb as usize + addr as usize;
                let w = &mut self.warps[wi];
                let s = &mut w.local[base..base + size as usize];
                if is_load {
                    Ok(Some(le(s)))
                } else if let Op::Atom(op) = inst.op {
                    let cur = le(s);
                    let nv = atom_apply(
                        op,
                        inst.ty,
                        cur,
                        rd(&w.regs, inst.b, l),
                        rd(&w.regs, inst.c, l),
                    );
                    w.local[base..base + size as usize]
                        .copy_from_slice(&nv.to_le_bytes()[..size as usize]);
                    Ok(Some(cur))
                } else {
                    s.copy_from_slice(&val.to_le_bytes()[..size as usize]);
                    Ok(None)
                }
            }
            Space::Const => {
                let cb = self.ctx.cbank;
                let o = addr as usize;
                match cb.get(o..o.saturating_add(size as usize)) {
                    Some(b) if is_load => Ok(Some(le(b))),
                    _ => {
                        let n = cb.len();
                        self.diag("memcheck", 4, pc, wid, l, || {
                            if is_load {
                                format!("out-of-bounds constant read of {size} bytes at constant offset {addr:#x}; the module has {n} bytes of __constant__ data")
                            } else {
                                "write to constant memory".into()
                            }
                        });
                        Ok(Some(0).filter(|_| is_load))
                    }
                }
            }
            Space::Param => Ok(Some(0)),
        }
    }

    /// `ld.param` of a kernel parameter: the same value in every lane.
    #[inline]
    pub(super) fn ld_kparam(&mut self, wi: usize, inst: &Inst, mask: u32) {
        let ty = inst.ty;
        let bits = ty.bits();
        let n = ty.bytes() as usize;
        let w = &mut self.warps[wi];
        for k in 0..inst.vec as usize {
            let o = (inst.off as usize).wrapping_add(k * n);
            let v = o
                .checked_add(n)
                .and_then(|e| self.ctx.params.get(o..e))
                .map(le)
                .unwrap_or(0);
            let v = if ty.signed() {
                trunc(sext(v, bits) as u64, 64)
            } else {
                v
            };
            if inst.vregs[k] == NOREG {
                continue;
            }
            let d = inst.vregs[k] as usize * 32;
            lanes!(mask, l, {
                w.regs[d + l] = v;
            });
        }
    }

    pub(super) fn read_cstr(&mut self, addr: u64) -> String {
        let mut s = Vec::new();
        for k in 0..4096u64 {
            match self.generic_read(addr.wrapping_add(k), 1) {
                Some(0) | None => break,
                Some(b) => s.push(b as u8),
            }
        }
        String::from_utf8_lossy(&s).into_owned()
    }

    /// Uninstrumented generic byte read for printf/assert strings.
    pub(super) fn generic_read(&mut self, addr: u64, size: u32) -> Option<u64> {
        let (space, off) = resolve_generic(addr);
        match space {
            Space::Global => {
                let mut h = self.ghint;
                let (r, o) = self.ctx.gmem.locate(off, size as u64, &mut h)?;
                Some(self.ctx.gmem.regions[r].read(o, size))
            }
            Space::Const => {
                let o = off as usize;
                let b = self.ctx.cbank.get(o..o.saturating_add(size as usize))?;
                Some(le(b))
            }
            Space::Shared => {
                let o = off as usize;
                Some(le(self.shared.get(o..o.saturating_add(size as usize))?))
            }
            _ => None,
        }
    }
}

fn space_name(s: Space) -> &'static str {
    match s {
        Space::Global => "global",
        Space::Shared => "shared",
        Space::Local => "local",
        Space::Const => "constant",
        Space::Param => "param",
    }
}

#[inline]
pub fn resolve_generic(a: u64) -> (Space, u64) {
    if a.wrapping_sub(SHARED_WIN) < WIN_SIZE {
        (Space::Shared, a - SHARED_WIN)
    } else if a.wrapping_sub(LOCAL_WIN) < WIN_SIZE {
        (Space::Local, a - LOCAL_WIN)
    } else if a.wrapping_sub(CONST_WIN) < WIN_SIZE {
        (Space::Const, a - CONST_WIN)
    } else {
        (Space::Global, a)
    }
}

/// Distinct 32-byte sectors the lanes' accesses touch.
#[inline]
fn count_sectors(addrs: &[u64; 32], mask: u32, size: u32) -> u64 {
    let mut sectors = [0u64; 128];
    let mut n = 0;
    let mut sorted = true;
    lanes!(mask, l, {
        let a = addrs[l];
        let mut s = a >> 5;
        let e = a.saturating_add(size as u64 - 1) >> 5;
        while s <= e && n < 128 {
            sorted &= n == 0 || sectors[n - 1] <= s;
            sectors[n] = s;
            n += 1;
            s += 1;
        }
    });
    let sec = &mut sectors[..n];
    if !sorted {
        sec.sort_unstable();
    }
    let mut uniq = 0;
    for k in 0..sec.len() {
        if k == 0 || sec[k] != sec[k - 1] {
            uniq += 1;
        }
    }
    uniq
}

/// Extra shared-memory wavefronts: per phase (32 lanes for 4-byte accesses, 16 for 8-byte,
/// 8 for 16-byte), the most distinct words any one bank must serve, minus one.
#[inline]
pub fn bank_conflicts(addrs: &[u64; 32], mask: u32, size: u32) -> u64 {
    if size <= 4 {
        // Usual case: no bank serves two different words.
        let mut bank_word = [u64::MAX; 32];
        let mut clash = false;
        lanes!(mask, l, {
            let w = addrs[l] >> 2;
            let b = (w & 31) as usize;
            if bank_word[b] == u64::MAX {
                bank_word[b] = w;
            } else if bank_word[b] != w {
                clash = true;
            }
        });
        if !clash {
            return 0;
        }
    }
    let words_per_lane = size.div_ceil(4).max(1) as usize;
    let lanes_per_phase = (32 / words_per_lane).max(1);
    let mut extra = 0u64;
    for phase in (0..32).step_by(lanes_per_phase) {
        let mut words = [u64::MAX; 32];
        let mut n = 0;
        for (l, &addr) in addrs.iter().enumerate().skip(phase).take(lanes_per_phase) {
            if mask >> l & 1 == 0 {
                continue;
            }
            for k in 0..words_per_lane {
                if n < 32 {
                    words[n] = (addr >> 2) + k as u64;
                    n += 1;
                }
            }
        }
        if n == 0 {
            continue;
        }
        let w = &mut words[..n];
        w.sort_unstable();
        let mut per_bank = [0u8; 32];
        for k in 0..n {
            if k == 0 || w[k] != w[k - 1] {
                per_bank[(w[k] & 31) as usize] += 1;
            }
        }
        let max = *per_bank.iter().max().unwrap_or(&1) as u64;
        extra += max.saturating_sub(1);
    }
    extra
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bank_conflict_counts() {
        let mut a = [0u64; 32];
        for (l, x) in a.iter_mut().enumerate() {
            *x = l as u64 * 4;
        }
        assert_eq!(bank_conflicts(&a, u32::MAX, 4), 0);
        for (l, x) in a.iter_mut().enumerate() {
            *x = l as u64 * 8; // stride 2 words: two lanes per bank
        }
        assert_eq!(bank_conflicts(&a, u32::MAX, 4), 1);
        for (l, x) in a.iter_mut().enumerate() {
            *x = l as u64 * 128; // column of a 32-wide float tile: 32-way
        }
        assert_eq!(bank_conflicts(&a, u32::MAX, 4), 31);
        let b = [64u64; 32]; // broadcast
        assert_eq!(bank_conflicts(&b, u32::MAX, 4), 0);
    }
}
