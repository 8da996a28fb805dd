//! Metric checks (coalescing, bank conflicts, ...): thresholds on the emulator's counters,
//! which a `--backend cuda` run collects from an emulator worker of its own.

use super::*;
use crate::backend::{BackendKind, Metrics};
use crate::inputs;
use crate::result::{Check, CheckKind};
use crate::rubric::case_vars;
use crate::worker::protocol::{Request, Response};
use crate::worker::{Role, Worker};
use std::time::Duration;

impl MilestoneRun<'_> {
    pub(super) fn metric_on_emulator(
        &mut self,
        x: &crate::rubric::schema::MetricSpec,
        ptx: &str,
        max_threads: u32,
    ) -> Check {
        let Some(case) = self.rubric.correctness_case(&x.case).cloned() else {
            return Check::error(
                CheckKind::Metric,
                x.metric.clone(),
                format!("unknown case {}", x.case),
            );
        };
        let run = (|| -> Result<Option<Metrics>, String> {
            let mut w = Worker::spawn(&worker_options(
                &self.opts.protected,
                Role::Run,
                BackendKind::Emu,
                0,
            ))?;
            match w.call(&Request::Load, &[ptx.as_bytes()], Duration::from_secs(60)) {
                Ok((Response::Loaded { error: None }, _)) => {}
                other => {
                    return Err(format!(
                        "the emulator could not load the module: {:?}",
                        other.map(|r| variant(&r.0))
                    ));
                }
            }
            let dims = self.dims_for(&case, max_threads)?;
            let contract = self.rubric.contract(&self.m.contract);
            let inv = inputs::generate(
                contract,
                &case_vars(&case),
                inputs::trial_seed(self.opts.seed, &case.name, 0),
            )?;
            let student_inv = student_invocation(&self.numba, &inv, contract).map_err(|e| e.0)?;
            match run_on(
                &mut w,
                &self.m.kernel,
                &student_inv,
                dims,
                Duration::from_secs_f64(self.rubric.rubric.timeouts.launch_s * 10.0),
                None,
            ) {
                Ok(r) => Ok(r.report.metrics),
                Err(e) => Err(describe_run_error(&e)),
            }
        })();
        match run {
            Ok(Some(mx)) => metric_check(x, &mx),
            Ok(None) => Check::skipped(
                CheckKind::Metric,
                x.metric.clone(),
                "the emulator returned no metrics",
            )
            .with_case(x.case.clone()),
            Err(e) => Check::skipped(
                CheckKind::Metric,
                x.metric.clone(),
                format!("metrics need the PTX emulator, which could not run this case: {e}"),
            )
            .with_case(x.case.clone()),
        }
    }
}

pub(super) fn metric_check(x: &crate::rubric::schema::MetricSpec, mx: &Metrics) -> Check {
    let Some(v) = mx.by_name(&x.metric) else {
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
    if !ok {
        c.hint = Some(hints::SLOW.to_string());
    }
    c
}
