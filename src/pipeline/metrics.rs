//! Metric checks (coalescing, bank conflicts, ...). On the emulator they read its
//! deterministic counters; on `--backend cuda` they come from the GPU, through Nsight Compute
//! (`ncu`, run on the metric's case as `check --profile` runs it: `worker::nsight::kernel_job`), so
//! that no part of a GPU grade rests on what the emulator saw. Without ncu (or when the GPU's
//! counters cannot be read: no permission, a driver without the metric) the check is skipped
//! with the reason and its points are withheld as provisional, as speed is without a GPU. The
//! emulator's value for the same case is still computed on a GPU run: a large gap between the
//! two is flagged to the instructor (`cross::metrics_disagree`).

use super::context::{Ctx, Kernel};
use super::run::{describe_run_error, run_on, student_invocation};
use crate::backend::Metrics;
use crate::hints;
use crate::inputs;
use crate::result::{Check, CheckKind, Flag, Status};
use crate::rubric::plan::CasePlan;
use crate::rubric::schema::MetricSpec;
use crate::worker::Client;
use crate::worker::nsight::{NcuRow, kernel_job, run_ncu, tool_root};
use std::collections::HashMap;
use std::time::Duration;

/// The `cause` of a metric check skipped because the GPU's counters could not be read: its
/// points are provisional (`score::finish`).
pub const NO_GPU_COUNTERS: &str = "no-gpu-counters";

/// The Nsight Compute metrics each of cugrade's metrics is computed from (the emulator's
/// definitions: `backend::Metrics::by_name`).
pub fn ncu_metrics_for(name: &str) -> &'static [&'static str] {
    match name {
        "global_load_efficiency" => {
            &["smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct"]
        }
        "global_store_efficiency" => {
            &["smsp__sass_average_data_bytes_per_sector_mem_global_op_st.pct"]
        }
        "shared_bank_conflicts" => &[
            "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
            "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
        ],
        "branch_divergence" => &[
            "smsp__sass_branch_targets_threads_divergent.sum",
            "smsp__sass_branch_targets.sum",
        ],
        "warp_instructions" => &["smsp__inst_executed.sum"],
        "lane_instructions" => &["smsp__thread_inst_executed.sum"],
        "global_load_sectors_per_request" => &[
            "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
            "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
        ],
        "global_store_sectors_per_request" => &[
            "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
            "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
        ],
        _ => &[],
    }
}

/// The value of cugrade metric `name` for `kernel` from ncu's rows (one launch).
pub fn ncu_value(rows: &[NcuRow], kernel: &str, name: &str) -> Option<f64> {
    let get = |m: &str| {
        rows.iter()
            .find(|r| r.kernel == kernel && r.metric == m)
            .map(|r| r.value)
    };
    let ms = ncu_metrics_for(name);
    match name {
        "shared_bank_conflicts" => Some(get(ms[0])? + get(ms[1])?),
        "branch_divergence" => {
            let total = get(ms[1])?;
            (total > 0.0).then(|| 100.0 * get(ms[0]).unwrap_or(0.0) / total)
        }
        "global_load_sectors_per_request" | "global_store_sectors_per_request" => {
            let req = get(ms[1])?;
            (req > 0.0).then(|| get(ms[0]).unwrap_or(0.0) / req)
        }
        _ => get(ms.first()?),
    }
}

/// The milestone's metric checks, and flags where the emulator and the GPU disagree.
/// `metrics_by_case`: what the emulator backend collected during the correctness cases (empty
/// on a GPU); `correct`: nothing is wrong so far (the GPU's counters are read only then).
pub(super) fn stage(
    ctx: &Ctx,
    kernel: &Kernel,
    metrics_by_case: &HashMap<String, Metrics>,
    correct: bool,
    emulator: &mut Option<Client>,
) -> (Vec<Check>, Vec<Flag>) {
    let specs: Vec<MetricSpec> = ctx.plan.metrics.iter().map(|x| x.spec.clone()).collect();
    let hint = ctx.plan.milestone.hint.as_deref();
    if !ctx.caps().counters {
        let checks = specs
            .iter()
            .map(|x| match metrics_by_case.get(&x.case) {
                Some(mx) => with_hint(metric_check(x, mx), x, hint),
                None => Check::skipped(
                    CheckKind::Metric,
                    x.metric.clone(),
                    format!("no metrics collected for case {}", x.case),
                )
                .with_case(x.case.clone()),
            })
            .collect();
        return (checks, vec![]);
    }
    let mut cases: Vec<String> = specs.iter().map(|x| x.case.clone()).collect();
    cases.sort();
    cases.dedup();
    let ncu = crate::worker::nsight::find_ncu();
    let mut gpu: HashMap<String, Result<Vec<NcuRow>, String>> = HashMap::new();
    let mut emu: HashMap<String, Result<Metrics, String>> = HashMap::new();
    for case in &cases {
        emu.insert(case.clone(), emulator_metrics(ctx, kernel, case, emulator));
        if !correct {
            continue;
        }
        let rows = match &ncu {
            None => Err(
                "Nsight Compute (ncu) is not installed on this machine, so the GPU's counters were not read".to_string(),
            ),
            Some(ncu) => gpu_metrics(ctx, kernel, ncu, case, &specs),
        };
        gpu.insert(case.clone(), rows);
    }
    let mut flags = Vec::new();
    let checks = specs
        .iter()
        .map(|x| {
            let emulated = emu
                .get(&x.case)
                .and_then(|r| r.as_ref().ok())
                .and_then(|mx| mx.by_name(&x.metric));
            let c = gpu_check(ctx, x, gpu.get(&x.case), emulated, &mut flags);
            with_hint(c, x, hint)
        })
        .collect();
    (checks, flags)
}

/// A failed metric check's hint: the rubric's own for the check, else what the metric means
/// and what usually fixes it, with the milestone's hint after it (the lab's words).
fn with_hint(mut c: Check, x: &MetricSpec, milestone: Option<&str>) -> Check {
    if c.status != Status::Fail {
        return c;
    }
    let own = x.hint.as_deref().map(str::trim).filter(|h| !h.is_empty());
    c.hint = Some(match (own, hints::for_metric(&x.metric), milestone) {
        (Some(h), _, _) => h.to_string(),
        (None, Some(m), Some(lab)) => format!("{m} The lab's hint: {}", lab.trim()),
        (None, Some(m), None) => m.to_string(),
        (None, None, Some(lab)) => lab.trim().to_string(),
        (None, None, None) => hints::SLOW.to_string(),
    });
    c
}

/// One metric check on a GPU run: the GPU's value (`gpu`: the rows ncu read on the check's
/// case, `None` when the kernel was not correct), beside the emulator's (`emulated`).
fn gpu_check(
    ctx: &Ctx,
    x: &MetricSpec,
    gpu: Option<&Result<Vec<NcuRow>, String>>,
    emulated: Option<f64>,
    flags: &mut Vec<Flag>,
) -> Check {
    let rows = match gpu {
        None => {
            return Check::skipped(
                CheckKind::Metric,
                x.metric.clone(),
                "not measured: the kernel is not correct yet",
            )
            .with_case(x.case.clone());
        }
        Some(Err(why)) => return no_gpu_counters(x, why, emulated),
        Some(Ok(rows)) => rows,
    };
    let v = ncu_value(rows, &ctx.plan.kernel, &x.metric);
    if let (Some(v), Some(e)) = (v, emulated)
        && super::cross::metrics_disagree(&x.metric, e, v)
    {
        flags.push(Flag {
            kind: "backends-disagree".into(),
            milestone: Some(ctx.plan.milestone.id.clone()),
            location: None,
            message: format!(
                "`{}` has {} = {e:.1} on the PTX emulator and {v:.1} on the GPU for the same case ({}): its memory accesses differ between the two, as when a kernel checks where it runs (timers, SM ids)",
                ctx.plan.kernel, x.metric, x.case
            ),
        });
    }
    let mut c = metric_value_check(x, v);
    c.message.push_str(" on the GPU (Nsight Compute)");
    c
}

/// A metric the GPU's counters could not give: skipped, its points withheld.
fn no_gpu_counters(x: &MetricSpec, why: &str, emulated: Option<f64>) -> Check {
    let seen = emulated
        .map(|e| {
            format!(
                " (the PTX emulator measured {e:.1} on this case; it does not count on a GPU run)"
            )
        })
        .unwrap_or_default();
    let mut c = Check::skipped(
        CheckKind::Metric,
        x.metric.clone(),
        format!(
            "not measured on the GPU: {why}; its {} points are withheld until a GPU run can read the counters{seen}",
            x.points
        ),
    )
    .with_case(x.case.clone())
    .with_hint("Install NVIDIA Nsight Compute (`ncu`, in the CUDA toolkit) on the grading machine and allow profiling (NVreg_RestrictProfilingToAdminUsers=0, or grade as root); `cugrade doctor` says what it finds.");
    c.cause = Some(NO_GPU_COUNTERS.into());
    c
}

/// One launch of the kernel on correctness case `case` under Nsight Compute, reading the
/// counters `specs` need.
fn gpu_metrics(
    ctx: &Ctx,
    kernel: &Kernel,
    ncu: &std::path::Path,
    case: &str,
    specs: &[MetricSpec],
) -> Result<Vec<NcuRow>, String> {
    let Some(c) = metric_case(ctx, case) else {
        return Err(format!("unknown case {case}"));
    };
    let mut wanted: Vec<&str> = specs
        .iter()
        .filter(|x| x.case == case)
        .flat_map(|x| ncu_metrics_for(&x.metric).iter().copied())
        .collect();
    wanted.sort_unstable();
    wanted.dedup();
    if wanted.is_empty() {
        return Ok(vec![]);
    }
    let (dir, job) = kernel_job(
        ctx.plan,
        c,
        kernel.ptx,
        kernel.numba.as_ref(),
        ctx.opts.seed,
        ctx.opts.device,
        tool_root(ncu),
        Duration::from_secs(180),
    )?;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let args: Vec<std::ffi::OsString> = vec!["__profile-kernel".into(), job.into_os_string()];
    let name = &ctx.plan.kernel;
    let rows = run_ncu(
        ncu,
        &exe,
        &args,
        std::slice::from_ref(name),
        dir.path(),
        &wanted,
        ctx.opts.gpu.as_deref(),
    )?;
    if !rows.iter().any(|r| &r.kernel == name) {
        return Err("Nsight Compute measured no launch of the kernel".into());
    }
    Ok(rows)
}

/// The correctness case a metric check names.
fn metric_case<'a>(ctx: &Ctx<'a>, case: &str) -> Option<&'a CasePlan> {
    ctx.plan
        .metrics
        .iter()
        .filter(|x| x.spec.case == case)
        .find_map(|x| x.case.as_ref())
}

/// The emulator's counters for one launch on correctness case `case` (a worker of its own).
fn emulator_metrics(
    ctx: &Ctx,
    kernel: &Kernel,
    case: &str,
    emulator: &mut Option<Client>,
) -> Result<Metrics, String> {
    let Some(case) = metric_case(ctx, case) else {
        return Err(format!("unknown case {case}"));
    };
    let mut w = super::sanitizer::emulator(kernel.ptx, &ctx.opts.protected, emulator.take())
        .map_err(|c| c.message)?;
    let dims = case
        .launch
        .clone()
        .and_then(|d| inputs::check_limits(&d, kernel.info.max_threads_per_block).map(|()| d))?;
    let contract = &ctx.plan.contract;
    let inv = case
        .args()
        .and_then(|a| inputs::generate(a, inputs::trial_seed(ctx.opts.seed, &case.name, 0)))?;
    let student_inv = student_invocation(&kernel.numba, &inv, contract).map_err(|e| e.0)?;
    let limit = Duration::from_secs_f64(ctx.rubric.timeouts.launch_s * 10.0);
    let then = ctx.plan.then(case)?;
    let ran = run_on(
        &mut w,
        &ctx.plan.kernel,
        &student_inv,
        dims,
        &then,
        limit,
        None,
    );
    // Kept for the student's next milestone (a dead one is replaced then).
    *emulator = Some(w);
    match ran {
        Ok(r) => r
            .report
            .metrics
            .ok_or_else(|| "the emulator returned no metrics".to_string()),
        Err(e) => Err(describe_run_error(&e)),
    }
}

/// The check of metric `x` on the emulator's counters: a failed one points at the line that
/// costs the metric most (`Metrics::hot_line`), with its share.
pub(super) fn metric_check(x: &MetricSpec, mx: &Metrics) -> Check {
    let mut c = metric_value_check(x, mx.by_name(&x.metric));
    if c.status != Status::Fail {
        return c;
    }
    if let Some(h) = mx.hot_line(&x.metric) {
        let what = match x.metric.as_str() {
            "shared_bank_conflicts" => "of the bank conflicts",
            "global_load_efficiency" | "global_load_sectors_per_request" => {
                "of the loaded sector bytes no thread asked for"
            }
            "global_store_efficiency" | "global_store_sectors_per_request" => {
                "of the written sector bytes no thread wrote"
            }
            _ => "of the divergent branches",
        };
        let at = format!("{}:{}", h.file, h.line);
        c.message.push_str(&format!(
            "; {:.0}% {what} are at {at}",
            (h.share * 100.0).min(100.0)
        ));
        c.location = Some(at);
    }
    c
}

/// The check of metric `x` whose value is `v` (`None`: undefined for this run).
pub(super) fn metric_value_check(x: &MetricSpec, v: Option<f64>) -> Check {
    let Some(v) = v else {
        return Check::skipped(
            CheckKind::Metric,
            x.metric.clone(),
            format!("{} is undefined for this run (no such accesses)", x.metric),
        )
        .with_case(x.case.clone());
    };
    let ok = x.min.is_none_or(|m| v >= m) && x.max.is_none_or(|m| v <= m);
    let bound = match (x.min, x.max) {
        (Some(a), Some(b)) => format!("between {a} and {b}"),
        (Some(a), None) => format!("at least {a}"),
        (None, Some(b)) => format!("at most {b}"),
        (None, None) => String::new(),
    };
    let mut c = Check::new(
        CheckKind::Metric,
        x.metric.clone(),
        if ok { Status::Pass } else { Status::Fail },
        format!(
            "{} = {} (needs {bound})",
            x.metric,
            if v.fract() == 0.0 {
                format!("{v:.0}")
            } else {
                format!("{v:.1}")
            }
        ),
    )
    .with_case(x.case.clone())
    .with_measure(
        v,
        x.min.or(x.max),
        if x.metric.contains("efficiency") || x.metric.contains("divergence") {
            "%"
        } else {
            ""
        },
    );
    c.points = Some(if ok { x.points } else { 0.0 });
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(hint: Option<&str>) -> MetricSpec {
        MetricSpec {
            metric: "shared_bank_conflicts".into(),
            case: "c".into(),
            min: None,
            max: Some(0.0),
            points: 5.0,
            hint: hint.map(str::to_string),
        }
    }

    /// The rubric's hint for the check, else the metric's meaning and the milestone's hint;
    /// never the generic "correct but slow" where more is known (issue 32).
    #[test]
    fn a_failed_metric_check_says_what_the_rubric_and_the_metric_say() {
        let failed = metric_value_check(&spec(None), Some(3968.0));
        assert_eq!(failed.status, Status::Fail);
        let own = with_hint(failed.clone(), &spec(Some("pad the tile")), Some("lab"));
        assert_eq!(own.hint.as_deref(), Some("pad the tile"));
        let h = with_hint(failed.clone(), &spec(None), Some("Use tile[32][33]."))
            .hint
            .unwrap();
        assert!(
            h.starts_with(hints::for_metric("shared_bank_conflicts").unwrap())
                && h.ends_with("The lab's hint: Use tile[32][33]."),
            "{h}"
        );
        let passed = metric_value_check(&spec(None), Some(0.0));
        assert_eq!(with_hint(passed, &spec(None), Some("lab")).hint, None);
        for m in Metrics::NAMES {
            assert!(hints::for_metric(m).is_some(), "{m} has no advice");
        }
    }
}
