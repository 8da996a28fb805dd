//! Performance checks: the student's kernel timed through the measurement stage
//! (`measure::session` in the student's worker, under the GPU's timing lock), its ratio to the
//! baseline taken with a confidence interval, and points decided by `measure::decide`.

use super::baselines::BaselineChoice;
use super::*;
use crate::backend::BackendError;
use crate::check::Resolved;
use crate::inputs::Invocation;
use crate::measure::decide::{self, Interval};
use crate::measure::session::{
    ComparePlan, GenPlan, MeasureSpec, PlanBuffer, Problem, RefCall, TimingReport, elem_code,
};
use crate::measure::{Measurement, clocks, lock, stats};
use crate::rubric::schema::CacheMode;
use crate::rubric::schema::{Contract, DEFAULT_BUDGET_S, Direction, Gen, PerfSpec};
use crate::rubric::{self, case_vars};
use crate::worker::protocol::{Request, Response};
use std::time::Duration;

impl MilestoneRun<'_> {
    pub(super) fn performance(
        &mut self,
        p: &PerfSpec,
        max_threads: u32,
    ) -> Result<Check, Infrastructure> {
        let Some(case) = self.rubric.performance_case(&p.case).cloned() else {
            return Ok(Check::error(
                CheckKind::Performance,
                p.name.clone(),
                format!("unknown case {}", p.case),
            ));
        };
        let perf_error = |msg: String| {
            Check::error(CheckKind::Performance, p.name.clone(), msg).with_case(case.name.clone())
        };
        let dims = match self.dims_for(&case, max_threads) {
            Ok(d) => d,
            Err(e) => {
                return Ok(
                    Check::fail(CheckKind::Launch, format!("launch {}", case.name), e)
                        .with_case(case.name.clone()),
                );
            }
        };
        let contract = self.rubric.contract(&self.m.contract).clone();
        let vars = case_vars(&case);
        let inv = inputs::generate(
            &contract,
            &vars,
            inputs::trial_seed(self.opts.seed, &case.name, 0),
        )
        .map_err(|e| Infrastructure(format!("inputs for case {}: {e}", case.name)))?;
        let ref_dims = self.reference_dims(&case)?;
        let choice = match self.baseline(&p.against, &case, &inv) {
            Ok(c) => c,
            Err(e) => return Ok(perf_error(format!("could not measure the baseline: {e}"))),
        };
        let harness = match self.reference.harness(self.opts) {
            Ok(h) => h,
            Err(e) => return Ok(perf_error(e)),
        };
        let buffers = match plan_buffers(
            &inv,
            &contract,
            self.m,
            &vars,
            self.rubric.precision(self.m),
        ) {
            Ok(b) => b,
            Err(e) => return Ok(perf_error(format!("cannot plan the timed inputs: {e}"))),
        };
        let budget = case.budget_s.unwrap_or(DEFAULT_BUDGET_S);
        let launch_s = self.rubric.rubric.timeouts.launch_s;
        let bar = rubric::perf_bar(p);
        let spec = MeasureSpec {
            kernel: self.m.kernel.clone(),
            dims,
            buffers,
            args: inv.args.clone(),
            student_args: match student_invocation(&self.numba, &inv, &contract)? {
                std::borrow::Cow::Owned(numba) => Some(numba.args),
                std::borrow::Cow::Borrowed(_) => None,
            },
            verify: RefCall {
                kernel: self.reference_kernel().to_string(),
                dims: ref_dims,
            },
            baseline: choice.plan.clone(),
            scale: choice.scale,
            max_noise: crate::measure::stopping::StoppingRule::DEFAULT_NOISE,
            min_samples: crate::measure::stopping::StoppingRule::DEFAULT_MIN_SAMPLES,
            max_samples: crate::measure::stopping::StoppingRule::MAX_SAMPLES,
            budget_ms: (budget * 1e3) as u64,
            edges: decide::edges(bar, &p.tiers),
            cache: case.cache.unwrap_or_default(),
            // One iteration (the probe included) may take the launch timeout, and never more
            // than twice the budget: the whole check ends within about twice its budget.
            launch_deadline_ms: (launch_s.min(2.0 * budget) * 1e3) as u64,
            seed: inputs::trial_seed(self.opts.seed, &format!("timed {}", case.name), 0),
        };
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
        let gpu = self.opts.gpu.clone();
        if !self.timing_modules_loaded && self.worker.is_some() {
            // Normally done in the correctness phase; the same texts again are free.
            let _shared = gpu.as_deref().and_then(|k| lock::shared(k).ok());
            if let Err(e) = self.preload_timing_modules() {
                return Ok(perf_error(e));
            }
        }
        let mut blobs: Vec<&[u8]> = vec![self.reference.ptx.as_bytes(), harness.as_bytes()];
        blobs.extend(allocs.iter().map(Vec::as_slice));
        let bytes: usize = allocs.iter().map(Vec::len).sum();
        let timeout = Duration::from_secs_f64(2.0 * budget + launch_s + 30.0)
            + Duration::from_millis((bytes / 100_000) as u64);
        let Some(worker) = self.worker.as_mut() else {
            return Ok(Check::skipped(
                CheckKind::Performance,
                p.name.clone(),
                "not timed: the worker stopped earlier",
            ));
        };
        // Setup (allocations, uploads, input tables) alongside other jobs' correctness runs;
        // the worker answers `Staged` and waits.
        let staged = {
            let _shared = gpu.as_deref().and_then(|k| lock::shared(k).ok());
            worker.call(&Request::Measure(Box::new(spec.clone())), &blobs, timeout)
        };
        let asked = std::time::Instant::now();
        let (answer, before, after, got) = match staged {
            Ok((Response::Staged, _)) => {
                // One GPU, one timer: nothing else runs on this GPU while the kernel is timed.
                let held = match gpu.as_deref().map(lock::timing) {
                    Some(Err(e)) => {
                        self.worker = None;
                        return Ok(perf_error(format!(
                            "cannot take the GPU's timing lock: {e}"
                        )));
                    }
                    Some(Ok(l)) => Some(l),
                    None => None,
                };
                let got = std::time::Instant::now();
                let before = gpu.as_deref().and_then(clocks::read);
                let answer = worker.call(&Request::Go, &[], timeout);
                let after = gpu.as_deref().and_then(clocks::read);
                drop(held);
                (answer, before, after, got)
            }
            // The setup failed: the report says how.
            other => (other, None, None, asked),
        };
        let held_s = got.elapsed().as_secs_f64();
        let hold = |setup_s: f64| crate::measure::GpuHold {
            waited_s: (got - asked).as_secs_f64(),
            held_s,
            setup_s,
        };
        let printed = worker.output();
        let report = match answer {
            Ok((Response::Timed(r), _)) => *r,
            Ok((other, _)) => {
                return Ok(perf_error(format!(
                    "unexpected answer from the worker: {}",
                    variant(&other)
                )));
            }
            Err(f) => {
                let (c, fatal) = runtime_check(&RunError::Worker(f), &case.name, &printed);
                if fatal {
                    self.worker = None;
                }
                return Ok(Check {
                    kind: CheckKind::Performance,
                    name: p.name.clone(),
                    ..c
                });
            }
        };
        let clocks = match (before, after) {
            (Some(b), Some(a)) => Some(clocks::ClockRecord::new(b, a)),
            _ => None,
        };
        let hold = hold(report.setup_s);
        let mut c = self.verdict(p, &case, &spec, &choice, report, clocks, &inv, bar);
        if let Some(t) = c.timing.as_mut() {
            t.gpu = Some(hold);
            t.device = self.opts.gpu_record.clone();
        }
        Ok(c)
    }

    /// Load the reference and harness modules into the student's worker ahead of its timed
    /// sections, so that the driver's JIT compiles them outside any timed section. The
    /// caller holds the GPU's shared lock. Errors say what failed; the worker is dropped if
    /// it broke.
    pub(super) fn preload_timing_modules(&mut self) -> Result<(), String> {
        let harness = self.reference.harness(self.opts)?;
        let reference = self.reference.ptx.clone();
        let Some(worker) = self.worker.as_mut() else {
            return Err("not timed: the worker stopped earlier".into());
        };
        match worker.call(
            &Request::LoadSlots,
            &[reference.as_bytes(), harness.as_bytes()],
            Duration::from_secs(120),
        ) {
            Ok((Response::Loaded { error: None }, _)) => {
                self.timing_modules_loaded = true;
                Ok(())
            }
            Ok((Response::Loaded { error: Some(e) }, _)) => {
                Err(format!("cannot load the reference and timing kernels: {e}"))
            }
            Ok((other, _)) => Err(format!(
                "unexpected answer from the worker: {}",
                variant(&other)
            )),
            Err(f) => {
                self.worker = None;
                Err(format!("the worker failed loading the timing kernels: {f}"))
            }
        }
    }

    /// Turn a timing report into the check.
    #[allow(clippy::too_many_arguments)]
    fn verdict(
        &mut self,
        p: &PerfSpec,
        case: &Case,
        spec: &MeasureSpec,
        choice: &BaselineChoice,
        report: TimingReport,
        clocks: Option<clocks::ClockRecord>,
        inv: &Invocation,
        bar: f64,
    ) -> Check {
        let name = p.name.clone();
        let fail = |msg: String, hint: &str| {
            let mut c = Check::fail(CheckKind::Performance, name.clone(), msg)
                .with_case(case.name.clone())
                .with_hint(hint);
            c.points = Some(0.0);
            c
        };
        match &report.problem {
            Some(Problem::Wrong {
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
            }) => {
                let at = self.element_name(buffer, *index, inv);
                let (got_s, exp_s) = (fmt_value(*got), fmt_value(*expected));
                if *unwritten > 0 && *unwritten == *mismatches {
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
                    return c;
                }
                if *gross == 0 && *bound > 0.0 && got.is_finite() {
                    let p = self.rubric.precision(self.m);
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
                return fail(
                    format!(
                        "timing cheat or flaky kernel: timed launch {} gave wrong results on fresh inputs after {} right ones: {mismatches} element(s) of `{buffer}` differ from the reference, the first at {at} (got {got_s}, expected {exp_s}){why}; no speed points",
                        launch + 1,
                        report.verified
                    ),
                    hints::TIMED_WRONG,
                );
            }
            Some(Problem::StrayWrite {
                launch,
                buffer,
                bytes,
            }) => {
                return fail(
                    format!(
                        "timed launch {} wrote {bytes} byte(s) outside `{buffer}`; no speed points",
                        launch + 1
                    ),
                    hints::OUT_OF_BOUNDS,
                );
            }
            Some(Problem::Failed { launch, error }) => {
                let fatal = matches!(error, BackendError::Fault(_) | BackendError::Timeout(_));
                if fatal {
                    self.worker = None;
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
                return c;
            }
            None => {}
        }
        if report.estimates.is_empty() {
            return Check::error(
                CheckKind::Performance,
                name,
                "the timed section returned no samples",
            )
            .with_case(case.name.clone());
        }
        let iv = Interval::of_median(&report.estimates);
        let median_ms = stats::median(&report.student_ms);
        let mut record = choice.record.clone();
        if let Some(r) = record.as_mut().filter(|r| r.paired) {
            r.median_ms = stats::median(&report.baseline_ms);
        }
        let lower = self.lower_bound_ms(case, inv, spec.cache, &report);
        let noise = stats::noise(&report.estimates);
        let mut timing = Measurement {
            samples: report.student_ms.len(),
            median_ms,
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
        };
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
        let d = decide::decide(&iv, bar, &p.tiers, p.points);
        timing.near_edge = d.near_edge;
        let mut msg = format!(
            "{:.2}{suffix} {} (needs {bar}{suffix}; 95 % interval {:.2}–{:.2}{suffix}); kernel median {median_ms:.4} ms over {} timed launches on fresh inputs, each checked ({}, noise ±{:.2} %)",
            iv.estimate,
            choice.what,
            iv.lo,
            iv.hi,
            timing.samples,
            timing.stop.describe(),
            100.0 * noise.min(9.99),
        );
        if let Some(edge) = d.near_edge {
            msg.push_str(&if d.favoured {
                format!("; near the {edge}{suffix} edge, within measurement noise: decided in your favour")
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

    /// `C[17] (row 0, column 17)`-style name of element `index` of `buffer`: with the
    /// coordinates its declared shape gives.
    fn element_name(&self, buffer: &str, index: u64, inv: &Invocation) -> String {
        let shape = inv
            .buffers
            .iter()
            .find(|b| b.name == buffer)
            .and_then(|b| b.shape.clone());
        match (shape, usize::try_from(index)) {
            (Some(s), Ok(i)) if s.len() > 1 => format!(
                "{buffer}[{i}] ({})",
                crate::check::coords(i, &s)
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
        &self,
        case: &Case,
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
        if let (Some(e), true) = (&case.flops, f.peak_fp32_gflops > 0.0) {
            let flops = e.eval_f64(&case_vars(case)).unwrap_or(0.0);
            // Tensor cores run far above the FP32 peak: allow for them where the kernel uses them.
            let peak = f.peak_fp32_gflops * if self.tensor_ops { 16.0 } else { 1.0 };
            bound = bound.max(flops / (peak * 1e9) * 1e3);
        }
        // Below a few microseconds launch overhead and timer resolution dominate.
        (bound >= 0.005).then_some(bound)
    }
}

/// How each buffer is regenerated and checked in the timed section.
fn plan_buffers(
    inv: &Invocation,
    contract: &Contract,
    m: &crate::rubric::schema::Milestone,
    vars: &rubric::expr::Vars,
    precision: crate::check::Precision,
) -> Result<Vec<PlanBuffer>, String> {
    let tol_vars = inv.tolerance_vars(vars);
    let ev = |e: &crate::rubric::schema::Expr| e.eval_f64(vars);
    inv.buffers
        .iter()
        .map(|b| {
            let param = contract.params.iter().find(|p| p.name == b.name);
            let draw = match (param.and_then(|p| p.generator.as_ref()), b.dir) {
                (Some(g), Direction::In | Direction::InOut) => {
                    let (kind, a, bb, values) = match g {
                        Gen::Uniform([lo, hi]) => (0, ev(lo)?, ev(hi)?, vec![]),
                        Gen::Normal([mu, sd]) => (1, ev(mu)?, ev(sd)?, vec![]),
                        Gen::Int([lo, hi]) => (2, ev(lo)?.ceil(), ev(hi)?.ceil(), vec![]),
                        Gen::Constant(c) => (3, ev(c)?, 0.0, vec![]),
                        Gen::Values(v) => (4, 0.0, 0.0, v.clone()),
                    };
                    let specials = param.and_then(|p| p.specials.as_ref());
                    Some(GenPlan {
                        kind,
                        a,
                        b: bb,
                        values,
                        specials: specials.map(|s| s.values.clone()).unwrap_or_default(),
                        special_fraction: specials.map_or(0.0, |s| s.fraction),
                    })
                }
                _ => None,
            };
            let compare = if b.is_output() {
                let t = b
                    .tolerance
                    .as_ref()
                    .or(m.correctness.tolerance.as_ref())
                    .or(Some(&contract.tolerance));
                let r = Resolved::with_precision(t, b.elem, &tol_vars, precision)?;
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
