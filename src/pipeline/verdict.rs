//! A timed section's report to the performance check: a wrong, stray or failed timed launch
//! earns nothing (and says why); otherwise the ratio to the baseline with its confidence
//! interval, checked against the roofline's floor, and the points `measure::decide` gives.

use super::baselines::BaselineChoice;
use super::context::{Ctx, Kernel, Student};
use crate::backend::BackendError;
use crate::hints;
use crate::inputs::Invocation;
use crate::measure::decide::{self, Interval};
use crate::measure::session::{MeasureSpec, Problem, TimingReport, WrongLaunch};
use crate::measure::{Measurement, clocks, stats};
use crate::result::{Check, CheckKind, Status};
use crate::rubric::plan::{CasePlan, PerfPlan};
use crate::rubric::schema::{CacheMode, Direction};
use crate::worker::client::Measured;

/// Turn a timing report into the check.
#[allow(clippy::too_many_arguments)]
pub(super) fn verdict(
    ctx: &Ctx,
    kernel: &Kernel,
    p: &PerfPlan,
    case: &CasePlan,
    spec: &MeasureSpec,
    choice: &BaselineChoice,
    inv: &Invocation,
    measured: Measured,
    student: &mut Student,
) -> Check {
    let Measured {
        report,
        clocks,
        hold,
    } = measured;
    let fail = |msg: String, hint: &str| {
        let mut c = Check::fail(CheckKind::Performance, p.spec.name.clone(), msg)
            .with_case(case.name.clone())
            .with_hint(hint);
        c.points = Some(0.0);
        c
    };
    let mut c = match &report.problem {
        Some(Problem::Wrong(w)) => wrong(ctx, case, &report, w, inv, &fail),
        Some(Problem::StrayWrite {
            launch,
            buffer,
            bytes,
        }) => fail(
            format!(
                "timed launch {} wrote {bytes} byte(s) outside `{buffer}`; no speed points",
                launch + 1
            ),
            hints::OUT_OF_BOUNDS,
        ),
        Some(Problem::Failed { launch, error }) => failed(p, case, spec, *launch, error, student),
        None => timed(kernel, p, case, spec, choice, report, clocks, inv),
    };
    if let Some(t) = c.timing.as_mut() {
        t.gpu = Some(hold);
    }
    c
}

/// A timed launch gave wrong results (or left its output unwritten).
fn wrong(
    ctx: &Ctx,
    case: &CasePlan,
    report: &TimingReport,
    w: &WrongLaunch,
    inv: &Invocation,
    fail: &dyn Fn(String, &str) -> Check,
) -> Check {
    let WrongLaunch {
        launch,
        buffer,
        mismatches,
        index,
        got,
        expected,
        chained,
        unwritten,
        gross,
        bound,
    } = w;
    let at = element_name(buffer, *index, inv);
    let (got_s, exp_s) = (fmt_value(*got), fmt_value(*expected));
    if *unwritten > 0 && *unwritten == *mismatches {
        return unwritten_check(case, report, w, &at, fail);
    }
    if *gross == 0 && *bound > 0.0 && got.is_finite() {
        let p = ctx.plan.precision;
        let mut c = fail(
            format!(
                "results less precise than {} accumulation allows: {} on the performance case {}, {mismatches} element(s) of `{buffer}` are off by more than {} rounding explains, the first at {at} (got {got_s}, expected {exp_s}: off by {:.3e} where {:.3e} is allowed), as from a computation in half precision, bfloat16 or TF32; no speed points",
                p.word(),
                if *launch == 0 {
                    "on the first launch".to_string()
                } else {
                    format!("on timed launch {}", launch + 1)
                },
                case.name,
                p.word(),
                (got - expected).abs(),
                bound
            ),
            hints::IMPRECISE,
        );
        c.cause = Some("imprecise".into());
        return c;
    }
    let why = if *chained {
        "; it ran right after earlier launches without a reset of the kernel's __device__ variables, and the ones before it were right: the kernel's results depend on state it kept from an earlier launch (a launch counter or a saved answer)"
    } else {
        ""
    };
    if *launch == 0 {
        return fail(
            format!(
                "wrong results on the performance case {}: {mismatches} element(s) of `{buffer}` differ from the reference, the first at {at} (got {got_s}, expected {exp_s}); a kernel right only on the small correctness cases earns no speed points",
                case.name
            ),
            hints::WRONG_RESULTS,
        );
    }
    fail(
        format!(
            "timing cheat or flaky kernel: timed launch {} gave wrong results on fresh inputs after {} right ones: {mismatches} element(s) of `{buffer}` differ from the reference, the first at {at} (got {got_s}, expected {exp_s}){why}; no speed points",
            launch + 1,
            report.verified
        ),
        hints::TIMED_WRONG,
    )
}

/// A timed launch failed: a fault or a timeout ends the worker.
fn failed(
    p: &PerfPlan,
    case: &CasePlan,
    spec: &MeasureSpec,
    launch: u32,
    error: &BackendError,
    student: &mut Student,
) -> Check {
    let name = p.spec.name.clone();
    let fatal = matches!(error, BackendError::Fault(_) | BackendError::Timeout(_));
    if fatal {
        student.worker = None;
    }
    let (msg, hint) = match error {
        BackendError::Timeout(_) => (
            format!(
                "timed launch {} did not finish within {:.1} s (the check's limit: its launch timeout, at most twice its {:.1} s budget); no speed points",
                launch + 1,
                spec.launch_deadline_ms as f64 / 1e3,
                spec.budget_ms as f64 / 1e3
            ),
            hints::TIMED_TOO_SLOW,
        ),
        other => (
            format!("timed launch {} failed: {other}", launch + 1),
            hints::FAULT,
        ),
    };
    let mut c = Check::error(CheckKind::Performance, name, msg)
        .with_case(case.name.clone())
        .with_hint(hint);
    c.points = Some(0.0);
    c
}

/// A timed launch left outputs unwritten.
fn unwritten_check(
    case: &CasePlan,
    report: &TimingReport,
    w: &WrongLaunch,
    at: &str,
    fail: &dyn Fn(String, &str) -> Check,
) -> Check {
    let WrongLaunch {
        launch,
        buffer,
        chained,
        unwritten,
        ..
    } = w;
    let (what, hint) = if *launch == 0 {
        (
            format!(
                "left its output unwritten on the performance case {}: {unwritten} element(s) of `{buffer}` still hold what cugrade filled them with before the launch (NaN for floats), the first at {at}; a kernel right only on the small correctness cases earns no speed points",
                case.name
            ),
            hints::UNWRITTEN,
        )
    } else {
        (
            format!(
                "left its output unwritten on a repeated launch: timed launch {} (on fresh inputs, after {} right ones) left {unwritten} element(s) of `{buffer}` as cugrade filled them before the launch (NaN for floats), the first at {at}{}; a kernel must compute every output on every launch: no speed points",
                launch + 1,
                report.verified,
                if *chained {
                    ", without a reset of its __device__ variables since the first launch"
                } else {
                    ""
                }
            ),
            hints::TIMED_UNWRITTEN,
        )
    };
    let mut c = fail(what, hint);
    c.cause = Some("unwritten".into());
    c
}

/// Every timed launch right: the ratio, its interval, and the points.
#[allow(clippy::too_many_arguments)]
fn timed(
    kernel: &Kernel,
    p: &PerfPlan,
    case: &CasePlan,
    spec: &MeasureSpec,
    choice: &BaselineChoice,
    report: TimingReport,
    clocks: Option<clocks::ClockRecord>,
    inv: &Invocation,
) -> Check {
    let name = p.spec.name.clone();
    let bar = p.bar;
    let fail = |msg: String, hint: &str| {
        let mut c = Check::fail(CheckKind::Performance, name.clone(), msg)
            .with_case(case.name.clone())
            .with_hint(hint);
        c.points = Some(0.0);
        c
    };
    if report.estimates.is_empty() {
        return Check::error(
            CheckKind::Performance,
            name,
            "the timed section returned no samples",
        )
        .with_case(case.name.clone());
    }
    let iv = Interval::of_median(&report.estimates);
    let lower = lower_bound_ms(kernel, case, inv, spec.cache, &report);
    let mut timing = measurement(spec, choice, &report, clocks, iv, lower);
    let median_ms = timing.median_ms;
    let unit = choice.unit;
    let suffix = unit_suffix(unit);
    if let Some(bound) = lower.filter(|b| median_ms < 0.95 * b) {
        let mut c = fail(
                format!(
                    "impossible time: median {median_ms:.4} ms, but this GPU needs at least {bound:.4} ms to move this case's data or do its arithmetic at peak; not scored"
                ),
                hints::IMPOSSIBLE,
            )
            .with_measure(iv.estimate, Some(bar), unit);
        c.timing = Some(Box::new(timing));
        return c;
    }
    let d = decide::decide(&iv, bar, &p.spec.tiers, p.spec.points);
    timing.near_edge = d.near_edge;
    let msg = ratio_message(&iv, bar, suffix, choice, &timing, &d);
    let status = if d.passed { Status::Pass } else { Status::Fail };
    let mut c = Check::new(CheckKind::Performance, name, status, msg)
        .with_case(case.name.clone())
        .with_measure(iv.estimate, Some(bar), unit);
    c.points = Some(d.points);
    if status == Status::Fail {
        c.hint = Some(hints::SLOW.to_string());
    }
    c.timing = Some(Box::new(timing));
    c
}

/// The measurement's record (result.json `timing`).
fn measurement(
    spec: &MeasureSpec,
    choice: &BaselineChoice,
    report: &TimingReport,
    clocks: Option<clocks::ClockRecord>,
    iv: Interval,
    lower: Option<f64>,
) -> Measurement {
    let mut record = choice.record.clone();
    if let Some(r) = record.as_mut().filter(|r| r.paired) {
        r.median_ms = stats::median(&report.baseline_ms);
    }
    let noise = stats::noise(&report.estimates);
    Measurement {
        samples: report.student_ms.len(),
        median_ms: stats::median(&report.student_ms),
        min_ms: stats::min(&report.student_ms),
        noise,
        noise_target: spec.max_noise,
        target_met: noise <= spec.max_noise,
        stop: report.stop.unwrap_or(crate::measure::StopReason::Budget),
        budget_s: spec.budget_ms as f64 / 1e3,
        cache: spec.cache,
        probe_ms: report.probe_ms,
        launches_verified: report.verified,
        samples_ms: report.student_ms.clone(),
        baseline: record,
        ratio: Some(iv),
        near_edge: None,
        clocks,
        gpu: None,
        lower_bound_ms: lower,
        device: None,
    }
}

/// The check's message: the ratio, its interval and the measurement behind it.
fn ratio_message(
    iv: &Interval,
    bar: f64,
    suffix: &str,
    choice: &BaselineChoice,
    timing: &Measurement,
    d: &decide::Decision,
) -> String {
    let mut msg = format!(
        "{:.2}{suffix} {} (needs {bar}{suffix}; 95 % interval {:.2}–{:.2}{suffix}); kernel median {:.4} ms over {} timed launches on fresh inputs, each checked ({}, noise ±{:.2} %)",
        iv.estimate,
        choice.what,
        iv.lo,
        iv.hi,
        timing.median_ms,
        timing.samples,
        timing.stop.describe(),
        100.0 * timing.noise.min(9.99),
    );
    if let Some(edge) = d.near_edge {
        msg.push_str(&if d.favoured {
            format!(
                "; near the {edge}{suffix} edge, within measurement noise: decided in your favour"
            )
        } else {
            format!("; near the {edge}{suffix} edge")
        });
    }
    if let Some(c) = timing.clocks.as_ref().filter(|c| c.throttled) {
        msg.push_str(&format!(
            "; the GPU was throttled during the measurement ({}): the time may be overstated",
            c.describe()
        ));
    }
    msg
}

/// `C[17] (row 0, column 17)`-style name of element `index` of `buffer`: with the
/// coordinates its declared shape gives.
fn element_name(buffer: &str, index: u64, inv: &Invocation) -> String {
    let shape = inv
        .buffers
        .iter()
        .find(|b| b.name == buffer)
        .and_then(|b| b.shape.clone());
    match (shape, usize::try_from(index)) {
        (Some(s), Ok(i)) if s.len() > 1 => format!(
            "{buffer}[{i}] ({})",
            crate::compare::coords(i, &s)
                .iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        _ => format!("{buffer}[{index}]"),
    }
}

/// The roofline's floor for this case: compulsory bytes at peak bandwidth (unless a warm
/// cache may hold them) and the case's `flops` at peak arithmetic throughput, in ms.
fn lower_bound_ms(
    kernel: &Kernel,
    case: &CasePlan,
    inv: &Invocation,
    cache: CacheMode,
    report: &TimingReport,
) -> Option<f64> {
    let f = &report.facts;
    let bytes: usize = inv
        .buffers
        .iter()
        .map(|b| match b.dir {
            Direction::InOut => 2 * b.data.len(),
            _ => b.data.len(),
        })
        .sum();
    let mut bound: f64 = 0.0;
    if f.peak_gbs > 0.0 && !(cache == CacheMode::Warm && bytes <= f.l2_bytes) {
        bound = bound.max(bytes as f64 / (f.peak_gbs * 1e9) * 1e3);
    }
    if let (Some(flops), true) = (case.flops, f.peak_fp32_gflops > 0.0) {
        // Tensor cores run far above the FP32 peak: allow for them where the kernel uses them.
        let peak = f.peak_fp32_gflops * if kernel.tensor_ops { 16.0 } else { 1.0 };
        bound = bound.max(flops / (peak * 1e9) * 1e3);
    }
    // Below a few microseconds launch overhead and timer resolution dominate.
    (bound >= 0.005).then_some(bound)
}
/// A value as a report shows it: NaN and infinities by name.
fn fmt_value(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+inf" } else { "-inf" }.into()
    } else {
        format!("{v}")
    }
}

pub(super) fn unit_suffix(unit: &str) -> &str {
    if unit == "%" { " %" } else { "x" }
}
