//! The rank set's scheduler: every rank's kernel runs at once, from one thread, so that a
//! block spinning on a flag its peer sets lets the peer run. Each rank holds up to a bounded
//! number of resident blocks (as a GPU holds so many per SM); the scheduler steps them
//! round-robin, rank 0's resident blocks in block order, then rank 1's, and so on, one
//! `BlockRunner::step` (a round of `SLICE` instructions per warp) each. When a block finishes
//! the rank's next block becomes resident. Nothing depends on time but the deadline, so the
//! interleaving (and so every report) is the same on every run.

use super::ctaid_of;
use super::exec::{BlockOut, BlockRunner, LaunchCtx, PRINTF_CAP, Step};
use super::merge::Merge;
use super::xrace::XRace;
use crate::backend::Diagnostic;
use std::cell::RefCell;
use std::time::Instant;

/// Resident blocks per rank at most: an H100's 132 SMs x 2 blocks (a grid-wide spin that
/// needs more blocks resident at once than a GPU holds is a bug the emulator should not
/// hide, and more would only cost memory).
pub const RESIDENT_PER_RANK: usize = 264;
/// What all ranks' resident blocks may hold at once (registers, local and shared memory);
/// big blocks get fewer resident slots, never fewer than one per rank.
const RESIDENT_BYTES: usize = 1 << 30;
/// Instructions a warp runs per step: small enough that a spinning block hands the thread
/// back quickly, large enough that stepping costs little next to the instructions.
const SLICE: u32 = 1024;

/// One rank's launch as the scheduler runs it.
struct RankRun<'a, 'c> {
    ctx: &'c LaunchCtx<'a>,
    /// The next block (linear index) to make resident.
    next: u64,
    /// Resident blocks in the order they became resident: (block, runner, race agent).
    resident: Vec<(u64, BlockRunner<'a, 'c>, u32)>,
    cap: usize,
    merge: Merge,
    printf_room: usize,
}

/// What running every rank left.
pub(super) struct RanksOut {
    /// Each rank's merged blocks (diagnostics, metrics, printf).
    pub merges: Vec<Merge>,
    /// The first fault, with its rank (the deadline's included).
    pub fault: Option<(usize, String)>,
    /// Whether the deadline stopped the launch.
    pub timed_out: bool,
    /// Per rank, where its first resident block's threads were when the deadline passed.
    pub hung: Vec<Option<Diagnostic>>,
}

/// Run every rank's grid (`ctxs[r]` rank r's launch) to completion, a fault, or `deadline`;
/// `xrace` checks accesses across ranks.
pub(super) fn run_ranks<'a, 'c>(
    ctxs: &'c [LaunchCtx<'a>],
    xrace: &'c RefCell<XRace>,
    deadline: Instant,
) -> RanksOut {
    let n = ctxs.len().max(1);
    let mut runs: Vec<RankRun> = ctxs
        .iter()
        .map(|ctx| {
            let each = BlockRunner::footprint(ctx, ctx.dims).max(1);
            RankRun {
                ctx,
                next: 0,
                resident: Vec::new(),
                cap: (RESIDENT_BYTES / n / each).clamp(1, RESIDENT_PER_RANK),
                merge: Merge::default(),
                printf_room: PRINTF_CAP,
            }
        })
        .collect();
    let mut fault = None;
    let mut timed_out = false;
    'rounds: loop {
        let mut any = false;
        for (r, run) in runs.iter_mut().enumerate() {
            admit(run, r, xrace);
            let mut i = 0;
            while i < run.resident.len() {
                any = true;
                match run.resident[i].1.step(SLICE) {
                    Step::Running => i += 1,
                    Step::Done => {
                        let (_, runner, agent) = run.resident.remove(i);
                        xrace.borrow_mut().end_agent(agent);
                        retire(run, runner.finish());
                    }
                    Step::Fault(f) => {
                        fault = Some((r, f));
                        break 'rounds;
                    }
                }
                if Instant::now() > deadline {
                    timed_out = true;
                    fault = Some((r, super::exec::DEADLINE_FAULT.to_string()));
                    break 'rounds;
                }
            }
        }
        if !any {
            break;
        }
    }
    let hung = runs
        .iter_mut()
        .map(|run| {
            if !timed_out {
                return None;
            }
            run.resident.iter_mut().find_map(|(_, b, _)| b.hung())
        })
        .collect();
    RanksOut {
        merges: runs.into_iter().map(|r| r.merge).collect(),
        fault,
        timed_out,
        hung,
    }
}

/// Make blocks resident up to the rank's cap, in block order.
fn admit<'a, 'c>(run: &mut RankRun<'a, 'c>, rank: usize, xrace: &'c RefCell<XRace>) {
    let nblocks = run.ctx.dims.blocks();
    while run.resident.len() < run.cap && run.next < nblocks {
        let b = run.next;
        run.next += 1;
        let ctaid = ctaid_of(b, run.ctx.dims.grid);
        let agent = xrace.borrow_mut().add_agent(rank, ctaid);
        let mut runner = BlockRunner::new(run.ctx, ctaid).with_xrace(xrace, agent);
        runner.set_printf_room(run.printf_room);
        run.resident.push((b, runner, agent));
    }
}

/// A finished block's output into its rank's report.
fn retire(run: &mut RankRun, o: BlockOut) {
    run.printf_room = run.printf_room.saturating_sub(o.printf.len());
    run.merge.add(o);
}
