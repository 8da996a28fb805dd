//! The adversarial fixtures in tests/adversarial/ stay well-formed: each has one `.cu` file
//! and an `expected.yaml` naming a valid verdict, and each one that is meant to get past the
//! compiler really compiles with NVRTC (so it tests the runtime defence it claims to, rather
//! than failing early on a typo). The end-to-end grading of these fixtures lives with the
//! worker's tests.

use crate::support::{nvrtc, root};
use serde::Deserialize;
use std::path::{Path, PathBuf};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Expected {
    verdict: String,
    check: String,
    notes: String,
    #[serde(default)]
    acceptable: Vec<String>,
    #[serde(default)]
    must_not_contain: Vec<String>,
    /// Lines GitHub Actions would read as workflow commands (`::error`...), which the report
    /// must never start a line with.
    #[serde(default)]
    github_must_not_start_line: Vec<String>,
    /// The verdict on the emulator, where it legitimately differs from a GPU's.
    #[serde(default)]
    emu: Option<EmuVerdict>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EmuVerdict {
    verdict: String,
    check: String,
    #[serde(default)]
    acceptable: Vec<String>,
}

const STATUSES: [&str; 4] = ["pass", "fail", "error", "skipped"];
const CHECK_KINDS: [&str; 10] = [
    "compile",
    "kernel",
    "launch",
    "correctness",
    "memory",
    "sanitizer",
    "performance",
    "metric",
    "resources",
    "runtime",
];

fn fixtures() -> Vec<PathBuf> {
    let root = root().join("tests/adversarial");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs
}

fn load(dir: &Path) -> (String, Expected) {
    let cus: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "cu"))
        .collect();
    assert_eq!(cus.len(), 1, "{}: want exactly one .cu file", dir.display());
    let src = std::fs::read_to_string(&cus[0]).unwrap();
    let yaml = std::fs::read_to_string(dir.join("expected.yaml"))
        .unwrap_or_else(|e| panic!("{}: expected.yaml: {e}", dir.display()));
    let exp: Expected = serde_yaml::from_str(&yaml)
        .unwrap_or_else(|e| panic!("{}/expected.yaml: {e}", dir.display()));
    (src, exp)
}

#[test]
fn every_fixture_names_a_valid_verdict_and_check() {
    let dirs = fixtures();
    assert!(dirs.len() >= 15, "fixtures went missing: {dirs:?}");
    for dir in dirs {
        let (src, exp) = load(&dir);
        let name = dir.display();
        assert!(
            STATUSES.contains(&exp.verdict.as_str()),
            "{name}: verdict {}",
            exp.verdict
        );
        assert!(
            CHECK_KINDS.contains(&exp.check.as_str()),
            "{name}: check {}",
            exp.check
        );
        for a in &exp.acceptable {
            assert!(STATUSES.contains(&a.as_str()), "{name}: acceptable {a}");
        }
        assert!(
            exp.acceptable.is_empty() || exp.acceptable.contains(&exp.verdict),
            "{name}: the verdict must be among the acceptable ones"
        );
        assert!(
            !exp.notes.trim().is_empty(),
            "{name}: notes say what the defence is"
        );
        assert!(
            src.contains("vector_add"),
            "{name}: implements (or steals) the vector-add contract"
        );
        for s in exp
            .must_not_contain
            .iter()
            .chain(&exp.github_must_not_start_line)
        {
            assert!(!s.is_empty(), "{name}: empty must_not_contain entry");
        }
        if let Some(e) = &exp.emu {
            assert!(
                STATUSES.contains(&e.verdict.as_str()) && CHECK_KINDS.contains(&e.check.as_str()),
                "{name}: emu verdict {} / check {}",
                e.verdict,
                e.check
            );
            for a in &e.acceptable {
                assert!(
                    a == "none" || STATUSES.contains(&a.as_str()),
                    "{name}: emu acceptable {a}"
                );
            }
        }
    }
}

#[test]
fn fixtures_meant_to_compile_do_compile() {
    if !nvrtc() {
        return;
    }
    for dir in fixtures() {
        let (src, exp) = load(&dir);
        // Compile-stage attacks are meant to fail (or never finish) in the compiler.
        if exp.check == "compile" {
            continue;
        }
        let opts = cudarc::nvrtc::CompileOptions {
            arch: Some("sm_90"),
            name: Some("solution.cu".into()),
            ..Default::default()
        };
        if let Err(e) = cudarc::nvrtc::compile_ptx_with_opts(&src, opts) {
            let log = match e {
                cudarc::nvrtc::CompileError::CompileError { log, .. } => {
                    log.to_string_lossy().into_owned()
                }
                other => format!("{other:?}"),
            };
            panic!("{} does not compile:\n{log}", dir.display());
        }
    }
}
