//! The cohort's CSV files: `grades.csv` for the gradebook (docs/gradebook.md maps it to Canvas
//! and Moodle imports) and `integrity.csv` for the pairs worth a second look.

use super::describe;
use super::gradescope::speed_measured;
use crate::integrity::Pair;
use crate::result::GradeResult;
use std::collections::HashMap;
use std::io;

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

/// Whether any result has performance checks: then the rubric measures speed, even for a
/// student whose run stopped before any (a compile error).
pub fn measures_speed(results: &[GradeResult]) -> bool {
    results
        .iter()
        .flat_map(|r| &r.milestones)
        .any(|m| speed_measured(m).is_some())
}

/// `yes` when speed was measured for every milestone that has performance checks, `no` when
/// it was not (no GPU, or a speed check was skipped: the total is provisional, without speed
/// points), `n/a` when the rubric measures no speed at all (`rubric_measures_speed`, from
/// [`measures_speed`] over the cohort).
pub fn speed_column(r: &GradeResult, rubric_measures_speed: bool) -> &'static str {
    let measured: Vec<bool> = r.milestones.iter().filter_map(speed_measured).collect();
    if !rubric_measures_speed && measured.is_empty() {
        "n/a"
    } else if r.run.timed && measured.iter().all(|m| *m) {
        "yes"
    } else {
        "no"
    }
}

/// The gradebook key of each result: the cohort entry's name (`grade` never takes one from a
/// student's manifest). A result with `student_id` (written by an older cugrade, which took it
/// from the manifest) keeps it only where no other row uses it: those rows fall back to their
/// entry names (and the entry literally named so keeps it). Returns one key per result, in
/// order, and the ids that were refused.
pub fn row_keys(results: &[GradeResult]) -> (Vec<String>, Vec<String>) {
    let mut keys: Vec<String> = results
        .iter()
        .map(|r| r.student_id.clone().unwrap_or_else(|| r.student.clone()))
        .collect();
    let mut refused = Vec::new();
    // Falling back can make a new clash (an entry named like another's claim): repeat until
    // no claimed id is shared. Entry names are unique, so this ends.
    loop {
        let mut uses: HashMap<&str, usize> = HashMap::new();
        for k in &keys {
            *uses.entry(k.as_str()).or_default() += 1;
        }
        let clashes: Vec<usize> = (0..results.len())
            .filter(|&i| {
                keys[i] != results[i].student && uses.get(keys[i].as_str()).copied() > Some(1)
            })
            .collect();
        if clashes.is_empty() {
            break;
        }
        for i in clashes {
            if !refused.contains(&keys[i]) {
                refused.push(keys[i].clone());
            }
            keys[i] = results[i].student.clone();
        }
    }
    (keys, refused)
}

/// `grades.csv`: `student` (the gradebook key), one column per milestone, `total`,
/// `max_score`, `speed_measured`, `status`, `entry` (the cohort entry the row came from, as
/// named in the cohort folder) and `id` (the row's unique key: the student's folder in
/// `<out>/students/`).
/// Scores are plain numbers; an empty cell where a student has no such milestone.
pub fn grades_csv(results: &[GradeResult]) -> io::Result<String> {
    let cols = milestone_columns(results);
    let (keys, _) = row_keys(results);
    let speed = measures_speed(results);
    let mut w = csv::Writer::from_writer(Vec::new());
    let mut header = vec!["student".to_string()];
    header.extend(cols.iter().cloned());
    for h in [
        "total",
        "max_score",
        "speed_measured",
        "status",
        "entry",
        "id",
    ] {
        header.push(h.to_string());
    }
    w.write_record(&header).map_err(io::Error::other)?;
    for (r, key) in results.iter().zip(keys) {
        let mut row = vec![spreadsheet_safe(&key)];
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
        row.push(describe::score(r.max_score));
        row.push(speed_column(r, speed).to_string());
        // A correct result whose speed was not measured is a pass (`speed_measured` says no).
        row.push(describe::shown_overall(r).as_str().to_string());
        row.push(spreadsheet_safe(if r.entry.is_empty() {
            &r.student
        } else {
            &r.entry
        }));
        row.push(spreadsheet_safe(r.key()));
        w.write_record(&row).map_err(io::Error::other)?;
    }
    finish(w)
}

/// `integrity.csv`: `student_a`, `student_b` (cohort entries), `similarity` (0 to 1),
/// `identical` (after normalization), `lines_a` and `lines_b` (`file:first-last`, `; `
/// between ranges) for each near-identical pair; then `flag` (`similar` on those rows) and
/// `details`. After the pairs, one row per flag a student's result carries (device code that
/// reads timers or SM ids, large `__device__` arrays, emulator and GPU runs that disagree):
/// `student_a` the student's id (as grades.csv's `id`), `lines_a` where, `flag` its key, `details` what was seen. A header
/// even when nothing was flagged.
pub fn integrity_csv(pairs: &[Pair], results: &[GradeResult]) -> io::Result<String> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record([
        "student_a",
        "student_b",
        "similarity",
        "identical",
        "lines_a",
        "lines_b",
        "flag",
        "details",
    ])
    .map_err(io::Error::other)?;
    for p in pairs {
        w.write_record([
            spreadsheet_safe(&p.a),
            spreadsheet_safe(&p.b),
            format!("{:.2}", p.similarity),
            if p.identical { "yes" } else { "no" }.to_string(),
            spreadsheet_safe(&p.lines_a.join("; ")),
            spreadsheet_safe(&p.lines_b.join("; ")),
            "similar".to_string(),
            String::new(),
        ])
        .map_err(io::Error::other)?;
    }
    let mut sorted: Vec<&GradeResult> = results.iter().collect();
    sorted.sort_by(|a, b| (&a.student, a.key()).cmp(&(&b.student, b.key())));
    for r in sorted {
        for f in &r.flags {
            let details = match &f.milestone {
                Some(m) => format!("{m}: {}", f.message),
                None => f.message.clone(),
            };
            w.write_record([
                spreadsheet_safe(r.key()),
                String::new(),
                String::new(),
                String::new(),
                spreadsheet_safe(f.location.as_deref().unwrap_or("")),
                String::new(),
                f.kind.clone(),
                spreadsheet_safe(&details),
            ])
            .map_err(io::Error::other)?;
        }
    }
    finish(w)
}

fn finish(w: csv::Writer<Vec<u8>>) -> io::Result<String> {
    let bytes = w
        .into_inner()
        .map_err(|e| io::Error::other(e.to_string()))?;
    String::from_utf8(bytes).map_err(io::Error::other)
}

/// Student names come from directory names and manifests, which students control; a name that
/// starts like a formula would run as one when the CSV is opened in a spreadsheet (OWASP "CSV
/// injection"), so it gets a leading apostrophe.
pub fn spreadsheet_safe(name: &str) -> String {
    if name.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        format!("'{name}")
    } else {
        name.to_string()
    }
}
