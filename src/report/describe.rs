//! How verdict values read in prose, shared by every report so that a score or a measurement
//! reads the same in the terminal, in Markdown and in JUnit.

use super::sanitize::one_line;
use crate::result::{Check, CheckKind, GradeResult, MilestoneResult, Status};

/// A score without noise: `30`, `12.5`, `33.33`; `?` for a value that is not a number.
pub fn score(x: f64) -> String {
    if !x.is_finite() {
        return "?".to_string();
    }
    let s = format!("{x:.2}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".to_string()
    } else {
        s.to_string()
    }
}

/// `score / max`.
pub fn score_of(got: f64, max: f64) -> String {
    format!("{} / {}", score(got), score(max))
}

/// What a score is worth when speed was not measured: the milestone's (or the total's)
/// `score / max`, followed by `, speed not measured` when it is provisional.
pub fn provisional_score(got: f64, max: f64, provisional: bool) -> String {
    if provisional {
        format!("{}, {PROVISIONAL}", score_of(got, max))
    } else {
        score_of(got, max)
    }
}

/// The words every report puts after a provisional score.
pub const PROVISIONAL: &str = "speed not measured";

/// A correct milestone whose speed could not be measured (no GPU). result.json keeps SPEC's
/// `skipped` for it, with `provisional: true`; every report reads it as a pass whose speed was
/// not measured ([`PASS_UNMEASURED`]), never as skipped.
pub fn unmeasured_pass(m: &MilestoneResult) -> bool {
    m.provisional && m.status == Status::Skipped
}

/// A speed check of such a milestone: not run because speed could not be measured.
pub fn unmeasured(m: &MilestoneResult, c: &Check) -> bool {
    unmeasured_pass(m) && c.kind == CheckKind::Performance && c.status == Status::Skipped
}

/// The status a report shows for a milestone: a pass when only its speed went unmeasured.
pub fn shown_status(m: &MilestoneResult) -> Status {
    if unmeasured_pass(m) {
        Status::Pass
    } else {
        m.status
    }
}

/// The status a report shows for a whole result (see [`shown_status`]).
pub fn shown_overall(r: &GradeResult) -> Status {
    Status::aggregate(r.milestones.iter().map(shown_status))
}

/// Whether the result's shown pass is one whose speed was not measured.
pub fn overall_unmeasured(r: &GradeResult) -> bool {
    shown_overall(r) == Status::Pass && r.milestones.iter().any(unmeasured_pass)
}

/// What the terminal says for a correct result whose speed was not measured.
pub const PASS_UNMEASURED: &str = "PASS, speed not measured";

/// A measured or threshold value with its unit: `1.23x`, `87.5%`, `412.1 GB/s`.
pub fn quantity(x: f64, unit: Option<&str>) -> String {
    let v = if !x.is_finite() {
        x.to_string()
    } else if x != 0.0 && x.abs() < 0.01 {
        format!("{x:.3e}")
    } else {
        let s = format!("{x:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    };
    // Units come from the rubric, but every string a report prints goes through sanitize.
    match unit.map(one_line).as_deref() {
        None | Some("") => v,
        Some(u @ ("x" | "%")) => format!("{v}{u}"),
        Some(u) => format!("{v} {u}"),
    }
}

/// `0.8x (threshold 1.5x)` when the check has a measurement.
pub fn measurement(c: &Check) -> Option<String> {
    let unit = c.unit.as_deref();
    let threshold = c
        .threshold
        .map(|t| format!("threshold {}", quantity(t, unit)));
    match (c.measured, threshold) {
        (None, None) => None,
        (Some(m), None) => Some(quantity(m, unit)),
        (None, Some(t)) => Some(t),
        (Some(m), Some(t)) => Some(format!("{} ({t})", quantity(m, unit))),
    }
}

/// A `file:line[:col]` location split into its parts; a bare file name has no line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location<'a> {
    pub file: &'a str,
    pub line: Option<u32>,
    pub col: Option<u32>,
}

pub fn location(s: &str) -> Location<'_> {
    let mut parts = s.rsplitn(3, ':');
    let last = parts.next().unwrap_or("");
    let mid = parts.next();
    let first = parts.next();
    match (first, mid.and_then(|m| m.parse().ok()), last.parse().ok()) {
        (Some(f), Some(line), Some(col)) => Location {
            file: f,
            line: Some(line),
            col: Some(col),
        },
        _ => match (mid, last.parse().ok()) {
            (Some(_), Some(line)) => {
                let file = &s[..s.len() - last.len() - 1];
                Location {
                    file,
                    line: Some(line),
                    col: None,
                }
            }
            _ => Location {
                file: s,
                line: None,
                col: None,
            },
        },
    }
}

/// Upper-case status word for the terminal.
pub fn status_word(s: Status) -> &'static str {
    match s {
        Status::Pass => "PASS",
        Status::Fail => "FAIL",
        Status::Error => "ERROR",
        Status::Skipped => "SKIP",
    }
}

/// Status symbol for Markdown (GitHub renders these emoji everywhere).
pub fn status_symbol(s: Status) -> &'static str {
    match s {
        Status::Pass => "✅",
        Status::Fail => "❌",
        Status::Error => "💥",
        Status::Skipped => "⏭️",
    }
}

/// Whether a check needs the reader's attention.
pub fn is_problem(c: &Check) -> bool {
    matches!(c.status, Status::Fail | Status::Error)
}

/// The sandbox lines that say a layer was not in force (`sandbox::Report::lines` writes
/// `name: DEGRADED (why)` for those).
pub fn degraded_sandbox(r: &GradeResult) -> Vec<&str> {
    // The cgroup layer is an extra most hosts do not delegate (docs/security.md): its absence
    // is the usual case, not a warning; the run's sandbox lines and `cugrade doctor` show it.
    r.run
        .sandbox
        .iter()
        .filter(|l| l.contains("DEGRADED") && !l.starts_with("cgroup:"))
        .map(String::as_str)
        .collect()
}

/// Why speed was not measured, as the rest of a sentence that starts "Speed was not
/// measured".
pub fn untimed_reason(r: &GradeResult) -> String {
    let device = one_line(if r.run.device.is_empty() {
        &r.backend
    } else {
        &r.run.device
    });
    if device.contains(STAND_IN) {
        // A function lab without a GPU: no PTX, no emulator; NumPy ran the student's CuPy.
        return "this run had no GPU: NumPy stood in for CuPy, which says nothing about a GPU's \
                speed, so the pipeline was not timed. Grade on a GPU (--backend cuda) for a \
                speed result."
            .into();
    }
    format!(
        "this run used {device}, which cannot time kernels, so no performance check ran. \
         Grade on a GPU (--backend cuda) for a speed result."
    )
}

/// What `run.device` says of a function lab graded without a GPU.
pub const STAND_IN: &str = "NumPy standing in for CuPy";

/// The plain sentence every report prints when speed was not measured.
pub fn untimed_note(r: &GradeResult) -> String {
    format!("Speed was not measured: {}", untimed_reason(r))
}

/// Bytes as `512 B`, `48 KiB`, `1.5 MiB`.
pub fn bytes(n: u64) -> String {
    const KIB: u64 = 1024;
    if n < KIB {
        format!("{n} B")
    } else if n < KIB * KIB {
        format!("{} KiB", quantity(n as f64 / KIB as f64, None))
    } else {
        format!("{} MiB", quantity(n as f64 / (KIB * KIB) as f64, None))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_drop_trailing_zeros() {
        assert_eq!(score(30.0), "30");
        assert_eq!(score(12.5), "12.5");
        assert_eq!(score(100.0 / 3.0), "33.33");
        assert_eq!(score(-0.0), "0");
        assert_eq!(score(f64::NAN), "?");
    }

    #[test]
    fn provisional_scores_say_so() {
        assert_eq!(
            provisional_score(20.0, 35.0, true),
            "20 / 35, speed not measured"
        );
        assert_eq!(provisional_score(20.0, 35.0, false), "20 / 35");
    }

    #[test]
    fn quantities_carry_units() {
        assert_eq!(quantity(1.5, Some("x")), "1.5x");
        assert_eq!(quantity(87.5, Some("%")), "87.5%");
        assert_eq!(quantity(412.123_45, Some("GB/s")), "412.123 GB/s");
        assert_eq!(quantity(0.000_12, Some("ms")), "1.200e-4 ms");
    }

    #[test]
    fn locations_split_file_line_and_column() {
        let l = location("reduce.cu:12");
        assert_eq!((l.file, l.line, l.col), ("reduce.cu", Some(12), None));
        let l = location("src/k.cu:7:3");
        assert_eq!((l.file, l.line, l.col), ("src/k.cu", Some(7), Some(3)));
        let l = location("reduce.cu");
        assert_eq!((l.file, l.line, l.col), ("reduce.cu", None, None));
        let l = location("weird:name.cu:x");
        assert_eq!((l.file, l.line), ("weird:name.cu:x", None));
    }

    #[test]
    fn bytes_read_naturally() {
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(49152), "48 KiB");
        assert_eq!(bytes(1536 * 1024), "1.5 MiB");
    }
}
