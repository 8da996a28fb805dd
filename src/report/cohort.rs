//! The files of `cugrade grade`: per student `<student>/result.json`, `report.md` and
//! `junit.xml`; for the class `summary.md`, `grades.csv` and the combined `junit.xml`.

use super::describe::{self, status_symbol};
use super::markdown::inline;
use super::{json, junit, markdown};
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

/// Write one student's `result.json`, `report.md` and `junit.xml` into
/// `out_dir/<safe_dir_name(student)>/` and return that directory.
pub fn write_student(r: &GradeResult, out_dir: &Path) -> io::Result<std::path::PathBuf> {
    let dir = out_dir.join(safe_dir_name(&r.student));
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("report.md"), markdown::render(r))?;
    std::fs::write(dir.join("junit.xml"), junit::to_string(r))?;
    // Last, and atomically: `--resume` treats an existing result.json as "graded".
    json::write(r, &dir.join("result.json"))?;
    Ok(dir)
}

/// A directory name for a student that cannot leave `out_dir` or hide: student names can come
/// from a manifest the student wrote. Letters, digits, `.`, `_` and `-` are kept, anything
/// else becomes `_`; a leading `.` becomes `_`; the result is never empty and at most 100
/// bytes. Distinct names can map to one directory name; callers key students by their cohort
/// entry, which the file system already made unique.
pub fn safe_dir_name(student: &str) -> String {
    let mut name: String = student
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if name.starts_with('.') {
        name.replace_range(..1, "_");
    }
    if name.is_empty() {
        name.push('_');
    }
    let mut end = name.len().min(100);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    name.truncate(end);
    name
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
