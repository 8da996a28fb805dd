//! Correctness: every trial of every case, compared byte for byte with the reference, and the
//! sanitizer and metric findings that come with the runs.

use super::context::{Ctx, Infrastructure, Kernel, Student};
use super::performance::preload_timing_modules;
use super::reference::Reference;
use super::run::{AppendDetails, RunError, run_on, runtime_check, student_invocation};
use super::sanitizer::{self, sanitizer_check};
use crate::backend::Metrics;
use crate::compare::{self, Resolved};
use crate::hints;
use crate::inputs::{self, Invocation};
use crate::result::{Check, CheckKind, Status};
use crate::rubric::plan::CasePlan;
use crate::rubric::schema::Direction;
use crate::score;
use crate::submission::Submission;
use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

/// What the correctness stage found and kept for the later stages.
pub(super) struct Correctness {
    pub(super) checks: Vec<Check>,
    /// The emulator's metrics of each case's first trial (emulator backend).
    pub(super) metrics: HashMap<String, Metrics>,
    /// The GPU's outputs of each case's first trial, for the cases the emulator runs again
    /// (cuda backend: `cross`).
    pub(super) gpu_outputs: HashMap<String, Vec<Vec<u8>>>,
}

/// Every case in turn (until one crashes or times out, or the milestone's budget, counted from
/// `started`, runs out), with the GPU's shared lock held throughout; then, for a kernel with
/// nothing wrong so far, the timing modules' load.
pub(super) fn stage(
    ctx: &Ctx,
    kernel: &Kernel,
    reference: &mut Reference,
    student: &mut Student,
    started: Instant,
) -> Result<Correctness, Infrastructure> {
    let budget = Duration::from_secs_f64(ctx.rubric.timeouts.milestone_s);
    let timed = ctx.caps().timed && !ctx.plan.performance.is_empty();
    if timed {
        // cugrade's timing kernels, compiled (once per job) before the GPU is taken; a
        // failure is reported by the performance check.
        let _ = reference.harness(ctx.opts);
    }
    // The GPU is taken once for the whole correctness phase (every case and trial, the
    // reference's runs, the timing modules' load), shared with other correctness phases,
    // never with a timed section. Taken per launch, each of a milestone's launches queued
    // behind the timed sections of every other job: on an H100 with `--jobs 16` that was
    // about 0.3 s per launch, half of a reduction cohort's wall time.
    let phase = ctx
        .opts
        .gpu
        .as_deref()
        .and_then(|k| crate::measure::lock::shared(k, "correctness").ok());
    let mut out = Correctness {
        checks: Vec::new(),
        metrics: HashMap::new(),
        gpu_outputs: HashMap::new(),
    };
    let mut stopped = false;
    for case in &ctx.plan.cases {
        if let Some(c) = not_run(case, stopped, started, budget) {
            stopped = true;
            out.checks.push(c);
            continue;
        }
        let ran = run_case(ctx, kernel, case, reference, student)?;
        if let Some(mx) = ran.metrics {
            out.metrics.insert(case.name.clone(), mx);
        }
        if let Some(g) = ran.gpu_output {
            out.gpu_outputs.insert(case.name.clone(), g);
        }
        out.checks.extend(ran.checks);
        stopped = ran.fatal;
    }
    // The reference and harness modules for the timed sections, JIT-compiled by the driver
    // now (still in the correctness phase: no timed section runs meanwhile) rather than in a
    // timed section's setup. A failure is the performance check's to report (it tries again).
    let loaded = student.worker.as_ref().is_some_and(|w| w.timing_loaded());
    if timed && !loaded && score::nothing_wrong(&out.checks) {
        let _ = preload_timing_modules(ctx, reference, student);
    }
    drop(phase);
    Ok(out)
}

/// The check of a case that is not run: an earlier case crashed or timed out, or the
/// milestone's time budget ran out (`Some` also stops the cases after it).
fn not_run(case: &CasePlan, stopped: bool, started: Instant, budget: Duration) -> Option<Check> {
    if stopped {
        return Some(
            Check::skipped(
                CheckKind::Correctness,
                format!("correctness {}", case.name),
                "not run: an earlier case crashed or timed out",
            )
            .with_case(case.name.clone()),
        );
    }
    (started.elapsed() > budget).then(|| {
        Check::error(
            CheckKind::Runtime,
            format!("correctness {}", case.name),
            format!(
                "the milestone's time budget of {:.0} s ran out",
                budget.as_secs_f64()
            ),
        )
        .with_case(case.name.clone())
    })
}

/// One case's outcome.
struct CaseRun {
    checks: Vec<Check>,
    /// The worker is gone (fault or timeout): stop the milestone's cases.
    fatal: bool,
    metrics: Option<Metrics>,
    gpu_output: Option<Vec<Vec<u8>>>,
}

/// Run every trial of one case. The caller holds the GPU's shared lock (`measure::lock`) for
/// the whole correctness phase.
fn run_case(
    ctx: &Ctx,
    kernel: &Kernel,
    case: &CasePlan,
    reference: &mut Reference,
    student: &mut Student,
) -> Result<CaseRun, Infrastructure> {
    let started = Instant::now();
    let mut run = CaseRun {
        checks: Vec::new(),
        fatal: false,
        metrics: None,
        gpu_output: None,
    };
    let dims = match launch(case, kernel.info.max_threads_per_block) {
        Ok(d) => d,
        Err(c) => {
            run.checks.push(*c);
            return Ok(run);
        }
    };
    let mut seen = BTreeSet::new();
    let mut trials_ok = 0u32;
    for trial in 0..ctx.rubric.trials {
        let Some(trial_run) = run_trial(
            ctx, kernel, case, trial, dims, reference, student, &mut seen,
        )?
        else {
            break;
        };
        if run.metrics.is_none() {
            run.metrics = trial_run.metrics;
        }
        if trial == 0 && keeps_gpu_output(ctx, case) {
            run.gpu_output = trial_run.allocations;
        }
        run.checks.extend(trial_run.checks);
        if trial_run.errored {
            // A run that did not complete ends the case (and, fatal, the worker).
            run.fatal = trial_run.fatal;
            return Ok(run);
        }
        if trial_run.ended {
            break;
        }
        trials_ok += 1;
    }
    if !run.checks.iter().any(|c| c.kind == CheckKind::Correctness) {
        let mut c = Check::pass(
            CheckKind::Correctness,
            format!("correctness {}", case.name),
            format!("values match the reference ({trials_ok} trials on fresh inputs)"),
        )
        .with_case(case.name.clone());
        c.seconds = Some(started.elapsed().as_secs_f64());
        run.checks.push(c);
    }
    Ok(run)
}

/// The student's launch of a case, or the failed launch check.
pub(super) fn launch(
    case: &CasePlan,
    max_threads: u32,
) -> Result<crate::backend::LaunchDims, Box<Check>> {
    // A multi-kernel milestone's later launches are checked against the device's limits.
    let later = case.then.clone().and_then(|ds| {
        ds.iter()
            .try_for_each(|d| inputs::check_limits(d, 1024))
            .map_err(|e| format!("a later kernel's launch: {e}"))
    });
    case.launch
        .clone()
        .and_then(|d| inputs::check_limits(&d, max_threads).map(|()| d))
        .and_then(|d| later.map(|()| d))
        .map_err(|e| {
            Box::new(
                Check::fail(
                    CheckKind::Launch,
                    format!("launch {}", case.name),
                    format!("invalid launch configuration: {e}"),
                )
                .with_case(case.name.clone())
                .with_hint(hints::RESOURCES),
            )
        })
}

/// Keep the GPU's outputs of `case`'s first trial if the emulator will run the case too.
fn keeps_gpu_output(ctx: &Ctx, case: &CasePlan) -> bool {
    ctx.caps().device_sanitizer
        && sanitizer::smallest_cases(ctx.plan)
            .iter()
            .any(|c| c.name == case.name)
}

/// One trial's outcome.
struct TrialRun {
    checks: Vec<Check>,
    /// The run did not complete (timeout, fault, crash): the case ends with no verdict.
    errored: bool,
    /// ... and the worker is gone.
    fatal: bool,
    /// The trial found something wrong and the case stops here.
    ended: bool,
    metrics: Option<Metrics>,
    allocations: Option<Vec<Vec<u8>>>,
}

/// One trial: fresh inputs, the reference's outputs, the student's run, the comparison.
/// `None`: the student's worker is gone.
#[allow(clippy::too_many_arguments)]
fn run_trial(
    ctx: &Ctx,
    kernel: &Kernel,
    case: &CasePlan,
    trial: u32,
    dims: crate::backend::LaunchDims,
    reference: &mut Reference,
    student: &mut Student,
    seen: &mut BTreeSet<(String, Option<String>, Option<u32>, String)>,
) -> Result<Option<TrialRun>, Infrastructure> {
    let inv = case
        .args()
        .and_then(|a| inputs::generate(a, inputs::trial_seed(ctx.opts.seed, &case.name, trial)))
        .map_err(|e| Infrastructure(format!("inputs for case {}: {e}", case.name)))?;
    let (expected, magnitude) = super::reference::expected_outputs(ctx, case, &inv, reference)?;
    // A multiple of the reference's time, so that a hung kernel holds the GPU (which timed
    // sections wait for) for about a second, not the whole `launch_s`.
    let (deadline_s, why) = ctx.rubric.timeouts.correctness_deadline(expected.seconds);
    let Some(worker) = student.worker.as_mut() else {
        return Ok(None);
    };
    let student_inv = student_invocation(&kernel.numba, &inv, &ctx.plan.contract)?;
    let then = ctx.plan.then(case).map_err(Infrastructure)?;
    let ran = run_on(
        worker,
        &ctx.plan.kernel,
        &student_inv,
        dims,
        &then,
        Duration::from_secs_f64(deadline_s),
        None,
    );
    let printed = worker.output();
    let r = match ran {
        Ok(r) => r,
        Err(e) => {
            let who = launched(ctx);
            let deadline = Deadline {
                kernel: &who,
                seconds: deadline_s,
                why: &why,
            };
            let (checks, fatal) = failed_run(&e, &case.name, &printed, &deadline);
            if fatal {
                student.worker = None;
            }
            return Ok(Some(TrialRun {
                checks,
                errored: true,
                fatal,
                ended: true,
                metrics: None,
                allocations: None,
            }));
        }
    };
    let mut checks = new_findings(&r.report.diagnostics, &case.name, seen);
    let found = compare_trial(
        ctx,
        &inv,
        &expected.allocations,
        magnitude.as_deref(),
        &r.allocations,
        case,
        trial,
    );
    let ended = !found.is_empty();
    for (k, c) in found.into_iter().enumerate() {
        checks.push(if k == 0 {
            c.with_details_append(&printed)
        } else {
            c
        });
    }
    Ok(Some(TrialRun {
        checks,
        errored: false,
        fatal: false,
        ended,
        metrics: r.report.metrics.clone(),
        allocations: Some(r.allocations),
    }))
}

/// Checks for the backend's sanitizer findings not seen on an earlier trial.
fn new_findings(
    found: &[crate::backend::Diagnostic],
    case: &str,
    seen: &mut BTreeSet<(String, Option<String>, Option<u32>, String)>,
) -> Vec<Check> {
    found
        .iter()
        .filter(|d| {
            seen.insert((
                d.tool.clone(),
                d.file.clone(),
                d.line,
                d.instruction.clone(),
            ))
        })
        .map(|d| sanitizer_check(d, case))
        .collect()
}

/// A correctness launch's deadline: the kernel, the seconds and why that many.
/// The milestone's kernel in backticks; a multi-kernel milestone's launches share one deadline,
/// so all of them in launch order (the emulator's finding points at the line that was running).
fn launched(ctx: &Ctx) -> String {
    ctx.plan
        .kernels()
        .map(|k| format!("`{k}`"))
        .collect::<Vec<_>>()
        .join(", then ")
}

struct Deadline<'a> {
    /// The kernel in backticks, or a multi-kernel milestone's kernels in launch order.
    kernel: &'a str,
    seconds: f64,
    why: &'a str,
}

/// A run that did not complete: its runtime check and the sanitizer findings the backend made
/// before it ended; and whether the worker is gone. A timeout names the kernel, the case and
/// the deadline with why it is that long, and the line its threads were running where the
/// emulator saw it (`backend::HUNG`).
fn failed_run(
    e: &RunError,
    case: &str,
    printed: &crate::worker::Captured,
    deadline: &Deadline,
) -> (Vec<Check>, bool) {
    let (mut check, fatal) = runtime_check(e, case, printed);
    let diagnostics = match e {
        RunError::Backend(_, report) => report.diagnostics.as_slice(),
        RunError::Worker(_) => &[],
    };
    let hung = diagnostics.iter().find(|d| d.tool == crate::backend::HUNG);
    if check.hint.as_deref() == Some(hints::DEADLOCK) && check.message.starts_with("timeout") {
        check.message = format!(
            "timeout: {} did not finish case {} within {:.1} s ({}) and was stopped",
            deadline.kernel, case, deadline.seconds, deadline.why
        );
        if let Some(at) = hung.and_then(|d| Some(format!("{}:{}", d.file.as_ref()?, d.line?))) {
            check
                .message
                .push_str(&format!("; its threads were still running at {at}"));
            check.location = Some(at);
        }
        check.hint = Some(hints::TIMEOUT.to_string());
    }
    let mut checks = vec![check];
    checks.extend(
        diagnostics
            .iter()
            .filter(|d| d.tool != crate::backend::HUNG)
            .map(|d| sanitizer_check(d, case)),
    );
    (checks, fatal)
}

/// Whether a milestone's checks say its kernel hung on the GPU (a timeout, or a deadlock the
/// backend saw): then neither sanitizer pass runs it again. Each would only wait out its own,
/// longer deadline (the emulator's is ten times a launch's, per case; compute-sanitizer's 30 s
/// per launch and tool) while the student's job and, on the GPU, every timed section waited.
pub(super) fn hung(checks: &[Check]) -> bool {
    checks.iter().any(|c| {
        c.kind == CheckKind::Runtime
            && matches!(c.hint.as_deref(), Some(h) if h == hints::DEADLOCK || h == hints::TIMEOUT)
    })
}

/// Per wrong output: the sentence naming the kind of wrong, its cause key, its hint, and the
/// mismatch listing.
type Problem = (String, &'static str, &'static str, String);

/// Compare one trial: a failed correctness check (if values differ) and one memory check per
/// stray write or changed input. Empty when everything is right.
pub(super) fn compare_trial(
    ctx: &Ctx,
    inv: &Invocation,
    expected: &[Vec<u8>],
    magnitude: Option<&[Vec<f64>]>,
    got: &[Vec<u8>],
    case: &CasePlan,
    trial: u32,
) -> Vec<Check> {
    let tol_vars = inv.tolerance_vars(&case.vars);
    let mut problems: Vec<Problem> = Vec::new();
    let mut memory: Vec<Check> = Vec::new();
    for (i, b) in inv.buffers.iter().enumerate() {
        let spec = b.spec();
        let payload = &got[i][spec.guard..spec.guard + spec.bytes];
        memory.extend(memory_checks(b, &got[i], payload));
        if !b.is_output() {
            continue;
        }
        let exp_payload = &expected[i][spec.guard..spec.guard + spec.bytes];
        let mag = magnitude.and_then(|m| m.get(i)).map(Vec::as_slice);
        match wrong_output(ctx, b, &tol_vars, exp_payload, payload, mag) {
            Ok(None) => {}
            Ok(Some(p)) => problems.push(p),
            Err(e) => {
                let name = format!("correctness {}", case.name);
                return vec![
                    Check::error(CheckKind::Correctness, name, format!("tolerance: {e}"))
                        .with_case(case.name.clone()),
                ];
            }
        }
    }
    let mut found: Vec<Check> = memory
        .into_iter()
        .map(|mut c| {
            c.case = Some(case.name.clone());
            c.details = Some(format!("case {}, trial {}", case.name, trial + 1));
            c
        })
        .collect();
    if !problems.is_empty() {
        found.insert(0, wrong_values(ctx, &problems, case, trial));
    }
    found
}

/// A stray write into a buffer's guards, and an input the kernel changed.
fn memory_checks(b: &inputs::Buffer, allocation: &[u8], payload: &[u8]) -> Vec<Check> {
    let spec = b.spec();
    let mut out = Vec::new();
    if let Some(stray) = compare::guards(allocation, spec.bytes, spec.guard) {
        let where_ = if stray.offset < 0 {
            format!("{} bytes before the start of `{}`", -stray.offset, b.name)
        } else {
            format!(
                "past the end of `{}` (at byte {} of a {}-byte buffer)",
                b.name, stray.offset, spec.bytes
            )
        };
        out.push(
            Check::fail(
                CheckKind::Memory,
                format!("bounds {}", b.name),
                format!("stray write {where_}; {} guard bytes changed", stray.bytes),
            )
            .with_hint(hints::OUT_OF_BOUNDS)
            .with_cause("stray-write"),
        );
    }
    if b.dir == Direction::In
        && let Some(idx) = compare::changed_input(b, payload)
    {
        out.push(
            Check::fail(
                CheckKind::Memory,
                format!("read-only {}", b.name),
                format!(
                    "the kernel wrote to input `{}` (first change at element {idx})",
                    b.name
                ),
            )
            .with_hint(hints::CONST_WRITTEN)
            .with_cause("input-written"),
        );
    }
    out
}

/// An output compared with the reference's under its tolerance: what is wrong, if anything.
fn wrong_output(
    ctx: &Ctx,
    b: &inputs::Buffer,
    tol_vars: &crate::rubric::expr::Vars,
    expected: &[u8],
    got: &[u8],
    mag: Option<&[f64]>,
) -> Result<Option<Problem>, String> {
    let t = b
        .tolerance
        .as_ref()
        .or(ctx.plan.tolerance.as_ref())
        .or(Some(&ctx.plan.contract.tolerance));
    let tol = Resolved::with_precision(t, b.elem, tol_vars, ctx.plan.precision)?;
    let each = Resolved::per_element(t, b.elem, tol_vars, ctx.plan.precision, b.len)?;
    let c = compare::compare_each(b, expected, got, mag, tol, each.as_deref());
    if c.ok() {
        return Ok(None);
    }
    let wrong =
        compare::classify::classify_each(b, &b.data, expected, got, mag, tol, each.as_deref());
    Ok(Some((
        wrong.describe(&b.name, c.total),
        wrong.cause(),
        hints::for_wrong(&wrong),
        c.describe(),
    )))
}

/// The failed correctness check of a trial with wrong outputs.
fn wrong_values(ctx: &Ctx, problems: &[Problem], case: &CasePlan, trial: u32) -> Check {
    let (sentence, cause, class_hint, _) = &problems[0];
    // The rubric's own hint for the milestone knows the lab best; the kind of wrong is in the
    // message either way.
    let hint = ctx
        .plan
        .milestone
        .hint
        .clone()
        .unwrap_or_else(|| class_hint.to_string());
    let details = std::iter::once(format!("case {}, trial {}:", case.name, trial + 1))
        .chain(problems.iter().map(|p| p.3.clone()))
        .collect::<Vec<_>>()
        .join("\n");
    let also = if problems.len() > 1 {
        format!(" (and {} more wrong outputs)", problems.len() - 1)
    } else {
        String::new()
    };
    // "results less precise than float accumulation allows" says what it is.
    let lead = if *cause == "imprecise" {
        ""
    } else {
        "wrong results: "
    };
    Check::fail(
        CheckKind::Correctness,
        format!("correctness {}", case.name),
        format!("{lead}{sentence}{also}"),
    )
    .with_case(case.name.clone())
    .with_hint(hint)
    .with_cause(*cause)
    .with_details(details)
}

/// A kernel right on every small case and wrong on every larger one (by the number of
/// elements its buffers hold) is "right for small cases only": say so on the failures whose
/// kind of wrong has no better name (a named kind, NaN or unwritten, is more useful).
pub(super) fn mark_small_cases_only(ctx: &Ctx, checks: &mut [Check]) {
    let outcome = |name: &str| {
        checks
            .iter()
            .filter(|c| c.kind == CheckKind::Correctness)
            .find(|c| c.case.as_deref() == Some(name))
            .map(|c| c.status)
    };
    let (mut passed, mut failed) = (vec![], vec![]);
    for case in &ctx.plan.cases {
        match outcome(&case.name) {
            Some(Status::Pass) => passed.push((case.elements, case.name.clone())),
            Some(Status::Fail) => failed.push((case.elements, case.name.clone())),
            _ => {}
        }
    }
    let (Some(big_pass), Some(small_fail)) = (
        passed.iter().max_by_key(|p| p.0),
        failed.iter().min_by_key(|f| f.0),
    ) else {
        return;
    };
    if big_pass.0 >= small_fail.0 {
        return;
    }
    let note = format!(
        "right for small cases only (every case up to {} passes, every case from {} on fails)",
        big_pass.1, small_fail.1
    );
    for c in checks.iter_mut() {
        if c.kind == CheckKind::Correctness
            && c.status == Status::Fail
            && c.cause.as_deref() == Some("wrong-values")
        {
            let rest = c.message.trim_start_matches("wrong results: ");
            c.message = format!("{note}: {rest}");
            c.cause = Some("small-only".into());
            if ctx.plan.milestone.hint.is_none() {
                c.hint = Some(hints::SMALL_ONLY.to_string());
            }
        }
    }
}

/// `check --profile` without a GPU: the emulator's counters of the largest case that ran,
/// kept with the milestone's kernel.
pub(super) fn keep_emulator_counters(ctx: &Ctx, metrics: &HashMap<String, Metrics>) {
    let Some(kept) = &ctx.opts.keep_kernels else {
        return;
    };
    let Some(case) = ctx
        .plan
        .cases
        .iter()
        .filter(|c| metrics.contains_key(&c.name))
        .max_by_key(|c| c.elements)
    else {
        return;
    };
    let mut kept = kept
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(k) = kept
        .iter_mut()
        .rev()
        .find(|k| k.milestone == ctx.plan.milestone.id)
    {
        k.emulator = Some((case.name.clone(), metrics[&case.name].clone()));
    }
}

/// Quote the student's source line under every check that names a `file:line` of the
/// submission, so that reports show the line itself (result.json keeps only that line).
pub(super) fn attach_snippets(milestones: &mut [crate::result::MilestoneResult], sub: &Submission) {
    // Numba findings name `file.py:LINE` (from the PTX's `.loc` lines or the compiler): the
    // Python files are quoted like the CUDA ones.
    let files: Vec<&crate::compile::SourceFile> = sub
        .sources
        .iter()
        .chain(&sub.headers)
        .chain(&sub.python)
        .collect();
    for c in milestones.iter_mut().flat_map(|m| m.checks.iter_mut()) {
        if c.snippet.is_some() {
            continue;
        }
        c.snippet = c.location.as_deref().and_then(|l| source_line(l, &files));
    }
}

/// The line a `file:line[:col]` location names, if the file is one of `files`.
pub(super) fn source_line(
    location: &str,
    files: &[&crate::compile::SourceFile],
) -> Option<crate::result::SourceLine> {
    let mut parts = location.split(':');
    let file = parts.next()?;
    let line: u32 = parts.next()?.trim().parse().ok()?;
    let f = files
        .iter()
        .find(|f| f.name == file || f.name.rsplit('/').next() == Some(file))?;
    let text = f
        .text
        .lines()
        .nth(usize::try_from(line).ok()?.checked_sub(1)?)?;
    // A line is quoted, not a file: cap what a minified source could put on one line.
    let text: String = text.chars().take(400).collect();
    Some(crate::result::SourceLine {
        line,
        text: text.trim_end().to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compile::SourceFile;

    #[test]
    fn source_lines_are_found_by_location() {
        let f = SourceFile {
            name: "src/reduce.cu".into(),
            text: "a\n  partial[tid] += x;  \nc".into(),
        };
        let files = [&f];
        let l = source_line("src/reduce.cu:2", &files).unwrap();
        assert_eq!((l.line, l.text.as_str()), (2, "  partial[tid] += x;"));
        assert_eq!(source_line("reduce.cu:3", &files).unwrap().text, "c");
        assert!(source_line("reduce.cu:0", &files).is_none());
        assert!(source_line("reduce.cu:9", &files).is_none());
        assert!(source_line("other.cu:1", &files).is_none());
        assert!(source_line("reduce.cu", &files).is_none());
    }

    #[test]
    fn a_kernel_stopped_at_its_deadline_counts_as_hung() {
        // A timeout's check reads as a timeout (its own hint, issue 32), and still keeps the
        // sanitizer passes off the kernel (a regression made every hung kernel wait out both
        // sanitizers' deadlines: over 200 s a student on the GPU).
        let deadline = Deadline {
            kernel: "`reduce_shared`",
            seconds: 1.0,
            why: "the least any launch is given",
        };
        let printed = crate::worker::Captured::default();
        let e = RunError::Worker(crate::worker::WorkerFailure::Timeout(
            std::time::Duration::from_secs(1),
        ));
        let (checks, _) = failed_run(&e, "n1", &printed, &deadline);
        assert!(checks[0].message.starts_with("timeout: `reduce_shared`"));
        assert!(hung(&checks));
        let fault = Check::error(CheckKind::Runtime, "n1", "illegal address");
        assert!(!hung(&[fault]));
    }
}
