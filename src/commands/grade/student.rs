//! One student of the cohort: their entry read and checked against the rubric, graded (or
//! their earlier result reused under `--resume`), then their folder written.

use super::Outcome;
use super::entries::Entry;
use super::unread::{Unread, read_entry, unreadable};
use crate::integrity::{self, Fingerprints};
use crate::pipeline::{self, Reference};
use crate::report::outputs::Outputs;
use crate::result::GradeResult;
use crate::rubric::LoadedRubric;
use crate::submission;
use std::collections::HashSet;
use std::path::Path;

/// What every student of a run shares.
pub(super) struct EntryContext<'a> {
    pub(super) rubric: &'a LoadedRubric,
    pub(super) rubric_hash: &'a str,
    /// Where archives are unpacked, one folder per id.
    pub(super) unpack: &'a Path,
    /// `<out>/students`.
    pub(super) students: &'a Path,
    pub(super) resume: bool,
    pub(super) common: &'a HashSet<u64>,
}

/// A student graded, waiting to be written (after compute-sanitizer's pass, when deferred).
pub(super) struct Held<'e> {
    pub(super) entry: &'e Entry,
    /// Taken out when the batch is finished.
    pub(super) graded: Option<pipeline::Graded>,
    pub(super) prints: Fingerprints,
    pub(super) outcome: Outcome,
}

pub(super) fn grade_entry<'e>(
    entry: &'e Entry,
    ctx: &EntryContext<'_>,
    o: &pipeline::Options,
    reference: &mut Reference,
) -> Result<Held<'e>, String> {
    let rubric = ctx.rubric;
    let loaded = read_entry(entry, ctx.unpack, &o.protected);
    let loaded = loaded.and_then(|s| {
        submission::check_against(&s, rubric)
            .map(|_| s)
            .map_err(|e| Unread::unreadable(e.to_string()))
    });
    let student = entry.student.clone();
    // The cohort entry names the student, in the outputs and in the gradebook, never the
    // manifest: a student could otherwise claim another's name or gradebook id and fill their
    // row (issue 32). The instructor names the entries (an LMS export's folders).
    let loaded = loaded.map(|mut s| {
        // Only a manifest that names someone else earns a note; a bare file's own name
        // needs none.
        if s.manifest.student.is_some() && s.student != student {
            s.notes.push(format!(
                "the manifest names the student `{}`; graded as cohort entry `{student}`",
                s.student
            ));
        }
        s.student = student.clone();
        s
    });
    let folder = ctx.students.join(&entry.id);
    let mut prints = Fingerprints::default();
    let mut outcome = Outcome::Graded;
    let graded = match loaded {
        Err(why) => pipeline::Graded {
            result: unreadable(rubric, &student, &why, o.seed, o.backend.as_str()),
            deferred: None,
        },
        Ok(sub) => {
            prints = fingerprints_of(&sub, ctx.common);
            let previous = ctx
                .resume
                .then(|| crate::report::json::read(&folder.join("result.json")).ok())
                .flatten()
                .filter(|r| r.submission_sha256 == sub.sha256);
            let reuse = previous.filter(|r| {
                let same = r.assignment == rubric.rubric.assignment
                    && r.rubric_sha256 == ctx.rubric_hash
                    && r.run.cugrade_version == env!("CARGO_PKG_VERSION")
                    && r.backend == o.backend.as_str();
                if !same {
                    outcome = Outcome::Regraded;
                }
                same
            });
            match reuse {
                Some(r) => {
                    outcome = Outcome::Reused;
                    pipeline::Graded {
                        result: r,
                        deferred: None,
                    }
                }
                None => {
                    pipeline::grade_deferring(rubric, &sub, o, reference, true).map_err(|e| e.0)?
                }
            }
        }
    };
    Ok(Held {
        entry,
        graded: Some(graded),
        prints,
        outcome,
    })
}

/// Write a student's files: their fingerprints, then every report ([`Outputs::folder`]).
pub(super) fn write_entry(
    entry: &Entry,
    ctx: &EntryContext<'_>,
    mut result: GradeResult,
    prints: Fingerprints,
    outcome: Outcome,
) -> Result<(GradeResult, Fingerprints, Outcome), String> {
    // A worker ended by Ctrl-C or SIGTERM looks like a failing submission: write nothing (the
    // interrupt handler exits the grader meanwhile), so that `--resume` grades it again.
    crate::worker::interrupt::wait_if_interrupted();
    let folder = ctx.students.join(&entry.id);
    result.id = entry.id.clone();
    result.entry = entry.name.clone();
    result.rubric_sha256 = ctx.rubric_hash.to_string();
    // Fresh or reused (`--resume` of an older run's result.json), every file written here and
    // every class report shows the student's text cut the same way.
    crate::report::caps::cap_student_text(&mut result);
    std::fs::create_dir_all(&folder)
        .map_err(|e| format!("cannot create {}: {e}", folder.display()))?;
    let prints_at = folder.join("fingerprints.json");
    let text = serde_json::to_string(&prints).map_err(|e| e.to_string())? + "\n";
    crate::report::atomic::write(&prints_at, text)
        .map_err(|e| format!("cannot write {}: {e}", prints_at.display()))?;
    Outputs::folder(&folder).write(&mut result, outcome != Outcome::Reused)?;
    Ok((result, prints, outcome))
}

/// A submission's fingerprints (all its source files, headers and PTX).
fn fingerprints_of(sub: &submission::Submission, common: &HashSet<u64>) -> Fingerprints {
    let sources: Vec<integrity::Source<'_>> = sub
        .sources
        .iter()
        .chain(&sub.headers)
        .chain(&sub.ptx)
        .map(|f| integrity::Source {
            name: &f.name,
            text: &f.text,
        })
        .collect();
    integrity::fingerprint(&sources, common)
}
