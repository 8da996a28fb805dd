//! The interpreter: runs one thread block as warps of 32 lanes with per-lane program counters
//! (independent thread scheduling). A warp executes the group of lanes that share the lowest
//! program counter, so diverged lanes reconverge where their paths meet. Every decoded
//! instruction runs over the group's lanes at once, with registers stored lane-contiguous.
//! Memory checks (memcheck, racecheck, initcheck, synccheck, shfl masks) and metrics are
//! collected as it goes.
//!
//! This file holds the block's state, the scheduling loop and the dispatch; each instruction
//! family, as the PTX ISA's chapter "Instruction Set" groups them, runs in its own file:
//!
//! - `integer.rs`: integer and extended-precision integer arithmetic;
//! - `floating.rs`: floating-point and half-precision floating-point arithmetic;
//! - `compare.rs`: comparison and selection;
//! - `logic.rs`: logic and shift;
//! - `convert.rs`: data movement and conversion (mov, prmt, cvt, cvta, special registers);
//! - `memory.rs`: loads and stores (data movement too), with memcheck and the memory metrics;
//! - `racecheck.rs`: shared memory's shadow state (racecheck, initcheck);
//! - `atomics.rs`: atom and red's operations, also redux's;
//! - `warp.rs`: shfl, vote, redux, activemask;
//! - `control.rs`: control flow and barriers: bra, call, ret, exit, bar, trap and
//!   `__assertfail`;
//! - `printf.rs`: device printf (`vprintf`) and its C formats;
//! - `lanes.rs`: the per-lane plumbing they share.

#[macro_use]
mod lanes;
mod atomics;
mod compare;
mod control;
mod convert;
mod floating;
mod integer;
mod logic;
mod memory;
mod printf;
mod racecheck;
mod warp;
mod xcheck;

use super::cost::{self, BlockCost};
use super::decode::*;
use super::mem::GlobalMem;
use crate::backend::{Diagnostic, LaunchDims, Metrics};
use lanes::trunc;
use racecheck::Shadow;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// Output cap for device printf per launch.
pub const PRINTF_CAP: usize = 1 << 20;

/// The fault of a launch stopped at its deadline.
pub const DEADLINE_FAULT: &str = "deadline exceeded: the kernel ran too long (infinite loop?)";

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
    /// A rank set's cross-device race check and this block's agent in it (`xcheck.rs`).
    xrace: Option<(&'c std::cell::RefCell<super::xrace::XRace>, u32)>,
}

/// What one `BlockRunner::step` left.
#[derive(Debug, PartialEq)]
pub enum Step {
    Done,
    Running,
    Fault(String),
}

/// Stop reasons from a warp's run.
enum Stop {
    Fault(String),
}

/// The special registers' values (in [`SPECIALS`]' order) of lane `l` of warp `w` in block
/// `ctaid`, whose block has `nwarps` warps and `shared_size` bytes of shared memory.
fn special_values(
    ctx: &LaunchCtx,
    ctaid: [u32; 3],
    w: u32,
    l: u32,
    nwarps: u32,
    shared_size: u32,
) -> [u64; SPECIALS.len()] {
    let dims = ctx.dims;
    let t = w * 32 + l;
    let tx = t % dims.block[0];
    let ty = (t / dims.block[0]) % dims.block[1];
    let tz = t / (dims.block[0] * dims.block[1]);
    let linear = super::specials_linear(ctaid, dims.grid);
    let sm = super::specials::smid(linear);
    let one_cluster = |k: usize| [ctaid[k] as u64, dims.grid[k] as u64];
    [
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
    ]
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
                let vals = special_values(ctx, ctaid, w, l, nwarps, shared_size);
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
            xrace: None,
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
            let progressed = self.pass(slice)?;
            if self.ctx.abort.load(Ordering::Relaxed) {
                return Err(Stop::Fault("launch aborted".into()));
            }
            if Instant::now() > self.ctx.deadline {
                self.ctx.abort.store(true, Ordering::Relaxed);
                self.out.hung = self.hung_at();
                return Err(Stop::Fault(DEADLINE_FAULT.into()));
            }
            if !progressed {
                if self.warps.iter().all(|w| w.blocked == 0) {
                    return Ok(());
                }
                self.release_barrier();
            }
        }
    }

    /// One round over the block's warps, each running up to `slice` instructions; false when
    /// none could run (all exited, or waiting at a barrier).
    fn pass(&mut self, slice: u32) -> Result<bool, Stop> {
        let mut progressed = false;
        for w in 0..self.warps.len() {
            if self.warps[w].cur != 0 {
                progressed = true;
                self.run_warp(w, slice)?;
            }
        }
        Ok(progressed)
    }

    /// One resumable step of the block (a rank set interleaves every rank's resident blocks
    /// so that a block spinning on a peer's flag lets the peer run): one round over its
    /// warps, then the release of a barrier all its live threads reached. The caller owns
    /// the deadline.
    pub fn step(&mut self, slice: u32) -> Step {
        match self.pass(slice) {
            Err(Stop::Fault(f)) => Step::Fault(f),
            Ok(true) => Step::Running,
            Ok(false) if self.warps.iter().all(|w| w.blocked == 0) => Step::Done,
            Ok(false) => {
                self.release_barrier();
                Step::Running
            }
        }
    }

    /// How many bytes of device printf this block may still write (a launch's cap shared by
    /// its blocks in order).
    pub fn set_printf_room(&mut self, room: usize) {
        self.printf_room = room;
    }

    /// What the block holds while resident (registers, local and parameter slots, shared
    /// memory and its shadow): a rank set bounds its resident blocks by it.
    pub fn footprint(ctx: &LaunchCtx, dims: LaunchDims) -> usize {
        let nwarps = (dims.threads_per_block() as usize).div_ceil(32);
        let per_warp = ctx.prog.nregs as usize * 32 * 8
            + ctx.kernel.local_bytes as usize * 32
            + ctx.prog.fparam_bytes as usize * 32
            + std::mem::size_of::<Warp>();
        let shared = shared_block_bytes(ctx.kernel, dims.shared_bytes) as usize;
        nwarps * per_warp + shared + shared.div_ceil(4) * std::mem::size_of::<Shadow>()
    }

    /// Where the block's threads are (a launch stopped at its deadline), as `backend::HUNG`.
    pub fn hung(&mut self) -> Option<Diagnostic> {
        self.hung_at()
    }

    /// The block's output, after `step` said `Done` (or the launch stopped).
    pub fn finish(self) -> BlockOut {
        self.out
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

    /// Everything but control flow: one instruction's family runs it over the lanes of `mask`.
    fn exec(&mut self, wi: usize, inst: &Inst, pc: u32, mask: u32) -> Result<(), Stop> {
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
            Op::Ld | Op::St | Op::Atom(_) => self.memory(wi, inst, pc, mask),
            Op::LdKParam => {
                self.ld_kparam(wi, inst, mask);
                Ok(())
            }
            Op::Shfl(mode) => self.shfl(wi, inst, pc, mask, mode),
            Op::Vote(mode) => {
                self.vote(wi, inst, pc, mask, mode);
                Ok(())
            }
            Op::Redux(op) => {
                self.redux(wi, inst, pc, mask, op);
                Ok(())
            }
            Op::Activemask => {
                self.activemask(wi, inst, mask);
                Ok(())
            }
            Op::BarWarp | Op::Nop => Ok(()),
            Op::Fence => {
                self.fence(inst);
                Ok(())
            }
            Op::ReadSpecial(s) => {
                self.read_special(wi, inst, mask, s);
                Ok(())
            }
            Op::Vprintf => {
                self.vprintf(wi, inst, mask);
                Ok(())
            }
            _ => {
                alu(&mut self.warps[wi], inst, mask);
                Ok(())
            }
        }
    }
}

/// Arithmetic, logic, comparison and conversion instructions, each by its family's file. The
/// half formats' arithmetic comes first (computed in f64 and rounded once); then f32 and f64
/// arithmetic before the integer rules for the same operations. The families' functions are
/// `#[inline(always)]` and called from here only: on the hot path this stays one function.
fn alu(w: &mut Warp, inst: &Inst, mask: u32) {
    if floating::half(w, inst, mask) {
        return;
    }
    match inst.op {
        Op::Mov | Op::Pack | Op::Unpack | Op::Prmt | Op::Cvt | Op::Cvta { .. } => {
            convert::alu(w, inst, mask)
        }
        Op::Add
        | Op::Sub
        | Op::Mul(_)
        | Op::Fma
        | Op::Div
        | Op::Min
        | Op::Max
        | Op::Abs
        | Op::Neg
        | Op::Copysign
        | Op::Rcp
        | Op::Sqrt
        | Op::Rsqrt
            if matches!(inst.ty, Ty::F32 | Ty::F64) =>
        {
            floating::alu(w, inst, mask)
        }
        Op::Sin | Op::Cos | Op::Ex2 | Op::Lg2 | Op::Tanh | Op::Testp(_) => {
            floating::alu(w, inst, mask)
        }
        Op::And
        | Op::Or
        | Op::Xor
        | Op::Not
        | Op::CNot
        | Op::Shl
        | Op::Shr
        | Op::Shf { .. }
        | Op::Lop3 => logic::alu(w, inst, mask),
        Op::Setp(..) | Op::Set(..) | Op::Selp | Op::Slct => compare::alu(w, inst, mask),
        Op::Add | Op::Sub | Op::Mul(_) | Op::Mul24(_) | Op::Mad(_) | Op::Mad24(_) => {
            integer::add_mul(w, inst, mask)
        }
        Op::Dp4a { .. } | Op::Dp2a { .. } | Op::Sad => integer::dot(w, inst, mask),
        Op::Div | Op::Rem | Op::Abs | Op::Neg | Op::Min | Op::Max => {
            integer::div_min_max(w, inst, mask)
        }
        Op::Popc | Op::Clz | Op::Brev | Op::Bfe | Op::Bfi | Op::Bfind { .. } => {
            integer::bits(w, inst, mask)
        }
        Op::Carry { .. } => integer::carry(w, inst, mask),
        _ => {
            // Combinations decode accepted but the ALU has no rule for (e.g. rem.f32): keep
            // the destination unchanged. Decode rejects everything it knows is unsupported.
        }
    }
}
