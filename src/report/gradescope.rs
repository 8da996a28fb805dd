//! Gradescope's `results.json` (the autograder format of
//! <https://gradescope-autograders.readthedocs.io/en/latest/specs/>): one test per milestone
//! with its score, maximum, status and Markdown output; the whole Markdown report as the
//! submission's output; the measured speeds as leaderboard entries where speed was measured.
//!
//! `tests/data/gradescope-results.schema.json` writes that format down as a JSON schema, and
//! the tests validate every file cugrade writes against it.

use super::describe::{self, status_symbol};
use super::markdown::{self, inline};
use crate::result::{CheckKind, GradeResult, MilestoneResult, Status};
use serde_json::{Value, json};
use std::fmt::Write as _;

/// Gradescope shows at most this much output per test before it gets unwieldy; longer text
/// is cut (the full evidence stays in report.md and result.json).
const MAX_TEST_OUTPUT: usize = 16 * 1024;
/// The same for the submission-level output.
const MAX_OUTPUT: usize = 256 * 1024;

/// Whether a milestone's speed was measured: it has performance checks and none was skipped.
/// A milestone without performance checks needs no measurement.
pub fn speed_measured(m: &MilestoneResult) -> Option<bool> {
    let perf: Vec<_> = m
        .checks
        .iter()
        .filter(|c| c.kind == CheckKind::Performance)
        .collect();
    (!perf.is_empty()).then(|| perf.iter().all(|c| c.status != Status::Skipped))
}

/// `results.json` for one graded submission.
pub fn to_value(r: &GradeResult) -> Value {
    let tests: Vec<Value> = r
        .milestones
        .iter()
        .enumerate()
        .map(|(i, m)| test(m, i + 1))
        .collect();
    // The whole grading's wall time; results from before it was recorded: the checks' sum.
    let execution_time: f64 = r.run.seconds.unwrap_or_else(|| {
        r.milestones
            .iter()
            .flat_map(|m| &m.checks)
            .filter_map(|c| c.seconds)
            .sum()
    });
    let leaderboard: Vec<Value> = r
        .milestones
        .iter()
        .flat_map(|m| {
            m.checks
                .iter()
                .filter(|c| c.kind == CheckKind::Performance && c.status != Status::Skipped)
                .filter_map(move |c| {
                    let v = c.measured.filter(|v| v.is_finite())?;
                    Some(json!({"name": format!("{} {}", m.id, c.name), "value": round(v), "order": "desc"}))
                })
        })
        .collect();
    let mut out = json!({
        "score": round(r.score),
        "execution_time": execution_time.ceil() as u64,
        "output": super::sanitize::truncate(&markdown::render(r), MAX_OUTPUT),
        "output_format": "md",
        "test_output_format": "md",
        "test_name_format": "text",
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "extra_data": {
            "assignment": r.assignment,
            "student": r.student,
            "backend": r.backend,
            "seed": r.seed,
            "speed_measured": r.run.timed,
            "submission_sha256": r.submission_sha256,
        },
        "tests": tests,
    });
    if !leaderboard.is_empty() {
        out["leaderboard"] = Value::Array(leaderboard);
    }
    out
}

/// `results.json` as text.
pub fn to_string(r: &GradeResult) -> String {
    let mut s = serde_json::to_string_pretty(&to_value(r)).unwrap_or_else(|_| "{}".into());
    s.push('\n');
    s
}

fn round(x: f64) -> f64 {
    if x.is_finite() {
        (x * 100.0).round() / 100.0
    } else {
        0.0
    }
}

fn test(m: &MilestoneResult, number: usize) -> Value {
    let mut output = String::new();
    for c in &m.checks {
        let _ = write!(
            output,
            "- {} **{}**: {}",
            status_symbol(c.status),
            inline(&c.name),
            inline(&c.message)
        );
        if let Some(loc) = &c.location {
            let _ = write!(output, " (`{}`)", inline(loc).replace('`', "'"));
        }
        output.push('\n');
        if let Some(h) = &c.hint
            && describe::is_problem(c)
        {
            let _ = writeln!(output, "  - hint: {}", inline(h));
        }
    }
    if speed_measured(m) == Some(false) {
        output.push_str(
            "\nSpeed was not measured for this milestone: its performance points are not \
             awarded yet.\n",
        );
    }
    let mut t = json!({
        "name": format!("{} ({})", m.title, m.id),
        "name_format": "text",
        "number": number.to_string(),
        "score": round(m.score),
        "max_score": round(m.max_score),
        "output": super::sanitize::truncate(&output, MAX_TEST_OUTPUT),
        "output_format": "md",
        "tags": [m.id],
        "visibility": "visible",
        "extra_data": {"milestone": m.id, "status": m.status.as_str(), "speed_measured": speed_measured(m)},
    });
    // Gradescope's two statuses; a milestone with skipped checks is neither, and Gradescope
    // then derives the colour from the score.
    match m.status {
        Status::Pass => t["status"] = json!("passed"),
        Status::Fail | Status::Error => t["status"] = json!("failed"),
        Status::Skipped => {}
    }
    t
}
