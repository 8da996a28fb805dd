//! The timed loop itself: each iteration's launches and timed windows, the stopping rule, and
//! the reading of each launch's comparison results.

use super::*;

/// probe's cost) ends them; each verified launch's times and estimate go into `report`.
pub(super) fn time_launches(
    d: &mut Device,
    plan: &LoopPlan,
    report: &mut TimingReport,
) -> Result<(), BackendError> {
    let spec = d.spec;
    let rule = plan.rule;
    let mut last_cost = Duration::ZERO;
    let started = Instant::now();
    let hard_stop = started + 2 * rule.budget;
    for i in 0u64.. {
        let iteration = Instant::now();
        let set = (i as usize) % d.sets.len();
        let limit = (iteration + Duration::from_millis(spec.launch_deadline_ms))
            .min(hard_stop.max(iteration + Duration::from_millis(1)));
        let Launched {
            results,
            student,
            base,
        } = d.iterate(plan, set, i, limit)?;
        if let Some(p) = check_results(d, &results, set, i as u32, (1..=CHAINED).contains(&i))? {
            report.problem = Some(p);
            return Ok(());
        }
        report.verified += 1;
        last_cost = last_cost.max(iteration.elapsed());
        let estimate = match (&spec.baseline, base) {
            (_, Some(b)) => spec.scale * b / student.max(1e-6),
            (BaselinePlan::Constant(ms), None) => spec.scale * ms / student.max(1e-6),
            _ => student,
        };
        if i == 0 {
            report.probe_ms = student;
            // The probe alone: does a second launch fit the budget at all?
            if started.elapsed() + last_cost > rule.budget {
                report.student_ms.push(student);
                report.baseline_ms.extend(base);
                report.estimates.push(estimate);
                report.stop = Some(StopReason::Budget);
                return Ok(());
            }
            continue;
        }
        report.student_ms.push(student);
        report.baseline_ms.extend(base);
        report.estimates.push(estimate);
        let straddles = spec.baseline != BaselinePlan::None
            && Interval::of_median(&report.estimates).straddles(&spec.edges);
        if let Some(stop) = rule.decide(&report.estimates, started.elapsed(), last_cost, straddles)
        {
            report.stop = Some(stop);
            return Ok(());
        }
    }
    Ok(())
}

/// What one iteration's launches left behind.
struct Launched {
    /// The comparison's result words ([`RESULT_WORDS`] per compared buffer).
    results: Vec<u8>,
    /// The student's time, ms.
    student: f64,
    /// The paired baseline's time, ms (GPU baselines only).
    base: Option<f64>,
}

impl Device<'_> {
    /// Iteration `i` on set `set` (steps 1-4 of the module's doc), then the comparison's
    /// result words (waited for until `limit`) and the timed windows' lengths.
    fn iterate(
        &mut self,
        plan: &LoopPlan,
        set: usize,
        i: u64,
        limit: Instant,
    ) -> Result<Launched, BackendError> {
        self.t.clear_marks();
        let (s0, s1) = self.time_student(plan, set, i)?;
        let paired = self.time_baseline(plan, set, i)?;
        self.queue_checks(plan, set, i)?;
        let results = self.t.download(self.results, plan.result_bytes, limit)?;
        let student = self.t.elapsed_ms(s0, s1)?;
        let base = match paired {
            Some((a, b)) => Some(self.t.elapsed_ms(a, b)?),
            None => None,
        };
        Ok(Launched {
            results,
            student,
            base,
        })
    }

    /// Steps 1-2: fresh inputs, poisoned outputs, reset globals, then the student's launch
    /// alone; the marks around it.
    fn time_student(
        &mut self,
        plan: &LoopPlan,
        set: usize,
        i: u64,
    ) -> Result<(usize, usize), BackendError> {
        let spec = self.spec;
        // The first launches after the probe run without the reset: a kernel whose results
        // depend on state kept from an earlier launch (a launch counter, a saved answer) is
        // caught there by the verification; afterwards the reset keeps any such state from
        // helping.
        self.prepare(set, i, false)?;
        if i == 0 || i > CHAINED {
            self.t.restore_globals()?;
        }
        let student_params = self.params(Slot::Student, set)?;
        if plan.cold {
            self.t.flush_l2()?;
        }
        let s0 = self.t.mark()?;
        enqueue_all(
            self.t,
            Slot::Student,
            &spec.kernel,
            spec.dims,
            &spec.then,
            &student_params,
        )?;
        Ok((s0, self.t.mark()?))
    }

    /// Step 3: the paired baseline, on the same inputs (regenerated: the kernel may have
    /// written to them); the marks around it, `None` without a GPU baseline.
    fn time_baseline(
        &mut self,
        plan: &LoopPlan,
        set: usize,
        i: u64,
    ) -> Result<Option<(usize, usize)>, BackendError> {
        let spec = self.spec;
        match &spec.baseline {
            BaselinePlan::Reference(r) => {
                self.prepare(set, i, true)?;
                let p = self.params(Slot::Reference, set)?;
                if plan.cold {
                    self.t.flush_l2()?;
                }
                let b0 = self.t.mark()?;
                enqueue_all(self.t, Slot::Reference, &r.kernel, r.dims, &r.then, &p)?;
                Ok(Some((b0, self.t.mark()?)))
            }
            BaselinePlan::Cublas { m, n, k } => {
                let abc = self.cublas.unwrap_or_default();
                if plan.cold {
                    self.t.flush_l2()?;
                }
                let b0 = self.t.mark()?;
                self.t.enqueue_sgemm(*m, *n, *k, abc)?;
                Ok(Some((b0, self.t.mark()?)))
            }
            BaselinePlan::Copy { bytes } => {
                let (src, dst) = self.copy.unwrap_or_default();
                if plan.cold {
                    self.t.flush_l2()?;
                }
                let b0 = self.t.mark()?;
                self.t.copy(dst, src, *bytes)?;
                Ok(Some((b0, self.t.mark()?)))
            }
            BaselinePlan::None | BaselinePlan::Constant(_) => Ok(None),
        }
    }

    /// Step 4: the expected outputs for this launch's inputs (unless the baseline's run left
    /// them), the sums a tolerance scales with, and the comparison, its result words reset.
    fn queue_checks(&mut self, plan: &LoopPlan, set: usize, i: u64) -> Result<(), BackendError> {
        let spec = self.spec;
        if !plan.same_kernel {
            self.prepare(set, i, true)?;
            let p = self.params(Slot::Reference, set)?;
            let v = &spec.verify;
            enqueue_all(self.t, Slot::Reference, &v.kernel, v.dims, &v.then, &p)?;
        }
        if plan.wants_mags {
            self.magnitudes(set, i)?;
        }
        self.t.fill(self.results, 0, plan.result_bytes)?;
        for k in 0..plan.compared {
            // First-mismatch slots start at u64::MAX.
            self.t
                .fill(self.results + (8 * RESULT_WORDS * k) as u64 + 8, 0xFF, 8)?;
        }
        self.compare(set)?;
        Ok(())
    }
}

/// Read the comparison results of one launch; the first problem, if any.
fn check_results(
    d: &mut Device,
    res: &[u8],
    set: usize,
    launch: u32,
    chained: bool,
) -> Result<Option<Problem>, BackendError> {
    let word = |k: usize| {
        u64::from_le_bytes(<[u8; 8]>::try_from(&res[8 * k..8 * k + 8]).unwrap_or_default())
    };
    let mut slot = 0;
    for b in 0..d.spec.buffers.len() {
        let pb = d.spec.buffers[b].clone();
        if pb.compare.is_none() {
            continue;
        }
        let (mismatches, first, guards) = (word(slot), word(slot + 1), word(slot + 2));
        let (gross, unwritten) = (word(slot + 3), word(slot + 4));
        slot += RESULT_WORDS;
        if guards > 0 {
            return Ok(Some(Problem::StrayWrite {
                launch,
                buffer: pb.name,
                bytes: guards,
            }));
        }
        if mismatches > 0 {
            let w = elem_size(pb.elem);
            let at = pb.spec.guard as u64 + first * w as u64;
            let deadline = Instant::now() + Duration::from_secs(10);
            let got = d.t.download(d.sets[set][b] + at, w, deadline)?;
            let exp =
                d.t.download(d.reference[b].unwrap_or(0) + at, w, deadline)?;
            let expected = read_f64(&exp, pb.elem);
            let mag = match d.mags[b] {
                Some(m) => {
                    let s = read_f64(&d.t.download(m + at, w, deadline)?, pb.elem);
                    let q = match d.squares[b] {
                        Some(q) => read_f64(&d.t.download(q + at, w, deadline)?, pb.elem),
                        None => f64::NAN,
                    };
                    crate::compare::sum_scale(&[expected], &[s], Some(&[q]))[0]
                }
                None => 0.0,
            };
            let bound = pb.compare.map_or(0.0, |c| c.allowance(expected, mag));
            return Ok(Some(Problem::Wrong(WrongLaunch {
                launch,
                buffer: pb.name,
                mismatches,
                index: first,
                got: read_f64(&got, pb.elem),
                expected,
                chained,
                unwritten,
                gross,
                bound,
            })));
        }
    }
    Ok(None)
}
