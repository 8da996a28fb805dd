//! One pass that bounds every string of a result a student can make long, before any report
//! is written.
//!
//! Check messages and details carry what the student's process said: printed output,
//! exception text, Numba's and NVRTC's logs, CuPy tracebacks, the student's own source lines.
//! Each report caps some of it as it writes (Markdown and JUnit at [`DETAILS_CAP`]), but
//! result.json and Gradescope's results.json wrote it whole: one run's exception messages made a
//! 60 MB result.json. [`cap_student_text`] cuts every such string once, where the result is
//! made (`check`, `grade`, a result read back by `--resume` or `merge`), so every output shows
//! the same text and says where it was cut (`[truncated: N more bytes]`).

use super::sanitize::{DETAILS_CAP, LINE_CAP, truncate};
use crate::result::{Check, GradeResult};

/// Student text one result may carry in check details altogether: beyond it, later details
/// keep [`SPENT_DETAILS`] bytes each. A rubric with many cases cannot multiply [`DETAILS_CAP`]
/// into a result too big to open.
pub const RESULT_DETAILS_BUDGET: usize = 256 * 1024;
/// What a check's details keep once the result's budget is spent.
pub const SPENT_DETAILS: usize = 2 * 1024;
/// Longest compile log kept in `compile.log`.
pub const LOG_CAP: usize = 32 * 1024;
/// Most notes and flags a result keeps; the rest are counted in a last note.
pub const MAX_NOTES: usize = 64;
pub const MAX_FLAGS: usize = 256;

/// Room for the marker a cut appends: text at most this much over its cap was cut already
/// (or nearly fits) and is left alone, so that a second pass changes nothing.
const MARKER_ROOM: usize = 256;

fn cap(s: &mut String, max: usize) {
    if s.len() > max + MARKER_ROOM {
        *s = truncate(s, max).into_owned();
    }
}

fn cap_opt(s: &mut Option<String>, max: usize) {
    if let Some(s) = s {
        cap(s, max);
    }
}

/// The one-line fields of a check, and its details within `budget` (what is left of the
/// result's; reduced by what these details keep).
fn cap_check(c: &mut Check, budget: &mut usize) {
    cap(&mut c.name, LINE_CAP);
    cap(&mut c.message, LINE_CAP);
    cap_opt(&mut c.hint, LINE_CAP);
    cap_opt(&mut c.location, LINE_CAP);
    cap_opt(&mut c.case, LINE_CAP);
    cap_opt(&mut c.cause, LINE_CAP);
    cap_opt(&mut c.unit, LINE_CAP);
    if let Some(s) = &mut c.snippet {
        cap(&mut s.text, LINE_CAP);
    }
    if let Some(d) = &mut c.details {
        let room = if *budget >= SPENT_DETAILS {
            DETAILS_CAP.min(*budget)
        } else {
            SPENT_DETAILS
        };
        if d.len() > room + MARKER_ROOM {
            let note = if room < DETAILS_CAP {
                "\n(the result's room for such text is spent: earlier checks show more)"
            } else {
                ""
            };
            *d = format!("{}{note}", truncate(d, room));
        }
        *budget = budget.saturating_sub(d.len());
    }
}

/// Cap every string of `r` that the student's files or processes can make long. Idempotent:
/// a capped result is unchanged by a second pass.
pub fn cap_student_text(r: &mut GradeResult) {
    cap(&mut r.student, LINE_CAP);
    cap_opt(&mut r.student_id, LINE_CAP);
    let mut budget = RESULT_DETAILS_BUDGET;
    for m in &mut r.milestones {
        cap(&mut m.kernel, LINE_CAP);
        for c in &mut m.checks {
            cap_check(c, &mut budget);
        }
    }
    if let Some(compile) = &mut r.compile {
        cap(&mut compile.log, LOG_CAP);
        for k in &mut compile.kernels {
            cap(&mut k.name, LINE_CAP);
        }
    }
    // Flags first: their count goes into a note, which the notes' own cap then covers.
    if r.flags.len() > MAX_FLAGS {
        let cut = r.flags.len() - MAX_FLAGS;
        r.flags.truncate(MAX_FLAGS);
        r.notes
            .push(format!("[cut: {cut} more flags for the instructor]"));
    }
    for f in &mut r.flags {
        cap(&mut f.message, LINE_CAP);
        cap_opt(&mut f.location, LINE_CAP);
        cap_opt(&mut f.milestone, LINE_CAP);
    }
    cap_list(&mut r.notes, MAX_NOTES);
    for n in &mut r.notes {
        cap(n, LINE_CAP);
    }
    for n in &mut r.run.notes {
        cap(n, LINE_CAP);
    }
}

/// Keep the first `max - 1` entries of a long list and say how many more there were.
fn cap_list(v: &mut Vec<String>, max: usize) {
    if v.len() > max {
        let cut = v.len() - (max - 1);
        v.truncate(max - 1);
        v.push(format!("[cut: {cut} more notes]"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::{CheckKind, MilestoneResult, Status};

    fn result_with(checks: Vec<Check>) -> GradeResult {
        GradeResult {
            assignment: "a".into(),
            student: "s".into(),
            student_id: None,
            id: String::new(),
            entry: String::new(),
            backend: "emu".into(),
            seed: 1,
            score: 0.0,
            max_score: 1.0,
            milestones: vec![MilestoneResult {
                id: "m".into(),
                title: "m".into(),
                status: Status::Fail,
                score: 0.0,
                max_score: 1.0,
                checks,
                kernel: "k".into(),
                provisional: false,
            }],
            submission_sha256: String::new(),
            rubric_sha256: String::new(),
            compile: None,
            run: Default::default(),
            notes: vec![],
            flags: vec![],
        }
    }

    fn flood(n: usize) -> Check {
        Check::fail(
            CheckKind::Correctness,
            "c",
            "raised ".to_string() + &"x".repeat(n),
        )
        .with_details("y".repeat(n))
    }

    #[test]
    fn long_messages_and_details_are_cut_and_say_so() {
        let mut r = result_with(vec![flood(50 << 20)]);
        cap_student_text(&mut r);
        let c = &r.milestones[0].checks[0];
        assert!(
            c.message.len() < LINE_CAP + MARKER_ROOM,
            "{}",
            c.message.len()
        );
        assert!(
            c.message.ends_with("more bytes]"),
            "{}",
            &c.message[c.message.len() - 40..]
        );
        let d = c.details.as_deref().unwrap();
        assert!(d.len() < DETAILS_CAP + MARKER_ROOM);
        assert!(d.contains("[truncated: "));
        let once = r.clone();
        cap_student_text(&mut r);
        assert_eq!(r, once, "a second pass changes nothing");
    }

    #[test]
    fn many_long_details_share_one_budget() {
        let mut r = result_with((0..100).map(|_| flood(1 << 20)).collect());
        cap_student_text(&mut r);
        let total: usize = r.milestones[0]
            .checks
            .iter()
            .map(|c| c.details.as_deref().unwrap_or("").len() + c.message.len())
            .sum();
        assert!(
            total < 1 << 20,
            "{total} bytes of student text in one result"
        );
        let last = r.milestones[0].checks[99].details.as_deref().unwrap();
        assert!(last.contains("room for such text is spent"), "{last}");
    }

    #[test]
    fn notes_and_flags_are_bounded_in_number() {
        let mut r = result_with(vec![]);
        r.notes = (0..1000).map(|i| format!("note {i}")).collect();
        cap_student_text(&mut r);
        assert_eq!(r.notes.len(), MAX_NOTES);
        assert_eq!(r.notes.last().unwrap(), "[cut: 937 more notes]");
    }
}
