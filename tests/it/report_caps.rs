//! Text a student's process hands the grader is cut before any report is written (issue 31):
//! one run's exception messages made a 60 MB result.json. A function whose exception message
//! is 50 MB, and a Numba import that forges the compile driver's answer with a 7 MB message
//! and 7 MB of details (the harness and the driver cap what they send, but they run in the
//! student's interpreter), both end in a result.json, Markdown, JUnit and Gradescope file of
//! well under 1 MB that say where the text was cut.

use crate::support::{cugrade, lab_rubric, numba, nvrtc, root};
use std::path::Path;

const MB: u64 = 1 << 20;

/// `cugrade check --backend emu` of `sub` against `rubric`, every report written into `dir`:
/// (file name, its text) for each.
fn check_all_reports(rubric: &Path, sub: &Path, dir: &Path) -> Vec<(String, String)> {
    let names = ["result.json", "report.md", "junit.xml", "results.json"];
    let out = cugrade()
        .args(["check", "--backend", "emu", "--seed", "3", "--rubric"])
        .arg(rubric)
        .arg(sub)
        .arg("--json")
        .arg(dir.join(names[0]))
        .arg("--markdown")
        .arg(dir.join(names[1]))
        .arg("--junit")
        .arg(dir.join(names[2]))
        .arg("--gradescope")
        .arg(dir.join(names[3]))
        .output()
        .unwrap();
    let terminal = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut files: Vec<(String, String)> = names
        .iter()
        .map(|n| {
            let p = dir.join(n);
            let size = std::fs::metadata(&p)
                .unwrap_or_else(|_| {
                    panic!(
                        "no {n}: {terminal}\n{}",
                        String::from_utf8_lossy(&out.stderr)
                    )
                })
                .len();
            assert!(size < MB, "{n} is {size} bytes");
            (n.to_string(), std::fs::read_to_string(&p).unwrap())
        })
        .collect();
    assert!(
        (terminal.len() as u64) < MB,
        "the terminal got {} bytes",
        terminal.len()
    );
    files.push(("terminal".into(), terminal));
    files
}

fn assert_cut_everywhere(files: &[(String, String)]) {
    for (name, text) in files {
        if name == "terminal" {
            continue; // it shows the start of each message, folded; the files say the rest
        }
        assert!(
            text.contains("[truncated: "),
            "{name} does not say where the text was cut:\n{}",
            &text[..text.len().min(2000)]
        );
    }
}

#[test]
fn a_50_mb_exception_message_is_cut_in_every_report() {
    if !nvrtc() || cugrade::compile::arrays::numpy().is_err() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let rubric = lab_rubric(d.path(), "preprocess", "");
    let sub = d.path().join("student");
    std::fs::create_dir(&sub).unwrap();
    std::fs::write(
        sub.join("preprocess.py"),
        "import cupy as cp\n\ndef preprocess(table):\n    raise RuntimeError('x' * 50_000_000)\n",
    )
    .unwrap();
    let files = check_all_reports(&rubric, &sub, d.path());
    assert_cut_everywhere(&files);
    let r: serde_json::Value = serde_json::from_str(&files[0].1).unwrap();
    let first = &r["milestones"][0]["checks"][0];
    assert_eq!(first["status"], "fail", "{first}");
    assert!(
        first["message"]
            .as_str()
            .unwrap()
            .starts_with("raised RuntimeError: xxxx"),
        "{first}"
    );
}

#[test]
fn a_forged_compiler_answer_with_megabytes_of_text_is_cut_in_every_report() {
    if !nvrtc() || !numba() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let sub = d.path().join("student");
    std::fs::create_dir(&sub).unwrap();
    // At import, the driver's answer file (its second argument) written by the student, then
    // Python ends before the driver can write its own.
    let forge = "import json, os, sys\n\
         big = 'M' * 7_000_000\n\
         json.dump({'results': [{'kernel': 'vector_add', 'ok': False, 'missing': False, \
         'file': 'k.py', 'line': 1, 'message': big, 'details': 'D' * 7_000_000, \
         'signature': 0}]}, open(sys.argv[2], 'w'))\n\
         os._exit(0)\n";
    std::fs::write(sub.join("k.py"), forge).unwrap();
    let files = check_all_reports(&root().join("rubrics/vector-add.yaml"), &sub, d.path());
    assert_cut_everywhere(&files);
    let r: serde_json::Value = serde_json::from_str(&files[0].1).unwrap();
    let c = &r["milestones"][0]["checks"][0];
    assert!(
        c["message"].as_str().unwrap().starts_with("MMMM"),
        "the forged answer was not the one graded: {c}"
    );
}
