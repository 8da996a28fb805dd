//! The class files of `cugrade grade`: `summary.md` (with its charts in `charts/`),
//! `grades.csv`, `integrity.csv` and the combined `junit.xml` (a student's own files are
//! written by `outputs`).

use super::charts::{self, cleared};
use super::describe::{self, status_symbol};
use super::gradebook::{self, integrity_csv};
use super::junit;
use super::markdown::inline;
use crate::integrity::Pair;
use crate::result::{CheckKind, GradeResult, Status};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io;
use std::path::Path;

/// Write `summary.md`, `charts/*.svg`, `grades.csv`, `junit.xml` and `integrity.csv` (from
/// `pairs`) into `out_dir` (created if missing), each atomically. Students are listed by name
/// (then id), whatever order `results` is in.
pub fn write_all_with(results: &[GradeResult], pairs: &[Pair], out_dir: &Path) -> io::Result<()> {
    use super::atomic::write;
    std::fs::create_dir_all(out_dir.join("charts"))?;
    let sorted = sorted(results);
    // Everything is rendered before anything is written: a failure leaves the previous files.
    let summary = summary_md_with(&sorted, pairs);
    // The charts say so when some totals lack their speed points (summary.md warns too).
    let speed = gradebook::measures_speed(&sorted);
    let provisional = sorted
        .iter()
        .any(|r| gradebook::speed_column(r, speed) == "no");
    let scores = charts::scores_svg(&sorted, provisional).map_err(io::Error::other)?;
    let (ids, pct) = cleared_rates(&sorted);
    let milestones = charts::milestones_svg(&ids, &pct, provisional).map_err(io::Error::other)?;
    let grades = grades_csv(&sorted)?;
    let integrity = integrity_csv(pairs, &sorted)?;
    let junit = junit::cohort_to_string(&sorted);
    write(&out_dir.join("charts/scores.svg"), scores)?;
    write(&out_dir.join("charts/milestones.svg"), milestones)?;
    write(&out_dir.join("integrity.csv"), integrity)?;
    write(&out_dir.join("junit.xml"), junit)?;
    write(&out_dir.join("grades.csv"), grades)?;
    write(&out_dir.join("summary.md"), summary)?;
    Ok(())
}

/// Per milestone column, the percentage of students who cleared it (see [`cleared`]).
fn cleared_rates(results: &[GradeResult]) -> (Vec<String>, Vec<f64>) {
    let ids = milestone_columns(results);
    let pct = ids
        .iter()
        .map(|id| {
            let ms: Vec<_> = results
                .iter()
                .filter_map(|r| r.milestones.iter().find(|m| &m.id == id))
                .collect();
            if ms.is_empty() {
                0.0
            } else {
                100.0 * ms.iter().filter(|m| cleared(m.status)).count() as f64 / ms.len() as f64
            }
        })
        .collect();
    (ids, pct)
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
    v.sort_by(|a, b| (&a.student, a.key()).cmp(&(&b.student, b.key())));
    v
}

pub use super::gradebook::{grades_csv, milestone_columns};

/// [`summary_md_with`] without integrity pairs.
pub fn summary_md(results: &[GradeResult]) -> String {
    summary_md_with(results, &[])
}

/// `summary.md`: counts, the charts, a students × milestones table with totals, per-milestone
/// pass counts and mean scores, the most common failure causes, an anonymised speed
/// leaderboard per performance check, and the pairs flagged for a second look.
pub fn summary_md_with(results: &[GradeResult], pairs: &[Pair]) -> String {
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

    // A correct result whose speed was not measured passed (the warning below says so).
    let count = |s: Status| {
        results
            .iter()
            .filter(|r| describe::shown_overall(r) == s)
            .count()
    };
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
    let speed = gradebook::measures_speed(results);
    let unmeasured = results
        .iter()
        .filter(|r| gradebook::speed_column(r, speed) == "no")
        .count();
    if unmeasured > 0 {
        let _ = writeln!(
            out,
            "> [!WARNING]\n> Speed was not measured for {unmeasured} of {} students (no GPU): \
             their totals are provisional, without performance points (`speed_measured` is \
             `no` in grades.csv).\n",
            results.len()
        );
    }
    let (_, refused) = gradebook::row_keys(results);
    if !refused.is_empty() {
        let list: Vec<String> = refused.iter().map(|k| format!("`{}`", inline(k))).collect();
        let _ = writeln!(
            out,
            "> [!CAUTION]\n> More than one submission's manifest claims the student id {}: \
             those rows of grades.csv use their cohort entry names instead.\n",
            list.join(", ")
        );
    }
    if !results.is_empty() {
        out.push_str(
            "![Total score](charts/scores.svg)\n![Milestones cleared](charts/milestones.svg)\n\n",
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
        // Entries of one name (`alice.cu`, `alice.zip`) are told apart by their ids.
        if r.key() == r.student {
            let _ = write!(out, "| {} |", inline(&r.student));
        } else {
            let _ = write!(out, "| {} ({}) |", inline(&r.student), inline(r.key()));
        }
        for id in &cols {
            match r.milestones.iter().find(|m| &m.id == id) {
                Some(m) => {
                    let _ = write!(
                        out,
                        " {} {} |",
                        status_symbol(describe::shown_status(m)),
                        describe::score(m.score)
                    );
                }
                None => out.push_str(" – |"),
            }
        }
        let _ = writeln!(out, " {} |", describe::score_of(r.score, r.max_score));
    }
    out.push('\n');

    out.push_str("| Milestone | Passed | Cleared | Mean score |\n| --- | ---: | ---: | ---: |\n");
    for id in &cols {
        let ms: Vec<_> = results
            .iter()
            .filter_map(|r| r.milestones.iter().find(|m| &m.id == id))
            .collect();
        let passed = ms
            .iter()
            .filter(|m| describe::shown_status(m) == Status::Pass)
            .count();
        let clear = ms.iter().filter(|m| cleared(m.status)).count();
        let max = ms.first().map(|m| m.max_score).unwrap_or(0.0);
        let mean = if ms.is_empty() {
            0.0
        } else {
            ms.iter().map(|m| m.score).sum::<f64>() / ms.len() as f64
        };
        let _ = writeln!(
            out,
            "| {} | {passed} / {} | {clear} / {} | {} |",
            inline(id),
            ms.len(),
            ms.len(),
            describe::score_of(mean, max)
        );
    }
    out.push_str(
        "\n*Passed*: every check passed (a correct kernel whose speed was not measured passes, \
         with its speed points still to come). *Cleared*: nothing failed or errored (a check \
         that could not run does not count against the student).\n",
    );
    super::causes::section(&mut out, results);
    leaderboard(&mut out, results);
    super::devices::section(&mut out, results);
    duplicates(&mut out, pairs);
    out
}

/// How many places each leaderboard shows.
const TOP_PLACES: usize = 10;

/// Per performance check that was measured for someone: the best values, without names. A
/// student learns where the class stands, not who is where.
fn leaderboard(out: &mut String, results: &[GradeResult]) {
    // (rubric position, milestone, check) -> (measured values, unit)
    type Boards = BTreeMap<(usize, String, String), (Vec<f64>, Option<String>)>;
    let mut boards = Boards::new();
    let cols = milestone_columns(results);
    for r in results {
        for m in &r.milestones {
            for c in m.checks.iter().filter(|c| {
                c.kind == CheckKind::Performance && matches!(c.status, Status::Pass | Status::Fail)
            }) {
                let Some(v) = c.measured.filter(|v| v.is_finite()) else {
                    continue;
                };
                let order = cols.iter().position(|id| id == &m.id).unwrap_or(usize::MAX);
                let e = boards
                    .entry((order, m.id.clone(), c.name.clone()))
                    .or_insert_with(|| (vec![], c.unit.clone()));
                e.0.push(v);
            }
        }
    }
    if boards.is_empty() {
        return;
    }
    out.push_str("\n## Speed leaderboard (anonymised)\n");
    for ((_, id, name), (mut values, unit)) in boards {
        values.sort_by(|a, b| b.total_cmp(a));
        let _ = writeln!(
            out,
            "\n**{}**, {} ({} students measured; median {})\n\n| Place | Measured |\n| ---: | ---: |",
            inline(&id),
            inline(&name),
            values.len(),
            describe::quantity(crate::measure::median(&values), unit.as_deref())
        );
        for (i, v) in values.iter().take(TOP_PLACES).enumerate() {
            let _ = writeln!(
                out,
                "| {} | {} |",
                i + 1,
                describe::quantity(*v, unit.as_deref())
            );
        }
    }
}

fn duplicates(out: &mut String, pairs: &[Pair]) {
    out.push_str("\n## Duplicates\n\n");
    if pairs.is_empty() {
        out.push_str(
            "No pair of submissions is identical or near-identical after normalization.\n",
        );
        return;
    }
    let _ = writeln!(
        out,
        "{} pairs are identical or near-identical once comments, layout and names are taken \
         away (the reference kernels and starter code excluded). These are flags for a second \
         look, never verdicts: see integrity.csv and docs/integrity.md.\n\n\
         | Students | Similarity | Matching lines |\n| --- | ---: | --- |",
        pairs.len()
    );
    for p in pairs {
        let lines = |v: &[String]| {
            let mut s = v.iter().take(4).cloned().collect::<Vec<_>>().join(", ");
            if v.len() > 4 {
                s.push_str(", …");
            }
            s
        };
        let _ = writeln!(
            out,
            "| {} and {} | {:.0} %{} | {} / {} |",
            inline(&p.a),
            inline(&p.b),
            p.similarity * 100.0,
            if p.identical { " (identical)" } else { "" },
            inline(&lines(&p.lines_a)),
            inline(&lines(&p.lines_b))
        );
    }
}
