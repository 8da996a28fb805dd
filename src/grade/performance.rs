//! Performance checks: time the student's kernel and compare it with its baseline.

use super::*;
use crate::hints;
use crate::inputs::{self};
use crate::result::{Check, CheckKind, Status};
use crate::rubric::{self, case_vars};
use crate::score;
use crate::worker::protocol::Timing;
use std::time::Duration;

impl MilestoneRun<'_> {
    pub(super) fn performance(
        &mut self,
        p: &crate::rubric::schema::PerfSpec,
        max_threads: u32,
    ) -> Result<Check, Infrastructure> {
        let Some(case) = self.rubric.performance_case(&p.case).cloned() else {
            return Ok(Check::error(
                CheckKind::Performance,
                p.name.clone(),
                format!("unknown case {}", p.case),
            ));
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
        let limit = Duration::from_secs_f64(self.rubric.rubric.timeouts.launch_s);
        let ref_dims = self.reference_dims(&case)?;
        let expected = {
            let k = self.reference_kernel().to_string();
            self.reference
                .expected(&k, &case.name, 0, &inv, ref_dims, limit)?
        };
        let reps = self.opts.timing_reps;
        let Some(worker) = self.worker.as_mut() else {
            return Ok(Check::skipped(
                CheckKind::Performance,
                p.name.clone(),
                "not timed: the worker stopped earlier",
            ));
        };
        let total_limit = limit * (reps + 4);
        let student_inv = student_invocation(&self.numba, &inv, &contract)?;
        let ran = run_on(
            worker,
            &self.m.kernel,
            &student_inv,
            dims,
            Some(Timing { warmup: 3, reps }),
            total_limit,
        );
        let printed = worker.output();
        let r = match ran {
            Ok(r) => r,
            Err(e) => {
                let (c, fatal) = runtime_check(&e, &case.name, &printed);
                if fatal {
                    self.worker = None;
                }
                return Ok(c);
            }
        };
        // Correct on the big case too: a kernel right only for small sizes earns no speed points.
        if let Some(c) = self
            .compare_trial(&inv, &expected, &r.allocations, &vars, &case, 0, &printed)
            .into_iter()
            .next()
        {
            return Ok(Check {
                kind: CheckKind::Performance,
                name: p.name.clone(),
                ..c
            }
            .with_case(case.name.clone()));
        }
        let student_ms = crate::measure::median(r.times.as_deref().unwrap_or(&[]));
        if student_ms <= 0.0 {
            return Ok(Check::error(
                CheckKind::Performance,
                p.name.clone(),
                "the backend returned no timings",
            )
            .with_case(case.name.clone()));
        }
        let spread = crate::measure::relative_spread(r.times.as_deref().unwrap_or(&[]));
        let (measured, unit, what) = match self.baseline(&p.against, &case, &inv, reps, limit) {
            Ok((base, unit, what)) => {
                let v = if unit == "%" {
                    100.0 * base / (student_ms * 1e-3) / 1e9
                } else {
                    base / student_ms
                };
                (v, unit, what)
            }
            Err(e) => {
                return Ok(Check::error(
                    CheckKind::Performance,
                    p.name.clone(),
                    format!("could not measure the baseline: {e}"),
                )
                .with_case(case.name.clone()));
            }
        };
        let bar = rubric::perf_bar(p);
        let points = score::tier_points(measured, bar, &p.tiers, p.points);
        let status = if measured >= bar {
            Status::Pass
        } else {
            Status::Fail
        };
        let mut c = Check::new(
            CheckKind::Performance,
            p.name.clone(),
            status,
            format!("{measured:.2}{} {what} (needs {bar}{}); kernel median {student_ms:.4} ms over {reps} runs (spread {:.1} %)", unit_suffix(unit), unit_suffix(unit), spread * 100.0),
        )
        .with_case(case.name.clone())
        .with_measure(measured, Some(bar), unit);
        c.points = Some(points);
        if status == Status::Fail {
            c.hint = Some(hints::SLOW.to_string());
        }
        Ok(c)
    }
}

pub(super) fn unit_suffix(unit: &str) -> &str {
    if unit == "%" { " %" } else { "x" }
}
