//! Performance checks: the student's kernel timed through the measurement stage
//! (`measure::session` in the student's worker, under the GPU's timing lock), its ratio to the
//! baseline taken with a confidence interval (`verdict`), and points decided by
//! `measure::decide`. Without a GPU, the speed estimate instead (`estimated`).

use super::baselines::{BaselineChoice, baseline};
use super::context::{Ctx, Infrastructure, Kernel, Student, reference_launch};
use super::estimated;
use super::reference::Reference;
use super::run::{RunError, runtime_check, student_invocation};
use super::verdict::verdict;
use crate::compare::Resolved;
use crate::inputs::{self, Draw, Invocation, ParamArg};
use crate::measure::decide;
use crate::measure::lock;
use crate::measure::session::{
    ComparePlan, DrawKind, GenPlan, MeasureSpec, PlanBuffer, RefCall, elem_code,
};
use crate::result::{Check, CheckKind};
use crate::rubric::plan::{CasePlan, MilestonePlan, PerfPlan};
use crate::worker::client::MeasureError;
use crate::worker::client::Measured;
use std::time::{Duration, Instant};

/// Every performance check of the milestone: timed on a GPU when the kernel is correct, an
/// estimate (never a grade) on the emulator.
pub(super) fn stage(
    ctx: &Ctx,
    kernel: &Kernel,
    reference: &mut Reference,
    student: &mut Student,
    correct: bool,
) -> Result<Vec<Check>, Infrastructure> {
    let mut out = Vec::new();
    for p in &ctx.plan.performance {
        let c = if !ctx.caps().timed {
            // No GPU: a speed estimate, never a grade (docs/estimate.md).
            estimated::check(ctx, kernel, reference, student, p, correct)
        } else if !correct {
            Check::skipped(
                CheckKind::Performance,
                p.spec.name.clone(),
                "not timed: the kernel is not correct yet",
            )
            .with_case(p.spec.case.clone())
        } else {
            let t0 = Instant::now();
            let mut c = timed(ctx, kernel, reference, student, p)?;
            c.seconds = Some(t0.elapsed().as_secs_f64());
            c
        };
        out.push(c);
    }
    Ok(out)
}

/// One performance check, timed.
fn timed(
    ctx: &Ctx,
    kernel: &Kernel,
    reference: &mut Reference,
    student: &mut Student,
    p: &PerfPlan,
) -> Result<Check, Infrastructure> {
    let Some(case) = &p.case else {
        return Ok(Check::error(
            CheckKind::Performance,
            p.spec.name.clone(),
            format!("unknown case {}", p.spec.case),
        ));
    };
    let perf_error = |msg: String| {
        Check::error(CheckKind::Performance, p.spec.name.clone(), msg).with_case(case.name.clone())
    };
    let max_threads = kernel.info.max_threads_per_block;
    let dims = match case
        .launch
        .clone()
        .and_then(|d| inputs::check_limits(&d, max_threads).map(|()| d))
    {
        Ok(d) => d,
        Err(e) => {
            let c = Check::fail(CheckKind::Launch, format!("launch {}", case.name), e);
            return Ok(c.with_case(case.name.clone()));
        }
    };
    let inv = case
        .args()
        .and_then(|a| inputs::generate(a, inputs::trial_seed(ctx.opts.seed, &case.name, 0)))
        .map_err(|e| Infrastructure(format!("inputs for case {}: {e}", case.name)))?;
    let ref_dims = reference_launch(case)?;
    let choice = match baseline(ctx, reference, p, case, &inv) {
        Ok(c) => c,
        Err(e) => return Ok(perf_error(format!("could not measure the baseline: {e}"))),
    };
    let harness = match reference.harness(ctx.opts) {
        Ok(h) => h,
        Err(e) => return Ok(perf_error(e)),
    };
    let buffers = match plan_buffers(&inv, ctx.plan, case) {
        Ok(b) => b,
        Err(e) => return Ok(perf_error(format!("cannot plan the timed inputs: {e}"))),
    };
    let spec = measure_spec(ctx, kernel, p, case, &inv, &choice, buffers, dims, ref_dims)?;
    let loaded = student.worker.as_ref().is_some_and(|w| w.timing_loaded());
    if !loaded && student.worker.is_some() {
        // Normally done in the correctness phase; the same texts again are free.
        let _shared = ctx
            .opts
            .gpu
            .as_deref()
            .and_then(|k| lock::shared(k, "preload").ok());
        if let Err(e) = preload_timing_modules(ctx, reference, student) {
            return Ok(perf_error(e));
        }
    }
    let measured = match measure(ctx, reference, student, &harness, &spec, &inv, case) {
        Ok(m) => m,
        Err(c) => {
            return Ok(Check {
                kind: CheckKind::Performance,
                name: p.spec.name.clone(),
                ..*c
            });
        }
    };
    let mut c = verdict(
        ctx, kernel, p, case, &spec, &choice, &inv, measured, student,
    );
    if let Some(t) = c.timing.as_mut() {
        t.device = ctx.opts.gpu_record.clone();
    }
    Ok(c)
}

/// What the timed section runs.
#[allow(clippy::too_many_arguments)]
fn measure_spec(
    ctx: &Ctx,
    kernel: &Kernel,
    p: &PerfPlan,
    case: &CasePlan,
    inv: &Invocation,
    choice: &BaselineChoice,
    buffers: Vec<PlanBuffer>,
    dims: crate::backend::LaunchDims,
    ref_dims: crate::backend::LaunchDims,
) -> Result<MeasureSpec, Infrastructure> {
    let budget = case.budget_s;
    let launch_s = ctx.rubric.timeouts.launch_s;
    let rule = crate::measure::stopping::StoppingRule::DEFAULT_NOISE;
    Ok(MeasureSpec {
        kernel: ctx.plan.kernel.clone(),
        dims,
        then: ctx.plan.then(case).map_err(Infrastructure)?,
        buffers,
        args: inv.args.clone(),
        student_args: match student_invocation(&kernel.numba, inv, &ctx.plan.contract)? {
            std::borrow::Cow::Owned(numba) => Some(numba.args),
            std::borrow::Cow::Borrowed(_) => None,
        },
        verify: RefCall {
            kernel: ctx.plan.reference_kernel.clone(),
            dims: ref_dims,
            then: ctx.plan.reference_then(case).map_err(Infrastructure)?,
        },
        baseline: choice.plan.clone(),
        scale: choice.scale,
        max_noise: rule,
        min_samples: crate::measure::stopping::StoppingRule::DEFAULT_MIN_SAMPLES,
        max_samples: crate::measure::stopping::StoppingRule::MAX_SAMPLES,
        budget_ms: (budget * 1e3) as u64,
        edges: decide::edges(p.bar, &p.spec.tiers),
        cache: case.cache,
        // One iteration (the probe included) may take the launch timeout, and never more than
        // twice the budget: the whole check ends within about twice its budget.
        launch_deadline_ms: (launch_s.min(2.0 * budget) * 1e3) as u64,
        seed: inputs::trial_seed(ctx.opts.seed, &format!("timed {}", case.name), 0),
    })
}

/// The timed section in the student's worker: set up alongside other jobs' correctness runs
/// (the worker answers `Staged` and waits), then timed under the GPU's timing lock, with the
/// clocks read around it. `Err`: the check saying why nothing was timed.
fn measure(
    ctx: &Ctx,
    reference: &Reference,
    student: &mut Student,
    harness: &str,
    spec: &MeasureSpec,
    inv: &Invocation,
    case: &CasePlan,
) -> Result<Measured, Box<Check>> {
    // Buffers drawn on the device travel empty: only outputs' initial contents (and inputs
    // without a generator) cross the pipe.
    let allocs: Vec<Vec<u8>> = inv
        .buffers
        .iter()
        .zip(&spec.buffers)
        .map(|(b, p)| {
            if p.draw.is_some() {
                Vec::new()
            } else {
                b.allocation()
            }
        })
        .collect();
    let mut blobs: Vec<&[u8]> = vec![reference.ptx.as_bytes(), harness.as_bytes()];
    blobs.extend(allocs.iter().map(Vec::as_slice));
    let bytes: usize = allocs.iter().map(Vec::len).sum();
    let budget = case.budget_s;
    let timeout = Duration::from_secs_f64(2.0 * budget + ctx.rubric.timeouts.launch_s + 30.0)
        + Duration::from_millis((bytes / 100_000) as u64);
    let perf_error = |msg: String| {
        Check::error(CheckKind::Performance, String::new(), msg).with_case(case.name.clone())
    };
    let Some(worker) = student.worker.as_mut() else {
        return Err(Box::new(Check::skipped(
            CheckKind::Performance,
            String::new(),
            "not timed: the worker stopped earlier",
        )));
    };
    match worker.measure(spec, &blobs, timeout, ctx.opts.gpu.as_deref()) {
        Ok(m) => Ok(m),
        Err(MeasureError::Lock(e)) => {
            student.worker = None;
            let why = format!("cannot take the GPU's timing lock: {e}");
            Err(Box::new(perf_error(why)))
        }
        Err(MeasureError::Worker(f)) => {
            let printed = worker.output();
            let (c, fatal) = runtime_check(&RunError::Worker(f), &case.name, &printed);
            if fatal {
                student.worker = None;
            }
            Err(Box::new(c))
        }
    }
}

/// Load the reference and harness modules into the student's worker ahead of its timed
/// sections, so that the driver's JIT compiles them outside any timed section. The caller
/// holds the GPU's shared lock. Errors say what failed; the worker is dropped if it broke.
pub(super) fn preload_timing_modules(
    ctx: &Ctx,
    reference: &mut Reference,
    student: &mut Student,
) -> Result<(), String> {
    let harness = reference.harness(ctx.opts)?;
    let Some(worker) = student.worker.as_mut() else {
        return Err("not timed: the worker stopped earlier".into());
    };
    match worker.load_slots(&reference.ptx, &harness, Duration::from_secs(120)) {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(format!("cannot load the reference and timing kernels: {e}")),
        Err(f) => {
            student.worker = None;
            Err(format!("the worker failed loading the timing kernels: {f}"))
        }
    }
}

/// How each buffer is regenerated and checked in the timed section.
fn plan_buffers(
    inv: &Invocation,
    plan: &MilestonePlan,
    case: &CasePlan,
) -> Result<Vec<PlanBuffer>, String> {
    let contract = &plan.contract;
    let args = case.args()?;
    let tol_vars = inv.tolerance_vars(&case.vars);
    inv.buffers
        .iter()
        .map(|b| {
            let arg = args.iter().find_map(|a| match a {
                ParamArg::Buffer(x) if x.name == b.name => Some(x),
                _ => None,
            });
            let draw = arg.and_then(|a| Some(gen_plan(a.draw.as_ref()?, a.specials.as_ref())));
            let compare = if b.is_output() {
                let t = b
                    .tolerance
                    .as_ref()
                    .or(plan.tolerance.as_ref())
                    .or(Some(&contract.tolerance));
                // Element by element where the tolerance reads the index: correctness did;
                // the device's check takes the widest.
                let r = Resolved::widest(t, b.elem, &tol_vars, plan.precision, b.len)?;
                Some(ComparePlan::of(&r))
            } else {
                None
            };
            Ok(PlanBuffer {
                name: b.name.clone(),
                spec: b.spec(),
                elem: elem_code(b.elem),
                draw,
                compare,
                symbol: b.symbol.then(|| b.name.clone()),
            })
        })
        .collect()
}

/// A generator as the device draws it.
fn gen_plan(draw: &Draw, specials: Option<&(f64, Vec<f64>)>) -> GenPlan {
    let (kind, a, b, values) = match draw {
        Draw::Uniform(lo, hi) => (DrawKind::Uniform, *lo, *hi, vec![]),
        Draw::Normal(mu, sd) => (DrawKind::Normal, *mu, *sd, vec![]),
        Draw::Int(lo, hi) => (DrawKind::Int, *lo as f64, *hi as f64, vec![]),
        Draw::Constant(c) => (DrawKind::Constant, *c, 0.0, vec![]),
        Draw::Values(v) => (DrawKind::Values, 0.0, 0.0, v.clone()),
    };
    GenPlan {
        kind,
        a,
        b,
        values,
        specials: specials.map(|s| s.1.clone()).unwrap_or_default(),
        special_fraction: specials.map_or(0.0, |s| s.0),
    }
}
