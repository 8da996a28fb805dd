//! A cohort entry that cannot be graded at all (a link, a special file, an archive that does
//! not unpack, a folder without sources, a bad manifest): why, with a cause key for the class
//! summary, and the all-zero result that says so in every milestone.

use super::entries::{Entry, Kind as EntryKind};
use crate::result::{Check, CheckKind, GradeResult, MilestoneResult, Status};
use crate::rubric::{self, LoadedRubric};
use crate::submission::{self, Submission};
use std::path::{Path, PathBuf};

/// Why a cohort entry could not be graded at all: a message for the student, and its cause
/// key for the class summary (`causes::UNREADABLE` or `causes::EMPTY`).
pub struct Unread {
    pub why: String,
    pub cause: &'static str,
}

impl Unread {
    pub(super) fn unreadable(why: impl Into<String>) -> Self {
        Unread {
            why: why.into(),
            cause: crate::report::causes::UNREADABLE,
        }
    }
}

/// The result for a submission that could not be graded at all.
pub fn unreadable(
    rubric: &LoadedRubric,
    student: &str,
    unread: &Unread,
    seed: u64,
    backend: &str,
) -> GradeResult {
    let message = if unread.cause == crate::report::causes::EMPTY {
        format!("the submission has no source file: {}", unread.why)
    } else {
        format!("the submission could not be read: {}", unread.why)
    };
    let milestones = rubric
        .rubric
        .milestones
        .iter()
        .map(|m| MilestoneResult {
            id: m.id.clone(),
            title: m.display_title(),
            status: Status::Error,
            score: 0.0,
            max_score: rubric::milestone_max(m),
            provisional: false,
            checks: vec![
                Check::error(CheckKind::Compile, "submission", message.clone())
                    .with_cause(unread.cause),
            ],
            kernel: m.kernel.clone(),
        })
        .collect();
    GradeResult {
        assignment: rubric.rubric.assignment.clone(),
        student: student.to_string(),
        student_id: None,
        id: String::new(),
        entry: String::new(),
        backend: backend.to_string(),
        seed,
        score: 0.0,
        max_score: rubric.max_score(),
        milestones,
        submission_sha256: String::new(),
        rubric_sha256: String::new(),
        compile: None,
        run: Default::default(),
        notes: vec![],
        flags: vec![],
    }
}

/// Read a cohort entry into a submission; `Err` is the student's message.
pub(super) fn read_entry(
    entry: &Entry,
    unpack: &Path,
    protected: &[PathBuf],
) -> Result<Submission, Unread> {
    let path = match entry.kind {
        EntryKind::Link => {
            return Err(Unread::unreadable(format!(
                "the cohort entry `{}` is a symbolic link; cugrade does not follow links in a \
                 cohort (copy the submission itself into the cohort folder)",
                entry.name
            )));
        }
        EntryKind::Special => {
            return Err(Unread::unreadable(format!(
                "the cohort entry `{}` is not a regular file or folder (a FIFO, socket or \
                 device); it was not opened",
                entry.name
            )));
        }
        EntryKind::Archive(_) => {
            submission::unpack(&entry.path, &unpack.join(&entry.id), protected)
                .map_err(Unread::unreadable)?
        }
        EntryKind::Dir | EntryKind::File => entry.path.clone(),
    };
    submission::load(&path).map_err(|e| match e {
        submission::SubmissionError::Empty(why) => Unread {
            why,
            cause: crate::report::causes::EMPTY,
        },
        e => Unread::unreadable(e.to_string()),
    })
}
