//! A multi-GPU lab's milestones (a rubric with `ranks:`, the all-reduce lab). The kernel is
//! located and loaded as any other, in a rank worker (`worker::ranks`: every rank's device in
//! one process, peer access between them only). Then every case and trial runs on every rank
//! at once: each rank's inputs drawn from a seed of its own, each rank's kernel handed tables
//! of its peers' buffers, the reference kernel run the same way in a trusted rank worker, and
//! every rank's outputs compared with the reference's under the contract's tolerance. The
//! emulator's findings (memcheck, the cross-device race check) fail the case as on one device.
//!
//! On GPUs the timed section times the student's kernel and NCCL's all-reduce on the same GPUs
//! in the same run (`against: nccl`): the ratio is the student's bus bandwidth over NCCL's.
//! Without GPUs nothing is timed and no speed is estimated: the check says so.

use super::context::{Ctx, Infrastructure, Kernel, Student};
use super::reference::Reference;
use super::run::runtime_check;
use super::sanitizer::sanitizer_check;
use crate::backend::LaunchDims;
use crate::backend::ranks::allreduce_bus_gbs;
use crate::hints;
use crate::inputs::{self, Invocation};
use crate::measure::decide::{self, Interval};
use crate::result::{Check, CheckKind, Status};
use crate::rubric::plan::{CasePlan, PerfPlan};
use crate::rubric::schema::{Against, Direction};
use crate::worker::nccl::NcclTimes;
use crate::worker::protocol::{RankArg, RanksMeasure, RanksSpec};
use std::time::Duration;

/// Repetitions of a timed section (the student's, then NCCL's): medians of 20 are stable to
/// about 1 % on an H200 pair (docs/validation/2026-11-28-allreduce).
const REPS: usize = 20;

/// Every milestone of a multi-GPU lab: locate, load (in the student's rank worker), every
/// case on every rank, then the timed checks; scored as any milestone.
pub(super) fn grade(
    plan: &crate::rubric::plan::Plan,
    sub: &crate::submission::Submission,
    opts: &super::Options,
    built: &super::build::Built,
    reference: &mut Reference,
    run: &mut crate::result::RunInfo,
    phases: &mut crate::result::Phases,
) -> Result<Vec<crate::result::MilestoneResult>, Infrastructure> {
    let mut student = Student::default();
    let mut milestones = Vec::new();
    for m in &plan.milestones {
        let ctx = Ctx {
            rubric: plan,
            plan: m,
            sub,
            opts,
            compiled: &built.summary.kernels,
        };
        let checks = milestone(
            &ctx,
            built,
            reference,
            &mut student,
            &mut run.sandbox,
            phases,
        )?;
        milestones.push(crate::score::finish(&m.milestone, m.max_points, checks));
    }
    super::correctness::attach_snippets(&mut milestones, sub);
    Ok(milestones)
}

fn milestone(
    ctx: &Ctx,
    built: &super::build::Built,
    reference: &mut Reference,
    student: &mut Student,
    sandbox: &mut Vec<String>,
    phases: &mut crate::result::Phases,
) -> Result<Vec<Check>, Infrastructure> {
    use crate::result::Phase;
    if let Some(w) = &student.worker {
        w.clear_output();
    }
    let (found, _) = super::locate::stage(ctx, built);
    let mut checks = found.checks;
    let Some(found) = found.next else {
        return Ok(checks);
    };
    super::locate::keep(ctx, &found);
    let loaded = super::timed_phase(phases, Phase::Load, || {
        super::load::stage(ctx, found, student, sandbox)
    })?;
    checks.extend(loaded.checks);
    let Some(kernel) = loaded.next else {
        return Ok(checks);
    };
    let ran = super::timed_phase(phases, Phase::Correctness, || {
        correctness(ctx, &kernel, reference, student)
    })?;
    checks.extend(ran);
    let correct = crate::score::nothing_wrong(&checks);
    let phase = if ctx.caps().timed {
        Phase::Timed
    } else {
        Phase::Estimate
    };
    let timed = super::timed_phase(phases, phase, || {
        performance(ctx, reference, student, correct)
    })?;
    checks.extend(timed);
    Ok(checks)
}

/// Rank `rank`'s inputs of a trial: a stream of its own, so no two ranks hold the same data.
fn rank_seed(trial_seed: u64, rank: usize) -> u64 {
    trial_seed ^ (rank as u64 + 1).wrapping_mul(0xD6E8_FEB8_6659_FD93)
}

/// Every rank's inputs of one trial of `case`.
fn invocations(ctx: &Ctx, case: &CasePlan, trial: u32) -> Result<Vec<Invocation>, Infrastructure> {
    let seed = inputs::trial_seed(ctx.opts.seed, &case.name, trial);
    case.rank_args
        .iter()
        .enumerate()
        .map(|(r, a)| {
            a.clone()
                .and_then(|a| inputs::generate(&a, rank_seed(seed, r)))
                .map_err(|e| {
                    Infrastructure(format!("inputs for case {} on rank {r}: {e}", case.name))
                })
        })
        .collect()
}

/// One launch on every rank of `invs`: the request and its blobs (every rank's allocations,
/// rank by rank). Buffers the contract marks `peers` go as tables of every rank's copy.
fn ranks_spec(
    kernel: &str,
    dims: LaunchDims,
    invs: &[Invocation],
    limit: Duration,
) -> Result<(RanksSpec, Vec<Vec<u8>>), Infrastructure> {
    let first = invs
        .first()
        .ok_or_else(|| Infrastructure("a rank set needs at least one rank".into()))?;
    if !first.symbols.is_empty() {
        return Err(Infrastructure(
            "a multi-GPU lab's buffers are parameters, not symbols".into(),
        ));
    }
    let mut args = Vec::new();
    for (k, a) in first.args.iter().enumerate() {
        args.push(match a {
            crate::backend::Arg::Buffer(i) if first.buffers[*i].peers => RankArg::Table(*i),
            crate::backend::Arg::Buffer(i) => RankArg::Own(*i),
            crate::backend::Arg::Value(_) => RankArg::PerRank(
                invs.iter()
                    .map(|inv| match inv.args.get(k) {
                        Some(crate::backend::Arg::Value(v)) => Ok(*v),
                        _ => Err(Infrastructure("the ranks' parameters differ".into())),
                    })
                    .collect::<Result<Vec<_>, _>>()?,
            ),
        });
    }
    let spec = RanksSpec {
        kernel: kernel.to_string(),
        dims,
        ranks: invs.len(),
        buffers: first.specs(),
        args,
        deadline_ms: limit.as_millis() as u64,
    };
    let blobs = invs.iter().flat_map(Invocation::allocations).collect();
    Ok((spec, blobs))
}

/// Each rank's allocations out of a rank run's blobs.
fn per_rank(blobs: Vec<Vec<u8>>, buffers: usize) -> Vec<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    let mut it = blobs.into_iter();
    loop {
        let rank: Vec<Vec<u8>> = it.by_ref().take(buffers).collect();
        if rank.is_empty() {
            return out;
        }
        out.push(rank);
    }
}

/// Every rank's allocations, `[rank][buffer]`.
type RankAllocations = Vec<Vec<Vec<u8>>>;

/// The reference's outputs of one trial on every rank, and per rank each output element's
/// scale for a `sum` tolerance (the reference run again on the inputs' absolute values).
struct Expected {
    allocations: Vec<Vec<Vec<u8>>>,
    magnitude: Option<Vec<Vec<Vec<f64>>>>,
    seconds: f64,
}

fn expected(
    ctx: &Ctx,
    case: &CasePlan,
    invs: &[Invocation],
    reference: &mut Reference,
) -> Result<Expected, Infrastructure> {
    let limit = Duration::from_secs_f64(ctx.rubric.timeouts.launch_s);
    let dims = super::context::reference_launch(case)?;
    let locks = ctx.opts.rank_locks.clone();
    let mut run = |invs: &[Invocation]| -> Result<(RankAllocations, f64), Infrastructure> {
        let (spec, blobs) = ranks_spec(&ctx.plan.reference_kernel, dims, invs, limit)?;
        let n = spec.buffers.len();
        let w = reference.worker()?;
        match w.run_ranks(spec, &blobs, limit, &locks) {
            Ok(r) => {
                let secs = r.reports.iter().map(|x| x.seconds).fold(0.0, f64::max);
                Ok((per_rank(r.allocations, n), secs))
            }
            Err((e, _)) => {
                reference.worker = None;
                Err(Infrastructure(format!(
                    "the reference kernel `{}` failed on case {} on the rank set: {}",
                    ctx.plan.reference_kernel,
                    case.name,
                    super::run::describe_run_error(&e)
                )))
            }
        }
    };
    let (allocations, seconds) = run(invs)?;
    let magnitude = if super::reference::needs_magnitude(ctx) {
        let abs: Vec<Invocation> = invs.iter().map(Invocation::absolute).collect();
        let (abs_out, _) = run(&abs)?;
        Some(
            abs_out
                .iter()
                .zip(&allocations)
                .zip(invs)
                .map(|((a, e), inv)| scales(inv, e, a))
                .collect(),
        )
    } else {
        None
    };
    Ok(Expected {
        allocations,
        magnitude,
        seconds,
    })
}

/// Each output buffer's per-element scale (`compare::sum_scale`): the reference's output on
/// the absolute values, next to its output on the inputs; empty for inputs.
fn scales(inv: &Invocation, expected: &[Vec<u8>], abs: &[Vec<u8>]) -> Vec<Vec<f64>> {
    inv.buffers
        .iter()
        .enumerate()
        .map(|(i, b)| {
            if !b.is_output() {
                return Vec::new();
            }
            let s = b.spec();
            let payload = |a: &Vec<u8>| inputs::decode(&a[s.guard..s.guard + s.bytes], b.elem);
            let e = expected.get(i).map(payload).unwrap_or_default();
            let t = abs.get(i).map(payload).unwrap_or_default();
            crate::compare::sum_scale(&e, &t, None)
        })
        .collect()
}

/// Every case on every rank, each trial against the reference. Stops at the first case whose
/// run timed out or crashed (that worker is gone).
pub(super) fn correctness(
    ctx: &Ctx,
    kernel: &Kernel,
    reference: &mut Reference,
    student: &mut Student,
) -> Result<Vec<Check>, Infrastructure> {
    let mut checks = Vec::new();
    if kernel.numba.is_some() {
        checks.push(Check::error(
            CheckKind::Correctness,
            "correctness",
            "a multi-GPU lab takes CUDA C++ (or PTX) kernels: a Numba kernel cannot take a table of its peers' device pointers",
        ));
        return Ok(checks);
    }
    for case in &ctx.plan.cases {
        let (found, fatal) = case_checks(ctx, case, reference, student)?;
        checks.extend(found);
        if fatal {
            break;
        }
    }
    if ctx.caps().device_sanitizer && crate::score::nothing_wrong(&checks) {
        checks.extend(emulator_pass(ctx, kernel, reference, student)?);
    }
    Ok(checks)
}

/// Cases the emulator runs again after a GPU run: the smallest few, enough elements for a
/// chunk a rank.
const EMULATED_CASES: usize = 3;
const EMULATED_MAX_ELEMENTS: usize = 1 << 16;

/// On GPUs: the smallest cases again on emulated ranks, whose race check sees what a GPU run
/// may get right by luck (a flag published without a system-scope fence, a read that does not
/// wait for its flag). Its findings fail the milestone as on the emulator.
fn emulator_pass(
    ctx: &Ctx,
    kernel: &Kernel,
    reference: &mut Reference,
    student: &mut Student,
) -> Result<Vec<Check>, Infrastructure> {
    let n = ctx.opts.ranks.len();
    if student.emulator.is_none() {
        let w = crate::worker::pool::Workers::emulator(&ctx.opts.protected)
            .with_ranks((0..n).collect())
            .run(None)
            .map_err(|e| Infrastructure(format!("cannot start the emulated ranks: {e}")))?;
        student.emulator = Some(w);
    }
    let Some(w) = student.emulator.as_mut() else {
        return Ok(vec![]);
    };
    match w.load(kernel.ptx, Duration::from_secs(60)) {
        Ok(Ok(())) => {}
        // The emulator's limits are cugrade's, not the student's: nothing to say.
        _ => return Ok(vec![]),
    }
    let mut cases: Vec<&CasePlan> = ctx
        .plan
        .cases
        .iter()
        .filter(|c| c.elements <= EMULATED_MAX_ELEMENTS)
        .collect();
    cases.sort_by_key(|c| std::cmp::Reverse(c.elements));
    cases.truncate(EMULATED_CASES);
    let mut out = Vec::new();
    for case in cases {
        let Ok(dims) = case.launch.clone() else {
            continue;
        };
        let invs = invocations(ctx, case, 0)?;
        let exp = expected(ctx, case, &invs, reference)?;
        let limit = Duration::from_secs_f64(ctx.rubric.timeouts.launch_s * 10.0);
        let (spec, blobs) = ranks_spec(&ctx.plan.kernel, dims, &invs, limit)?;
        let nbuf = spec.buffers.len();
        let Some(w) = student.emulator.as_mut() else {
            break;
        };
        match w.run_ranks(spec, &blobs, limit, &[]) {
            Ok(r) => {
                let mut found = rank_findings(&r.reports, &case.name);
                let got = per_rank(r.allocations, nbuf);
                for (rank, inv) in invs.iter().enumerate() {
                    let mag = exp
                        .magnitude
                        .as_ref()
                        .and_then(|m| m.get(rank))
                        .map(Vec::as_slice);
                    let wrong = super::correctness::compare_trial(
                        ctx,
                        inv,
                        &exp.allocations[rank],
                        mag,
                        &got[rank],
                        case,
                        0,
                    );
                    found.extend(wrong.into_iter().map(|mut c| {
                        c.message = format!(
                            "on emulated ranks (the GPUs gave the right answer, by the luck of timing), rank {rank}: {}",
                            c.message
                        );
                        c
                    }));
                }
                let stop = !found.is_empty();
                out.extend(found);
                if stop {
                    break;
                }
            }
            Err((e, reports)) => {
                student.emulator = None;
                let (mut c, _) = runtime_check(&e, &case.name, &crate::worker::Captured::default());
                c.message = format!("on emulated ranks: {}", c.message);
                out.push(c);
                out.extend(rank_findings(&reports, &case.name));
                break;
            }
        }
    }
    Ok(out)
}

/// One case's trials: its checks (a passing correctness check when nothing was wrong), and
/// whether the student's worker is gone.
fn case_checks(
    ctx: &Ctx,
    case: &CasePlan,
    reference: &mut Reference,
    student: &mut Student,
) -> Result<(Vec<Check>, bool), Infrastructure> {
    let name = format!("correctness {}", case.name);
    let dims = match case.launch.clone() {
        Ok(d) => d,
        Err(e) => {
            let c = Check::fail(CheckKind::Launch, format!("launch {}", case.name), e)
                .with_case(case.name.clone());
            return Ok((vec![c], false));
        }
    };
    for trial in 0..ctx.rubric.trials {
        let invs = invocations(ctx, case, trial)?;
        let exp = expected(ctx, case, &invs, reference)?;
        let (deadline_s, _) = ctx.rubric.timeouts.correctness_deadline(exp.seconds);
        let limit = Duration::from_secs_f64(deadline_s);
        let (spec, blobs) = ranks_spec(&ctx.plan.kernel, dims, &invs, limit)?;
        let n = spec.buffers.len();
        let Some(worker) = student.worker.as_mut() else {
            return Ok((vec![], true));
        };
        let ran = worker.run_ranks(spec, &blobs, limit, &ctx.opts.rank_locks);
        let printed = worker.output();
        let ran = match ran {
            Ok(r) => r,
            Err((e, reports)) => {
                let (mut c, fatal) = runtime_check(&e, &case.name, &printed);
                if matches!(c.hint.as_deref(), Some(h) if h == hints::DEADLOCK) {
                    c.message = format!(
                        "{}; on {} ranks a rank that waits for a flag its peer never sets (or sets before its data is visible) hangs every rank",
                        c.message,
                        invs.len()
                    );
                }
                let mut found = vec![c];
                found.extend(rank_findings(&reports, &case.name));
                if fatal {
                    student.worker = None;
                }
                return Ok((found, fatal));
            }
        };
        let mut found = rank_findings(&ran.reports, &case.name);
        let got = per_rank(ran.allocations, n);
        for (r, inv) in invs.iter().enumerate() {
            let mag = exp
                .magnitude
                .as_ref()
                .and_then(|m| m.get(r))
                .map(Vec::as_slice);
            let wrong = super::correctness::compare_trial(
                ctx,
                inv,
                &exp.allocations[r],
                mag,
                &got[r],
                case,
                trial,
            );
            found.extend(wrong.into_iter().map(|mut c| {
                c.message = format!("rank {r} of {}: {}", invs.len(), c.message);
                c
            }));
        }
        if !found.is_empty() {
            return Ok((found, false));
        }
    }
    let c = Check::pass(
        CheckKind::Correctness,
        name,
        format!(
            "every rank's outputs match the reference on {} ranks ({} trials)",
            case.rank_args.len(),
            ctx.rubric.trials
        ),
    )
    .with_case(case.name.clone());
    Ok((vec![c], false))
}

/// The backend's findings (memcheck, the cross-device race check, where a hung rank was), each
/// saying which rank it was seen on.
fn rank_findings(reports: &[crate::backend::LaunchReport], case: &str) -> Vec<Check> {
    let mut out = Vec::new();
    for (r, rep) in reports.iter().enumerate() {
        for d in &rep.diagnostics {
            if d.tool == crate::backend::HUNG {
                continue;
            }
            let mut c = sanitizer_check(d, case);
            c.message = format!("rank {r}: {}", c.message);
            out.push(c);
        }
    }
    out
}

/// The timed checks: on GPUs the student's all-reduce beside NCCL's; without GPUs a check that
/// says nothing was timed or estimated.
pub(super) fn performance(
    ctx: &Ctx,
    reference: &mut Reference,
    student: &mut Student,
    correct: bool,
) -> Result<Vec<Check>, Infrastructure> {
    let mut out = Vec::new();
    for p in &ctx.plan.performance {
        let skipped = |why: String| {
            let mut c = Check::skipped(CheckKind::Performance, p.spec.name.clone(), why);
            c.points = Some(0.0);
            c
        };
        let Some(case) = &p.case else {
            out.push(Check::error(
                CheckKind::Performance,
                p.spec.name.clone(),
                format!("no performance case `{}`", p.spec.case),
            ));
            continue;
        };
        if !ctx.caps().timed {
            out.push(skipped(format!(
                "not measured: speed was not measured on the emulator, and no speed is estimated for a multi-GPU lab; on {} GPUs with peer access this check compares your bus bandwidth with NCCL's",
                case.rank_args.len()
            )));
            continue;
        }
        if !correct {
            out.push(skipped(
                "not measured: the kernel must be correct before its speed counts".into(),
            ));
            continue;
        }
        if !matches!(p.spec.against, Against::Nccl) {
            out.push(Check::error(
                CheckKind::Performance,
                p.spec.name.clone(),
                "a multi-GPU lab's speed is compared with NCCL's (`against: nccl`)",
            ));
            continue;
        }
        out.push(timed_check(ctx, p, case, reference, student)?);
    }
    Ok(out)
}

/// One timed check against NCCL: the student's launches and NCCL's all-reduce on the same GPUs
/// in one timed section, every rank's outputs of the last launch checked against the
/// reference's.
fn timed_check(
    ctx: &Ctx,
    p: &PerfPlan,
    case: &CasePlan,
    reference: &mut Reference,
    student: &mut Student,
) -> Result<Check, Infrastructure> {
    let name = p.spec.name.clone();
    let fail = |msg: String, hint: &str| {
        let mut c = Check::fail(CheckKind::Performance, name.clone(), msg)
            .with_case(case.name.clone())
            .with_hint(hint);
        c.points = Some(0.0);
        c
    };
    let dims = case
        .launch
        .clone()
        .map_err(|e| Infrastructure(format!("launch of case {}: {e}", case.name)))?;
    let invs = invocations(ctx, case, 0)?;
    let exp = expected(ctx, case, &invs, reference)?;
    let limit = Duration::from_secs_f64(ctx.rubric.timeouts.launch_s.max(10.0));
    let (spec, blobs) = ranks_spec(&ctx.plan.kernel, dims, &invs, limit)?;
    let first = &invs[0];
    let Some((zero, restore, count)) = timed_buffers(first) else {
        return Ok(Check::error(
            CheckKind::Performance,
            name,
            "`against: nccl` needs a float input and a float output to all-reduce",
        ));
    };
    let bytes = 4 * count;
    // NCCL is timed in a trusted process of its own (`worker::nccl`: the worker's sandbox
    // leaves it no sockets), on the same GPUs, right after the student's launches.
    let m = RanksMeasure {
        run: spec,
        zero,
        restore,
        reps: REPS,
    };
    let Some(worker) = student.worker.as_mut() else {
        return Ok(fail("the student's worker is gone".into(), hints::FAULT));
    };
    let (timed, last) = match worker.measure_ranks(
        m,
        &blobs,
        limit * (2 * REPS as u32 + 4),
        &ctx.opts.rank_locks,
    ) {
        Ok(t) => t,
        Err(e) => {
            student.worker = None;
            return Ok(Check::error(CheckKind::Performance, name, e).with_case(case.name.clone()));
        }
    };
    if let Some(e) = &timed.error {
        student.worker = None;
        return Ok(fail(
            format!("the timed launches failed: {e}"),
            hints::FAULT,
        ));
    }
    let job = crate::worker::nccl::NcclJob {
        gpus: ctx.opts.ranks.clone(),
        count,
        reps: REPS,
    };
    let nccl = crate::worker::nccl::time_nccl(&job, &ctx.opts.rank_locks);
    let got = per_rank(last, first.buffers.len());
    if let Some(why) = wrong_when_timed(ctx, case, &invs, &exp, &got) {
        return Ok(fail(why, hints::FAULT));
    }
    Ok(ratio_check(
        p,
        case,
        &timed.student_s,
        &nccl,
        invs.len(),
        bytes,
    ))
}

/// The buffers a timed section zeroes (scratch: flags) and restores (inputs back, outputs
/// poisoned again: every launch does the whole work) before every launch, and how many
/// floats NCCL all-reduces beside it: the first float32 output's length (it needs a float32
/// input too).
fn timed_buffers(first: &Invocation) -> Option<(Vec<usize>, Vec<usize>, usize)> {
    let pick = |f: &dyn Fn(&inputs::Buffer) -> bool| -> Vec<usize> {
        first
            .buffers
            .iter()
            .enumerate()
            .filter(|(_, b)| f(b))
            .map(|(i, _)| i)
            .collect()
    };
    let zero = pick(&|b| b.dir == Direction::Scratch);
    let restore = pick(&|b| b.dir != Direction::Scratch);
    let f32 = crate::rubric::schema::ScalarType::F32;
    pick(&|b| b.dir == Direction::In && b.elem == f32).first()?;
    let recv = *pick(&|b| b.dir.is_output() && b.elem == f32).first()?;
    Some((zero, restore, first.buffers[recv].len))
}

/// The last timed launch's outputs on every rank against the reference's: what is wrong, if
/// anything (a kernel that skips work when timed earns nothing).
fn wrong_when_timed(
    ctx: &Ctx,
    case: &CasePlan,
    invs: &[Invocation],
    exp: &Expected,
    got: &[Vec<Vec<u8>>],
) -> Option<String> {
    for (r, inv) in invs.iter().enumerate() {
        let mag = exp
            .magnitude
            .as_ref()
            .and_then(|m| m.get(r))
            .map(Vec::as_slice);
        let (Some(e), Some(g)) = (exp.allocations.get(r), got.get(r)) else {
            return Some("the timed section returned no outputs to check".into());
        };
        let wrong = super::correctness::compare_trial(ctx, inv, e, mag, g, case, 0);
        if let Some(w) = wrong.first() {
            return Some(format!(
                "the timed launches' results are wrong on rank {r}: {}; no speed points",
                w.message
            ));
        }
    }
    None
}

/// The check from a timed section's repetitions: the ratio of NCCL's time to the student's (=
/// the student's bus bandwidth over NCCL's), its interval, the points the tiers give.
fn ratio_check(
    p: &PerfPlan,
    case: &CasePlan,
    student_s: &[f64],
    nccl: &NcclTimes,
    ranks: usize,
    bytes: usize,
) -> Check {
    let name = p.spec.name.clone();
    if nccl.seconds.is_empty() {
        let why = nccl
            .error
            .clone()
            .unwrap_or_else(|| "NCCL returned no times".into());
        return Check::error(
            CheckKind::Performance,
            name,
            format!("not scored: NCCL, the baseline of this check, could not be timed: {why}"),
        )
        .with_case(case.name.clone());
    }
    let ratios: Vec<f64> = student_s
        .iter()
        .zip(&nccl.seconds)
        .map(|(s, n)| n / s.max(1e-12))
        .collect();
    let iv = Interval::of_median(&ratios);
    let d = decide::decide(&iv, p.bar, &p.spec.tiers, p.spec.points);
    let median = |v: &[f64]| crate::measure::stats::median(v);
    let (s, n) = (median(student_s), median(&nccl.seconds));
    let msg = format!(
        "{:.2}x NCCL's bus bandwidth (needs {}x; 95 % interval {:.2}–{:.2}x): yours {:.1} GB/s ({:.1} us), NCCL's {:.1} GB/s ({:.1} us), {} ranks, {} MiB a rank, medians of {} launches each{}",
        iv.estimate,
        p.bar,
        iv.lo,
        iv.hi,
        allreduce_bus_gbs(ranks, bytes, s),
        s * 1e6,
        allreduce_bus_gbs(ranks, bytes, n),
        n * 1e6,
        ranks,
        bytes >> 20,
        ratios.len(),
        nccl.version
            .as_ref()
            .map(|v| format!(" ({v})"))
            .unwrap_or_default()
    );
    let status = if d.passed { Status::Pass } else { Status::Fail };
    let mut c = Check::new(CheckKind::Performance, name, status, msg)
        .with_case(case.name.clone())
        .with_measure(iv.estimate, Some(p.bar), "x");
    c.points = Some(d.points);
    if status == Status::Fail {
        c.hint = Some(hints::SLOW.to_string());
    }
    c
}
