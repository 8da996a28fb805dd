//! The class-wide files of `cugrade grade`: `summary.md`, `grades.csv` and the combined
//! `junit.xml`. (The per-student files are written by the caller with the other modules.)

use super::describe::{self, status_symbol};
use super::junit;
use super::markdown::inline;
use crate::result::{GradeResult, Status};
use std::fmt::Write as _;
use std::io;
use std::path::Path;

/// Write `summary.md`, `grades.csv` and `junit.xml` into `out_dir` (created if missing).
/// Students are listed by name, whatever order `results` is in.
pub fn write_all(results: &[GradeResult], out_dir: &Path) -> io::Result<()> {
    std::fs::create_dir_all(out_dir)?;
    let sorted = sorted(results);
    std::fs::write(out_dir.join("summary.md"), summary_md(&sorted))?;
    std::fs::write(out_dir.join("grades.csv"), grades_csv(&sorted)?)?;
    std::fs::write(out_dir.join("junit.xml"), junit::cohort_to_string(&sorted))?;
    Ok(())
}

fn sorted(results: &[GradeResult]) -> Vec<GradeResult> {
    let mut v = results.to_vec();
    v.sort_by(|a, b| a.student.cmp(&b.student));
    v
}

/// Milestone ids over all results, in rubric order of first appearance: a student whose run
/// stopped early still lines up with the others.
pub fn milestone_columns(results: &[GradeResult]) -> Vec<String> {
    let mut cols: Vec<String> = Vec::new();
    for r in results {
        for m in &r.milestones {
            if !cols.contains(&m.id) {
                cols.push(m.id.clone());
            }
        }
    }
    cols
}

/// `grades.csv`: a header row (`student`, one column per milestone, `total`), then one row per
/// student with scores as plain numbers; an empty cell where a student has no such milestone.
pub fn grades_csv(results: &[GradeResult]) -> io::Result<String> {
    let cols = milestone_columns(results);
    let mut w = csv::Writer::from_writer(Vec::new());
    let mut header = vec!["student".to_string()];
    header.extend(cols.iter().cloned());
    header.push("total".to_string());
    w.write_record(&header).map_err(io::Error::other)?;
    for r in results {
        let mut row = vec![spreadsheet_safe(&r.student)];
        for id in &cols {
            row.push(
                r.milestones
                    .iter()
                    .find(|m| &m.id == id)
                    .map(|m| describe::score(m.score))
                    .unwrap_or_default(),
            );
        }
        row.push(describe::score(r.score));
        w.write_record(&row).map_err(io::Error::other)?;
    }
    let bytes = w
        .into_inner()
        .map_err(|e| io::Error::other(e.to_string()))?;
    String::from_utf8(bytes).map_err(io::Error::other)
}

/// Student names come from directory names and manifests, which students control; a name that
/// starts like a formula would run as one when the CSV is opened in a spreadsheet (OWASP "CSV
/// injection"), so it gets a leading apostrophe.
fn spreadsheet_safe(name: &str) -> String {
    if name.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        format!("'{name}")
    } else {
        name.to_string()
    }
}

/// `summary.md`: counts, then a students × milestones table with totals, then per-milestone
/// pass counts and mean scores.
pub fn summary_md(results: &[GradeResult]) -> String {
    let cols = milestone_columns(results);
    let mut out = String::new();
    let mut assignments: Vec<&str> = results.iter().map(|r| r.assignment.as_str()).collect();
    assignments.sort_unstable();
    assignments.dedup();
    let _ = writeln!(
        out,
        "# {}: cohort summary\n",
        inline(&assignments.join(", "))
    );

    let count = |s: Status| results.iter().filter(|r| r.status() == s).count();
    let _ = writeln!(
        out,
        "{} students: {} passed everything, {} failed a check, {} hit an error, {} were partly \
         skipped.\n",
        results.len(),
        count(Status::Pass),
        count(Status::Fail),
        count(Status::Error),
        count(Status::Skipped)
    );
    if results.iter().any(|r| !r.run.timed) {
        out.push_str(
            "> [!NOTE]\n> Speed was not measured for some or all students (no GPU): their \
             performance checks were skipped.\n\n",
        );
    }

    out.push_str("| Student |");
    for c in &cols {
        let _ = write!(out, " {} |", inline(c));
    }
    out.push_str(" Total |\n| --- |");
    for _ in &cols {
        out.push_str(" :---: |");
    }
    out.push_str(" ---: |\n");
    for r in results {
        let _ = write!(out, "| {} |", inline(&r.student));
        for id in &cols {
            match r.milestones.iter().find(|m| &m.id == id) {
                Some(m) => {
                    let _ = write!(
                        out,
                        " {} {} |",
                        status_symbol(m.status),
                        describe::score(m.score)
                    );
                }
                None => out.push_str(" – |"),
            }
        }
        let _ = writeln!(out, " {} |", describe::score_of(r.score, r.max_score));
    }
    out.push('\n');

    out.push_str("| Milestone | Passed | Mean score |\n| --- | ---: | ---: |\n");
    for id in &cols {
        let ms: Vec<_> = results
            .iter()
            .filter_map(|r| r.milestones.iter().find(|m| &m.id == id))
            .collect();
        let passed = ms.iter().filter(|m| m.status == Status::Pass).count();
        let max = ms.first().map(|m| m.max_score).unwrap_or(0.0);
        let mean = if ms.is_empty() {
            0.0
        } else {
            ms.iter().map(|m| m.score).sum::<f64>() / ms.len() as f64
        };
        let _ = writeln!(
            out,
            "| {} | {passed} / {} | {} |",
            inline(id),
            ms.len(),
            describe::score_of(mean, max)
        );
    }
    out
}
