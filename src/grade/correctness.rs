//! Correctness: every trial of every case, compared byte for byte with the reference, and the
//! sanitizer and metric findings that come with the runs.

use super::*;
use crate::backend::{BackendKind, Metrics};
use crate::check::{self, Resolved};
use crate::hints;
use crate::inputs::{self, Invocation};
use crate::result::{Check, CheckKind, Status};
use crate::rubric::schema::{Case, Direction};
use crate::rubric::{self, case_vars};
use std::time::{Duration, Instant};

impl MilestoneRun<'_> {
    /// The correctness phase of a milestone: every case in turn (until one crashes or times
    /// out, or the milestone's budget, counted from `started`, runs out), with the GPU's shared
    /// lock held throughout; then, for a kernel with nothing wrong so far, the timing modules'
    /// load. Returns the emulator metrics of each case's first trial.
    pub(super) fn correctness_phase(
        &mut self,
        cases: &[Case],
        max_threads: u32,
        started: Instant,
    ) -> Result<HashMap<String, Metrics>, Infrastructure> {
        let budget = Duration::from_secs_f64(self.rubric.rubric.timeouts.milestone_s);
        let mut metrics_by_case: HashMap<String, Metrics> = HashMap::new();
        let mut stopped = false;
        if self.opts.backend == BackendKind::Cuda && !self.m.performance.is_empty() {
            // cugrade's timing kernels, compiled (once per job) before the GPU is taken; a
            // failure is reported by the performance check.
            let _ = self.reference.harness(self.opts);
        }
        // The GPU is taken once for the whole correctness phase (every case and trial, the
        // reference's runs, the timing modules' load), shared with other correctness phases,
        // never with a timed section. Taken per launch, each of a milestone's launches
        // queued behind the timed sections of every other job: on an H100 with `--jobs 16`
        // that was about 0.3 s per launch, half of a reduction cohort's wall time.
        let phase = self
            .opts
            .gpu
            .as_deref()
            .and_then(|k| crate::measure::lock::shared(k).ok());
        for case in cases {
            if stopped {
                self.checks.push(
                    Check::skipped(
                        CheckKind::Correctness,
                        format!("correctness {}", case.name),
                        "not run: an earlier case crashed or timed out",
                    )
                    .with_case(case.name.clone()),
                );
                continue;
            }
            if started.elapsed() > budget {
                self.checks.push(
                    Check::error(
                        CheckKind::Runtime,
                        format!("correctness {}", case.name),
                        format!(
                            "the milestone's time budget of {:.0} s ran out",
                            budget.as_secs_f64()
                        ),
                    )
                    .with_case(case.name.clone()),
                );
                stopped = true;
                continue;
            }
            let (check, fatal, metrics) = self.correctness_case(case, max_threads)?;
            if let Some(mx) = metrics {
                metrics_by_case.insert(case.name.clone(), mx);
            }
            self.checks.extend(check);
            stopped = fatal;
        }
        // The reference and harness modules for the timed sections, JIT-compiled by the
        // driver now (still in the correctness phase: no timed section runs meanwhile) rather
        // than in a timed section's setup.
        if self.opts.backend == BackendKind::Cuda
            && !self.m.performance.is_empty()
            && !self.timing_modules_loaded
            && score::nothing_wrong(&self.checks)
        {
            // A failure is the performance check's to report (it tries again).
            let _ = self.preload_timing_modules();
        }
        drop(phase);
        Ok(metrics_by_case)
    }

    /// Run every trial of one case. Returns the case's checks, whether the worker is gone
    /// (fault or timeout: stop the milestone), and the first trial's emulator metrics. The
    /// caller holds the GPU's shared lock (`measure::lock`) for the whole correctness phase.
    pub(super) fn correctness_case(
        &mut self,
        case: &Case,
        max_threads: u32,
    ) -> Result<(Vec<Check>, bool, Option<Metrics>), Infrastructure> {
        let name = format!("correctness {}", case.name);
        let started = Instant::now();
        let dims = match self.dims_for(case, max_threads) {
            Ok(d) => d,
            Err(e) => {
                let c = Check::fail(
                    CheckKind::Launch,
                    format!("launch {}", case.name),
                    format!("invalid launch configuration: {e}"),
                )
                .with_case(case.name.clone())
                .with_hint(hints::RESOURCES);
                return Ok((vec![c], false, None));
            }
        };
        let ref_dims = self.reference_dims(case)?;
        let contract = self.rubric.contract(&self.m.contract);
        let vars = case_vars(case);
        let limit = Duration::from_secs_f64(self.rubric.rubric.timeouts.launch_s);
        let mut out = Vec::new();
        let mut first_metrics = None;
        let mut diagnostics_seen = std::collections::BTreeSet::new();
        let mut trials_ok = 0u32;
        for trial in 0..self.rubric.rubric.trials {
            let inv = inputs::generate(
                contract,
                &vars,
                inputs::trial_seed(self.opts.seed, &case.name, trial),
            )
            .map_err(|e| Infrastructure(format!("inputs for case {}: {e}", case.name)))?;
            let expected = {
                let k = self.reference_kernel().to_string();
                // The caller holds the GPU for the whole correctness phase.
                self.reference
                    .expected(&k, &case.name, trial, &inv, ref_dims, limit, None)?
            };
            // Each element's sum of absolute terms, where a tolerance scales with it.
            let magnitude = if self.needs_magnitude() {
                let k = self.reference_kernel().to_string();
                Some(self.reference.magnitude(
                    &k,
                    &case.name,
                    trial,
                    &inv,
                    &expected.allocations,
                    ref_dims,
                    limit,
                    None,
                )?)
            } else {
                None
            };
            // A multiple of the reference's time, so that a hung kernel holds the GPU (which
            // timed sections wait for) for about a second, not the whole `launch_s`.
            let (deadline_s, why) = self
                .rubric
                .rubric
                .timeouts
                .correctness_deadline(expected.seconds);
            let Some(worker) = self.worker.as_mut() else {
                break;
            };
            let student_inv = student_invocation(&self.numba, &inv, contract)?;
            let ran = run_on(
                worker,
                &self.m.kernel,
                &student_inv,
                dims,
                Duration::from_secs_f64(deadline_s),
                None,
            );
            let printed = worker.output();
            match ran {
                Ok(r) => {
                    if first_metrics.is_none() {
                        first_metrics = r.report.metrics.clone();
                    }
                    if trial == 0 {
                        self.keep_gpu_output(case, &r.allocations);
                    }
                    for d in &r.report.diagnostics {
                        let key = (
                            d.tool.clone(),
                            d.file.clone(),
                            d.line,
                            d.instruction.clone(),
                        );
                        if diagnostics_seen.insert(key) {
                            out.push(sanitizer_check(d, &case.name));
                        }
                    }
                    let found = self.compare_trial(
                        &inv,
                        &expected.allocations,
                        magnitude.as_deref(),
                        &r.allocations,
                        &vars,
                        case,
                        trial,
                        &printed,
                    );
                    if !found.is_empty() {
                        for (k, c) in found.into_iter().enumerate() {
                            out.push(if k == 0 {
                                c.with_details_append(&printed)
                            } else {
                                c
                            });
                        }
                        break;
                    }
                    trials_ok += 1;
                }
                Err(e) => {
                    let (mut check, fatal) = runtime_check(&e, &case.name, &printed);
                    if check.hint.as_deref() == Some(hints::DEADLOCK)
                        && check.message.starts_with("timeout")
                    {
                        check
                            .message
                            .push_str(&format!("; its deadline was {deadline_s:.1} s ({why})"));
                    }
                    out.push(check);
                    if let RunError::Backend(_, report) = &e {
                        for d in &report.diagnostics {
                            out.push(sanitizer_check(d, &case.name));
                        }
                    }
                    if fatal {
                        self.worker = None;
                    }
                    return Ok((out, fatal, first_metrics));
                }
            }
        }
        if !out.iter().any(|c| c.kind == CheckKind::Correctness) {
            let mut c = Check::pass(
                CheckKind::Correctness,
                name,
                format!("values match the reference ({trials_ok} trials on fresh inputs)"),
            )
            .with_case(case.name.clone());
            c.seconds = Some(started.elapsed().as_secs_f64());
            out.push(c);
        }
        Ok((out, false, first_metrics))
    }

    /// Compare one trial: a failed correctness check (if values differ) and one memory check
    /// per stray write or changed input. Empty when everything is right.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn compare_trial(
        &self,
        inv: &Invocation,
        expected: &[Vec<u8>],
        magnitude: Option<&[Vec<f64>]>,
        got: &[Vec<u8>],
        vars: &rubric::expr::Vars,
        case: &Case,
        trial: u32,
        printed: &crate::worker::Captured,
    ) -> Vec<Check> {
        let name = format!("correctness {}", case.name);
        let tol_vars = inv.tolerance_vars(vars);
        let precision = self.rubric.precision(self.m);
        // Per wrong output: the sentence naming the kind of wrong, its cause key, its hint, and
        // the mismatch listing.
        let mut problems: Vec<(String, &'static str, &'static str, String)> = Vec::new();
        let mut memory: Vec<Check> = Vec::new();
        for (i, b) in inv.buffers.iter().enumerate() {
            let spec = b.spec();
            if let Some(stray) = check::guards(&got[i], spec.bytes, spec.guard) {
                let where_ = if stray.offset < 0 {
                    format!("{} bytes before the start of `{}`", -stray.offset, b.name)
                } else {
                    format!(
                        "past the end of `{}` (at byte {} of a {}-byte buffer)",
                        b.name, stray.offset, spec.bytes
                    )
                };
                memory.push(
                    Check::fail(
                        CheckKind::Memory,
                        format!("bounds {}", b.name),
                        format!("stray write {where_}; {} guard bytes changed", stray.bytes),
                    )
                    .with_hint(hints::OUT_OF_BOUNDS)
                    .with_cause("stray-write"),
                );
            }
            let payload = &got[i][spec.guard..spec.guard + spec.bytes];
            if b.dir == Direction::In {
                if let Some(idx) = check::changed_input(b, payload) {
                    memory.push(
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
                continue;
            }
            let m = self.m;
            let t = b
                .tolerance
                .as_ref()
                .or(m.correctness.tolerance.as_ref())
                .or(Some(&self.rubric.contract(&m.contract).tolerance));
            let tol = match Resolved::with_precision(t, b.elem, &tol_vars, precision) {
                Ok(t) => t,
                Err(e) => {
                    return vec![
                        Check::error(CheckKind::Correctness, name, format!("tolerance: {e}"))
                            .with_case(case.name.clone()),
                    ];
                }
            };
            let exp_payload = &expected[i][spec.guard..spec.guard + spec.bytes];
            let mag = magnitude.and_then(|m| m.get(i)).map(Vec::as_slice);
            let c = check::compare_at(b, exp_payload, payload, mag, tol);
            if !c.ok() {
                let wrong =
                    check::classify::classify_at(b, &b.data, exp_payload, payload, mag, tol);
                problems.push((
                    wrong.describe(&b.name, c.total),
                    wrong.cause(),
                    hints::for_wrong(&wrong),
                    c.describe(),
                ));
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
        let _ = printed;
        if let Some((sentence, cause, class_hint, _)) = problems.first() {
            // The rubric's own hint for the milestone knows the lab best; the kind of wrong is
            // in the message either way.
            let hint = self
                .m
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
            found.insert(
                0,
                Check::fail(
                    CheckKind::Correctness,
                    name,
                    format!("{lead}{sentence}{also}"),
                )
                .with_case(case.name.clone())
                .with_hint(hint)
                .with_cause(*cause)
                .with_details(details),
            );
        }
        found
    }

    /// Does some output's tolerance scale with its elements' sums of absolute terms?
    pub(super) fn needs_magnitude(&self) -> bool {
        let contract = self.rubric.contract(&self.m.contract);
        contract.params.iter().any(|p| {
            p.dir != Direction::In
                && p.tolerance
                    .as_ref()
                    .or(self.m.correctness.tolerance.as_ref())
                    .unwrap_or(&contract.tolerance)
                    .sum
                    .is_some()
        })
    }

    /// A kernel right on every small case and wrong on every larger one (by the number of
    /// elements its buffers hold) is "right for small cases only": say so on the failures whose
    /// kind of wrong has no better name (a named kind, NaN or unwritten, is more useful).
    pub(super) fn mark_small_cases_only(&mut self, cases: &[Case]) {
        let contract = self.rubric.contract(&self.m.contract);
        let size = |case: &Case| -> usize {
            let vars = case_vars(case);
            contract
                .params
                .iter()
                .filter(|p| p.len.is_some())
                .filter_map(|p| rubric::eval_len(p, &vars).ok())
                .sum()
        };
        let outcome = |name: &str| {
            self.checks
                .iter()
                .filter(|c| c.kind == CheckKind::Correctness)
                .find(|c| c.case.as_deref() == Some(name))
                .map(|c| c.status)
        };
        let (mut passed, mut failed) = (vec![], vec![]);
        for case in cases {
            match outcome(&case.name) {
                Some(Status::Pass) => passed.push((size(case), case.name.clone())),
                Some(Status::Fail) => failed.push((size(case), case.name.clone())),
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
        for c in &mut self.checks {
            if c.kind == CheckKind::Correctness
                && c.status == Status::Fail
                && c.cause.as_deref() == Some("wrong-values")
            {
                let rest = c.message.trim_start_matches("wrong results: ");
                c.message = format!("{note}: {rest}");
                c.cause = Some("small-only".into());
                if self.m.hint.is_none() {
                    c.hint = Some(hints::SMALL_ONLY.to_string());
                }
            }
        }
    }
}

pub(super) fn sanitizer_check(d: &crate::backend::Diagnostic, case: &str) -> Check {
    let location = match (&d.file, d.line) {
        (Some(f), Some(l)) => Some(format!("{f}:{l}")),
        _ => None,
    };
    let hint = match d.tool.as_str() {
        "racecheck" => hints::RACE,
        "synccheck" => hints::BARRIER_DIVERGENCE,
        "memcheck" => hints::OUT_OF_BOUNDS,
        "initcheck" => {
            "Shared memory is read before any thread wrote it: initialise it, and put a __syncthreads() between the writes and the reads."
        }
        _ => hints::WRONG_RESULTS,
    };
    let more = if d.repeats > 0 {
        format!(" (and {} more times)", d.repeats)
    } else {
        String::new()
    };
    Check::fail(
        CheckKind::Sanitizer,
        format!("{} {}", d.tool, location.clone().unwrap_or_default())
            .trim()
            .to_string(),
        format!(
            "{}: {} at thread ({},{},{}) of block ({},{},{}){more}",
            d.tool,
            d.message,
            d.thread[0],
            d.thread[1],
            d.thread[2],
            d.block[0],
            d.block[1],
            d.block[2]
        ),
    )
    .with_location(location)
    .with_case(case.to_string())
    .with_hint(hint)
    .with_cause(d.tool.clone())
    .with_details(format!("PTX: {}", d.instruction))
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
}
