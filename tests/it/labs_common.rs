//! Helpers shared by the `labs_*` tests (no tests of its own).
//!
//! Layout they rely on: `rubrics/<lab>.yaml`, the reference it names, and
//! `submissions-example/<lab>/<example>/` holding `.cu` (or Numba `.py`) files, an optional `cugrade.yaml`
//! and an `expected.yaml` that says what the grader should decide.

#![allow(dead_code)]

use cugrade::rubric::schema::Rubric;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub use crate::support::root;

/// Every `rubrics/*.yaml`, parsed, with its path.
pub fn rubrics() -> Vec<(PathBuf, Rubric)> {
    let mut out: Vec<_> = std::fs::read_dir(root().join("rubrics"))
        .expect("rubrics/ exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            let r: Rubric =
                serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (p, r)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

pub fn lab_name(rubric_path: &Path) -> String {
    rubric_path
        .file_stem()
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

pub fn reference_path(rubric_path: &Path, r: &Rubric) -> PathBuf {
    rubric_path.parent().unwrap().join(&r.reference)
}

/// Entry points the reference file must define: every milestone's reference kernel and
/// every `against: reference` target, each with its contract.
pub fn reference_entries(r: &Rubric) -> BTreeMap<String, String> {
    use cugrade::rubric::schema::Against;
    let mut out = BTreeMap::new();
    for m in &r.milestones {
        let k = m
            .reference_kernel
            .clone()
            .unwrap_or_else(|| m.kernel.clone());
        out.insert(k, m.contract.clone());
        for p in &m.performance {
            if let Against::Reference(name) = &p.against {
                // The timed reference entry runs on the same case and contract.
                out.insert(name.clone(), m.contract.clone());
            }
        }
    }
    out
}

/// Kernel arguments of a contract: its parameters minus those set by symbol.
pub fn arg_count(r: &Rubric, contract: &str) -> usize {
    r.contracts[contract]
        .params
        .iter()
        .filter(|p| !p.symbol)
        .count()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Pass,
    Fail,
    Error,
    Skipped,
}

/// `expected.yaml` of an example submission.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expected {
    pub milestones: BTreeMap<String, Status>,
    #[serde(default)]
    pub gpu: BTreeMap<String, Status>,
    #[serde(default)]
    pub hint_contains: Vec<String>,
}

pub struct Example {
    pub lab: String,
    pub dir: PathBuf,
    pub expected: Expected,
    pub sources: Vec<PathBuf>,
}

impl Example {
    /// A Python submission (Numba or CuPy `.py` files) rather than CUDA C++.
    pub fn is_numba(&self) -> bool {
        std::fs::read_dir(&self.dir)
            .unwrap()
            .any(|e| e.unwrap().path().extension().is_some_and(|x| x == "py"))
    }

    pub fn name(&self) -> String {
        format!(
            "{}/{}",
            self.lab,
            self.dir.file_name().unwrap().to_string_lossy()
        )
    }
}

pub fn examples() -> Vec<Example> {
    let mut out = vec![];
    let base = root().join("submissions-example");
    let mut labs: Vec<_> = std::fs::read_dir(&base)
        .expect("submissions-example/ exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    labs.sort();
    for lab in labs {
        let mut dirs: Vec<_> = std::fs::read_dir(&lab)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_dir())
            .collect();
        dirs.sort();
        for dir in dirs {
            let exp_path = dir.join("expected.yaml");
            let text = std::fs::read_to_string(&exp_path)
                .unwrap_or_else(|e| panic!("{}: {e}", exp_path.display()));
            let expected: Expected = serde_yaml::from_str(&text)
                .unwrap_or_else(|e| panic!("{}: {e}", exp_path.display()));
            let mut sources: Vec<_> = std::fs::read_dir(&dir)
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| p.extension().is_some_and(|e| e == "cu"))
                .collect();
            sources.sort();
            out.push(Example {
                lab: lab.file_name().unwrap().to_string_lossy().into_owned(),
                dir,
                expected,
                sources,
            });
        }
    }
    out
}
