//! The interpreter: runs one thread block as warps of 32 lanes with per-lane program counters
//! (independent thread scheduling). A warp executes the group of lanes that share the lowest
//! program counter, so diverged lanes reconverge where their paths meet. Every decoded
//! instruction runs over the group's lanes at once, with registers stored lane-contiguous.
//! Memory checks (memcheck, racecheck, initcheck, synccheck, shfl masks) and metrics are
//! collected as it goes.

use super::cost::{self, BlockCost};
use super::decode::*;
use super::float::{self, Rnd};
use super::mem::GlobalMem;
use super::parse::Space;
use crate::backend::{Diagnostic, LaunchDims, Metrics};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// Backward branches a group may take in a row, with other groups of its warp waiting,
/// before it yields to them.
const SPIN_LIMIT: u32 = 4096;

/// Output cap for device printf per launch.
pub const PRINTF_CAP: usize = 1 << 20;

pub struct LaunchCtx<'a> {
    pub prog: &'a Program,
    pub kernel: &'a Kernel,
    pub dims: LaunchDims,
    pub params: &'a [u8],
    pub gmem: &'a GlobalMem,
    pub cbank: &'a [u8],
    pub deadline: Instant,
    pub abort: &'a AtomicBool,
    /// Cost counters for the speed estimate (`EmuBackend::launch_profiled`): per-instruction
    /// prices and the L1 and latencies to model.
    pub cost: Option<(&'a [cost::Price], &'a cost::CostConfig)>,
    /// What `%globaltimer`, `%clock64` and `%gridid` start from (`specials`).
    pub clocks: super::specials::Clocks,
}

/// What one block produced besides memory writes.
#[derive(Default)]
pub struct BlockOut {
    pub metrics: Metrics,
    pub diags: Vec<(DiagKey, Diagnostic)>,
    pub printf: Vec<u8>,
    pub fault: Option<String>,
    /// Where most of the block's live threads were when the launch's deadline passed
    /// (`backend::HUNG`).
    pub hung: Option<Diagnostic>,
    /// Per metric of [`HOT_METRICS`] and instruction, its cost there (`Metrics::hot_lines`):
    /// counted only where there is one, so a clean kernel pays nothing.
    pub hot: HashMap<(u8, u32), u64>,
    /// The cost counters, when the launch asked for them.
    pub cost: Option<Box<(cost::BlockProfile, cost::Touched)>>,
}

/// The metrics whose cost the emulator places on lines, by index in [`BlockOut::hot`]: bank
/// conflicts, unused bytes of loaded and of stored global sectors, divergent branches.
pub const HOT_METRICS: [&str; 4] = [
    "shared_bank_conflicts",
    "global_load_efficiency",
    "global_store_efficiency",
    "branch_divergence",
];

/// Repeats of the same problem at the same instruction fold into one diagnostic.
pub type DiagKey = (&'static str, u32, u8);

#[derive(Clone, Copy, Default)]
struct Shadow {
    init: u8,
    w_epoch: u32,
    writer: u32,
    r_epoch: u32,
    reader: u32,
    /// The writer's and the reader's warp's `sync_epoch` at the access: lanes of one warp
    /// that touch the same word with no warp-level sync in between race since Volta.
    w_sync: u32,
    r_sync: u32,
}
const MANY: u32 = u32::MAX;

struct Warp {
    regs: Vec<u64>,
    lane_pc: [u32; 32],
    valid: u32,
    exited: u32,
    blocked: u32,
    bar_pred: u32,
    /// Barrier id each blocked lane waits on.
    bar_id: [u8; 32],
    /// Lanes that were alive but elsewhere when others of this warp arrived at the block-wide
    /// barrier at `bar_watch_pc` (see `Op::Bar`): if they branch back above it before it
    /// releases, they skipped it inside a loop (synccheck).
    bar_watch: u32,
    bar_watch_pc: u32,
    cur: u32,
    cur_pc: u32,
    wait_min: u32,
    stack: Vec<Vec<(u32, u32)>>,
    local: Vec<u8>,
    fparam: Vec<u8>,
    id: u32,
    /// Warp-level syncs (`bar.warp.sync`, `*.sync` collectives) so far (racecheck).
    sync_epoch: u32,
    clock: u64,
    /// Backward branches taken, and instructions left for a group run out of turn (see
    /// `yield_group`).
    backjumps: u32,
    forced: u32,
}

impl Warp {
    /// Store the running group's pc back into its lanes.
    fn sync_pc(&mut self) {
        let mut m = self.cur;
        while m != 0 {
            let l = m.trailing_zeros() as usize;
            m &= m - 1;
            self.lane_pc[l] = self.cur_pc;
        }
    }

    /// Choose the lanes with the lowest pc among those that can run.
    fn pick(&mut self) {
        self.pick_among(self.valid & !self.exited & !self.blocked);
        self.forced = 0;
        self.backjumps = 0;
    }

    /// Independent thread scheduling guarantees progress to every diverged group: a group that
    /// keeps looping (spinning on a lock another group of the warp holds) hands the warp to
    /// the other groups for a while.
    fn yield_group(&mut self) -> bool {
        let spin = self.cur;
        let others = self.valid & !self.exited & !self.blocked & !spin;
        if others == 0 {
            return false;
        }
        self.sync_pc();
        self.pick_among(others);
        self.forced = 256;
        self.backjumps = 0;
        true
    }

    fn pick_among(&mut self, live: u32) {
        if live == 0 {
            self.cur = 0;
            return;
        }
        let mut min = u32::MAX;
        let mut m = live;
        while m != 0 {
            let l = m.trailing_zeros() as usize;
            m &= m - 1;
            min = min.min(self.lane_pc[l]);
        }
        let mut cur = 0;
        let mut wait = u32::MAX;
        let mut m = live;
        while m != 0 {
            let l = m.trailing_zeros() as usize;
            m &= m - 1;
            if self.lane_pc[l] == min {
                cur |= 1 << l;
            } else {
                wait = wait.min(self.lane_pc[l]);
            }
        }
        self.cur = cur;
        self.cur_pc = min;
        self.wait_min = wait;
    }

    fn reschedule(&mut self) {
        self.sync_pc();
        self.pick();
    }
}

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
fn rd(regs: &[u64], s: Src, l: usize) -> u64 {
    match s {
        Src::R(r) => regs[r as usize * 32 + l],
        Src::I(v) => v,
    }
}

#[inline(always)]
fn trunc(v: u64, bits: u32) -> u64 {
    if bits >= 64 {
        v
    } else {
        v & ((1u64 << bits) - 1)
    }
}
#[inline(always)]
fn sext(v: u64, bits: u32) -> i64 {
    if bits >= 64 {
        v as i64
    } else {
        ((v << (64 - bits)) as i64) >> (64 - bits)
    }
}
#[inline(always)]
fn f32v(v: u64) -> f32 {
    f32::from_bits(v as u32)
}
#[inline(always)]
fn b32(f: f32) -> u64 {
    f.to_bits() as u64
}

/// Read a value of type `ty` as f64 (floats) for conversions.
fn as_f64(v: u64, ty: Ty) -> f64 {
    match ty {
        Ty::F32 => f32v(v) as f64,
        Ty::F64 => f64::from_bits(v),
        Ty::F16 => float::from_small(v as u16, float::F16),
        Ty::BF16 => float::from_small(v as u16, float::BF16),
        _ => 0.0,
    }
}

/// Shared memory one block holds: the static variables, then the dynamic array at its base.
/// The launch checks this against the per-block limit, so it fits in `u32` when it runs.
pub fn shared_block_bytes(k: &Kernel, dynamic: u32) -> u64 {
    if dynamic == 0 {
        k.static_shared as u64
    } else {
        (k.dyn_shared_base as u64 + dynamic as u64).max(k.static_shared as u64)
    }
}

pub struct BlockRunner<'a, 'c> {
    ctx: &'c LaunchCtx<'a>,
    warps: Vec<Warp>,
    shared: Vec<u8>,
    shadow: Vec<Shadow>,
    shared_size: u32,
    epoch: u32,
    ctaid: [u32; 3],
    out: BlockOut,
    diag_index: HashMap<DiagKey, usize>,
    steps: u64,
    ghint: usize,
    printf_room: usize,
    /// Threads arrived at each counted (`bar.sync id, count`) barrier.
    arrivals: [u32; 16],
    expected: [u32; 16],
    cost: Option<BlockCost<'a>>,
}

/// Stop reasons from a warp's run.
enum Stop {
    Fault(String),
}

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

impl<'a, 'c> BlockRunner<'a, 'c> {
    pub fn new(ctx: &'c LaunchCtx<'a>, ctaid: [u32; 3]) -> Self {
        let dims = ctx.dims;
        let nthreads = dims.threads_per_block() as u32;
        let nwarps = nthreads.div_ceil(32);
        let nregs = ctx.prog.nregs as usize;
        let shared_size = shared_block_bytes(ctx.kernel, dims.shared_bytes) as u32;
        let local = ctx.kernel.local_bytes as usize;
        let fp = ctx.prog.fparam_bytes as usize;
        let mut warps = Vec::with_capacity(nwarps as usize);
        for w in 0..nwarps {
            let mut regs = vec![0u64; nregs * 32];
            let mut valid = 0u32;
            for l in 0..32u32 {
                let t = w * 32 + l;
                if t >= nthreads {
                    break;
                }
                valid |= 1 << l;
                let tx = t % dims.block[0];
                let ty = (t / dims.block[0]) % dims.block[1];
                let tz = t / (dims.block[0] * dims.block[1]);
                let linear = super::specials_linear(ctaid, dims.grid);
                let sm = super::specials::smid(linear);
                let one_cluster = |k: usize| [ctaid[k] as u64, dims.grid[k] as u64];
                let vals: [u64; SPECIALS.len()] = [
                    tx as u64,
                    ty as u64,
                    tz as u64,
                    dims.block[0] as u64,
                    dims.block[1] as u64,
                    dims.block[2] as u64,
                    ctaid[0] as u64,
                    ctaid[1] as u64,
                    ctaid[2] as u64,
                    dims.grid[0] as u64,
                    dims.grid[1] as u64,
                    dims.grid[2] as u64,
                    l as u64,
                    super::specials::warpid(linear, w as u64, nwarps as u64),
                    super::specials::WARP_SLOTS,
                    sm,
                    super::specials::SMS,
                    ctx.clocks.grid_id,
                    1u64 << l,
                    (1u64 << l) - 1,
                    (1u64 << (l + 1)) - 1,
                    trunc(!((1u64 << (l + 1)) - 1), 32),
                    trunc(!((1u64 << l) - 1), 32),
                    dims.shared_bytes as u64,
                    shared_size as u64,
                    32,
                    // %clusterid, %nclusterid, %cluster_ctaid, %cluster_nctaid (x, y, z).
                    one_cluster(0)[0],
                    one_cluster(1)[0],
                    one_cluster(2)[0],
                    one_cluster(0)[1],
                    one_cluster(1)[1],
                    one_cluster(2)[1],
                    0,
                    0,
                    0,
                    1,
                    1,
                    1,
                    0,
                    1,
                    0,
                    // %aggr_smem_size: the block's shared memory and the 1 KiB sm_90 reserves.
                    shared_size as u64 + 1024,
                    0,
                    1024,
                    1024,
                    0,
                    // %pm0..%pm7, %pm0_64..%pm7_64.
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                ];
                for (k, v) in vals.iter().enumerate() {
                    regs[k * 32 + l as usize] = *v;
                }
            }
            let mut warp = Warp {
                regs,
                lane_pc: [ctx.kernel.entry_pc; 32],
                valid,
                exited: 0,
                blocked: 0,
                bar_pred: 0,
                bar_id: [0; 32],
                bar_watch: 0,
                bar_watch_pc: 0,
                cur: 0,
                cur_pc: 0,
                wait_min: u32::MAX,
                stack: Vec::new(),
                local: vec![0u8; local * 32],
                fparam: vec![0u8; fp * 32],
                id: w,
                sync_epoch: 0,
                clock: 0,
                backjumps: 0,
                forced: 0,
            };
            warp.pick();
            warps.push(warp);
        }
        BlockRunner {
            ctx,
            warps,
            shared: vec![0u8; shared_size as usize],
            shadow: vec![Shadow::default(); (shared_size as usize).div_ceil(4)],
            shared_size,
            epoch: 1,
            ctaid,
            out: BlockOut::default(),
            diag_index: HashMap::new(),
            steps: 0,
            ghint: 0,
            printf_room: PRINTF_CAP,
            arrivals: [0; 16],
            expected: [0; 16],
            cost: ctx
                .cost
                .map(|(p, c)| BlockCost::new(p, c, nregs, nwarps as usize)),
        }
    }

    fn thread_of(&self, warp: u32, lane: usize) -> [u32; 3] {
        let b = self.ctx.dims.block;
        let t = warp * 32 + lane as u32;
        [t % b[0], (t / b[0]) % b[1], t / (b[0] * b[1])]
    }

    fn diag(
        &mut self,
        tool: &'static str,
        kind: u8,
        pc: u32,
        warp: u32,
        lane: usize,
        message: impl FnOnce() -> String,
    ) {
        let key = (tool, pc, kind);
        if let Some(&i) = self.diag_index.get(&key) {
            self.out.diags[i].1.repeats += 1;
            return;
        }
        let prog = self.ctx.prog;
        let (file, line) = prog.locs.get(pc as usize).copied().unwrap_or((0, 0));
        let d = Diagnostic {
            tool: tool.to_string(),
            message: message(),
            thread: self.thread_of(warp, lane),
            block: self.ctaid,
            instruction: prog.texts.get(pc as usize).cloned().unwrap_or_default(),
            file: (line > 0).then(|| prog.files.get(&file).cloned().unwrap_or_default()),
            line: (line > 0).then_some(line),
            repeats: 0,
        };
        self.diag_index.insert(key, self.out.diags.len());
        self.out.diags.push((key, d));
    }

    /// Where the most live threads of this block are now (a kernel stopped at its deadline:
    /// the loop that did not end), as a [`crate::backend::HUNG`] diagnostic.
    fn hung_at(&mut self) -> Option<Diagnostic> {
        let prog = self.ctx.prog;
        let mut count: HashMap<u32, (u32, u32, usize)> = HashMap::new();
        for w in &mut self.warps {
            w.sync_pc();
            let live = w.valid & !w.exited;
            let id = w.id;
            lanes!(live, l, {
                let e = count.entry(w.lane_pc[l]).or_insert((0, id, l));
                e.0 += 1;
            });
        }
        // The most threads, then the lowest pc: the same answer on every run.
        let (&pc, &(_, warp, lane)) = count
            .iter()
            .max_by(|a, b| a.1.0.cmp(&b.1.0).then(b.0.cmp(a.0)))?;
        let (file, line) = prog.locs.get(pc as usize).copied().unwrap_or((0, 0));
        Some(Diagnostic {
            tool: crate::backend::HUNG.to_string(),
            message: "still running here when the launch's deadline passed".into(),
            thread: self.thread_of(warp, lane),
            block: self.ctaid,
            instruction: prog.texts.get(pc as usize).cloned().unwrap_or_default(),
            file: (line > 0).then(|| prog.files.get(&file).cloned().unwrap_or_default()),
            line: (line > 0).then_some(line),
            repeats: 0,
        })
    }

    /// Run the block to completion.
    pub fn run(mut self, printf_room: usize) -> BlockOut {
        self.printf_room = printf_room;
        if let Err(Stop::Fault(f)) = self.run_inner() {
            self.out.fault = Some(f);
        }
        if let Some(mut c) = self.cost.take() {
            c.finish_block();
            self.out.cost = Some(Box::new((c.profile, c.touched)));
        }
        self.out
    }

    fn run_inner(&mut self) -> Result<(), Stop> {
        // A profiled block interleaves its warps finely, as the GPU's schedulers do, so that
        // the cost counters' L1 sees one warp's line reused by the next (warps that ran
        // thousands of instructions apart would evict it first).
        let slice: u32 = if self.cost.is_some() { 32 } else { 4096 };
        loop {
            let mut progressed = false;
            for w in 0..self.warps.len() {
                if self.warps[w].cur != 0 {
                    progressed = true;
                    self.run_warp(w, slice)?;
                }
            }
            if self.ctx.abort.load(Ordering::Relaxed) {
                return Err(Stop::Fault("launch aborted".into()));
            }
            if Instant::now() > self.ctx.deadline {
                self.ctx.abort.store(true, Ordering::Relaxed);
                self.out.hung = self.hung_at();
                return Err(Stop::Fault(
                    "deadline exceeded: the kernel ran too long (infinite loop?)".into(),
                ));
            }
            if !progressed {
                if self.warps.iter().all(|w| w.blocked == 0) {
                    return Ok(());
                }
                self.release_barrier();
            }
        }
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
    fn release_barrier(&mut self) {
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

    fn run_warp(&mut self, wi: usize, slice: u32) -> Result<(), Stop> {
        let prog = self.ctx.prog;
        let mut budget = slice;
        while budget > 0 {
            let w = &mut self.warps[wi];
            if w.cur == 0 {
                return Ok(());
            }
            budget -= 1;
            let pc = w.cur_pc;
            let inst = &prog.insts[pc as usize];
            let cur = w.cur;
            let mut mask = cur;
            if inst.guard != NOREG {
                let base = inst.guard as usize * 32;
                let mut pm = 0u32;
                lanes!(cur, l, {
                    if (w.regs[base + l] != 0) != inst.guard_neg {
                        pm |= 1 << l;
                    }
                });
                mask = pm;
            }
            w.clock += 1;
            let met = &mut self.out.metrics;
            met.warp_instructions += 1;
            met.lane_instructions += cur.count_ones() as u64;
            self.steps += 1;
            if let Some(c) = self.cost.as_mut() {
                c.issue(wi, pc, inst, cur.count_ones());
            }
            if inst.op.is_control() || inst.op == Op::AssertFail {
                self.control(wi, inst, pc, mask)?;
                continue;
            }
            if mask != 0 {
                self.exec(wi, inst, pc, mask)?;
            }
            let w = &mut self.warps[wi];
            w.cur_pc += 1;
            if w.forced > 0 {
                w.forced -= 1;
                if w.forced == 0 {
                    w.reschedule();
                }
            } else if w.cur_pc >= w.wait_min {
                w.reschedule();
            }
        }
        Ok(())
    }

    fn control(&mut self, wi: usize, inst: &Inst, pc: u32, mask: u32) -> Result<(), Stop> {
        let prog = self.ctx.prog;
        match inst.op {
            Op::Bra => {
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
            }
            Op::Call => {
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
            }
            Op::Ret | Op::Exit => {
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
            }
            Op::Bar { arrive } => {
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
            }
            Op::BarRed(_) => {
                let w = &mut self.warps[wi];
                let cur = w.cur;
                lanes!(cur, l, {
                    let p = (rd(&w.regs, inst.c, l) != 0) != inst.c_neg;
                    w.bar_pred = (w.bar_pred & !(1 << l)) | ((p as u32) << l);
                    w.lane_pc[l] = if mask >> l & 1 != 0 { pc } else { pc + 1 };
                });
                w.blocked |= mask;
                w.pick();
            }
            Op::Trap => {
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
            }
            Op::AssertFail => {
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
            }
            _ => unreachable!(),
        }
        Ok(())
    }

    fn read_cstr(&mut self, addr: u64) -> String {
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
    fn generic_read(&mut self, addr: u64, size: u32) -> Option<u64> {
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

    fn exec(&mut self, wi: usize, inst: &Inst, pc: u32, mask: u32) -> Result<(), Stop> {
        let ty = inst.ty;
        let bits = ty.bits();
        if matches!(
            inst.op,
            Op::BarWarp | Op::Shfl(_) | Op::Vote(_) | Op::Redux(_)
        ) {
            // A warp-level sync: what its lanes wrote to shared memory before it is ordered
            // with what they read after it (racecheck, `check_shared`).
            let w = &mut self.warps[wi];
            w.sync_epoch = w.sync_epoch.wrapping_add(1);
        }
        match inst.op {
            Op::Ld | Op::St | Op::Atom(_) => return self.memory(wi, inst, pc, mask),
            Op::LdKParam => {
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
                return Ok(());
            }
            Op::Shfl(mode) => return self.shfl(wi, inst, pc, mask, mode),
            Op::Vote(mode) => {
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
                return Ok(());
            }
            Op::Redux(op) => {
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
                return Ok(());
            }
            Op::Activemask => {
                let w = &mut self.warps[wi];
                let v = w.cur as u64;
                let d = inst.d as usize * 32;
                lanes!(mask, l, {
                    w.regs[d + l] = v;
                });
                return Ok(());
            }
            Op::BarWarp | Op::Nop => return Ok(()),
            Op::ReadSpecial(s) => {
                use super::specials;
                let nwarps = self.warps.len() as u64;
                let sm = specials::smid(super::specials_linear(self.ctaid, self.ctx.dims.grid));
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
                return Ok(());
            }
            Op::Vprintf => {
                self.vprintf(wi, inst, mask);
                return Ok(());
            }
            _ => {}
        }
        let w = &mut self.warps[wi];
        alu(w, inst, mask);
        Ok(())
    }

    fn shfl(
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

    fn vprintf(&mut self, wi: usize, inst: &Inst, mask: u32) {
        let fp = self.ctx.prog.fparam_bytes as usize;
        lanes!(mask, l, {
            let w = &self.warps[wi];
            let slot = |o: usize| -> u64 {
                let s = l * fp + o;
                w.fparam.get(s..s + 8).map(le).unwrap_or(0)
            };
            let fmt_ptr = slot(inst.off as usize);
            let args_ptr = slot(inst.aux as usize);
            let fmt = self.read_cstr(fmt_ptr);
            let text = self.format_printf(wi, l, &fmt, args_ptr);
            let bytes = text.as_bytes();
            if self.printf_room > 0 {
                let n = bytes.len().min(self.printf_room);
                self.out.printf.extend_from_slice(&bytes[..n]);
                self.printf_room -= n;
                if self.printf_room == 0 {
                    self.out.printf.extend_from_slice(b"\n[output truncated]\n");
                }
            }
            if inst.d != NOREG {
                let d = l * fp + inst.d as usize;
                let w = &mut self.warps[wi];
                if let Some(s) = w.fparam.get_mut(d..d + 4) {
                    s.copy_from_slice(&(bytes.len() as u32).to_le_bytes());
                }
            }
        });
    }

    fn arg_read(&mut self, wi: usize, lane: usize, addr: u64, size: u32) -> u64 {
        let (space, off) = resolve_generic(addr);
        if space == Space::Local {
            let lb = self.ctx.kernel.local_bytes as usize;
            let o = off as usize;
            if o + size as usize <= lb {
                let base = lane * lb + o;
                return le(&self.warps[wi].local[base..base + size as usize]);
            }
            return 0;
        }
        self.generic_read(addr, size).unwrap_or(0)
    }

    fn format_printf(&mut self, wi: usize, lane: usize, fmt: &str, args: u64) -> String {
        let mut out = String::new();
        let mut pos = 0u64;
        let mut it = fmt.chars().peekable();
        while let Some(ch) = it.next() {
            if ch != '%' {
                out.push(ch);
                continue;
            }
            let mut spec = String::from("%");
            let mut conv = None;
            for c in it.by_ref() {
                spec.push(c);
                if c.is_ascii_alphabetic() && !matches!(c, 'l' | 'h' | 'z' | 'j' | 't' | 'L')
                    || c == '%'
                {
                    conv = Some(c);
                    break;
                }
            }
            let Some(conv) = conv else {
                out.push_str(&spec);
                break;
            };
            if conv == '%' {
                out.push('%');
                continue;
            }
            let long = spec.contains('l') || spec.contains('z') || spec.contains('j');
            let size = match conv {
                'f' | 'F' | 'e' | 'E' | 'g' | 'G' | 'a' | 'A' | 's' | 'p' => 8,
                _ if long => 8,
                _ => 4,
            };
            pos = pos.next_multiple_of(size as u64);
            let raw = self.arg_read(wi, lane, args + pos, size);
            pos += size as u64;
            let s = if conv == 's' {
                let s = self.read_cstr(raw);
                cfmt::format_str(&spec, &s)
            } else {
                cfmt::format_one(&spec, conv, raw, size)
            };
            out.push_str(&s);
        }
        out
    }

    /// Loads, stores and atomics: address checks, diagnostics and metrics, then the access.
    fn memory(&mut self, wi: usize, inst: &Inst, pc: u32, mask: u32) -> Result<(), Stop> {
        let ty = inst.ty;
        let esize = ty.bytes();
        let vec = inst.vec as u32;
        let total = esize * vec;
        let is_atom = matches!(inst.op, Op::Atom(_));
        let is_load = inst.op == Op::Ld;
        let generic = inst.aux == 1;
        let fp = self.ctx.prog.fparam_bytes as usize;

        // Function parameter slots are per lane and need no checks.
        if inst.space == Space::Param {
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
            let uniq = count_sectors(&addrs, gmask, total);
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
            let conflicts = bank_conflicts(&addrs, smask, total);
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
                c.global(wi, inst, &addrs, gmask, total);
            }
            if smask != 0 {
                c.shared(wi, pc, inst, &addrs, smask, total);
            }
            if lmask != 0 {
                c.local(wi, inst, lmask, total);
            }
        }

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

    /// Scalar shared loads/stores (the inner loops of tiled kernels) in one pass: addresses,
    /// bounds, bank conflicts, race/init shadow and the access. False: take the checked path.
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

    /// racecheck and initcheck for one shared access.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn check_shared(
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
fn own_warp(who1: u32, then: u32, wid: u32, tid: u32, sync: u32) -> bool {
    let who = who1 - 1;
    who / 32 == wid && (who == tid || then != sync)
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

#[inline(always)]
fn le(b: &[u8]) -> u64 {
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
fn put(dst: &mut [u8], v: u64) {
    match dst.len() {
        1 => dst[0] = v as u8,
        2 => dst.copy_from_slice(&(v as u16).to_le_bytes()),
        4 => dst.copy_from_slice(&(v as u32).to_le_bytes()),
        8 => dst.copy_from_slice(&v.to_le_bytes()),
        n => dst.copy_from_slice(&v.to_le_bytes()[..n]),
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

/// Distinct 32-byte sectors the lanes' accesses touch.
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

fn atom_apply(op: AtomOp, ty: Ty, old: u64, b: u64, c: u64) -> u64 {
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

#[inline(always)]
fn un(w: &mut Warp, inst: &Inst, mask: u32, f: impl Fn(u64) -> u64) {
    let d = inst.d as usize * 32;
    lanes!(mask, l, {
        let a = rd(&w.regs, inst.a, l);
        w.regs[d + l] = f(a);
    });
}
#[inline(always)]
fn bin(w: &mut Warp, inst: &Inst, mask: u32, f: impl Fn(u64, u64) -> u64) {
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
fn tri(w: &mut Warp, inst: &Inst, mask: u32, f: impl Fn(u64, u64, u64) -> u64) {
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

/// fma.rn.f32 on registers with the CPU's fused multiply-add when it has one (without it,
/// `mul_add` is a libm call per lane).
fn fma_fast(w: &mut Warp, inst: &Inst, mask: u32) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        if let (Src::R(a), Src::R(b), Src::R(c)) = (inst.a, inst.b, inst.c)
            && std::is_x86_feature_detected!("fma")
        {
            let idx = [
                inst.d as usize * 32,
                a as usize * 32,
                b as usize * 32,
                c as usize * 32,
            ];
            // SAFETY: the CPU supports FMA (checked just above).
            unsafe { fma_lanes(&mut w.regs, idx, mask) };
            return true;
        }
    }
    let _ = (w, inst, mask);
    false
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "fma")]
fn fma_lanes(regs: &mut [u64], [d, a, b, c]: [usize; 4], mask: u32) {
    lanes!(mask, l, {
        regs[d + l] = b32(f32v(regs[a + l]).mul_add(f32v(regs[b + l]), f32v(regs[c + l])));
    });
}

fn cmp_f(c: Cmp, a: f64, b: f64) -> bool {
    let un = a.is_nan() || b.is_nan();
    match c {
        Cmp::Eq => a == b,
        Cmp::Ne => a != b && !un,
        Cmp::Lt => a < b,
        Cmp::Le => a <= b,
        Cmp::Gt => a > b,
        Cmp::Ge => a >= b,
        Cmp::Equ => un || a == b,
        Cmp::Neu => a != b,
        Cmp::Ltu => un || a < b,
        Cmp::Leu => un || a <= b,
        Cmp::Gtu => un || a > b,
        Cmp::Geu => un || a >= b,
        Cmp::Num => !un,
        Cmp::Nan => un,
    }
}
fn cmp_i<T: Ord>(c: Cmp, a: T, b: T) -> bool {
    match c {
        Cmp::Eq | Cmp::Equ => a == b,
        Cmp::Ne | Cmp::Neu => a != b,
        Cmp::Lt | Cmp::Ltu => a < b,
        Cmp::Le | Cmp::Leu => a <= b,
        Cmp::Gt | Cmp::Gtu => a > b,
        Cmp::Ge | Cmp::Geu => a >= b,
        Cmp::Num => true,
        Cmp::Nan => false,
    }
}

#[inline]
fn compare(c: Cmp, ty: Ty, ftz: bool, a: u64, b: u64) -> bool {
    let bits = ty.bits();
    match ty {
        Ty::F32 => {
            let (mut x, mut y) = (f32v(a), f32v(b));
            if ftz {
                x = float::ftz32(x);
                y = float::ftz32(y);
            }
            cmp_f(c, x as f64, y as f64)
        }
        Ty::F64 | Ty::F16 | Ty::BF16 => cmp_f(c, as_f64(a, ty), as_f64(b, ty)),
        t if t.signed() => cmp_i(c, sext(a, bits), sext(b, bits)),
        _ => cmp_i(c, trunc(a, bits), trunc(b, bits)),
    }
}

/// Lanewise f16x2/bf16x2 arithmetic through f64 and one rounding.
fn half2(a: u64, b: u64, c: u64, fmt: float::Fmt, f: impl Fn(f64, f64, f64) -> f64, m: Rnd) -> u64 {
    let mut r = 0u64;
    for k in 0..2 {
        let s = 16 * k;
        let x = float::from_small((a >> s) as u16, fmt);
        let y = float::from_small((b >> s) as u16, fmt);
        let z = float::from_small((c >> s) as u16, fmt);
        r |= (float::to_small(f(x, y, z), fmt, m) as u64) << s;
    }
    r
}

/// Arithmetic, logic, comparison and conversion instructions.
fn alu(w: &mut Warp, inst: &Inst, mask: u32) {
    let ty = inst.ty;
    let bits = ty.bits();
    let rnd = inst.rnd;
    let ftz = inst.ftz;
    let sat = inst.sat;
    let f32post = move |x: f32| -> u64 {
        let x = if ftz { float::ftz32(x) } else { x };
        b32(if sat { float::sat32(x) } else { x })
    };
    let fin = move |v: u64| -> f32 {
        let x = f32v(v);
        if ftz { float::ftz32(x) } else { x }
    };
    let small = match ty {
        Ty::F16 | Ty::F16x2 => Some(float::F16),
        Ty::BF16 | Ty::BF16x2 => Some(float::BF16),
        _ => None,
    };
    let pair = matches!(ty, Ty::F16x2 | Ty::BF16x2);
    // Half formats: compute in f64 and round once.
    if let Some(fmt) = small
        && matches!(
            inst.op,
            Op::Add | Op::Sub | Op::Mul(_) | Op::Fma | Op::Min | Op::Max | Op::Neg | Op::Abs
        )
    {
        let op = inst.op;
        let f = move |x: f64, y: f64, z: f64| -> f64 {
            let r = match op {
                Op::Add => x + y,
                Op::Sub => x - y,
                Op::Mul(_) => x * y,
                Op::Fma => x.mul_add(y, z),
                Op::Min => float::min64(x, y),
                Op::Max => float::max64(x, y),
                Op::Neg => -x,
                _ => x.abs(),
            };
            if sat {
                if r.is_nan() { 0.0 } else { r.clamp(0.0, 1.0) }
            } else {
                r
            }
        };
        if pair {
            tri(w, inst, mask, |a, b, c| half2(a, b, c, fmt, f, rnd));
        } else {
            tri(w, inst, mask, |a, b, c| {
                let x = float::from_small(a as u16, fmt);
                let y = float::from_small(b as u16, fmt);
                let z = float::from_small(c as u16, fmt);
                float::to_small(f(x, y, z), fmt, rnd) as u64
            });
        }
        return;
    }
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
        (Op::Add, Ty::F32) => {
            if rnd == Rnd::N && !ftz && !sat {
                bin(w, inst, mask, |a, b| b32(f32v(a) + f32v(b)))
            } else {
                bin(w, inst, mask, |a, b| {
                    f32post(float::add32(fin(a), fin(b), rnd))
                })
            }
        }
        (Op::Sub, Ty::F32) => bin(w, inst, mask, |a, b| {
            f32post(float::add32(fin(a), -fin(b), rnd))
        }),
        (Op::Mul(_), Ty::F32) => {
            if rnd == Rnd::N && !ftz && !sat {
                bin(w, inst, mask, |a, b| b32(f32v(a) * f32v(b)))
            } else {
                bin(w, inst, mask, |a, b| {
                    f32post(float::mul32(fin(a), fin(b), rnd))
                })
            }
        }
        (Op::Fma, Ty::F32) => {
            if rnd == Rnd::N && !ftz && !sat && fma_fast(w, inst, mask) {
                return;
            }
            tri(w, inst, mask, |a, b, c| {
                f32post(float::fma32(fin(a), fin(b), fin(c), rnd))
            })
        }
        (Op::Div, Ty::F32) => bin(w, inst, mask, |a, b| {
            let (x, y) = (fin(a), fin(b));
            f32post(if inst.approx {
                x / y
            } else {
                float::div32(x, y, rnd)
            })
        }),
        (Op::Add, Ty::F64) => bin(w, inst, mask, |a, b| {
            float::add64(f64::from_bits(a), f64::from_bits(b), rnd).to_bits()
        }),
        (Op::Sub, Ty::F64) => bin(w, inst, mask, |a, b| {
            float::add64(f64::from_bits(a), -f64::from_bits(b), rnd).to_bits()
        }),
        (Op::Mul(_), Ty::F64) => bin(w, inst, mask, |a, b| {
            float::mul64(f64::from_bits(a), f64::from_bits(b), rnd).to_bits()
        }),
        (Op::Fma, Ty::F64) => tri(w, inst, mask, |a, b, c| {
            float::fma64(f64::from_bits(a), f64::from_bits(b), f64::from_bits(c), rnd).to_bits()
        }),
        (Op::Div, Ty::F64) => bin(w, inst, mask, |a, b| {
            float::div64(f64::from_bits(a), f64::from_bits(b), rnd).to_bits()
        }),
        (Op::Min, Ty::F32) => bin(w, inst, mask, |a, b| f32post(float::min32(fin(a), fin(b)))),
        (Op::Max, Ty::F32) => bin(w, inst, mask, |a, b| f32post(float::max32(fin(a), fin(b)))),
        (Op::Min, Ty::F64) => bin(w, inst, mask, |a, b| {
            float::min64(f64::from_bits(a), f64::from_bits(b)).to_bits()
        }),
        (Op::Max, Ty::F64) => bin(w, inst, mask, |a, b| {
            float::max64(f64::from_bits(a), f64::from_bits(b)).to_bits()
        }),
        (Op::Abs, Ty::F32) => un(w, inst, mask, |a| b32(fin(a).abs())),
        (Op::Neg, Ty::F32) => un(w, inst, mask, |a| b32(-fin(a))),
        (Op::Abs, Ty::F64) => un(w, inst, mask, |a| a & !(1 << 63)),
        (Op::Neg, Ty::F64) => un(w, inst, mask, |a| a ^ (1 << 63)),
        (Op::Copysign, Ty::F32) => bin(w, inst, mask, |a, b| (b & 0x7fff_ffff) | (a & 0x8000_0000)),
        (Op::Copysign, Ty::F64) => bin(w, inst, mask, |a, b| (b & !(1 << 63)) | (a & (1 << 63))),
        (Op::Rcp, Ty::F32) => un(w, inst, mask, |a| {
            f32post(if inst.approx {
                1.0 / fin(a)
            } else {
                float::div32(1.0, fin(a), rnd)
            })
        }),
        (Op::Rcp, Ty::F64) => un(w, inst, mask, |a| {
            float::div64(1.0, f64::from_bits(a), rnd).to_bits()
        }),
        (Op::Sqrt, Ty::F32) => un(w, inst, mask, |a| {
            f32post(float::sqrt32(
                fin(a),
                if inst.approx { Rnd::N } else { rnd },
            ))
        }),
        (Op::Sqrt, Ty::F64) => un(w, inst, mask, |a| {
            float::sqrt64(f64::from_bits(a), rnd).to_bits()
        }),
        (Op::Rsqrt, Ty::F32) => un(w, inst, mask, |a| f32post(1.0 / fin(a).sqrt())),
        (Op::Rsqrt, Ty::F64) => un(w, inst, mask, |a| {
            (1.0 / f64::from_bits(a).sqrt()).to_bits()
        }),
        (Op::Sin, _) => un(w, inst, mask, |a| f32post(fin(a).sin())),
        (Op::Cos, _) => un(w, inst, mask, |a| f32post(fin(a).cos())),
        (Op::Ex2, _) => un(w, inst, mask, |a| f32post(fin(a).exp2())),
        (Op::Lg2, _) => un(w, inst, mask, |a| f32post(fin(a).log2())),
        (Op::Tanh, _) => un(w, inst, mask, |a| f32post(fin(a).tanh())),
        (Op::Testp(k), _) => un(w, inst, mask, |a| {
            let x = as_f64(a, ty);
            let r = match k {
                0 => x.is_finite(),
                1 => x.is_infinite(),
                2 => !x.is_nan(),
                3 => x.is_nan(),
                4 => {
                    if ty == Ty::F32 {
                        f32v(a).is_normal()
                    } else {
                        x.is_normal()
                    }
                }
                _ => {
                    if ty == Ty::F32 {
                        f32v(a).is_subnormal()
                    } else {
                        x.is_subnormal()
                    }
                }
            };
            r as u64
        }),
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
        (
            Op::Carry {
                sub,
                mul,
                cin,
                cout,
            },
            _,
        ) => {
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
        (Op::Setp(c, bop), _) => {
            let cty = inst.ty2;
            lanes!(mask, l, {
                let a = rd(&w.regs, inst.a, l);
                let b = rd(&w.regs, inst.b, l);
                let mut t = compare(c, cty, ftz, a, b);
                let mut f = !t;
                if bop != BoolOp::None {
                    let p = (rd(&w.regs, inst.c, l) != 0) != inst.c_neg;
                    (t, f) = match bop {
                        BoolOp::And => (t & p, f & p),
                        BoolOp::Or => (t | p, f | p),
                        _ => (t ^ p, f ^ p),
                    };
                }
                w.regs[inst.d as usize * 32 + l] = t as u64;
                if inst.d2 != NOREG {
                    w.regs[inst.d2 as usize * 32 + l] = f as u64;
                }
            });
        }
        (Op::Set(c, bop), _) => {
            let cty = inst.ty2;
            lanes!(mask, l, {
                let a = rd(&w.regs, inst.a, l);
                let b = rd(&w.regs, inst.b, l);
                let mut t = compare(c, cty, ftz, a, b);
                if bop != BoolOp::None {
                    let p = (rd(&w.regs, inst.c, l) != 0) != inst.c_neg;
                    t = match bop {
                        BoolOp::And => t & p,
                        BoolOp::Or => t | p,
                        _ => t ^ p,
                    };
                }
                w.regs[inst.d as usize * 32 + l] = match ty {
                    Ty::F32 => b32(if t { 1.0 } else { 0.0 }),
                    _ => {
                        if t {
                            trunc(u64::MAX, bits)
                        } else {
                            0
                        }
                    }
                };
            });
        }
        (Op::Selp, _) => {
            let d = inst.d as usize * 32;
            lanes!(mask, l, {
                let p = (rd(&w.regs, inst.c, l) != 0) != inst.c_neg;
                w.regs[d + l] = if p {
                    rd(&w.regs, inst.a, l)
                } else {
                    rd(&w.regs, inst.b, l)
                };
            });
        }
        (Op::Slct, _) => {
            let cty = inst.ty2;
            tri(w, inst, mask, |a, b, c| {
                let ge = if cty == Ty::F32 {
                    fin(c) >= 0.0
                } else {
                    sext(c, 32) >= 0
                };
                if ge { a } else { b }
            })
        }
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
        _ => {
            // Combinations decode accepted but the ALU has no rule for (e.g. rem.f32): keep
            // the destination unchanged. Decode rejects everything it knows is unsupported.
        }
    }
}

fn cvt(a: u64, dt: Ty, st: Ty, rnd: Rnd, rnd_int: bool, ftz: bool, sat: bool) -> u64 {
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

/// C printf conversions for device printf.
mod cfmt {
    struct Spec {
        left: bool,
        plus: bool,
        space: bool,
        zero: bool,
        alt: bool,
        width: usize,
        prec: Option<usize>,
    }

    fn parse(spec: &str) -> Spec {
        let b = spec.as_bytes();
        let mut i = 1;
        let mut s = Spec {
            left: false,
            plus: false,
            space: false,
            zero: false,
            alt: false,
            width: 0,
            prec: None,
        };
        while i < b.len() {
            match b[i] {
                b'-' => s.left = true,
                b'+' => s.plus = true,
                b' ' => s.space = true,
                b'0' => s.zero = true,
                b'#' => s.alt = true,
                _ => break,
            }
            i += 1;
        }
        while i < b.len() && b[i].is_ascii_digit() {
            s.width = (s.width * 10 + (b[i] - b'0') as usize).min(4096);
            i += 1;
        }
        if i < b.len() && b[i] == b'.' {
            i += 1;
            let mut p = 0;
            while i < b.len() && b[i].is_ascii_digit() {
                p = (p * 10 + (b[i] - b'0') as usize).min(4096);
                i += 1;
            }
            s.prec = Some(p);
        }
        s
    }

    fn pad(s: &Spec, body: String, numeric: bool) -> String {
        if body.len() >= s.width {
            return body;
        }
        let n = s.width - body.len();
        if s.left {
            format!("{body}{}", " ".repeat(n))
        } else if s.zero && numeric {
            let (sign, rest) = if body.starts_with(['-', '+', ' ']) {
                body.split_at(1)
            } else {
                ("", body.as_str())
            };
            format!("{sign}{}{rest}", "0".repeat(n))
        } else {
            format!("{}{body}", " ".repeat(n))
        }
    }

    fn sign(s: &Spec, neg: bool) -> &'static str {
        if neg {
            "-"
        } else if s.plus {
            "+"
        } else if s.space {
            " "
        } else {
            ""
        }
    }

    fn exp_form(x: f64, prec: usize, upper: bool) -> String {
        let t = format!("{:.*e}", prec, x);
        let (m, e) = t.split_once('e').unwrap_or((&t, "0"));
        let ev: i32 = e.parse().unwrap_or(0);
        let s = format!("{m}e{}{:02}", if ev < 0 { '-' } else { '+' }, ev.abs());
        if upper { s.to_uppercase() } else { s }
    }

    pub fn format_str(spec: &str, v: &str) -> String {
        let s = parse(spec);
        let v: String = match s.prec {
            Some(p) => v.chars().take(p).collect(),
            None => v.to_string(),
        };
        pad(&s, v, false)
    }

    pub fn format_one(spec: &str, conv: char, raw: u64, size: u32) -> String {
        let s = parse(spec);
        let body = match conv {
            'd' | 'i' => {
                let v = if size == 8 {
                    raw as i64
                } else {
                    raw as u32 as i32 as i64
                };
                let mut digits = v.unsigned_abs().to_string();
                if let Some(p) = s.prec {
                    while digits.len() < p {
                        digits.insert(0, '0');
                    }
                }
                format!("{}{digits}", sign(&s, v < 0))
            }
            'u' | 'x' | 'X' | 'o' => {
                let v = if size == 8 { raw } else { raw as u32 as u64 };
                let mut d = match conv {
                    'u' => v.to_string(),
                    'x' => format!("{v:x}"),
                    'X' => format!("{v:X}"),
                    _ => format!("{v:o}"),
                };
                if let Some(p) = s.prec {
                    while d.len() < p {
                        d.insert(0, '0');
                    }
                }
                if s.alt && v != 0 {
                    d = match conv {
                        'x' => format!("0x{d}"),
                        'X' => format!("0X{d}"),
                        'o' => format!("0{d}"),
                        _ => d,
                    };
                }
                d
            }
            'c' => ((raw as u8) as char).to_string(),
            'p' => format!("0x{raw:x}"),
            'f' | 'F' | 'e' | 'E' | 'g' | 'G' | 'a' | 'A' => {
                let x = f64::from_bits(raw);
                let neg = x.is_sign_negative() && !x.is_nan();
                let a = x.abs();
                let p = s.prec.unwrap_or(6);
                let upper = conv.is_ascii_uppercase();
                let body = if a.is_nan() {
                    "nan".to_string()
                } else if a.is_infinite() {
                    "inf".to_string()
                } else {
                    match conv.to_ascii_lowercase() {
                        'f' => format!("{a:.p$}"),
                        'e' => exp_form(a, p, false),
                        'a' => format!("{a:e}"),
                        _ => {
                            let p = if p == 0 { 1 } else { p };
                            let e = if a == 0.0 {
                                0
                            } else {
                                a.log10().floor() as i32
                            };
                            let mut t = if e < -4 || e >= p as i32 {
                                exp_form(a, p - 1, false)
                            } else {
                                format!("{a:.*}", (p as i32 - 1 - e).max(0) as usize)
                            };
                            if !s.alt {
                                if let Some((m, ex)) = t.clone().split_once('e') {
                                    let m = if m.contains('.') {
                                        m.trim_end_matches('0').trim_end_matches('.')
                                    } else {
                                        m
                                    };
                                    t = format!("{m}e{ex}");
                                } else if t.contains('.') {
                                    t = t.trim_end_matches('0').trim_end_matches('.').to_string();
                                }
                            }
                            t
                        }
                    }
                };
                let body = if upper { body.to_uppercase() } else { body };
                format!("{}{body}", sign(&s, neg))
            }
            _ => spec.to_string(),
        };
        pad(&s, body, !matches!(conv, 'c' | 'p'))
    }

    #[cfg(test)]
    mod tests {
        #[test]
        fn c_formats() {
            assert_eq!(super::format_one("%d", 'd', (-5i32) as u32 as u64, 4), "-5");
            assert_eq!(
                super::format_one("%5.2f", 'f', 3.25159f64.to_bits(), 8),
                " 3.25"
            );
            assert_eq!(
                super::format_one("%g", 'g', 0.0001f64.to_bits(), 8),
                "0.0001"
            );
            assert_eq!(super::format_one("%g", 'g', 1e20f64.to_bits(), 8), "1e+20");
            assert_eq!(
                super::format_one("%e", 'e', 12345.0f64.to_bits(), 8),
                "1.234500e+04"
            );
            assert_eq!(super::format_one("%04x", 'x', 0xab, 4), "00ab");
            assert_eq!(super::format_one("%-3d", 'd', 7, 4), "7  ");
            assert_eq!(super::format_str("%.2s", "hello"), "he");
        }
    }
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
