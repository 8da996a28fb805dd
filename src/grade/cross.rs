//! The emulator against the GPU (issue 19). On `--backend cuda` the PTX emulator runs the
//! smallest correctness cases again (for its sanitizers, `sanitizer::on_emulator`) on the same
//! inputs as the GPU's first trial, and metric checks read the emulator's counters beside the
//! GPU's. A kernel that behaves one way when emulated and another on the hardware (it read
//! `%globaltimer` or `%smid` to tell them apart) shows up as a disagreement: its outputs are
//! right on one and wrong on the other, or its memory access pattern differs. That is said to
//! the instructor as a flag (result.json `flags`, report.md, integrity.csv), never as a
//! verdict: the GPU's own checks decide the points.

use super::*;
use crate::check::{self, Resolved};
use crate::result::Flag;

impl MilestoneRun<'_> {
    /// Keep the GPU's outputs of `case`'s first trial if the emulator will run the case too.
    pub(super) fn keep_gpu_output(&mut self, case: &Case, allocations: &[Vec<u8>]) {
        if self.opts.backend != BackendKind::Cuda {
            return;
        }
        let small = sanitizer::smallest_cases(self.rubric, self.m);
        if small.iter().any(|c| c.name == case.name) {
            self.gpu_outputs
                .insert(case.name.clone(), allocations.to_vec());
        }
    }

    /// Compare the emulator's outputs (`emulated`: per case, its allocations) with the GPU's on
    /// the same inputs; flag a case where one is right and the other wrong.
    pub(super) fn cross_check_outputs(&mut self, emulated: &[(String, Vec<Vec<u8>>)]) {
        for (case_name, emu) in emulated {
            let Some(gpu) = self.gpu_outputs.get(case_name).cloned() else {
                continue;
            };
            let Some(case) = self.rubric.correctness_case(case_name).cloned() else {
                continue;
            };
            if gpu == *emu {
                continue;
            }
            match self.disagreement(&case, &gpu, emu) {
                Ok(Some(what)) => self.flags.push(Flag {
                    kind: "backends-disagree".into(),
                    milestone: Some(self.m.id.clone()),
                    location: None,
                    message: format!(
                        "`{}` gives different results on the PTX emulator and on the GPU for the same inputs (case {case_name}): {what}; a kernel that checks where it runs (timers, SM ids) behaves like this",
                        self.m.kernel
                    ),
                }),
                Ok(None) => {}
                // The comparison needs the reference; without it there is nothing to say.
                Err(_) => {}
            }
        }
    }

    /// One sentence when exactly one of the two outputs of `case` is right.
    fn disagreement(
        &mut self,
        case: &Case,
        gpu: &[Vec<u8>],
        emu: &[Vec<u8>],
    ) -> Result<Option<String>, Infrastructure> {
        let contract = self.rubric.contract(&self.m.contract);
        let vars = case_vars(case);
        let inv = inputs::generate(
            contract,
            &vars,
            inputs::trial_seed(self.opts.seed, &case.name, 0),
        )
        .map_err(Infrastructure)?;
        if gpu.len() != inv.buffers.len() || emu.len() != inv.buffers.len() {
            return Ok(None);
        }
        let dims = self.reference_dims(case)?;
        let limit = Duration::from_secs_f64(self.rubric.rubric.timeouts.launch_s);
        let kernel = self.reference_kernel().to_string();
        // Both cached since the correctness phase.
        let expected = self
            .reference
            .expected(&kernel, &case.name, 0, &inv, dims, limit, None)?;
        let magnitude = if self.needs_magnitude() {
            Some(self.reference.magnitude(
                &kernel,
                &case.name,
                0,
                &inv,
                &expected.allocations,
                dims,
                limit,
                None,
            )?)
        } else {
            None
        };
        let tol_vars = inv.tolerance_vars(&vars);
        let precision = self.rubric.precision(self.m);
        for (i, b) in inv.buffers.iter().enumerate() {
            if !b.is_output() {
                continue;
            }
            let s = b.spec();
            let payload = |a: &[Vec<u8>]| {
                a.get(i)
                    .and_then(|x| x.get(s.guard..s.guard + s.bytes))
                    .map(<[u8]>::to_vec)
            };
            let (Some(e), Some(g), Some(x)) =
                (payload(&expected.allocations), payload(gpu), payload(emu))
            else {
                continue;
            };
            let t = b
                .tolerance
                .as_ref()
                .or(self.m.correctness.tolerance.as_ref())
                .or(Some(&contract.tolerance));
            let Ok(tol) = Resolved::with_precision(t, b.elem, &tol_vars, precision) else {
                continue;
            };
            let mag = magnitude.as_ref().and_then(|m| m.get(i)).map(Vec::as_slice);
            let on_gpu = check::compare_at(b, &e, &g, mag, tol);
            let on_emu = check::compare_at(b, &e, &x, mag, tol);
            if on_gpu.ok() != on_emu.ok() {
                let (right, wrong, c) = if on_gpu.ok() {
                    ("GPU", "emulator", &on_emu)
                } else {
                    ("emulator", "GPU", &on_gpu)
                };
                return Ok(Some(format!(
                    "`{}` is right on the {right} and wrong on the {wrong} ({} of {} elements differ from the reference there)",
                    b.name, c.bad, c.total
                )));
            }
        }
        Ok(None)
    }
}

/// How far apart the emulator's and the GPU's values of one metric may be before the pair is
/// flagged: the two count the same accesses, but the GPU runs the machine code ptxas made of
/// the PTX (which may merge, drop or split accesses), so only large gaps say something.
pub fn metrics_disagree(metric: &str, emulator: f64, gpu: f64) -> bool {
    if !emulator.is_finite() || !gpu.is_finite() {
        return false;
    }
    match metric {
        "global_load_efficiency" | "global_store_efficiency" | "branch_divergence" => {
            (emulator - gpu).abs() > 30.0
        }
        "shared_bank_conflicts" => {
            let (lo, hi) = (emulator.min(gpu), emulator.max(gpu));
            hi > 64.0 && hi > 4.0 * lo.max(1.0)
        }
        _ => {
            let (lo, hi) = (emulator.min(gpu).max(1e-9), emulator.max(gpu));
            hi / lo > 3.0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::metrics_disagree;

    #[test]
    fn only_large_metric_gaps_count() {
        assert!(metrics_disagree("global_store_efficiency", 100.0, 12.5));
        assert!(!metrics_disagree("global_store_efficiency", 100.0, 93.0));
        assert!(metrics_disagree("shared_bank_conflicts", 0.0, 3968.0));
        assert!(!metrics_disagree("shared_bank_conflicts", 0.0, 8.0));
        assert!(!metrics_disagree(
            "global_load_sectors_per_request",
            4.0,
            5.0
        ));
        assert!(metrics_disagree(
            "global_load_sectors_per_request",
            4.0,
            32.0
        ));
        assert!(!metrics_disagree("warp_instructions", f64::NAN, 3.0));
    }
}
