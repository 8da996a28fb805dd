//! compute-sanitizer over several students at once (`grade`, issue 29). A compute-sanitizer
//! tool's process starts a CUDA context, and the driver creates contexts one at a time across
//! processes: four per student (one per tool) made a 200-student cohort wait minutes on
//! context creation alone. So `grade` grades its students in full except for
//! compute-sanitizer's pass, then runs that pass over a batch of them in one process per tool
//! ([`finish`]), after every timed section on the GPU (`commands::grade::deferred` says when),
//! and only then are their results final and written.
//!
//! Their timed sections ran before the pass. A milestone in which compute-sanitizer finds
//! something fails as it would have anyway (a finding is a failure: the milestone scores
//! nothing), and its speed checks, measured before the finding was known, are not scored:
//! they say so. `check` grades one student and does not defer: its milestones' speed waits
//! for the pass (`pipeline::grade`).

use super::gpu_sanitizer::{self, Part};
use super::sanitizer::{disagreements, merge_findings};
use crate::result::{Check, CheckKind, GradeResult, Phase, Status};
use crate::rubric::plan::Heading;
use crate::submission::Submission;
use std::collections::BTreeSet;
use std::path::PathBuf;

/// A graded submission, and what is left to run for it, if anything.
pub struct Graded {
    pub result: GradeResult,
    pub deferred: Option<Deferred>,
}

/// A student's compute-sanitizer pass, left for [`finish`].
pub struct Deferred {
    pub(super) part: Part,
    /// compute-sanitizer's path.
    pub(super) cs: PathBuf,
    /// Per milestone: its rubric entry and points (to score it again).
    pub(super) milestones: Vec<(Heading, f64)>,
    /// Milestones whose checks speak Numba.
    pub(super) speaks_numba: BTreeSet<usize>,
    pub(super) sub: Submission,
}

impl Graded {
    /// A result with nothing left to run.
    pub fn done(result: GradeResult) -> Graded {
        Graded {
            result,
            deferred: None,
        }
    }
}

impl Deferred {
    pub(super) fn new(
        part: Part,
        cs: PathBuf,
        plan: &crate::rubric::plan::Plan,
        speaks_numba: BTreeSet<usize>,
        sub: &Submission,
    ) -> Deferred {
        Deferred {
            part,
            cs,
            milestones: plan
                .milestones
                .iter()
                .map(|m| (m.milestone.clone(), m.max_points))
                .collect(),
            speaks_numba,
            sub: sub.clone(),
        }
    }
}

/// Run the deferred passes of `graded` (one process per tool for all of them) on GPU `device`
/// (lock key `gpu`) and make each result final: its compute-sanitizer checks beside the
/// emulator's, its milestones scored again, its phases charged a share of the pass.
pub fn finish(graded: &mut [Graded], device: usize, gpu: Option<String>) {
    let mut owners = Vec::new();
    let mut parts = Vec::new();
    let mut cs = None;
    for (i, g) in graded.iter_mut().enumerate() {
        if let Some(d) = g.deferred.as_mut() {
            cs.get_or_insert_with(|| d.cs.clone());
            let checked = d.part.milestones().clone();
            owners.push((i, checked));
            parts.push(std::mem::take(&mut d.part));
        }
    }
    let Some(cs) = cs else { return };
    let outcome = gpu_sanitizer::run_parts(&cs, device, gpu, parts);
    let share = 1.0 / owners.len().max(1) as f64;
    for (k, (i, checked)) in owners.into_iter().enumerate() {
        let g = &mut graded[i];
        let Some(d) = g.deferred.take() else { continue };
        let mut found = outcome.checks.get(k).cloned().unwrap_or_default();
        for (m, (milestone, max_points)) in d.milestones.iter().enumerate() {
            if !checked.contains(&m) {
                continue;
            }
            let gpu = found
                .remove(&m)
                .unwrap_or_else(|| vec![gpu_sanitizer::missing()]);
            merge(&mut g.result, m, milestone, *max_points, gpu, &d);
        }
        let r = &mut g.result;
        r.score = (r.milestones.iter().map(|m| m.score).sum::<f64>() * 100.0).round() / 100.0;
        if let Some(p) = r.run.phases.as_mut() {
            p.add(
                Phase::GpuSanitizer,
                outcome.seconds * share,
                outcome.waited * share,
            );
        }
    }
}

/// Milestone `m` of `r` with compute-sanitizer's checks `gpu` merged into the emulator's.
fn merge(
    r: &mut GradeResult,
    m: usize,
    milestone: &Heading,
    max_points: f64,
    mut gpu: Vec<Check>,
    d: &Deferred,
) {
    let Some(done) = r.milestones.get_mut(m) else {
        return;
    };
    if d.speaks_numba.contains(&m) {
        for c in &mut gpu {
            super::numba::speak_numba(c, &d.sub);
        }
    }
    // Where the sanitizer checks were (else before the speed checks), the merged ones go.
    let at = done
        .checks
        .iter()
        .position(|c| c.kind == CheckKind::Sanitizer)
        .or_else(|| {
            done.checks
                .iter()
                .position(|c| matches!(c.kind, CheckKind::Performance | CheckKind::Metric))
        })
        .unwrap_or(done.checks.len());
    let before = done.checks[..at]
        .iter()
        .filter(|c| c.kind != CheckKind::Sanitizer)
        .count();
    let (emulator, mut rest): (Vec<Check>, Vec<Check>) = std::mem::take(&mut done.checks)
        .into_iter()
        .partition(|c| c.kind == CheckKind::Sanitizer);
    let merged = merge_findings(emulator, Some(gpu));
    r.flags.extend(disagreements(&milestone.id, &merged));
    let found_now = merged.iter().any(|c| c.status == Status::Fail);
    if found_now {
        for c in rest
            .iter_mut()
            .filter(|c| matches!(c.kind, CheckKind::Performance | CheckKind::Metric))
        {
            if c.status == Status::Skipped {
                continue;
            }
            c.status = Status::Skipped;
            c.points = None;
            c.message = format!(
                "not scored: a sanitizer found a problem in this kernel (above), so the milestone \
                 is not correct; measured before that was known: {}",
                c.message
            );
        }
    }
    let tail = rest.split_off(before);
    rest.extend(merged);
    rest.extend(tail);
    let mut finished = crate::score::finish(milestone, max_points, rest);
    super::correctness::attach_snippets(std::slice::from_mut(&mut finished), &d.sub);
    *done = finished;
}
