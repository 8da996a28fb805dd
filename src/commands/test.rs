//! `cugrade test COURSE_DIR`: a course's own example submissions against the verdicts their
//! `expected.yaml` promise, the way cugrade's own test suite checks the built-in labs'.
//!
//! Every folder under COURSE_DIR that holds an `expected.yaml` is an example:
//!
//! ```yaml
//! # submissions-example/scan/exclusive/expected.yaml
//! rubric: ../../../rubrics/scan.yaml   # optional, relative to this file
//! milestones: {scan_naive: fail}       # statuses on the emulator (or wherever it runs)
//! gpu: {scan_fast: pass}               # optional: what differs on a GPU (speed measured)
//! hint_contains: ["exclusive"]         # optional: words a failing check must say
//! ```
//!
//! Without `rubric:`, the rubric is `rubrics/LAB.yaml` under COURSE_DIR, LAB being the name of
//! the example's parent folder (cugrade's own layout: `submissions-example/LAB/NAME/`). Each
//! example is graded by this binary's `check` in a process of its own, so one example that
//! cannot be graded is a failed line, never the end of the run. Exit 0 when every example got
//! what it promised, 1 when one did not, 2 when COURSE_DIR has no example or an
//! `expected.yaml` cannot be read.

use crate::errors::CliError;
use crate::exit;
use crate::worker::process::Process;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// `expected.yaml` of an example submission.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Expected {
    #[serde(default)]
    rubric: Option<PathBuf>,
    milestones: BTreeMap<String, Status>,
    #[serde(default)]
    gpu: BTreeMap<String, Status>,
    #[serde(default)]
    hint_contains: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Status {
    Pass,
    Fail,
    Error,
    Skipped,
}

impl Status {
    fn word(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Fail => "fail",
            Status::Error => "error",
            Status::Skipped => "skipped",
        }
    }
}

/// Options of `cugrade test`.
pub struct TestOptions {
    pub course: PathBuf,
    /// `auto`, `emu` or `cuda`, passed to each `check`.
    pub backend: String,
    pub seed: u64,
}

pub fn run(o: &TestOptions) -> Result<i32, CliError> {
    let mut found = Vec::new();
    find(&o.course, 0, &mut found);
    found.sort();
    if found.is_empty() {
        return Err(CliError::Usage(format!(
            "{} holds no example: an example is a folder with a submission and an expected.yaml (docs/courses.md says how)",
            o.course.display()
        )));
    }
    let exe = std::env::current_exe()
        .map_err(|e| CliError::Usage(format!("cannot find cugrade's own binary: {e}")))?;
    let scratch = tempfile::tempdir()
        .map_err(|e| CliError::Usage(format!("cannot make a temporary folder: {e}")))?;
    let (mut good, mut unreadable) = (0usize, false);
    for (i, dir) in found.iter().enumerate() {
        let name = dir
            .strip_prefix(&o.course)
            .unwrap_or(dir)
            .display()
            .to_string();
        let json = scratch.path().join(format!("{i}.json"));
        match example(o, &exe, dir, &json) {
            Ok(problems) if problems.is_empty() => {
                good += 1;
                println!("ok    {name}");
            }
            Ok(problems) => {
                println!("FAIL  {name}");
                for p in problems {
                    println!("      {p}");
                }
            }
            Err(e) => {
                unreadable = true;
                println!("ERROR {name}: {e}");
            }
        }
    }
    let total = found.len();
    println!("{good} of {total} examples got the verdicts their expected.yaml promises");
    Ok(if unreadable {
        exit::USAGE
    } else if good == total {
        exit::OK
    } else {
        exit::FAILED
    })
}

/// Folders holding an `expected.yaml`, below `dir` (hidden folders and `target` skipped).
fn find(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    if depth > 8 {
        return;
    }
    if dir.join("expected.yaml").is_file() {
        out.push(dir.to_path_buf());
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') || name == "target" || name == "node_modules" {
            continue;
        }
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            find(&e.path(), depth + 1, out);
        }
    }
}

/// The rubric of the example in `dir`: `expected.rubric`, else `rubrics/LAB.yaml`.
fn rubric_of(course: &Path, dir: &Path, expected: &Expected) -> Result<PathBuf, String> {
    if let Some(r) = &expected.rubric {
        let p = dir.join(r);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(format!(
                "expected.yaml names the rubric {}, which does not exist",
                p.display()
            ))
        };
    }
    let lab = dir
        .parent()
        .and_then(Path::file_name)
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let p = course.join("rubrics").join(format!("{lab}.yaml"));
    if p.is_file() {
        Ok(p)
    } else {
        Err(format!(
            "no rubric: expected.yaml has no `rubric:` and {} does not exist",
            p.display()
        ))
    }
}

/// Grade one example: what differs from its promises (empty: all as promised).
fn example(o: &TestOptions, exe: &Path, dir: &Path, json: &Path) -> Result<Vec<String>, String> {
    let path = dir.join("expected.yaml");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let expected: Expected =
        serde_yaml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let rubric = rubric_of(&o.course, dir, &expected)?;
    let out = Process::new(exe)
        .args(["check", "--quiet", "--backend", &o.backend])
        .args(["--seed", &o.seed.to_string(), "--rubric"])
        .arg(&rubric)
        .arg(dir)
        .arg("--json")
        .arg(json)
        .capture()
        .run()
        .map_err(|e| format!("cannot run {}: {e}", exe.display()))?;
    let result: serde_json::Value = match std::fs::read_to_string(json) {
        Ok(t) => serde_json::from_str(&t).map_err(|e| format!("unreadable result: {e}"))?,
        Err(_) => {
            let said = String::from_utf8_lossy(&out.stderr.bytes);
            return Ok(vec![format!(
                "not graded (exit {}): {}",
                out.status.code().unwrap_or(-1),
                said.lines().next().unwrap_or("")
            )]);
        }
    };
    Ok(compare(&expected, &result))
}

/// The differences between the promises and a result.json.
fn compare(expected: &Expected, result: &serde_json::Value) -> Vec<String> {
    let on_gpu = result["backend"] == "cuda";
    let mut want: BTreeMap<&str, Status> = expected
        .milestones
        .iter()
        .map(|(k, v)| (k.as_str(), *v))
        .collect();
    if on_gpu {
        want.extend(expected.gpu.iter().map(|(k, v)| (k.as_str(), *v)));
    }
    let mut problems = Vec::new();
    let mut said = String::new();
    let empty = Vec::new();
    let milestones = result["milestones"].as_array().unwrap_or(&empty);
    for m in milestones {
        let id = m["id"].as_str().unwrap_or("?");
        let got = m["status"].as_str().unwrap_or("?");
        for c in m["checks"].as_array().unwrap_or(&empty) {
            if c["status"] == "fail" || c["status"] == "error" {
                for k in ["hint", "message", "location"] {
                    said.push_str(c[k].as_str().unwrap_or(""));
                    said.push('\n');
                }
            }
        }
        match want.remove(id) {
            Some(w) if w.word() == got => {}
            Some(w) => {
                let why = m["checks"]
                    .as_array()
                    .unwrap_or(&empty)
                    .iter()
                    .find(|c| c["status"] == "fail" || c["status"] == "error")
                    .and_then(|c| c["message"].as_str())
                    .map(|s| {
                        let line = crate::report::sanitize::one_line(s);
                        format!(" ({})", crate::report::sanitize::truncate(&line, 200))
                    })
                    .unwrap_or_default();
                problems.push(format!("{id}: {got}, expected {}{why}", w.word()));
            }
            None => problems.push(format!(
                "{id}: {got}, and expected.yaml says nothing of this milestone"
            )),
        }
    }
    for id in want.keys() {
        problems.push(format!(
            "{id}: expected.yaml names it, but the rubric has no such milestone"
        ));
    }
    for h in &expected.hint_contains {
        if !said.contains(h.as_str()) {
            problems.push(format!("no failing check mentions {h:?}"));
        }
    }
    problems
}
