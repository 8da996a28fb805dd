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
mod cross;
mod cupy;
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
mod reference;
mod resources;
mod run;
pub mod sanitizer;
mod selfcheck;
mod verdict;

pub use baselines::{cpu_run, host_args};
pub use context::{Infrastructure, Kept, KeptKernel, Options};
pub use reference::Reference;
pub use selfcheck::reference_against_cpu;

use crate::backend::BackendKind;
use crate::result::{Flag, GradeResult, MilestoneResult, RunInfo};
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
    let started = Instant::now();
    let plan = plan_for(rubric, sub);
    if plan.is_function_lab() {
        return grade_function_lab(&plan, sub, opts, reference, started);
    }
    let built = build::stage(&plan, sub, opts)?;
    let mut run = run_info(opts);
    // One worker serves all of a student's milestones while it stays healthy (a fault or a
    // timeout ends it; the next milestone gets a fresh one). On a GPU the driver creates and
    // destroys contexts one at a time across processes (about 0.2 s each on an H100 with 16
    // processes at once), so a worker per milestone made context churn a cohort's
    // bottleneck. Nothing crosses students, and within one student every launch still
    // starts from fresh inputs, poisoned outputs and the module's own `__device__` values.
    let mut student = Student::default();
    let mut milestones = Vec::new();
    // Flags from comparing the emulator's runs with the GPU's (cuda backend).
    let mut cross_flags: Vec<Flag> = Vec::new();
    for m in &plan.milestones {
        let ctx = Ctx {
            rubric: &plan,
            plan: m,
            sub,
            opts,
            compiled: &built.summary.kernels,
        };
        let done = milestone::grade(&ctx, &built, reference, &mut student, &mut run.sandbox)?;
        cross_flags.extend(done.flags);
        milestones.push(score::finish(&m.milestone, m.max_points, done.checks));
    }
    correctness::attach_snippets(&mut milestones, sub);
    let mut flags = built.device_flags(&plan);
    flags.append(&mut cross_flags);
    run.seconds = Some(started.elapsed().as_secs_f64());
    Ok(result(
        &plan,
        sub,
        opts,
        milestones,
        run,
        built.summary_if_compiled(),
        flags,
    ))
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

/// A Python function lab (`function`, `function_run`): no kernels to build.
fn grade_function_lab(
    plan: &Plan,
    sub: &Submission,
    opts: &Options,
    reference: &mut Reference,
    started: Instant,
) -> Result<GradeResult, Infrastructure> {
    let mut run = run_info(opts);
    let milestones = function_run::grade(plan, sub, opts, reference, &mut run.notes)?;
    run.seconds = Some(started.elapsed().as_secs_f64());
    Ok(result(plan, sub, opts, milestones, run, None, vec![]))
}

/// What result.json says of the run before any milestone ran.
fn run_info(opts: &Options) -> RunInfo {
    RunInfo {
        device: opts.device_name.clone(),
        arch: opts.arch.clone(),
        timed: opts.backend == BackendKind::Cuda,
        cugrade_version: env!("CARGO_PKG_VERSION").to_string(),
        sandbox: vec![],
        notes: vec![],
        seconds: None,
        gpu: opts.gpu_record.clone(),
    }
}

/// The plan `grade` resolves for a submission (`check --profile` profiles on it too).
pub fn plan_for(rubric: &LoadedRubric, sub: &Submission) -> Plan {
    rubric.plan(&|kernel, launch| submission::launch_for(sub, kernel, launch))
}
