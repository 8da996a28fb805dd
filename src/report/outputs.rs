//! The files a run writes: one [`Outputs`] (format -> path), built once from `check`'s flags
//! or for a student's folder of `grade` and `merge`, and one function that writes a result in
//! every format it names, each atomically; `write_cohort` writes the class files.

use super::{atomic, codequality, cohort, gradescope, json, junit, markdown};
use crate::errors::{CliError, Fatal};
use crate::integrity::Pair;
use crate::result::GradeResult;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A per-student file format, in the order the files are written.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// The student's feedback (`report.md`, `--markdown`).
    Markdown,
    Junit,
    /// Gradescope's results.json.
    Gradescope,
    /// GitLab's Code Quality report: `dir` is the submission's folder from the repository's
    /// root, `fallback` the file that findings without a line go to ([`codequality::to_string`]).
    CodeQuality {
        dir: String,
        fallback: String,
    },
    /// result.json: last, so that it records the others' time, and `--resume` takes an
    /// existing one for "graded".
    Json,
}

/// The files one run writes for a student, by format.
#[derive(Debug, Clone, Default)]
pub struct Outputs(BTreeMap<Kind, PathBuf>);

impl Outputs {
    /// A student's folder of `grade` and `merge`: `report.md`, `junit.xml`, Gradescope's
    /// `results.json` and `result.json`.
    pub fn folder(dir: &Path) -> Self {
        let names = [
            (Kind::Markdown, "report.md"),
            (Kind::Junit, "junit.xml"),
            (Kind::Gradescope, "results.json"),
            (Kind::Json, "result.json"),
        ];
        Outputs(names.into_iter().map(|(k, n)| (k, dir.join(n))).collect())
    }

    /// The formats given a path (`check --junit FILE`...).
    pub fn given(files: impl IntoIterator<Item = (Kind, Option<PathBuf>)>) -> Self {
        Outputs(
            files
                .into_iter()
                .filter_map(|(k, p)| Some((k, p?)))
                .collect(),
        )
    }

    /// Write `r` in every format, result.json last; when `timed`, `r` first records how long
    /// the others took (`run.phases.reports_s`).
    pub fn write(&self, r: &mut GradeResult, timed: bool) -> Result<(), String> {
        let put = |path: &Path, text: String| {
            atomic::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
        };
        let started = std::time::Instant::now();
        for (kind, path) in &self.0 {
            let text = match kind {
                Kind::Markdown => markdown::render(r),
                Kind::Junit => junit::to_string(r),
                Kind::Gradescope => gradescope::to_string(r),
                Kind::CodeQuality { dir, fallback } => codequality::to_string(r, dir, fallback),
                Kind::Json => continue,
            };
            put(path, text)?;
        }
        if timed && let Some(p) = r.run.phases.as_mut() {
            p.reports_s = started.elapsed().as_secs_f64();
        }
        match self.0.get(&Kind::Json) {
            Some(path) => put(path, json::to_string(r)),
            None => Ok(()),
        }
    }

    /// The class files of `grade` and `merge` in `out` ([`cohort::write_all_with`]).
    pub fn write_cohort(
        results: &[GradeResult],
        pairs: &[Pair],
        out: &Path,
    ) -> Result<(), CliError> {
        cohort::write_all_with(results, pairs, out).map_err(|e| {
            CliError::Fatal(Fatal::new(format!("cannot write the cohort reports: {e}")))
        })
    }
}
