//! Turn a milestone's checks into its status and points.
//!
//! A milestone's correctness points are earned only when every check that shows the kernel
//! works (compile, kernel, launch, correctness, memory, sanitizer, runtime) passed. Performance
//! and metric checks carry their own points (tiers), and count only for a correct kernel:
//! a fast wrong answer earns nothing.

use crate::result::{Check, CheckKind, MilestoneResult, Status};
use crate::rubric::plan::Heading;

/// Does this kind of check show the kernel computes the right thing?
pub fn is_correctness_kind(k: CheckKind) -> bool {
    !matches!(
        k,
        CheckKind::Performance | CheckKind::Metric | CheckKind::Resources
    )
}

/// Do the checks so far show the kernel right? Every correctness-kind check passed, except
/// a sanitizer check that could not run (the emulator's own limits after a GPU run): "not
/// checked" is not a verdict against the student.
pub fn nothing_wrong(checks: &[Check]) -> bool {
    checks
        .iter()
        .filter(|c| is_correctness_kind(c.kind))
        .all(|c| {
            c.status == Status::Pass
                || (c.kind == CheckKind::Sanitizer && c.status == Status::Skipped)
        })
}

/// Assemble a milestone's result from its checks.
pub fn finish(m: &Heading, max_score: f64, checks: Vec<Check>) -> MilestoneResult {
    // Correct: nothing wrong, and some correctness case actually ran and passed (a case that
    // could not run here, such as a CuPy kernel in a pipeline without a GPU, shows nothing).
    let correct = nothing_wrong(&checks)
        && checks
            .iter()
            .any(|c| c.kind == CheckKind::Correctness && c.status == Status::Pass);
    let mut score = 0.0;
    if correct {
        score += m.correctness_points;
        score += checks
            .iter()
            .filter(|c| !is_correctness_kind(c.kind))
            .filter_map(|c| c.points)
            .sum::<f64>();
    }
    let status = Status::aggregate(checks.iter().map(|c| c.status));
    // Correct, but a speed check that could award points was not measured: the score so far
    // is not the milestone's final word. A wrong kernel's 0 is final whatever its speed.
    // So is one whose metric check could not read the GPU's counters (`pipeline::metrics`).
    let provisional = correct
        && checks.iter().any(|c| {
            c.status == Status::Skipped
                && (c.kind == CheckKind::Performance
                    || (c.kind == CheckKind::Metric
                        && c.cause.as_deref() == Some("no-gpu-counters")))
        });
    MilestoneResult {
        id: m.id.clone(),
        title: m.title.clone(),
        status,
        score: (score * 100.0).round() / 100.0,
        max_score,
        checks,
        kernel: m.kernel.clone(),
        provisional,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn milestone() -> Heading {
        let m: crate::rubric::schema::Milestone =
            serde_yaml::from_str("id: m\nkernel: k\ncontract: c\ncorrectness: { points: 10 }\n")
                .unwrap();
        Heading::from(&m)
    }

    #[test]
    fn fast_but_wrong_earns_nothing() {
        let mut perf = Check::pass(CheckKind::Performance, "speed", "fast");
        perf.points = Some(5.0);
        let wrong = Check::fail(CheckKind::Correctness, "c", "wrong");
        let r = finish(&milestone(), 15.0, vec![wrong, perf.clone()]);
        assert_eq!((r.score, r.status), (0.0, Status::Fail));
        let right = Check::pass(CheckKind::Correctness, "c", "ok");
        let r = finish(&milestone(), 15.0, vec![right.clone(), perf]);
        assert_eq!((r.score, r.status), (15.0, Status::Pass));
        let skipped = Check::skipped(CheckKind::Performance, "speed", "emulator");
        let r = finish(&milestone(), 15.0, vec![right.clone(), skipped.clone()]);
        assert_eq!((r.score, r.status), (10.0, Status::Skipped));
        assert!(r.provisional, "correct but unmeasured is provisional");
        let r = finish(&milestone(), 15.0, vec![right, perf_pass()]);
        assert!(!r.provisional);
        let r = finish(
            &milestone(),
            15.0,
            vec![Check::fail(CheckKind::Correctness, "c", "wrong"), skipped],
        );
        assert!(!r.provisional, "a wrong kernel's zero is final");
    }

    #[test]
    fn a_sanitizer_that_could_not_run_takes_no_points() {
        let right = Check::pass(CheckKind::Correctness, "c", "ok");
        let not_run = Check::skipped(CheckKind::Sanitizer, "sanitizer (emulator)", "not run");
        let r = finish(
            &milestone(),
            15.0,
            vec![right.clone(), not_run, perf_pass()],
        );
        assert_eq!((r.score, r.status), (15.0, Status::Skipped));
        // A sanitizer that ran and found something is a verdict.
        let found = Check::fail(CheckKind::Sanitizer, "racecheck", "race");
        let r = finish(&milestone(), 15.0, vec![right.clone(), found, perf_pass()]);
        assert_eq!((r.score, r.status), (0.0, Status::Fail));
        // Any other correctness-kind check that did not run still withholds the points.
        let unrun_case = Check::skipped(CheckKind::Correctness, "c2", "not run");
        let r = finish(&milestone(), 15.0, vec![right, unrun_case, perf_pass()]);
        assert_eq!(r.score, 0.0);
    }

    fn perf_pass() -> Check {
        let mut c = Check::pass(CheckKind::Performance, "speed", "fast");
        c.points = Some(5.0);
        c
    }
}
