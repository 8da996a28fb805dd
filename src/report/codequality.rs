//! GitLab's Code Quality report (`check --codequality FILE`; the GitLab templates name it
//! `gl-code-quality-report.json` under `artifacts: reports: codequality:`): the subset of
//! CodeClimate's issue format that GitLab reads, one issue per finding that failed or errored
//! (as GitHub's annotations, [`super::terminal::github_in`]), so that a merge request shows
//! them in its Code Quality widget and beside the diff's lines.
//!
//! Each issue: `description` (milestones › check: the message's first line, with its hint),
//! `check_name` (`cugrade/<kind>[/<cause>]`), `fingerprint` (stable across runs: the
//! milestones, the check, the kind and cause, the file and line; never the message, whose
//! numbers change with the seed; unique in the report), `severity` (`major` for a failed check,
//! `critical` for one that errored), `location.path` (relative to the repository's root, as
//! GitLab wants it) and `location.lines.begin`. A finding without a source line is placed at
//! line 1 of the submission's first file (its `cugrade.yaml`, else its first source), since
//! GitLab requires a location.

use super::describe;
use super::findings::{self, Shared};
use super::sanitize::one_line;
use crate::result::{GradeResult, Status};
use serde::Serialize;
use std::collections::HashSet;

#[derive(Serialize)]
struct Lines {
    begin: u32,
}

#[derive(Serialize)]
struct Location {
    path: String,
    lines: Lines,
}

#[derive(Serialize)]
struct Issue {
    description: String,
    check_name: String,
    fingerprint: String,
    severity: &'static str,
    location: Location,
}

/// A description stays readable in GitLab's widget.
const DESCRIPTION_CAP: usize = 1000;

/// A student's file name as a repository path: `dir/file`, or `None` when it is not a plain
/// relative path (absolute, `..`, empty).
fn repo_path(dir: &str, file: &str) -> Option<String> {
    let file = one_line(file);
    let plain = !file.is_empty()
        && !file.starts_with('/')
        && file.split('/').all(|p| !p.is_empty() && p != "..");
    plain.then(|| {
        let file = file.trim_start_matches("./");
        let dir = dir.trim_end_matches('/');
        if dir.is_empty() || dir == "." {
            file.to_string()
        } else {
            format!("{dir}/{file}")
        }
    })
}

fn fingerprint(parts: &[&str]) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update([0]);
    }
    h.finalize()
        .iter()
        .take(16)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The report for `r`: `dir` is the submission's folder relative to the repository's root
/// ([`super::output::repo_relative`]), `fallback` the submission's file that findings without
/// a line are placed in.
pub fn to_string(r: &GradeResult, dir: &str, fallback: &str) -> String {
    let mut issues = Vec::new();
    let mut seen = HashSet::new();
    for p in findings::placed(r).iter().flatten() {
        let f = &p.finding;
        let c = f.check;
        if !describe::is_problem(c) {
            continue;
        }
        let mut ids = vec![p.milestone.id.as_str()];
        match &p.shared {
            Shared::Repeat { .. } => continue,
            Shared::First { also } => ids.extend(also),
            Shared::Alone => {}
        }
        let at = c.location.as_deref().map(describe::location);
        let (path, line) = match at.and_then(|l| repo_path(dir, l.file).map(|p| (p, l.line))) {
            Some((path, line)) => (path, line.unwrap_or(1).max(1)),
            None => (
                repo_path(dir, fallback).unwrap_or_else(|| "cugrade.yaml".into()),
                1,
            ),
        };
        let milestones = ids
            .iter()
            .map(|i| one_line(i))
            .collect::<Vec<_>>()
            .join(", ");
        let name = one_line(&findings::display_name(f));
        let mut description = format!(
            "{milestones} › {name}: {}",
            one_line(c.message.lines().next().unwrap_or(""))
        );
        if let Some(h) = &c.hint {
            description.push_str(&format!(" (hint: {})", one_line(h)));
        }
        if description.len() > DESCRIPTION_CAP {
            let mut end = DESCRIPTION_CAP;
            while !description.is_char_boundary(end) {
                end -= 1;
            }
            description.truncate(end);
            description.push('…');
        }
        let kind = c.kind.as_str();
        let check_name = match c.cause.as_deref() {
            Some(cause) => format!("cugrade/{kind}/{}", one_line(cause)),
            None => format!("cugrade/{kind}"),
        };
        let line_text = line.to_string();
        let mut print = fingerprint(&[&milestones, &name, &check_name, &path, &line_text]);
        // Unique in the report: GitLab keeps one issue per fingerprint.
        let mut n = 1;
        while !seen.insert(print.clone()) {
            n += 1;
            print = fingerprint(&[
                &milestones,
                &name,
                &check_name,
                &path,
                &line_text,
                &n.to_string(),
            ]);
        }
        issues.push(Issue {
            description,
            check_name,
            fingerprint: print,
            severity: if c.status == Status::Error {
                "critical"
            } else {
                "major"
            },
            location: Location {
                path,
                lines: Lines { begin: line },
            },
        });
    }
    serde_json::to_string_pretty(&issues).unwrap_or_else(|_| "[]".into()) + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_plain_and_relative_to_the_repository() {
        assert_eq!(repo_path("", "reduce.cu").as_deref(), Some("reduce.cu"));
        assert_eq!(
            repo_path("lab1", "./k/reduce.cu").as_deref(),
            Some("lab1/k/reduce.cu")
        );
        assert_eq!(repo_path("", "/etc/passwd"), None);
        assert_eq!(repo_path("", "../x.cu"), None);
        assert_eq!(repo_path("", ""), None);
    }
}
