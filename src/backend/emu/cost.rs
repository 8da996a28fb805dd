//! Cost counters for the speed estimate (`crate::estimate`, docs/estimate.md): what one thread
//! block did, in the terms a GPU cost model needs. Collected only by
//! [`super::EmuBackend::launch_profiled`]; an ordinary launch pays nothing.
//!
//! Per block: issued instructions by pipe (PTX instructions weighted by the SASS instructions
//! they usually become), global memory requests with their 32-byte sectors and 128-byte lines
//! (L1 wavefronts), an L1 cache simulation (which sectors go on to L2), shared-memory
//! wavefronts (bank conflicts included), atomics and how many lanes of one instruction hit one
//! address, barriers, and a critical path. Each warp issues one instruction per cycle at most;
//! an instruction waits for its source registers, whose values arrive after the latency of the
//! instruction (or memory level) that wrote them. Within straight-line code (up to a branch or
//! a barrier) independent instructions do not wait for one another, as the compiler's list
//! scheduling of a basic block would have it; a branch issues after everything before it. A
//! barrier brings the warps it releases to the latest one's clock. The block's critical path
//! is its slowest warp's clock at the end.

use super::decode::*;
use super::l1::{Cycles, L1, SCENARIOS, global_wavefronts, wavefronts};
use super::parse::Space;
use super::vectorize::Merge;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};

/// Issue classes: the pipes a cost model prices separately.
pub const FMA: usize = 0;
pub const ALU: usize = 1;
pub const FP64: usize = 2;
pub const SFU: usize = 3;
pub const CONV: usize = 4;
pub const MEM: usize = 5;
pub const CTRL: usize = 6;
pub const SHFL: usize = 7;
pub const CLASSES: usize = 8;
/// Names of the classes, for reports and result.json.
pub const CLASS_NAMES: [&str; CLASSES] =
    ["fma", "alu", "fp64", "sfu", "conv", "mem", "ctrl", "shfl"];

/// Latencies in cycles of the modelled GPU (the estimate's data file sets them).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Latencies {
    pub alu: u32,
    pub fma: u32,
    pub fp64: u32,
    pub sfu: u32,
    pub shared: u32,
    pub l1_hit: u32,
    pub l2_hit: u32,
    pub dram: u32,
    pub atomic: u32,
    pub barrier: u32,
}

impl Default for Latencies {
    fn default() -> Self {
        Latencies {
            alu: 4,
            fma: 4,
            fp64: 8,
            sfu: 20,
            shared: 30,
            l1_hit: 35,
            l2_hit: 260,
            dram: 600,
            atomic: 400,
            barrier: 24,
        }
    }
}

/// What a profiled launch needs besides the launch itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CostConfig {
    pub latencies: Latencies,
    /// L1 capacity one block may use (the SM's L1 beside shared memory, shared by the blocks
    /// resident with it), bytes.
    pub l1_bytes: u32,
}

/// What one PTX instruction costs: SASS-equivalent warp instructions per class and the
/// latency of its result.
#[derive(Debug, Clone, Copy, Default)]
pub struct Price {
    pub issue: [f32; CLASSES],
    pub latency: u32,
    /// Whether ptxas merges this shared load with others ([`super::vectorize`]).
    pub merge: Merge,
}

/// Prices of every instruction of `prog`, by program counter.
pub fn prices(prog: &Program, lat: &Latencies) -> Vec<Price> {
    let merges = super::vectorize::merges(prog);
    prog.insts
        .iter()
        .zip(merges)
        .map(|(i, merge)| Price {
            merge,
            ..price(i, lat)
        })
        .collect()
}

fn price(inst: &Inst, lat: &Latencies) -> Price {
    let mut p = Price::default();
    let ty = inst.ty;
    let f64t = ty == Ty::F64;
    let wide = ty.bits() == 64 && !ty.float();
    let mut put = |c: usize, n: f32| p.issue[c] += n;
    let mut latency = lat.alu;
    match inst.op {
        Op::Mov => {
            let special = matches!(inst.a, Src::R(r) if (r as usize) < SPECIALS.len());
            if special {
                put(ALU, 1.0);
                latency = lat.sfu;
            } else {
                // Most register moves disappear in register allocation.
                put(ALU, 0.25);
            }
        }
        Op::Pack | Op::Unpack => put(ALU, 0.25),
        Op::Cvta { .. } | Op::Nop | Op::Fence => {}
        Op::LdKParam => put(ALU, 0.1),
        Op::Add | Op::Sub | Op::Fma => {
            if f64t {
                put(FP64, 1.0);
                latency = lat.fp64;
            } else if ty.float() {
                put(FMA, 1.0);
                latency = lat.fma;
            } else {
                put(ALU, if wide { 2.0 } else { 1.0 });
            }
        }
        Op::Mul(m) | Op::Mad(m) => {
            if f64t {
                put(FP64, 1.0);
                latency = lat.fp64;
            } else if ty.float() {
                put(FMA, 1.0);
                latency = lat.fma;
            } else {
                put(FMA, if wide && m == MulMode::Lo { 3.0 } else { 1.0 });
                latency = lat.fma;
            }
        }
        Op::Mul24(_) | Op::Mad24(_) => {
            put(FMA, 1.0);
            latency = lat.fma;
        }
        Op::Sad => put(ALU, 2.0),
        // IDP: an integer-pipe instruction on sm_90.
        Op::Dp4a { .. } | Op::Dp2a { .. } => put(ALU, 2.0),
        Op::Div | Op::Rem => latency = division(inst, lat, &mut p.issue),
        Op::Abs | Op::Neg => put(ALU, if ty.float() { 0.5 } else { 1.0 }),
        Op::Min | Op::Max | Op::Copysign | Op::Prmt | Op::Lop3 | Op::Testp(_) => {
            if f64t {
                put(FP64, 1.0);
                latency = lat.fp64;
            } else {
                put(ALU, if wide { 2.0 } else { 1.0 });
            }
        }
        Op::And | Op::Or | Op::Xor | Op::Not | Op::CNot | Op::Shl | Op::Shr => {
            put(ALU, if wide { 2.0 } else { 1.0 })
        }
        Op::Shf { .. } | Op::Carry { .. } => put(ALU, 1.0),
        Op::Popc | Op::Clz | Op::Brev | Op::Bfind { .. } => {
            put(SFU, 0.25);
            put(ALU, if wide { 2.0 } else { 1.0 });
            latency = lat.sfu;
        }
        Op::Bfe | Op::Bfi => put(ALU, 2.0),
        Op::Rcp | Op::Sqrt | Op::Rsqrt => latency = reciprocal_or_root(inst, lat, &mut p.issue),
        Op::Sin | Op::Cos | Op::Lg2 => {
            put(SFU, 1.0);
            put(FMA, 1.0);
            latency = lat.sfu + lat.fma;
        }
        Op::Ex2 | Op::Tanh => {
            put(SFU, 1.0);
            latency = lat.sfu;
        }
        Op::Setp(..) | Op::Set(..) | Op::Selp | Op::Slct => {
            latency = comparison(inst, lat, &mut p.issue)
        }
        Op::Cvt => latency = conversion(inst, lat, &mut p.issue),
        Op::Ld | Op::St | Op::Atom(_) => {
            if inst.space != Space::Param {
                put(MEM, 1.0);
            }
        }
        Op::Bra | Op::Exit | Op::Bar { .. } | Op::BarRed(_) | Op::Trap => put(CTRL, 1.0),
        Op::Call | Op::Ret => put(CTRL, 2.0),
        Op::AssertFail => put(CTRL, 4.0),
        Op::Vprintf => put(CTRL, 50.0),
        Op::BarWarp => put(CTRL, 0.5),
        Op::Shfl(_) => {
            put(SHFL, 1.0);
            latency = lat.shared;
        }
        Op::Vote(_) | Op::Activemask => put(ALU, 1.0),
        Op::Redux(_) => {
            put(ALU, 2.0);
            latency = lat.shared;
        }
        Op::ReadSpecial(_) => {
            put(ALU, 1.0);
            latency = lat.sfu;
        }
    }
    p.latency = latency;
    p
}

/// A division or remainder: a subroutine but for f32 `.approx`.
fn division(inst: &Inst, lat: &Latencies, issue: &mut [f32; CLASSES]) -> u32 {
    let ty = inst.ty;
    let f64t = ty == Ty::F64;
    let wide = ty.bits() == 64 && !ty.float();
    let mut put = |c: usize, n: f32| issue[c] += n;
    let latency;
    if f64t {
        put(FP64, 10.0);
        put(SFU, 1.0);
        latency = 10 * lat.fp64 + lat.sfu;
    } else if ty.float() {
        if inst.approx {
            put(SFU, 1.0);
            put(FMA, 1.0);
            latency = lat.sfu + lat.fma;
        } else {
            put(FMA, 8.0);
            put(ALU, 2.0);
            put(SFU, 1.0);
            latency = lat.sfu + 6 * lat.fma;
        }
    } else if wide {
        // A 64-bit division is a subroutine of some 70 instructions.
        put(ALU, 40.0);
        put(FMA, 30.0);
        put(CTRL, 4.0);
        latency = 70 * lat.alu;
    } else {
        put(ALU, 8.0);
        put(FMA, 6.0);
        put(SFU, 1.0);
        put(CONV, 2.0);
        latency = lat.sfu + 12 * lat.alu;
    }
    latency
}

/// rcp, sqrt, rsqrt: the SFU, refined by Newton steps unless approximate.
fn reciprocal_or_root(inst: &Inst, lat: &Latencies, issue: &mut [f32; CLASSES]) -> u32 {
    let ty = inst.ty;
    let f64t = ty == Ty::F64;
    let mut put = |c: usize, n: f32| issue[c] += n;
    let latency;
    if f64t {
        put(FP64, 8.0);
        put(SFU, 1.0);
        latency = lat.sfu + 8 * lat.fp64;
    } else if inst.approx || inst.op == Op::Rsqrt {
        put(SFU, 1.0);
        latency = lat.sfu;
    } else {
        put(SFU, 1.0);
        put(FMA, 5.0);
        put(ALU, 2.0);
        latency = lat.sfu + 4 * lat.fma;
    }
    latency
}

/// setp, set (by the wider of the compared and the destination types), selp, slct.
fn comparison(inst: &Inst, lat: &Latencies, issue: &mut [f32; CLASSES]) -> u32 {
    let ty = inst.ty;
    let mut put = |c: usize, n: f32| issue[c] += n;
    let mut latency = lat.alu;
    let t = if matches!(inst.op, Op::Setp(..) | Op::Set(..)) {
        inst.ty2.max_by_bits(ty)
    } else {
        ty
    };
    if t == Ty::F64 {
        put(FP64, 1.0);
        latency = lat.fp64;
    } else {
        put(
            ALU,
            if t.bits() == 64 && !t.float() {
                2.0
            } else {
                1.0
            },
        );
    }
    latency
}

/// cvt: the conversion pipe between int and float or float formats, else the ALU.
fn conversion(inst: &Inst, lat: &Latencies, issue: &mut [f32; CLASSES]) -> u32 {
    let ty = inst.ty;
    let mut put = |c: usize, n: f32| issue[c] += n;
    let mut latency = lat.alu;
    let (d, s) = (ty, inst.ty2);
    if d == Ty::F64 || s == Ty::F64 {
        put(FP64, 1.0);
        latency = lat.fp64;
    } else if d.float() != s.float() || (d.float() && d != s) || inst.rnd_int {
        put(CONV, 1.0);
        latency = lat.sfu;
    } else if d.bits() > s.bits() && d.signed() {
        // Sign extension to 64 bits.
        put(ALU, 1.0);
    } else {
        put(ALU, 0.25);
    }
    latency
}

trait Wider {
    fn max_by_bits(self, other: Ty) -> Ty;
}
impl Wider for Ty {
    fn max_by_bits(self, other: Ty) -> Ty {
        if other.bits() > self.bits() || (other == Ty::F64) {
            other
        } else {
            self
        }
    }
}

/// What one block did (counts are warp-level unless named otherwise).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BlockProfile {
    /// SASS-equivalent warp instructions per class ([`CLASS_NAMES`]).
    pub issue: [f64; CLASSES],
    pub warp_insts: u64,
    pub lane_insts: u64,
    pub gld_requests: u64,
    pub gld_sectors: u64,
    /// Distinct 128-byte lines per request, summed.
    pub gld_lines: u64,
    /// The L1's cycles for global loads, summed over requests: its 32 banks of 4 bytes serve
    /// one word each per cycle whatever line it is in, and its tags about 4 sectors a cycle
    /// (measured: ci/estimate/probe_l1.py's `c_stride*_l1`).
    #[serde(default)]
    pub gld_wavefronts: u64,
    pub gld_bytes: u64,
    pub gst_requests: u64,
    pub gst_sectors: u64,
    pub gst_lines: u64,
    pub gst_bytes: u64,
    /// Global atomics: warp instructions, lane operations, sectors, and the lanes of each
    /// instruction that hit its most contended address, summed.
    pub gatom_requests: u64,
    pub gatom_ops: u64,
    pub gatom_sectors: u64,
    pub gatom_serial: u64,
    /// Global-load sectors the block's L1 held, and those it fetched from L2.
    pub l1_hit_sectors: u64,
    pub l1_miss_sectors: u64,
    /// Misses on sectors this block had not touched before (cold in its L1).
    pub l1_first_touch_sectors: u64,
    pub shared_requests: u64,
    pub shared_wavefronts: u64,
    pub shared_atom_ops: u64,
    pub shared_atom_serial: u64,
    pub local_requests: u64,
    pub local_wavefronts: u64,
    /// Block-wide barrier releases.
    pub barriers: u64,
    /// The block's critical path, cycles, with first-touch misses from DRAM, and with every
    /// miss from L2.
    pub cp_cycles: u64,
    pub cp_l2_cycles: u64,
}

/// A block's memory footprint: global sectors (address >> 5) it loaded and stored, and the
/// addresses of its global atomics with their operation counts.
#[derive(Debug, Clone, Default)]
pub struct Touched {
    pub loaded: HashSet<u64>,
    pub stored: HashSet<u64>,
    pub atomics: HashMap<u64, u64>,
}

/// The longest forward branch (in PTX instructions) taken to become predication.
const PREDICATED_SPAN: u32 = 8;

fn max2(a: Cycles, b: Cycles) -> Cycles {
    [a[0].max(b[0]), a[1].max(b[1])]
}

fn plus(a: Cycles, n: u64) -> Cycles {
    [a[0] + n, a[1] + n]
}

/// Where a warp's issue stands in one scenario: the current straight-line segment started at
/// `start`, has issued `issued` instructions, the last of them (in time) at `last`.
#[derive(Debug, Clone, Copy, Default)]
struct Segment {
    start: u64,
    issued: u64,
    last: u64,
}

/// One block's cost counters while it runs.
pub struct BlockCost<'p> {
    prices: &'p [Price],
    lat: Latencies,
    nregs: usize,
    /// Per warp and scenario: its straight-line segment; per warp, register and scenario: the
    /// cycle the register's value is ready.
    clocks: Vec<[Segment; SCENARIOS]>,
    ready: Vec<Cycles>,
    /// Issue cycles of the instruction being executed (memory instructions finish their
    /// latency once their addresses are known).
    issued: Cycles,
    l1: L1,
    /// Merged shared loads: per warp and group, whether its head merged this time; per group,
    /// whether it was ever found misaligned (then never merged).
    merge_slots: usize,
    merged: Vec<bool>,
    misaligned: Vec<bool>,
    pub profile: BlockProfile,
    pub touched: Touched,
}

impl<'p> BlockCost<'p> {
    pub fn new(prices: &'p [Price], cfg: &CostConfig, nregs: usize, warps: usize) -> Self {
        let slots = prices
            .iter()
            .filter_map(|p| match p.merge {
                Merge::Head { slot, .. } => Some(slot as usize + 1),
                _ => None,
            })
            .max()
            .unwrap_or(0);
        BlockCost {
            prices,
            lat: cfg.latencies,
            nregs,
            clocks: vec![[Segment::default(); SCENARIOS]; warps],
            ready: vec![[0; SCENARIOS]; nregs * warps],
            issued: [0; SCENARIOS],
            l1: L1::new(cfg.l1_bytes),
            merge_slots: slots,
            merged: vec![false; slots * warps],
            misaligned: vec![false; slots],
            profile: BlockProfile::default(),
            touched: Touched::default(),
        }
    }

    #[inline]
    fn src_ready(&self, base: usize, s: Src) -> Cycles {
        match s {
            Src::R(r) if (r as usize) < self.nregs => self.ready[base + r as usize],
            _ => [0; SCENARIOS],
        }
    }

    /// Warp `w` issues the instruction at `pc` for `lanes` lanes.
    #[inline]
    pub fn issue(&mut self, w: usize, pc: u32, inst: &Inst, lanes: u32) {
        let p = self.prices[pc as usize];
        let prof = &mut self.profile;
        for (a, b) in prof.issue.iter_mut().zip(p.issue) {
            *a += b as f64;
        }
        prof.warp_insts += 1;
        prof.lane_insts += lanes as u64;
        let base = w * self.nregs;
        let mut deps = [0u64; SCENARIOS];
        for s in [inst.a, inst.b, inst.c, inst.e] {
            deps = max2(deps, self.src_ready(base, s));
        }
        if inst.guard != NOREG {
            deps = max2(deps, self.src_ready(base, Src::R(inst.guard)));
        }
        if matches!(inst.op, Op::St | Op::Pack | Op::Atom(_)) {
            for &r in &inst.vregs[..(inst.vec as usize).min(4)] {
                deps = max2(deps, self.src_ready(base, Src::R(r)));
            }
        }
        // A conditional forward branch over a few instructions becomes predication in SASS:
        // it does not end the straight-line code.
        let predicated = inst.op == Op::Bra
            && inst.guard != NOREG
            && inst.aux > pc
            && inst.aux - pc <= PREDICATED_SPAN;
        let control = !predicated && (inst.op.is_control() || inst.op == Op::BarWarp);
        let mut t = [0u64; SCENARIOS];
        for (k, seg) in self.clocks[w].iter_mut().enumerate() {
            let mut at = (seg.start + seg.issued).max(deps[k]);
            *seg = if control {
                // Last in its basic block: after everything before it.
                at = at.max(seg.last + 1);
                Segment {
                    start: at + 1,
                    issued: 0,
                    last: at,
                }
            } else {
                Segment {
                    start: seg.start,
                    issued: seg.issued + 1,
                    last: seg.last.max(at),
                }
            };
            t[k] = at;
        }
        self.issued = t;
        let memory = matches!(inst.op, Op::Ld | Op::Atom(_)) && inst.space != Space::Param;
        // A memory instruction's results are set again once the level is known.
        let done = plus(t, if memory { self.lat.l1_hit } else { p.latency } as u64);
        self.set_dests(base, inst, done);
    }

    fn set_dests(&mut self, base: usize, inst: &Inst, done: Cycles) {
        for r in [inst.d, inst.d2] {
            if r != NOREG && (r as usize) < self.nregs {
                self.ready[base + r as usize] = done;
            }
        }
        if matches!(inst.op, Op::Ld | Op::Unpack) {
            for &r in &inst.vregs[..(inst.vec as usize).min(4)] {
                if r != NOREG && (r as usize) < self.nregs {
                    self.ready[base + r as usize] = done;
                }
            }
        }
    }

    /// A global load, store or atomic of warp `w`: `addrs` of the lanes in `mask`, `size`
    /// bytes each.
    pub fn global(&mut self, w: usize, inst: &Inst, addrs: &[u64; 32], mask: u32, size: u32) {
        let atomic = matches!(inst.op, Op::Atom(_));
        let load = inst.op == Op::Ld;
        let mut sectors: Vec<u64> = Vec::with_capacity(32);
        let mut m = mask;
        while m != 0 {
            let l = m.trailing_zeros() as usize;
            m &= m - 1;
            let a = addrs[l];
            let mut s = a >> 5;
            let e = a.saturating_add(size.max(1) as u64 - 1) >> 5;
            while s <= e && sectors.len() < 128 {
                sectors.push(s);
                s += 1;
            }
        }
        sectors.sort_unstable();
        sectors.dedup();
        let mut lines = 0u64;
        let mut last = u64::MAX;
        for &s in &sectors {
            if s >> 2 != last {
                lines += 1;
                last = s >> 2;
            }
        }
        let bytes = mask.count_ones() as u64 * size as u64;
        let prof = &mut self.profile;
        let n = sectors.len() as u64;
        let t0 = self.issued;
        if atomic {
            prof.gatom_requests += 1;
            prof.gatom_ops += mask.count_ones() as u64;
            prof.gatom_sectors += n;
            let mut per: HashMap<u64, u32> = HashMap::new();
            let mut m = mask;
            while m != 0 {
                let l = m.trailing_zeros() as usize;
                m &= m - 1;
                *per.entry(addrs[l]).or_default() += 1;
                *self.touched.atomics.entry(addrs[l]).or_default() += 1;
            }
            let worst = per.values().copied().max().unwrap_or(0) as u64;
            prof.gatom_serial += worst;
            for &s in &sectors {
                self.touched.stored.insert(s);
            }
            let done = plus(t0, self.lat.atomic as u64 + 2 * worst);
            self.finish(w, inst, done);
        } else if load {
            prof.gld_requests += 1;
            prof.gld_sectors += n;
            prof.gld_lines += lines;
            prof.gld_wavefronts += global_wavefronts(addrs, mask, size).max(n.div_ceil(4));
            prof.gld_bytes += bytes;
            let hit = self.lat.l1_hit as u64;
            let mut done = plus(t0, hit);
            for &s in &sectors {
                let first = self.touched.loaded.insert(s) && !self.touched.stored.contains(&s);
                let l2 = self.lat.l2_hit as u64;
                let miss = if first {
                    [self.lat.dram as u64, l2]
                } else {
                    [l2, l2]
                };
                let (held, arrives) = self.l1.access(s, t0, miss, hit);
                if held {
                    self.profile.l1_hit_sectors += 1;
                } else {
                    self.profile.l1_miss_sectors += 1;
                    if first {
                        self.profile.l1_first_touch_sectors += 1;
                    }
                }
                done = max2(done, arrives);
            }
            // Each extra line takes the L1 another cycle.
            done = plus(done, lines.saturating_sub(1));
            self.finish(w, inst, done);
        } else {
            prof.gst_requests += 1;
            prof.gst_sectors += n;
            prof.gst_lines += lines;
            prof.gst_bytes += bytes;
            for &s in &sectors {
                self.touched.stored.insert(s);
            }
        }
    }

    /// A shared-memory access of warp `w`.
    pub fn shared(
        &mut self,
        w: usize,
        pc: u32,
        inst: &Inst,
        addrs: &[u64; 32],
        mask: u32,
        mut size: u32,
    ) {
        match self.prices[pc as usize].merge {
            Merge::Head { slot, width } => {
                let s = slot as usize;
                let bytes = 4 * width as u64;
                let mut aligned = !self.misaligned[s];
                let mut m = mask;
                while m != 0 && aligned {
                    let l = m.trailing_zeros() as usize;
                    m &= m - 1;
                    aligned = addrs[l].is_multiple_of(bytes);
                }
                self.misaligned[s] |= !aligned;
                self.merged[w * self.merge_slots + s] = aligned;
                if aligned {
                    size = bytes as u32;
                }
            }
            Merge::Member { slot } if self.merged[w * self.merge_slots + slot as usize] => {
                // Part of its head's wider load: no instruction, no wavefront of its own.
                self.profile.issue[MEM] -= self.prices[pc as usize].issue[MEM] as f64;
                let done = plus(self.issued, self.lat.shared as u64);
                self.finish(w, inst, done);
                return;
            }
            _ => {}
        }
        let wf = wavefronts(addrs, mask, size);
        let prof = &mut self.profile;
        prof.shared_requests += 1;
        prof.shared_wavefronts += wf;
        let mut extra = self.lat.shared as u64 + wf.saturating_sub(1) * 2;
        if matches!(inst.op, Op::Atom(_)) {
            let mut per: HashMap<u64, u32> = HashMap::new();
            let mut m = mask;
            while m != 0 {
                let l = m.trailing_zeros() as usize;
                m &= m - 1;
                *per.entry(addrs[l]).or_default() += 1;
            }
            let worst = per.values().copied().max().unwrap_or(0) as u64;
            prof.shared_atom_ops += mask.count_ones() as u64;
            prof.shared_atom_serial += worst;
            extra += 4 * worst;
        }
        if inst.op != Op::St {
            let done = plus(self.issued, extra);
            self.finish(w, inst, done);
        }
    }

    /// A local-memory access (per-thread arrays, interleaved by the hardware: coalesced).
    pub fn local(&mut self, w: usize, inst: &Inst, mask: u32, size: u32) {
        let wf = (mask.count_ones() as u64 * size as u64)
            .div_ceil(128)
            .max(1);
        self.profile.local_requests += 1;
        self.profile.local_wavefronts += wf;
        if inst.op != Op::St {
            let done = plus(self.issued, self.lat.l1_hit as u64 + wf - 1);
            self.finish(w, inst, done);
        }
    }

    fn finish(&mut self, w: usize, inst: &Inst, done: Cycles) {
        let base = w * self.nregs;
        self.set_dests(base, inst, done);
    }

    /// A barrier released the warps in `warps`: none continues before the last arrived.
    pub fn barrier(&mut self, warps: &[usize], block_wide: bool) {
        for k in 0..SCENARIOS {
            let t = warps
                .iter()
                .map(|&w| self.clocks[w][k].last)
                .max()
                .unwrap_or(0)
                + self.lat.barrier as u64;
            for &w in warps {
                self.clocks[w][k] = Segment {
                    start: t + 1,
                    issued: 0,
                    last: t,
                };
            }
        }
        if block_wide {
            self.profile.barriers += 1;
        }
    }

    /// The block finished: its critical path in each scenario.
    pub fn finish_block(&mut self) {
        let mut cp = [0u64; SCENARIOS];
        for (w, segs) in self.clocks.iter().enumerate() {
            let regs = &self.ready[w * self.nregs..(w + 1) * self.nregs];
            for k in 0..SCENARIOS {
                let r = regs.iter().map(|c| c[k]).max().unwrap_or(0);
                cp[k] = cp[k].max(segs[k].last.max(r));
            }
        }
        self.profile.cp_cycles = cp[0];
        self.profile.cp_l2_cycles = cp[1];
    }
}
