//! Grade one submission against a rubric: the pipeline end to end.
//!
//! The parent generates inputs, gets expected outputs from the reference kernel in a trusted
//! worker, runs the student's kernels in a worker of the student's own (a fresh one after a
//! fault or a timeout), and compares raw output bytes itself. Expected outputs never enter
//! the student's process. A timeout or fault ends the milestone (its worker is killed) and
//! grading goes on with the next one.

//!
//! The flow, in the order it runs: the rubric's [`Plan`](crate::rubric::plan::Plan) for this
//! submission; `build` (every language's kernels to PTX: `compiling`, `numba`, `cupy`); then
//! per milestone, `milestone` runs the stages in turn: `locate` the kernel's module, `load` it
//! in the student's worker, `correctness` (cases and trials against the `reference`),
//! `sanitizer` (the emulator's and compute-sanitizer's, with the `cross` check, on a GPU),
//! `performance` (or `estimated` without a GPU; `baselines`) and `metrics`. Each stage is a
//! function of the milestone's context (`context::Ctx`) that returns its checks and whether
//! the milestone goes on.

mod baselines;
mod build;
mod compiling;
mod context;
mod correctness;
mod cpu_python;
mod cross;
mod cupy;
pub mod deferred;
mod estimated;
mod function;
mod function_run;
mod gpu_sanitizer;
mod load;
mod locate;
mod metrics;
mod milestone;
mod numba;
mod performance;
pub mod probe;
mod ranks;
mod reference;
mod resources;
mod run;
pub mod sanitizer;
mod selfcheck;
mod verdict;

pub use baselines::{CpuRunner, cpu_key_what, host_args};
pub use context::{Infrastructure, Kept, KeptKernel, Options};
pub use deferred::{Deferred, Graded};
pub use reference::Reference;
pub use selfcheck::reference_against_cpu;

use crate::result::{Flag, GradeResult, MilestoneResult, Phase, Phases, RunInfo};
use crate::rubric::LoadedRubric;
use crate::rubric::plan::Plan;
use crate::score;
use crate::submission::{self, Submission};
use context::{Ctx, Student};
use std::time::Instant;

/// Grade one submission. Infrastructure failures (the reference breaks) are `Err`.
pub fn grade(
    rubric: &LoadedRubric,
    sub: &Submission,
    opts: &Options,
    reference: &mut Reference,
) -> Result<GradeResult, Infrastructure> {
    grade_deferring(rubric, sub, opts, reference, false).map(|g| g.result)
}

/// Grade one submission; with `defer`, compute-sanitizer's pass is left for
/// [`deferred::finish`] to run over several students at once (`grade`), and the result is
/// final only after it.
pub fn grade_deferring(
    rubric: &LoadedRubric,
    sub: &Submission,
    opts: &Options,
    reference: &mut Reference,
    defer: bool,
) -> Result<Graded, Infrastructure> {
    let started = Instant::now();
    let plan = plan_of(rubric, sub, opts)?;
    let mut phases = Phases::default();
    if plan.is_function_lab() {
        return grade_function_lab(&plan, sub, opts, reference, started, phases).map(Graded::done);
    }
    let built = timed_phase(&mut phases, Phase::Compile, || {
        build::stage(&plan, sub, opts)
    })?;
    if plan.ranks.is_some() {
        return grade_rank_lab(&plan, sub, opts, &built, reference, started, phases);
    }
    let mut run = run_info(opts);
    let mut student = Student::default(); // one worker for all milestones (`Student` says why)
    let ctx_of = |m| Ctx {
        rubric: &plan,
        plan: m,
        sub,
        opts,
        compiled: &built.summary.kernels,
    };
    // Every milestone's first half (locate, load, correctness), then compute-sanitizer on all
    // of the kernels at once, beside the second halves (sanitizers, performance, metrics).
    let mut fronts = Vec::new();
    for m in &plan.milestones {
        fronts.push(milestone::front(
            &ctx_of(m),
            &built,
            reference,
            &mut student,
            &mut run.sandbox,
            &mut phases,
        )?);
    }
    let (mut gpu_sanitizer, part) = {
        let ctxs: Vec<Ctx> = plan.milestones.iter().map(ctx_of).collect();
        let targets: Vec<gpu_sanitizer::Target> = fronts
            .iter()
            .zip(&ctxs)
            .enumerate()
            .filter_map(|(i, (f, c))| f.sanitizer_target(c, i))
            .collect();
        sanitizer_pass(&targets, opts, defer)?
    };
    let mut speaks_numba = std::collections::BTreeSet::new();
    let mut milestones = Vec::new();
    // Flags from comparing the emulator's runs with the GPU's (cuda backend).
    let mut cross_flags: Vec<Flag> = Vec::new();
    for (i, (m, front)) in plan.milestones.iter().zip(fronts).enumerate() {
        let gpu = gpu_sanitizer.as_mut().and_then(|p| p.take(i, &mut phases));
        let done = milestone::rest(
            &ctx_of(m),
            &built,
            front,
            reference,
            &mut student,
            gpu,
            &mut phases,
        )?;
        cross_flags.extend(done.flags);
        if done.numba {
            speaks_numba.insert(i);
        }
        milestones.push(score::finish(&m.milestone, m.max_points, done.checks));
    }
    correctness::attach_snippets(&mut milestones, sub);
    // Checks against an unpinned CPU have no estimated ratio: said once, with what to do.
    run.notes
        .extend(estimated::no_cpu_ratio_note(&milestones, &plan.path));
    let mut flags = built.device_flags(&plan);
    flags.append(&mut cross_flags);
    run.seconds = Some(started.elapsed().as_secs_f64());
    run.phases = Some(phases);
    let compile = built.summary_if_compiled();
    let result = result(&plan, sub, opts, milestones, run, compile, flags);
    let deferred = part.map(|(part, cs)| Deferred::new(part, cs, &plan, speaks_numba, sub));
    Ok(Graded { result, deferred })
}

/// compute-sanitizer over the kernels that ran and did not hang (cuda backend, where the tool
/// is installed): started now, beside the milestones' second halves; or, with `defer`, planned
/// for `deferred::finish`, with the tool's path.
type Deferral = (gpu_sanitizer::Part, std::path::PathBuf);
fn sanitizer_pass(
    targets: &[gpu_sanitizer::Target],
    opts: &Options,
    defer: bool,
) -> Result<(Option<gpu_sanitizer::Pending>, Option<Deferral>), Infrastructure> {
    if !opts.backend.caps().device_sanitizer || targets.is_empty() {
        return Ok((None, None));
    }
    let Some(cs) = crate::worker::nsight::find_tool("compute-sanitizer") else {
        return Ok((None, None));
    };
    if defer {
        return Ok((None, Some((gpu_sanitizer::plan(targets, opts.seed), cs))));
    }
    Ok((Some(gpu_sanitizer::start(&cs, targets, opts)?), None))
}

/// The submission's result from its milestones (the score their sum, to the hundredth).
fn result(
    plan: &Plan,
    sub: &Submission,
    opts: &Options,
    milestones: Vec<MilestoneResult>,
    run: RunInfo,
    compile: Option<crate::result::CompileSummary>,
    flags: Vec<Flag>,
) -> GradeResult {
    let score: f64 = milestones.iter().map(|m: &MilestoneResult| m.score).sum();
    GradeResult {
        assignment: plan.assignment.clone(),
        student: sub.student.clone(),
        student_id: None,
        id: String::new(),
        entry: String::new(),
        backend: opts.backend.as_str().to_string(),
        seed: opts.seed,
        score: (score * 100.0).round() / 100.0,
        max_score: plan.max_score,
        milestones,
        submission_sha256: sub.sha256.clone(),
        rubric_sha256: String::new(),
        compile,
        run,
        notes: sub.notes.clone(),
        flags,
    }
}

/// The plan for this run: a multi-GPU lab's on its rank set (`setup::ranks` gave it one).
fn plan_of(
    rubric: &LoadedRubric,
    sub: &Submission,
    opts: &Options,
) -> Result<Plan, Infrastructure> {
    if opts.ranks.is_empty() {
        let plan = plan_for(rubric, sub);
        if plan.ranks.is_some() {
            return Err(Infrastructure(format!(
                "`{}` is a multi-GPU lab, and this run has no rank set (`setup::ranks` was not called)",
                plan.assignment
            )));
        }
        return Ok(plan);
    }
    Ok(rubric.plan_ranks(
        &|kernel, launch| submission::launch_for(sub, kernel, launch),
        opts.ranks.len(),
    ))
}

/// A multi-GPU lab (`ranks`): its milestones on the run's rank set.
fn grade_rank_lab(
    plan: &Plan,
    sub: &Submission,
    opts: &Options,
    built: &build::Built,
    reference: &mut Reference,
    started: Instant,
    mut phases: Phases,
) -> Result<Graded, Infrastructure> {
    let mut run = run_info(opts);
    let milestones = ranks::grade(plan, sub, opts, built, reference, &mut run, &mut phases)?;
    run.seconds = Some(started.elapsed().as_secs_f64());
    run.phases = Some(phases);
    let compile = built.summary_if_compiled();
    Ok(Graded::done(result(
        plan,
        sub,
        opts,
        milestones,
        run,
        compile,
        vec![],
    )))
}

/// A Python function lab (`function`, `function_run`): no kernels to build.
fn grade_function_lab(
    plan: &Plan,
    sub: &Submission,
    opts: &Options,
    reference: &mut Reference,
    started: Instant,
    mut phases: Phases,
) -> Result<GradeResult, Infrastructure> {
    let mut run = run_info(opts);
    let milestones = function_run::grade(plan, sub, opts, reference, &mut run.notes, &mut phases)?;
    run.seconds = Some(started.elapsed().as_secs_f64());
    run.phases = Some(phases);
    Ok(result(plan, sub, opts, milestones, run, None, vec![]))
}

/// What result.json says of the run before any milestone ran.
fn run_info(opts: &Options) -> RunInfo {
    RunInfo {
        device: opts.device_name.clone(),
        arch: opts.arch.clone(),
        timed: opts.backend.caps().timed,
        cugrade_version: env!("CARGO_PKG_VERSION").to_string(),
        sandbox: vec![],
        notes: vec![],
        seconds: None,
        gpu: opts.gpu_record.clone(),
        phases: None,
    }
}

/// Run `f`, counting its wall time in `phase` of `phases`, less the GPU-lock waits it made on
/// this thread, which go to `gpu_wait_s` (`measure::lock::waited_here`).
pub fn timed_phase<T>(phases: &mut Phases, phase: Phase, f: impl FnOnce() -> T) -> T {
    let start = Instant::now();
    let waited = crate::measure::lock::waited_here();
    let out = f();
    let waited = crate::measure::lock::waited_here() - waited;
    phases.add(phase, start.elapsed().as_secs_f64(), waited);
    out
}

/// The plan `grade` resolves for a submission (`check --profile` profiles on it too).
pub fn plan_for(rubric: &LoadedRubric, sub: &Submission) -> Plan {
    rubric.plan(&|kernel, launch| submission::launch_for(sub, kernel, launch))
}
