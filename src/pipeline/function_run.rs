//! A Python function lab's milestones: correctness on every case and trial, then speed on a
//! GPU (see `function` for the sides and the comparison).
//!
//! Speed is the parent's wall clock around each call: the table leaves the parent, the
//! function runs (uploads, kernels, downloads), and the clock stops when the last byte of the
//! returned array has arrived. Nothing the student's process does can stop it early: its
//! answer is the array itself, and every timed call's answer is checked against the
//! reference's on the same, freshly generated table. The reference (NumPy, on the CPU) is
//! timed the same way in the same round, under the GPU's timing lock, so the ratio compares
//! like with like; the harness's own transfer of the data, timed alone in the trusted worker
//! in the same round, is left out of both.

use super::context::{Infrastructure, Options};
use super::function::{
    self, Side, call_timeout, columns, expected, failed_call, location, null_call, on_gpu, table,
    wrong,
};
use super::reference::Reference;
use super::timed_phase;
use crate::inputs;
use crate::measure::{decide, lock};
use crate::result::{Check, CheckKind, MilestoneResult, Phase, Phases};
use crate::rubric::plan::{CasePlan, MilestonePlan, PerfPlan, Plan};
use crate::score;
use crate::submission::Submission;
use crate::worker::python::Answer;
use std::time::{Duration, Instant};

/// Timed calls per performance check, after one untimed warm-up (CuPy compiles its kernels on
/// first use).
const ROUNDS: u32 = 5;

/// Grade every milestone of a function lab; `notes` gets what `cupy` was.
pub(super) fn grade(
    plan: &Plan,
    sub: &Submission,
    opts: &Options,
    reference: &Reference,
    notes: &mut Vec<String>,
    phases: &mut Phases,
) -> Result<Vec<MilestoneResult>, Infrastructure> {
    let mut out = Vec::new();
    for m in &plan.milestones {
        let sides = timed_phase(phases, Phase::Load, || {
            function::sides(plan, m, sub, opts, reference)
        })?;
        let mut ref_side = sides.reference;
        let checks = match sides.student {
            Err(c) => vec![*c],
            Ok(mut student) => {
                let note = format!(
                    "Python function labs: the submission's `cupy` was {}",
                    student.backend
                );
                if !notes.contains(&note) {
                    notes.push(note);
                }
                let mut checks = timed_phase(phases, Phase::Correctness, || {
                    correctness(plan, m, opts, &mut ref_side, &mut student)
                })?;
                // Correct: nothing wrong, and some case ran (not only skipped ones).
                let correct = score::nothing_wrong(&checks)
                    && checks
                        .iter()
                        .any(|c| c.status == crate::result::Status::Pass);
                checks.extend(timed_phase(phases, Phase::Timed, || {
                    performance(plan, m, opts, &mut ref_side, &mut student, correct)
                })?);
                student.client.kill();
                checks
            }
        };
        ref_side.client.kill();
        out.push(score::finish(&m.milestone, m.max_points, checks));
    }
    Ok(out)
}

/// One check per case: every trial's answer within tolerance of the reference's.
fn correctness(
    plan: &Plan,
    m: &MilestonePlan,
    opts: &Options,
    reference: &mut Side,
    student: &mut Side,
) -> Result<Vec<Check>, Infrastructure> {
    let mut checks = Vec::new();
    let mut stopped = false;
    let mut reference_s: f64 = 0.0;
    // The student's CuPy runs on the GPU: never beside another student's timed section.
    let _gpu = opts
        .gpu
        .as_deref()
        .and_then(|k| lock::shared(k, "function correctness").ok());
    for case in &m.cases {
        let name = format!("correctness {}", case.name);
        if stopped {
            checks.push(
                Check::skipped(
                    CheckKind::Correctness,
                    name,
                    "not run: an earlier case failed to return",
                )
                .with_case(case.name.clone()),
            );
            continue;
        }
        let (check, stop) = one_case(plan, m, opts, reference, student, case, &mut reference_s)?;
        stopped = stop;
        checks.push(check);
    }
    Ok(checks)
}

/// Every trial of one case; `true` when the student's worker is gone.
#[allow(clippy::too_many_arguments)]
fn one_case(
    plan: &Plan,
    m: &MilestonePlan,
    opts: &Options,
    reference: &mut Side,
    student: &mut Side,
    case: &CasePlan,
    reference_s: &mut f64,
) -> Result<(Check, bool), Infrastructure> {
    let name = format!("correctness {}", case.name);
    let ref_timeout = Duration::from_secs_f64(plan.timeouts.milestone_s.max(60.0));
    for trial in 0..plan.trials {
        let seed = inputs::trial_seed(opts.seed, &case.name, trial);
        let (inv, call) =
            table(case, seed).map_err(|e| Infrastructure(format!("case {}: {e}", case.name)))?;
        let cols = columns(&inv);
        let t0 = Instant::now();
        let exp = expected(reference.client.python_call(&call, &cols, ref_timeout))?;
        *reference_s = reference_s.max(t0.elapsed().as_secs_f64());
        let mut timeout = call_timeout(plan, *reference_s);
        if !student.warm {
            timeout += Duration::from_secs_f64(plan.timeouts.compile_s);
        }
        let got = match student.client.python_call(&call, &cols, timeout) {
            Ok(a) => a,
            Err(f) => return Ok((failed_call(name, case, &f), true)),
        };
        student.warm = true;
        // The harness's word alone skips nothing (see `Side::may_be_unsupported`): without
        // the grader's own reasons it is a raised exception like any other.
        if let Answer::Raised(e) = &got
            && e.kind == "unsupported"
            && student.may_be_unsupported
        {
            let c = Check::skipped(
                CheckKind::Correctness,
                name,
                format!("not run without a GPU: {}", e.message),
            )
            .with_case(case.name.clone())
            .with_location(location(e));
            return Ok((c, false));
        }
        if let Some((msg, cause, evidence)) = wrong(m, &inv, case, &exp, &got) {
            let at = match &got {
                Answer::Raised(e) => location(e),
                Answer::Array { .. } => None,
            };
            let hint = match cause {
                "wrong" => m.milestone.hint.clone(),
                _ => None,
            };
            let mut c = Check::fail(CheckKind::Correctness, name, msg)
                .with_case(case.name.clone())
                .with_cause(cause)
                .with_location(at)
                .with_hint_opt(hint);
            // A heading over nothing is an empty block in every report.
            if !evidence.trim().is_empty() {
                c = c.with_details(format!(
                    "case {}, trial {}:\n{evidence}",
                    case.name,
                    trial + 1
                ));
            }
            return Ok((c, false));
        }
    }
    let c = Check::pass(
        CheckKind::Correctness,
        name,
        format!("matches the reference on {} fresh tables", plan.trials),
    )
    .with_case(case.name.clone());
    Ok((c, false))
}

/// Every performance check: timed on a GPU when the pipeline is correct.
fn performance(
    plan: &Plan,
    m: &MilestonePlan,
    opts: &Options,
    reference: &mut Side,
    student: &mut Side,
    correct: bool,
) -> Result<Vec<Check>, Infrastructure> {
    let mut out = Vec::new();
    for p in &m.performance {
        let skipped = |why: &str| {
            Check::skipped(CheckKind::Performance, p.spec.name.clone(), why)
                .with_case(p.spec.case.clone())
        };
        let c = if !on_gpu(opts) {
            skipped(&format!(
                "speed is not measured: without a GPU, NumPy {} stood in for CuPy; grade on a GPU \
                 (--backend cuda) for this check's points",
                student.backend.split_whitespace().nth(1).unwrap_or("")
            ))
        } else if !correct {
            skipped("not timed: the pipeline is not correct yet")
        } else {
            let t0 = Instant::now();
            let mut c = timed(plan, m, opts, reference, student, p)?;
            c.seconds = Some(t0.elapsed().as_secs_f64());
            c
        };
        out.push(c);
    }
    Ok(out)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Wall times of the timed rounds (seconds): the reference, the student, the harness alone.
#[derive(Default)]
struct Times {
    reference: Vec<f64>,
    student: Vec<f64>,
    null: Vec<f64>,
}

/// One performance check: ROUNDS calls of each side on fresh tables, every answer checked.
fn timed(
    plan: &Plan,
    m: &MilestonePlan,
    opts: &Options,
    reference: &mut Side,
    student: &mut Side,
    p: &PerfPlan,
) -> Result<Check, Infrastructure> {
    let name = p.spec.name.clone();
    let Some(case) = &p.case else {
        return Ok(Check::error(
            CheckKind::Performance,
            name,
            format!("unknown case {}", p.spec.case),
        ));
    };
    let mut times = Times::default();
    for round in 0..=ROUNDS {
        if let Some(failed) = round_of(
            plan, m, opts, reference, student, p, case, round, &mut times,
        )? {
            return Ok(failed);
        }
    }
    Ok(speed_check(p, case, &times))
}

/// One round: the harness alone, the reference and the student on one fresh table, under the
/// GPU's timing lock; a failing check when the student's answer is wrong or never comes.
#[allow(clippy::too_many_arguments)]
fn round_of(
    plan: &Plan,
    m: &MilestonePlan,
    opts: &Options,
    reference: &mut Side,
    student: &mut Side,
    p: &PerfPlan,
    case: &CasePlan,
    round: u32,
    times: &mut Times,
) -> Result<Option<Check>, Infrastructure> {
    let name = p.spec.name.clone();
    let ref_timeout = Duration::from_secs_f64(plan.timeouts.milestone_s.max(60.0));
    let seed = inputs::trial_seed(opts.seed, &format!("{}:timed", case.name), round);
    let (inv, call) =
        table(case, seed).map_err(|e| Infrastructure(format!("case {}: {e}", case.name)))?;
    let cols = columns(&inv);
    // Nothing else is timed on this GPU meanwhile (other graders' timed sections wait).
    let held = opts
        .gpu
        .as_deref()
        .map(|k| lock::timing(k, "function timed"))
        .transpose()
        .map_err(|e| Infrastructure(format!("the GPU's timing lock: {e}")))?;
    let clock = Instant::now();
    let null = reference
        .client
        .python_call(&null_call(&inv, &call), &cols, ref_timeout);
    let t_null = clock.elapsed().as_secs_f64();
    let clock = Instant::now();
    let exp = reference.client.python_call(&call, &cols, ref_timeout);
    let t_ref = clock.elapsed().as_secs_f64();
    let clock = Instant::now();
    let got = student
        .client
        .python_call(&call, &cols, call_timeout(plan, t_ref));
    let t_stu = clock.elapsed().as_secs_f64();
    drop(held);
    expected(null)?;
    let exp = expected(exp)?;
    let got = match got {
        Ok(a) => a,
        Err(f) => return Ok(Some(failed_call(name, case, &f))),
    };
    if let Some((msg, cause, evidence)) = wrong(m, &inv, case, &exp, &got) {
        let c = Check::fail(
            CheckKind::Performance,
            name,
            format!(
                "timed call {} of {} on a fresh table: {msg} (a result kept from an earlier \
                 call, or work left for later, gets no points)",
                round + 1,
                ROUNDS + 1
            ),
        )
        .with_case(case.name.clone())
        .with_cause(if cause == "wrong" {
            "timed-output"
        } else {
            cause
        })
        .with_details(evidence);
        return Ok(Some(c));
    }
    if round > 0 {
        times.reference.push(t_ref);
        times.student.push(t_stu);
        times.null.push(t_null);
    }
    Ok(None)
}

/// The check from the timed rounds: the ratio of the medians, the harness's own time out.
fn speed_check(p: &PerfPlan, case: &CasePlan, times: &Times) -> Check {
    // What moving the data between the grader and a harness costs (measured alone, in the
    // trusted worker, in the same round) is the grader's, not the pipeline's: it comes out of
    // both sides' times. A call can never take less than 5 % of its wall time this way.
    let net = |t: &[f64]| -> Vec<f64> {
        t.iter()
            .zip(&times.null)
            .map(|(t, o)| (t - o).max(0.05 * t))
            .collect()
    };
    let (mut ref_net, mut stu_net) = (net(&times.reference), net(&times.student));
    let (r, s, o) = (
        median(&mut ref_net),
        median(&mut stu_net),
        median(&mut times.null.clone()),
    );
    let ratio = r / s;
    let points = decide::tier_points(ratio, p.bar, &p.spec.tiers, p.spec.points);
    let msg = format!(
        "{ratio:.1}x the NumPy reference end to end: {:.2} ms per call against {:.2} ms (medians \
         of {ROUNDS} calls on fresh tables; uploads and downloads included, the grader's own \
         {:.2} ms of passing the table and the features between processes left out of both); \
         needs {}x",
        s * 1e3,
        r * 1e3,
        o * 1e3,
        p.bar
    );
    let ms = |v: &[f64]| {
        v.iter()
            .map(|x| format!("{:.2}", x * 1e3))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let details = format!(
        "wall time per call, the grader's clock (ms); the harness alone (null) passes the same \
         table in and an array of the features' size out\nnull: {}\nstudent (ms): {}\n\
         reference (ms): {}",
        ms(&times.null),
        ms(&times.student),
        ms(&times.reference)
    );
    let c = if ratio >= p.bar {
        Check::pass(CheckKind::Performance, p.spec.name.clone(), msg)
    } else {
        Check::fail(CheckKind::Performance, p.spec.name.clone(), msg).with_cause("slow")
    };
    let mut c = c
        .with_case(case.name.clone())
        .with_measure(ratio, Some(p.bar), "x")
        .with_details(details);
    c.points = Some(points);
    c
}
