//! Gradescope's `results.json` (the autograder format of
//! <https://gradescope-autograders.readthedocs.io/en/latest/specs/>): one test per milestone
//! with its score, maximum, status and Markdown output; the whole Markdown report as the
//! submission's output; the measured speeds as leaderboard entries where speed was measured.
//!
//! `tests/data/gradescope-results.schema.json` writes that format down as a JSON schema, and
//! the tests validate every file cugrade writes against it.

use super::describe::{self, status_symbol};
use super::findings::{self, Placed, Shared};
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
    let tests: Vec<Value> = super::findings::placed(r)
        .iter()
        .zip(&r.milestones)
        .enumerate()
        .map(|(i, (placed, m))| test(m, placed, i + 1))
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
    // The sandbox's layers are the instructor's business (a "cgroup: DEGRADED" line tells a
    // student nothing to do): in `extra_data`, which Gradescope does not show students.
    let mut shown = r.clone();
    let sandbox = std::mem::take(&mut shown.run.sandbox);
    let mut out = json!({
        "score": round(r.score),
        "execution_time": execution_time.ceil() as u64,
        "output": super::sanitize::truncate(&markdown::render(&shown), MAX_OUTPUT),
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
            "sandbox": sandbox,
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

/// One finding per line (a problem seen in several cases once, with them); a finding an
/// earlier milestone's test showed word for word points there instead of repeating it.
fn test(m: &MilestoneResult, placed: &[Placed], number: usize) -> Value {
    let mut output = String::new();
    if describe::unmeasured_pass(m) {
        output.push_str(
            "**pass, speed not measured**: the kernel is correct; its speed was not measured \
             (no GPU), so its performance points are not awarded yet.\n\n",
        );
    }
    for p in placed {
        let f = &p.finding;
        let c = f.check;
        let symbol = if describe::unmeasured(m, c) {
            "⏱️"
        } else {
            status_symbol(c.status)
        };
        let _ = write!(
            output,
            "- {symbol} **{}**: ",
            inline(&findings::display_name(f))
        );
        if let Shared::Repeat { first } = &p.shared {
            let _ = writeln!(output, "the same as in milestone {} above", inline(first));
            continue;
        }
        if describe::unmeasured(m, c) {
            output.push_str("speed not measured (no GPU)");
            // The emulator's speed estimate, where there is one: shown, never scored.
            if let Some(e) = &c.estimate {
                let _ = write!(output, "; {}", inline(&e.sentence()));
                if let Some(h) = &c.hint {
                    let _ = write!(output, " Hint: {}", inline(h));
                }
            }
        } else {
            output.push_str(&inline(&findings::display_message(f)));
        }
        if let Some(loc) = &c.location {
            let _ = write!(output, " (`{}`)", inline(loc).replace('`', "'"));
        }
        if let Some(w) = f.where_cases().filter(|_| f.all.len() > 1) {
            let _ = write!(output, ", {}", inline(&w));
        }
        output.push('\n');
        if let Shared::First { also } = &p.shared {
            let _ = writeln!(
                output,
                "  - also in {}",
                inline(&findings::milestones_phrase(also))
            );
        }
        if let Some(h) = &c.hint
            && describe::is_problem(c)
        {
            let _ = writeln!(output, "  - hint: {}", inline(h));
        }
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
    match describe::shown_status(m) {
        Status::Pass => t["status"] = json!("passed"),
        Status::Fail | Status::Error => t["status"] = json!("failed"),
        Status::Skipped => {}
    }
    t
}
